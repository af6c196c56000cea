// orch ui: a sweep's page: orch compare and orch query in the browser, its trials, failures,
// timeline and figures; filters, columns, metric, selection, pages and zoom in the URL; live.
"use strict";
function sweepPage() {
  const { esc, num, x, ci, col, table } = UI;
  const name = UI.state.name;
  const base = "/sweep/" + encodeURIComponent(name);
  const api = "/api/sweep/" + encodeURIComponent(name);
  let data = null;
  const selected = new Set(UI.params().getAll("sel"));
  const app = document.getElementById("app");
  app.innerHTML = `<h1>sweep <span id="sweep-name">${esc(name)}</span></h1>
    <p id="annotations"></p><p id="progress"></p>
    <form id="filters" class="filters">
      <label>where <input name="where" size="40" placeholder="method=dynatree; depth>=4"></label>
      <label>columns <input name="columns" size="28" placeholder="+ttft_s,depth"></label>
      <label>rank by <select name="best_by"></select></label>
      <button type="submit">apply</button> <a href="${base}">clear</a>
      <span class="downloads">download: <a data-fmt="csv">CSV</a> <a data-fmt="json">JSON</a>
      <a data-fmt="parquet">Parquet</a> · <a href="${base}/report">paper report</a></span>
    </form><p id="filter-error" class="error"></p><p id="note" class="note"></p>` +
    UI.section("compare", "compare: each method's best config per pair (orch compare)") +
    UI.section("categories", "speedup per category") +
    UI.section("best", "best configs per pair") +
    UI.section("configs", "configs ranked (orch query)") +
    UI.section("trials", "trials (click a row to select it)") +
    UI.section("failures", "failed and running trials") +
    UI.section("timeline", "timeline of trials per worker and GPU") +
    UI.section("figures", "figures (drag to zoom, double-click to reset)") +
    UI.section("predicted", "predicted against measured speedup per profiled device (cost model)",
      '<button id="predict">compute (reads every trial\'s per-iteration data)</button>');
  const form = document.getElementById("filters");
  const METRICS = ["speedup", "throughput", "tokens_per_iteration", "acceptance_rate", "mean_accepted_length",
    "ttft_s", "tpot_s", "total_s", "peak_memory_bytes", "overhead_share", "mean_tree_size"];
  form.best_by.innerHTML = METRICS.map((m) => `<option>${m}</option>`).join("");

  function fromURL() {
    const p = UI.params();
    form.where.value = p.getAll("where").join("; ");
    form.columns.value = p.get("columns") || "";
    form.best_by.value = p.get("best_by") || "speedup";
    for (const a of form.querySelectorAll("a[data-fmt]")) a.href = `${base}/export.${a.dataset.fmt}` + UI.query(["where"]);
  }
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const where = form.where.value.split(";").map((s) => s.trim()).filter(Boolean);
    UI.setParams({ where, columns: form.columns.value.trim(), best_by: form.best_by.value === "speedup" ? "" : form.best_by.value, tp: "", cp: "" });
    fromURL();
    load();
  });
  window.addEventListener("popstate", () => { fromURL(); load(); });

  async function load() {
    try {
      data = await UI.getJSON(api + UI.query(["where", "columns", "best_by", "tp", "cp"]));
      document.getElementById("filter-error").textContent = "";
      render();
      return data.version;
    } catch (e) {
      document.getElementById("filter-error").textContent = e.message;
    }
  }

  const link = (id) => `<a href="/trial/${id}">${id}</a>`;
  const filterLink = (k, v) => `<a class="filter" href="${base}?where=${encodeURIComponent(k + "=" + v)}">${esc(v)}</a>`;
  function render() {
    const c = data.status.counts || {};
    document.getElementById("progress").innerHTML = `<span class="status ${esc(c.status)}">${esc(c.status || "")}</span>
      <span id="counts">${c.trials ?? 0} trials: ${c.done ?? 0} done, ${c.pending ?? 0} pending, ${c.running ?? 0} running, ${c.failed ?? 0} failed</span>
      · <span id="shown">${data.shown ?? 0} of ${data.finished ?? 0} finished trials shown</span>
      <span class="small">(version ${esc(data.version)})</span>`;
    document.getElementById("note").textContent = data.note || "";
    document.getElementById("annotations").innerHTML = data.tags.map((t) => `<span class="tag">${esc(t)}</span>`).join(" ") +
      (data.sweep_note ? ` <span class="sweep-note">${esc(data.sweep_note)}</span>` : "");
    UI.fill("compare", table([
      col("method", "method", (r) => filterLink("method", r.method)), col("pair"), col("machine"),
      col("speedup", "speedup [95% CI]", (r) => esc(x(r.speedup) + ci(r.speedup_lo, r.speedup_hi))),
      col("rank", "rank", (r) => esc(r.rank === null ? "-" : num(r.rank) + (r.tied ? " (tied)" : ""))),
      col("tau", "tau [95% CI]", (r) => esc(num(r.tokens_per_iteration) + ci(r.tau_lo, r.tau_hi))),
      col("acceptance_rate", "accept"), col("lossless"), col("ar_equal", "= AR"),
      col("params", "winning config", (r) => esc(r.params)), col("speedup_note", "note", (r) => esc(r.speedup_note)),
    ], data.compare, { id: "compare-table" }));
    const cats = [...new Set(data.compare.flatMap((r) => Object.keys(r).filter((k) => k.startsWith("speedup.")))).values()];
    UI.fill("categories", cats.length ? table([col("method"), col("pair"), ...cats.map((k) => col(k, k.slice(8), (r) => esc(x(r[k]))))], data.compare) : "<p>one category</p>");
    UI.fill("best", table([col("group"), col("rank"), col("method"),
      col("speedup", "speedup [95% CI]", (r) => esc(x(r.speedup) + ci(r.speedup_lo, r.speedup_hi))),
      col("tokens_per_iteration", "tau"), col("params", "params", (r) => esc(r.params))], data.best, { id: "best-table" }));
    renderConfigs();
    renderTrials();
    const st = data.status;
    UI.fill("failures", st.failed.length + st.running.length ? table([
      col("trial", "trial", (r) => link(r.trial)), col("status"), col("config", "config", (r) => esc(r.config)),
      col("attempts"), col("host"), col("gpu"), col("error", "last line of its error", (r) => `<code>${esc(r.error)}</code>`),
    ], [...st.failed, ...st.running], { id: "failures-table" }) : "<p>none</p>");
    const tl = document.getElementById("timeline");
    const w = data.timeline.workers;
    if (data.timeline.bars.length) Charts.timeline(tl, "timeline", data.timeline.bars.map(([trial, i, start, end, status, method]) => ({ row: w[i], start, end, status, label: `trial ${trial} ${method} (${status}) on ${w[i]}`, href: `/trial/${trial}` })));
    else tl.textContent = "no trial started yet";
    renderFigures(data.figures || {});
  }

  function renderConfigs() {
    const page = data.configs_page, rows = data.configs;
    const cols = [col("group", "group", (r) => `<span class="group">${esc(r.group)}</span>`),
      ...data.config_columns.map((k) => col(k, k.replace(/^param\./, ""), k === "params" ? (r) => esc(r.params) : k === "method" ? (r) => esc(r.method + (r.baseline ? "*" : "")) : undefined))];
    UI.fill("configs", table(cols, rows, { id: "configs-table" }) + UI.pager("cp", data.configs_total, data.page_rows, page));
  }

  function renderTrials() {
    const page = data.trials_page, rows = data.trials;
    UI.fill("trials", table([col("trial_id", "trial", (r) => link(r.trial_id)), col("method"), col("pair"),
      col("params", "params", (r) => esc(r.params)), col("repeat"), col("speedup", "speedup", (r) => esc(x(r.speedup))),
      col("throughput", "tok/s"), col("tokens_per_iteration", "tau"), col("acceptance_rate", "accept"), col("lossless"), col("host")],
    rows, { id: "trials-table", rowKey: (r) => r.trial_id, selected }) + UI.pager("tp", data.trials_total, data.page_rows, page));
  }

  app.addEventListener("click", (e) => {
    const btn = e.target.closest("[data-page]");
    if (btn) {
      const which = btn.closest("[data-pager]").dataset.pager;
      UI.setParams({ [which]: btn.dataset.page === "0" ? "" : btn.dataset.page }, false);
      load();
      return;
    }
    const tr = e.target.closest("#trials-table tbody tr");
    if (!tr || e.target.closest("a")) return;
    const key = tr.dataset.key;
    if (selected.has(key)) selected.delete(key); else selected.add(key);
    tr.classList.toggle("selected", selected.has(key));
    UI.setParams({ sel: [...selected] }, false);
  });

  function chart(host, id, title) {
    const d = document.createElement("div");
    d.className = "figure";
    d.innerHTML = `<h3>${esc(title)}</h3><div class="plot-host" id="fig-${esc(id)}"></div>`;
    host.appendChild(d);
    return d.lastChild;
  }
  function renderFigures(f) {
    const host = document.getElementById("figures");
    const y = window.scrollY;
    host.textContent = "";
    for (const a of f.axes || []) Charts.scatter(chart(host, `axis-${a.method}-${a.param}`, `${a.method}: ${a.y} against ${a.param}`), `axis-${a.method}-${a.param}`, a.points, { xlabel: a.param, ylabel: a.y, baseline: a.y === "speedup" ? 1 : null });
    for (const p of f.parallel || []) Charts.parallel(chart(host, `par-${p.method}`, `${p.method}: parallel coordinates over its varied parameters`), `par-${p.method}`, p.dims, p.lines);
    for (const h of f.heatmaps || []) Charts.heatmap(chart(host, `heat-${h.method}-${h.pair}`, `${h.method === "dynatree" ? "DynaTree heatmap" : h.method + " heatmap"}: best ${h.value} by ${h.x} × ${h.y} (${h.pair})`), `heat-${h.method}-${h.pair}`, h.cells, { xlabel: h.x, ylabel: h.y });
    if ((f.tau_speedup || []).length) Charts.scatter(chart(host, "tau-speedup", "tau (tokens per iteration) against speedup"), "tau-speedup", f.tau_speedup.map((p) => ({ x: p.tau, y: p.speedup ?? p.throughput, lo: p.lo, hi: p.hi, label: p.label + " (" + p.pair + ")", series: p.method })), { xlabel: "tau", ylabel: "speedup", baseline: 1 });
    if ((f.split || []).length) {
      const keys = ["draft_s", "target_s", "verify_s", "bookkeeping_s"];
      const node = chart(host, "split", "time per iteration (ms): draft, target, verify, bookkeeping — the fastest configs");
      Charts.stacked(node, "split", f.split.map((r) => ({ label: r.label, parts: Object.fromEntries(keys.map((k) => [k, r[k]])) })), keys, { xlabel: "config (numbered below)", ylabel: "ms per iteration", zoomable: false });
      node.insertAdjacentHTML("beforeend", "<ol class='small'>" + f.split.map((r) => `<li>${esc(r.label)} (${esc(r.pair)})</li>`).join("") + "</ol>");
    }
    if ((f.depth || []).length) Charts.lines(chart(host, "depth", "acceptance by depth (accepted / reached)"), "depth", f.depth.map((d) => ({ label: d.label, ys: d.rates })), { xlabel: "depth", ylabel: "acceptance", x0: 1 });
    if ((f.histogram || []).length) Charts.lines(chart(host, "hist", "acceptance-length histogram (DDTree): share of iterations"), "hist", f.histogram.map((h) => { const t = h.counts.reduce((a, b) => a + b, 0); return { label: h.label, ys: h.counts.map((c) => c / t) }; }), { xlabel: "tokens accepted in an iteration", ylabel: "share" });
    window.scrollTo(0, y);
  }

  async function showPredicted() {
    const host = document.getElementById("predicted");
    host.textContent = "computing…";
    try {
      const d = await UI.getJSON(api + "/predicted");
      if (!d.points.length) { host.textContent = d.note || "nothing to predict"; return; }
      Charts.scatter(host, "predicted", d.points.map((p) => ({ x: p.measured, y: p.predicted, label: `${p.label} on ${p.device} (measured on ${p.machine})`, series: p.device })),
        { xlabel: "measured speedup (where it ran)", ylabel: "predicted speedup", baseline: 1 });
      UI.setParams({ predicted: "1" }, false);
    } catch (e) { host.textContent = e.message; }
  }
  document.getElementById("predict").addEventListener("click", showPredicted);
  if (UI.params().get("predicted")) showPredicted();

  fromURL();
  load().then((v) => UI.live(api + "/version", v, load));
}
