// orch ui: small SVG charts, no library. Each chart draws into an element, keyed by an id
// whose zoom (an x range picked by dragging; double-click resets) survives redraws with new
// data and lives in the URL (z.ID=x0,x1), so live updates and reloads keep it.
"use strict";
const Charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 460, H = 260, M = { l: 52, r: 12, t: 12, b: 38 };
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#7f7f7f", "#bcbd22"];
  const zoom = {};
  const params = new URLSearchParams(location.search);
  for (const [k, v] of params) if (k.startsWith("z.")) zoom[k.slice(2)] = v.split(",").map(Number);

  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function extent(vals) {
    const v = vals.filter((x) => x !== null && x !== undefined && isFinite(x));
    if (!v.length) return [0, 1];
    let lo = Math.min(...v), hi = Math.max(...v);
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    return [lo, hi];
  }
  function ticks(lo, hi, n) {
    const step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n)));
    const err = (n * step) / (hi - lo);
    const s = step * (err <= 0.15 ? 10 : err <= 0.35 ? 5 : err <= 0.75 ? 2 : 1);
    const out = [];
    for (let t = Math.ceil(lo / s) * s; t <= hi + 1e-9 * s; t += s) out.push(+t.toPrecision(12));
    return out;
  }
  const fmt = (v) => (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(1) : +v.toPrecision(3));
  function color(i) { return COLORS[i % COLORS.length]; }

  // a frame: svg, scales, axes; opts.x / opts.y: [lo, hi]; returns {svg, sx, sy}
  function frame(host, id, opts) {
    host.textContent = "";
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", "data-chart": id }, host);
    let [x0, x1] = zoom[id] || opts.x;
    const [y0, y1] = opts.y;
    const sx = (v) => M.l + ((v - x0) / (x1 - x0)) * (W - M.l - M.r);
    const sy = (v) => H - M.b - ((v - y0) / (y1 - y0)) * (H - M.t - M.b);
    const clip = `clip-${id.replace(/[^\w-]/g, "_")}`;
    el("rect", { x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b, fill: "#fff", class: "plot" }, el("clipPath", { id: clip }, svg));
    const g = el("g", {}, svg);
    for (const t of opts.xticks || ticks(x0, x1, 6)) {
      el("line", { x1: sx(t), x2: sx(t), y1: H - M.b, y2: H - M.b + 4, stroke: "#444" }, g);
      el("text", { x: sx(t), y: H - M.b + 15, "text-anchor": "middle", class: "tick" }, g, opts.xname ? opts.xname(t) : fmt(t));
    }
    for (const t of ticks(y0, y1, 5)) {
      el("line", { x1: M.l, x2: W - M.r, y1: sy(t), y2: sy(t), stroke: "#eee" }, g);
      el("text", { x: M.l - 4, y: sy(t) + 4, "text-anchor": "end", class: "tick" }, g, fmt(t));
    }
    el("rect", { x: M.l, y: M.t, width: W - M.l - M.r, height: H - M.t - M.b, fill: "none", stroke: "#999" }, g);
    el("text", { x: (W + M.l) / 2, y: H - 4, "text-anchor": "middle", class: "axis" }, g, opts.xlabel || "");
    el("text", { x: 12, y: (H - M.b) / 2, transform: `rotate(-90 12 ${(H - M.b) / 2})`, "text-anchor": "middle", class: "axis" }, g, opts.ylabel || "");
    const plot = el("g", { "clip-path": `url(#${clip})` }, svg);
    if (opts.zoomable !== false) brush(svg, id, sx, x0, x1, opts.redraw);
    return { svg, plot, sx, sy };
  }

  function brush(svg, id, sx, x0, x1, redraw) {
    let start = null, box = null;
    const toX = (evt) => {
      const r = svg.getBoundingClientRect();
      return ((evt.clientX - r.left) / r.width) * W;
    };
    const inv = (px) => x0 + ((px - M.l) / (W - M.l - M.r)) * (x1 - x0);
    svg.addEventListener("mousedown", (e) => {
      start = toX(e);
      box = el("rect", { x: start, y: M.t, width: 0, height: H - M.t - M.b, class: "brush" }, svg);
    });
    svg.addEventListener("mousemove", (e) => {
      if (start === null) return;
      const x = toX(e);
      box.setAttribute("x", Math.min(x, start));
      box.setAttribute("width", Math.abs(x - start));
    });
    svg.addEventListener("mouseup", (e) => {
      if (start === null) return;
      const x = toX(e), a = Math.min(x, start), b = Math.max(x, start);
      start = null;
      box.remove();
      if (b - a > 6) setZoom(id, [inv(a), inv(b)], redraw);
    });
    svg.addEventListener("dblclick", () => setZoom(id, null, redraw));
  }
  function setZoom(id, range, redraw) {
    if (range) zoom[id] = range.map((v) => +v.toPrecision(6)); else delete zoom[id];
    const p = new URLSearchParams(location.search);
    if (range) p.set("z." + id, zoom[id].join(",")); else p.delete("z." + id);
    history.replaceState(null, "", location.pathname + (p.toString() ? "?" + p : ""));
    if (redraw) redraw();
  }
  function legend(host, names) {
    const d = document.createElement("div");
    d.className = "legend";
    names.forEach((n, i) => {
      const s = document.createElement("span");
      s.innerHTML = `<i style="background:${color(i)}"></i>`;
      s.appendChild(document.createTextNode(n));
      d.appendChild(s);
    });
    host.appendChild(d);
  }
  function title(node, text) { el("title", {}, node, text); }

  // points: [{x, y, lo, hi, label, series}]; categorical x when values are not numbers
  function scatter(host, id, pts, o) {
    const draw = () => {
      const cat = pts.some((p) => typeof p.x !== "number");
      const cats = cat ? [...new Set(pts.map((p) => String(p.x)))].sort() : null;
      const xv = (p) => (cat ? cats.indexOf(String(p.x)) : p.x);
      const xs = extent(pts.map(xv)), pad = (xs[1] - xs[0]) * 0.06;
      const ys = extent(pts.flatMap((p) => [p.y, p.lo, p.hi]).concat(o.baseline ? [o.baseline] : []));
      const series = [...new Set(pts.map((p) => p.series || ""))];
      const f = frame(host, id, { ...o, x: [xs[0] - pad, xs[1] + pad], y: [Math.min(ys[0], ys[0] - (ys[1] - ys[0]) * 0.05), ys[1] + (ys[1] - ys[0]) * 0.05],
        xticks: cat ? cats.map((_, i) => i) : null, xname: cat ? (i) => cats[i] : null, redraw: draw });
      if (o.baseline) el("line", { x1: M.l, x2: W - M.r, y1: f.sy(o.baseline), y2: f.sy(o.baseline), class: "base" }, f.plot);
      for (const p of pts) {
        if (p.y === null || p.y === undefined) continue;
        const c = color(series.indexOf(p.series || ""));
        const x = f.sx(xv(p));
        if (p.lo !== null && p.lo !== undefined) el("line", { x1: x, x2: x, y1: f.sy(p.lo), y2: f.sy(p.hi), stroke: c, "stroke-opacity": 0.5 }, f.plot);
        const dot = el("circle", { cx: x, cy: f.sy(p.y), r: 4, fill: c, class: "dot" }, f.plot);
        title(dot, `${p.label}: ${fmt(p.y)}` + (p.lo != null ? ` [${fmt(p.lo)}, ${fmt(p.hi)}]` : ""));
        if (p.href) dot.addEventListener("click", () => (location.href = p.href));
      }
      if (series.length > 1 || series[0]) legend(host, series);
    };
    draw();
  }

  // series: [{label, ys: [...]}] against 0..n-1 (or xs)
  function lines(host, id, series, o) {
    const draw = () => {
      const n = Math.max(1, ...series.map((s) => s.ys.length));
      const ys = extent(series.flatMap((s) => s.ys));
      const f = frame(host, id, { ...o, x: [o.x0 ?? 0, Math.max(n - 1 + (o.x0 ?? 0), 1)], y: [Math.min(0, ys[0]), ys[1] * 1.05], redraw: draw });
      series.forEach((s, i) => {
        const d = s.ys.map((y, j) => (y === null ? null : `${f.sx(j + (o.x0 ?? 0))},${f.sy(y)}`)).filter(Boolean).join(" L");
        if (d) title(el("path", { d: "M" + d, fill: "none", stroke: color(i), "stroke-width": 1.6 }, f.plot), s.label);
      });
      legend(host, series.map((s) => s.label));
    };
    draw();
  }

  // rows: [{label, parts: {key: value}}], stacked in `keys` order
  function stacked(host, id, rows, keys, o) {
    const draw = () => {
      const tot = rows.map((r) => keys.reduce((a, k) => a + (r.parts[k] || 0), 0));
      const f = frame(host, id, { ...o, x: [-0.6, rows.length - 0.4], y: [0, Math.max(...tot, 1e-12) * 1.05],
        xticks: rows.map((_, i) => i), xname: (i) => String(i + 1), redraw: draw });
      const bw = Math.max(2, ((W - M.l - M.r) / Math.max(rows.length, 1)) * 0.7);
      rows.forEach((r, i) => {
        let acc = 0;
        keys.forEach((k, j) => {
          const v = r.parts[k] || 0;
          const b = el("rect", { x: f.sx(i) - bw / 2, y: f.sy(acc + v), width: bw, height: Math.max(0, f.sy(acc) - f.sy(acc + v)), fill: color(j) }, f.plot);
          title(b, `${r.label}: ${k} ${fmt(v)}`);
          acc += v;
        });
      });
      legend(host, keys);
    };
    draw();
  }

  // cells: [[x, y, value]] on a grid of the distinct x and y values
  function heatmap(host, id, cells, o) {
    host.textContent = "";
    const xs = [...new Set(cells.map((c) => c[0]))].sort((a, b) => a - b);
    const ys = [...new Set(cells.map((c) => c[1]))].sort((a, b) => a - b);
    const [v0, v1] = extent(cells.map((c) => c[2]));
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", "data-chart": id }, host);
    const cw = (W - M.l - M.r) / xs.length, ch = (H - M.t - M.b) / ys.length;
    for (const [x, y, v] of cells) {
      const t = (v - v0) / (v1 - v0 || 1);
      const r = el("rect", { x: M.l + xs.indexOf(x) * cw, y: M.t + (ys.length - 1 - ys.indexOf(y)) * ch, width: cw - 1, height: ch - 1,
        fill: `hsl(${220 - 200 * t},70%,${75 - 30 * t}%)` }, svg);
      title(r, `${o.xlabel}=${x} ${o.ylabel}=${y}: ${fmt(v)}`);
      if (cw > 26 && ch > 14) el("text", { x: M.l + (xs.indexOf(x) + 0.5) * cw, y: M.t + (ys.length - 0.5 - ys.indexOf(y)) * ch + 4, "text-anchor": "middle", class: "tick" }, svg, fmt(v));
    }
    xs.forEach((x, i) => el("text", { x: M.l + (i + 0.5) * cw, y: H - M.b + 15, "text-anchor": "middle", class: "tick" }, svg, x));
    ys.forEach((y, i) => el("text", { x: M.l - 4, y: M.t + (ys.length - 0.5 - i) * ch + 4, "text-anchor": "end", class: "tick" }, svg, y));
    el("text", { x: (W + M.l) / 2, y: H - 4, "text-anchor": "middle", class: "axis" }, svg, o.xlabel);
    el("text", { x: 12, y: (H - M.b) / 2, transform: `rotate(-90 12 ${(H - M.b) / 2})`, "text-anchor": "middle", class: "axis" }, svg, o.ylabel);
  }

  // dims: names; lines: [{label, values}] (the last dimension colours the lines)
  function parallel(host, id, dims, rows) {
    host.textContent = "";
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", "data-chart": id }, host);
    const axes = dims.map((d, i) => {
      const vals = rows.map((r) => r.values[i]);
      const cat = vals.some((v) => v !== null && typeof v !== "number");
      const cats = cat ? [...new Set(vals.map(String))].sort() : null;
      const [lo, hi] = cat ? [0, Math.max(cats.length - 1, 1)] : extent(vals);
      const x = M.l + (i * (W - M.l - M.r)) / Math.max(dims.length - 1, 1);
      return { x, pos: (v) => H - M.b - (((cat ? cats.indexOf(String(v)) : v) - lo) / (hi - lo || 1)) * (H - M.t - M.b), lo, hi, cats };
    });
    const last = axes[axes.length - 1];
    for (const r of rows) {
      const t = (r.values[dims.length - 1] - last.lo) / (last.hi - last.lo || 1);
      const d = r.values.map((v, i) => (v === null ? null : `${axes[i].x},${axes[i].pos(v)}`)).filter(Boolean).join(" L");
      title(el("path", { d: "M" + d, fill: "none", stroke: `hsl(${220 - 200 * (isFinite(t) ? t : 0)},70%,45%)`, "stroke-opacity": 0.7 }, svg), r.label);
    }
    axes.forEach((a, i) => {
      el("line", { x1: a.x, x2: a.x, y1: M.t, y2: H - M.b, stroke: "#333" }, svg);
      el("text", { x: a.x, y: H - 8, "text-anchor": "middle", class: "axis" }, svg, dims[i]);
      el("text", { x: a.x + 3, y: M.t + 8, class: "tick" }, svg, a.cats ? a.cats[a.cats.length - 1] : fmt(a.hi));
      el("text", { x: a.x + 3, y: H - M.b, class: "tick" }, svg, a.cats ? a.cats[0] : fmt(a.lo));
    });
  }

  // bars: [{row, start, end, status, label, href}] against time (seconds since the first)
  function timeline(host, id, bars) {
    const rows = [...new Set(bars.map((b) => b.row))].sort();
    const t0 = Math.min(...bars.map((b) => b.start));
    const now = Date.now() / 1000;
    const draw = () => {
      const f = frame(host, id, { x: [0, Math.max(...bars.map((b) => (b.end ?? now) - t0), 1)], y: [0, rows.length],
        xlabel: "seconds since the first trial started", ylabel: "", redraw: draw });
      const bh = (H - M.t - M.b) / rows.length;
      rows.forEach((r, i) => el("text", { x: M.l + 4, y: f.sy(rows.length - i) + 12, class: "tick rowname" }, f.svg, r));
      for (const b of bars) {
        const i = rows.indexOf(b.row);
        const x = f.sx(b.start - t0), x2 = f.sx((b.end ?? now) - t0);
        const rect = el("rect", { x, y: f.sy(rows.length - i) + bh * 0.3, width: Math.max(1, x2 - x), height: bh * 0.6, class: "bar " + b.status }, f.plot);
        title(rect, b.label);
        if (b.href) rect.addEventListener("click", () => (location.href = b.href));
      }
    };
    draw();
  }

  return { scatter, lines, stacked, heatmap, parallel, timeline, zoom, color };
})();
