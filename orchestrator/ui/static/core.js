// orch ui: what every page shares: the URL as the page's state, JSON fetches, tables,
// and the live poll (an adaptive interval: fast while things change, slower while idle).
"use strict";
const UI = (() => {
  const state = JSON.parse(document.getElementById("app").dataset.state);

  function esc(s) {
    return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  function num(v, digits = 3) {
    if (v === null || v === undefined || v === "") return "-";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return String(v);
    return Math.abs(v) >= 1e5 ? v.toExponential(2) : v.toPrecision(digits);
  }
  const x = (v) => (v === null || v === undefined ? "-" : num(v) + "×");
  const ci = (lo, hi) => (lo === null || lo === undefined ? "" : ` [${num(lo)}, ${num(hi)}]`);

  // ---- the URL: ?where=A&where=B&columns=...&sel=...
  const params = () => new URLSearchParams(location.search);
  function setParams(changes, push = true) {
    const p = params();
    for (const [k, v] of Object.entries(changes)) {
      p.delete(k);
      for (const item of Array.isArray(v) ? v : v === null || v === undefined || v === "" ? [] : [v]) p.append(k, item);
    }
    const url = location.pathname + (p.toString() ? "?" + p : "");
    if (push) history.pushState(null, "", url); else history.replaceState(null, "", url);
  }
  function query(keys) {
    const p = params(), q = new URLSearchParams();
    for (const k of keys) for (const v of p.getAll(k)) q.append(k, v);
    return q.toString() ? "?" + q : "";
  }

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" } });
    const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
    if (!r.ok) throw new Error(data.error || `HTTP ${r.status}`);
    return data;
  }

  // ---- tables: columns [{key, label, cell(row) -> html}], rows keyed by `rowKey`
  function table(cols, rows, opts = {}) {
    const head = cols.map((c) => `<th>${esc(c.label ?? c.key)}</th>`).join("");
    const body = rows.map((r) => {
      const key = opts.rowKey ? opts.rowKey(r) : "";
      const sel = opts.selected && opts.selected.has(String(key)) ? " selected" : "";
      return `<tr data-key="${esc(key)}" class="${sel}">` + cols.map((c) => `<td>${c.cell ? c.cell(r) : esc(num(r[c.key]))}</td>`).join("") + "</tr>";
    }).join("");
    return `<table class="${opts.cls || ""}" id="${opts.id || ""}"><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
  }
  const col = (key, label, cell) => ({ key, label, cell });
  function pager(id, total, per, page) {
    const pages = Math.ceil(total / per);
    if (pages <= 1) return "";
    return `<div class="pager" data-pager="${id}">rows ${page * per + 1}–${Math.min(total, (page + 1) * per)} of ${total}
      <button data-page="${page - 1}" ${page <= 0 ? "disabled" : ""}>‹ prev</button>
      <button data-page="${page + 1}" ${page >= pages - 1 ? "disabled" : ""}>next ›</button></div>`;
  }

  // ---- a section's html replaced in place, the window's scroll kept
  function fill(id, html) {
    const node = document.getElementById(id);
    if (!node) return;
    const y = window.scrollY;
    node.innerHTML = html;
    window.scrollTo(0, y);
  }
  function section(id, title, extra = "") {
    return `<section><h2>${esc(title)}</h2>${extra}<div id="${id}"></div></section>`;
  }

  // ---- live: poll versionUrl; when it differs from the version of the data shown, onChange()
  // loads the data again and returns its version (an answer may lag while a sweep changes fast:
  // then the next poll loads again). The interval grows while nothing changes.
  function live(versionUrl, shown, onChange, min = 1000, max = 10000) {
    let wait = min;
    const badge = document.getElementById("live");
    async function tick() {
      try {
        if (!document.hidden) {
          const v = (await getJSON(versionUrl)).version;
          if (v !== shown) {
            shown = await onChange();
            wait = min;
          } else wait = Math.min(max, wait * 1.6);
          badge.textContent = `live · checked ${new Date().toLocaleTimeString()}`;
          badge.className = "live on";
        }
      } catch (e) {
        badge.textContent = "offline: " + e.message;
        badge.className = "live off";
        wait = Math.min(max * 3, wait * 2);
      }
      setTimeout(tick, wait);
    }
    setTimeout(tick, min);
  }

  function fail(e) {
    document.getElementById("app").innerHTML = `<h1>error</h1><p class="error" id="error">${esc(e.message)}</p>`;
  }

  return { state, esc, num, x, ci, params, setParams, query, getJSON, table, col, pager, fill, section, live, fail };
})();
