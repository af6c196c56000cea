// orch ui: the sweeps page, a trial's page, two sweeps compared; and the router.
"use strict";
function sweepsPage() {
  const { esc, num, x, ci, col, table } = UI;
  const app = document.getElementById("app");
  const checked = new Set(UI.params().getAll("pick"));
  app.innerHTML = `<h1>sweeps</h1><p>Tick two sweeps to <a id="compare-link" href="/compare">compare them</a>.</p><p id="tag-filter"></p><div id="sweeps"></div>`;
  async function load() {
    const d = await UI.getJSON("/api/sweeps");
    const tag = UI.params().get("tag");
    const shown = tag ? d.sweeps.filter((s) => s.tags.includes(tag)) : d.sweeps;
    document.getElementById("tag-filter").innerHTML = tag ? `tagged <span class="tag">${esc(tag)}</span> · <a href="/">every sweep</a>` : "";
    UI.fill("sweeps", shown.length ? table([
      col("pick", "", (s) => `<input type="checkbox" data-pick="${esc(s.name)}" ${checked.has(s.name) ? "checked" : ""}>`),
      col("name", "sweep", (s) => `<a class="sweep-link" href="/sweep/${encodeURIComponent(s.name)}">${esc(s.name)}</a>` +
        s.tags.map((t) => ` <a class="tag" href="/?tag=${encodeURIComponent(t)}">${esc(t)}</a>`).join("") + (s.note ? `<div class="sweep-note">${esc(s.note)}</div>` : "")),
      col("status", "status", (s) => `<span class="status ${esc(s.status)}">${esc(s.status)}</span>`),
      col("done", "done / pending / running / failed", (s) => `<span class="counts">${s.done} / ${s.pending} / ${s.running} / ${s.failed}</span> of ${s.trials}
        <div class="bar"><i style="width:${s.trials ? (100 * s.done) / s.trials : 0}%"></i></div>`),
      col("eta"),
      col("best", "best speedup per pair", (s) => s.best.map((b) => `${esc(b.pair)}: <b>${esc(x(b.speedup))}</b>${esc(ci(b.speedup_lo, b.speedup_hi))} ${esc(b.method)} <span class="small">${esc(b.params)}</span>`).join("<br>")),
      col("description", "description and sweep file", (s) => `${esc(s.description)}${s.file ? ` <span class="small">(${esc(s.file)})</span>` : ""}${s.paper ? `<details><summary>from the file</summary><pre>${esc(s.paper)}</pre></details>` : ""}`),
      col("code_versions", "code", (s) => s.code_versions.map((v) => `<code>${esc(v.slice(0, 12))}</code>`).join(" ")),
      col("drivers", "drivers", (s) => esc(s.drivers.join(", ") || "-")),
      col("hosts", "hosts / GPUs: running", (s) => esc(s.hosts.join(", ")) + (s.running_trials.length ? "<br>" + s.running_trials.map((r) => `<span class="small">${esc(r.host)} ${esc(r.gpu)}: ${esc(r.trial)}</span>`).join("<br>") : "")),
    ], shown, { id: "sweeps-table", rowKey: (s) => s.name }) : `<p>no sweeps${tag ? " with that tag" : ""} in ${esc(d.database)}</p>`);
    updateCompare();
    return d.version;
  }
  function updateCompare() {
    const picks = [...checked];
    const a = document.getElementById("compare-link");
    a.href = picks.length === 2 ? `/compare?a=${encodeURIComponent(picks[0])}&b=${encodeURIComponent(picks[1])}` : "/compare";
  }
  app.addEventListener("change", (e) => {
    const n = e.target.dataset.pick;
    if (n === undefined) return;
    if (e.target.checked) checked.add(n); else checked.delete(n);
    UI.setParams({ pick: [...checked] }, false);
    updateCompare();
  });
  let version = null;
  load().then((v) => { version = v; poll(); }).catch(UI.fail);
  // the sweeps list polls its own JSON (one cached answer per sweep until it changes)
  let wait = 1000;
  function poll() {
    setTimeout(async () => {
      try {
        const v = await load();
        wait = v === version ? Math.min(10000, wait * 1.6) : 1000;
        version = v;
        document.getElementById("live").textContent = `live · checked ${new Date().toLocaleTimeString()}`;
        document.getElementById("live").className = "live on";
      } catch (e) {
        document.getElementById("live").textContent = "offline: " + e.message;
        wait = 20000;
      }
      poll();
    }, wait);
  }
}

function trialPage() {
  const { esc, num, x, ci, col, table } = UI;
  const id = UI.state.id;
  const app = document.getElementById("app");
  UI.getJSON(`/api/trial/${id}`).then((t) => {
    const kv = (obj) => table([col("k", "", (r) => esc(r[0])), col("v", "", (r) => `<code>${esc(typeof r[1] === "object" && r[1] !== null ? JSON.stringify(r[1]) : r[1])}</code>`)], Object.entries(obj), { cls: "kv" });
    const s = t.summary || {};
    const prompt = Math.min(+(UI.params().get("prompt") || 0), Math.max(0, t.prompts.length - 1));
    app.innerHTML = `<h1>trial ${t.id} <span class="status ${esc(t.status)}">${esc(t.status)}</span></h1>
      <p><code id="label">${esc(t.label)}</code></p>
      <p>config hash <code id="hash">${esc(t.config_hash)}</code> · in sweeps ${t.sweeps.map((n) => `<a href="/sweep/${encodeURIComponent(n)}">${esc(n)}</a>`).join(", ")}</p>
      ${t.error_line ? `<p class="error">${esc(t.error_line)}</p><details><summary>full error</summary><pre>${esc(t.error)}</pre></details>` : ""}
      <div class="cols"><section><h2>resolved config</h2><div id="config">${kv(t.config)}</div></section>
      <section><h2>environment</h2><div id="environment">${kv(t.environment)}</div>
      <h2>result</h2><p id="certificate">speedup <b>${esc(x(s.speedup))}</b>${esc(ci(s.speedup_lo, s.speedup_hi))} on ${esc(s.machine || "-")} ${esc(s.speedup_note || "")}
      · tau [95% CI] ${esc(ci(s.tau_lo, s.tau_hi))} · certificate: <b>${esc(s.lossless ?? "-")}</b>, equal to autoregressive: ${esc(s.ar_equal ?? "-")}</p>
      <div id="metrics">${kv(t.metrics)}</div></section></div>
      <section><h2>prompts</h2><div id="prompts"></div></section>
      <section><h2>per iteration: prompt <select id="prompt-pick">${t.prompts.map((p, i) => `<option value="${i}" ${i === prompt ? "selected" : ""}>${i + 1}: ${esc(p.id)} (${esc(p.category)})</option>`).join("")}</select></h2>
      <div class="cols"><div class="figure"><h3>tree size and accepted tokens per iteration</h3><div id="fig-iter"></div></div>
      <div class="figure"><h3>time per iteration (ms)</h3><div id="fig-iter-time"></div></div></div></section>`;
    document.getElementById("prompts").innerHTML = table([
      col("id"), col("category"), col("prompt_tokens", "prompt tokens"), col("new_tokens", "new"), col("iterations", "iters"),
      col("throughput", "tok/s"), col("tokens_per_iteration", "tau"), col("acceptance_rate", "accept"), col("lossless", "lossless", (p) => esc(p.lossless === null ? "-" : p.lossless ? "yes" : `no (first mismatch ${p.first_mismatch})`)),
      col("output", "prompt and output", (p) => `<details><summary>text</summary>${p.prompt !== null ? `<p class="small">prompt</p><pre>${esc(p.prompt)}</pre>` : ""}<p class="small">output</p><pre>${esc(p.output ?? JSON.stringify(p.tokens))}</pre></details>`),
      col("generate", "rerun this prompt", (p) => `<pre class="cmd">${esc(p.generate)}</pre>`),
    ], t.prompts, { id: "prompts-table" });
    function iterations(i) {
      const it = t.iterations[i] || {};
      const ser = ["tree_size", "accepted", "emitted"].filter((k) => it[k]).map((k) => ({ label: k, ys: it[k] }));
      if (ser.length) Charts.lines(document.getElementById("fig-iter"), "iter", ser, { xlabel: "iteration", ylabel: "tokens" });
      const keys = ["draft_s", "target_s", "verify_s", "bookkeeping_s"].filter((k) => it[k]);
      const n = keys.length ? it[keys[0]].length : 0;
      if (n) Charts.stacked(document.getElementById("fig-iter-time"), "iter-time", [...Array(n).keys()].map((j) => ({ label: `iteration ${j + 1}`, parts: Object.fromEntries(keys.map((k) => [k, 1000 * it[k][j]])) })), keys, { xlabel: "iteration", ylabel: "ms", zoomable: false });
    }
    iterations(prompt);
    document.getElementById("prompt-pick").addEventListener("change", (e) => { UI.setParams({ prompt: e.target.value === "0" ? "" : e.target.value }, false); iterations(+e.target.value); });
  }).catch(UI.fail);
}

function comparePage() {
  const { esc, num, x, ci, col, table } = UI;
  const app = document.getElementById("app");
  const p = UI.params();
  app.innerHTML = `<h1>compare two sweeps</h1><form id="pick" class="filters"><label>A <select name="a"></select></label>
    <label>B <select name="b"></select></label><label>where <input name="where" size="30" value="${esc(p.getAll("where").join("; "))}"></label>
    <button>compare</button></form><p id="filter-error" class="error"></p><div id="compare2"></div>`;
  const form = document.getElementById("pick");
  UI.getJSON("/api/sweeps").then((d) => {
    const opts = d.sweeps.map((s) => `<option>${esc(s.name)}</option>`).join("");
    form.a.innerHTML = form.b.innerHTML = opts;
    if (p.get("a")) form.a.value = p.get("a");
    if (p.get("b")) form.b.value = p.get("b");
    if (p.get("a") && p.get("b")) load();
  }).catch(UI.fail);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    UI.setParams({ a: form.a.value, b: form.b.value, where: form.where.value.split(";").map((s) => s.trim()).filter(Boolean) });
    load();
  });
  async function load() {
    try {
      const d = await UI.getJSON("/api/compare" + UI.query(["a", "b", "where"]));
      document.getElementById("filter-error").textContent = "";
      const sp = (s) => (r) => esc(x(r["speedup_" + s]) + ci(r["speedup_lo_" + s], r["speedup_hi_" + s]));
      UI.fill("compare2", table([col("pair"), col("method"), col("params", "config", (r) => esc(r.params)),
        col("a", `A: ${d.a}`, sp("a")), col("where_a", "A ran on", (r) => esc(`${r.machine_a ?? "-"} ${r.engine_a ?? ""}`)),
        col("b", `B: ${d.b}`, sp("b")), col("where_b", "B ran on", (r) => esc(`${r.machine_b ?? "-"} ${r.engine_b ?? ""}`)), col("ratio", "ratio B/A", (r) => esc(x(r.ratio))),
        col("moved", "interval moved", (r) => `<span class="moved ${esc(r.moved)}">${esc(r.moved || "no")}</span>`)], d.rows, { id: "compare2-table" }));
    } catch (e) {
      document.getElementById("filter-error").textContent = e.message;
    }
  }
}

({ sweeps: sweepsPage, sweep: sweepPage, trial: trialPage, compare: comparePage })[UI.state.page]();
