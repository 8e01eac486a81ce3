// The drill page's live dashboard: report.html's panels drawn as SVG from the JSON the live region carries
// (<script id="drill-data">), redrawn whenever the region is replaced by a server-sent event. No library.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var W = 1100, H = 130, L = 70, R = 150, T = 18, B = 22;
  var LEGEND_CHARS = 15;  // what fits in the right margin R beside ": <value>"
  var COLORS = ["#2456c7", "#d9730d", "#1b7f3b", "#9c27b0", "#b3261e", "#00838f", "#6d4c41", "#546e7a"];

  function el(name, attrs, parent, text) {
    var e = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function panel(box, id, title, end, lo, hi, integer) {
    var svg = el("svg", { id: id, class: "panel", viewBox: "0 0 " + W + " " + H, width: W, height: H }, box);
    el("text", { x: 4, y: 12, class: "ptitle" }, svg, title);
    var span = Math.max(end, 1), range = Math.max(hi - lo, 1);
    var p = {
      svg: svg,
      x: function (t) { return L + (W - L - R) * Math.max(0, t) / span; },
      y: function (v) { return T + (H - T - B) * (1 - (v - lo) / range); }
    };
    el("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }, svg);
    var ticks = integer ? [] : [lo, (lo + hi) / 2, hi];
    if (integer) for (var v = lo; v <= hi; v += Math.max(1, Math.ceil(range / 4))) ticks.push(v);
    ticks.forEach(function (v) {
      el("text", { x: L - 6, y: p.y(v) + 4, class: "tick", "text-anchor": "end" }, svg, String(Math.round(v)));
    });
    for (var s = 0; s <= 5; s++) {
      var t = span * s / 5;
      el("text", { x: p.x(t), y: H - 6, class: "tick", "text-anchor": "middle" }, svg, t.toFixed(span < 10 ? 1 : 0) + " s");
    }
    return p;
  }

  function steps(p, pts, end, color, label, row) {
    if (!pts.length) return;
    var d = "";
    pts.forEach(function (pt, i) {
      var x = p.x(pt[0]), y = p.y(pt[1] < 0 ? -1 : pt[1]);
      d += (i ? "H" + x + "V" + y : "M" + x + "," + y);
    });
    d += "H" + p.x(end);
    el("path", { d: d, class: "series", stroke: color, "data-series": label }, p.svg);
    // a long name (a drill topic's partition) keeps its end, the partition; the whole name is the tooltip
    var last = pts[pts.length - 1][1];
    var g = el("g", {}, p.svg);
    el("title", {}, g, label + ": " + last);
    el("text", { x: W - R + 8, y: T + 12 * row + 8, fill: color, class: "legend", "data-series": label,
                 "data-value": last }, g, (label.length > LEGEND_CHARS ? "…" + label.slice(1 - LEGEND_CHARS) : label) +
       ": " + last);
  }

  function markers(p, data) {
    data.markers.forEach(function (m) {
      el("line", { x1: p.x(m[0]), x2: p.x(m[0]), y1: T, y2: H - B, class: m[2] ? "heal" : "fault" }, p.svg);
    });
  }

  function range(series, lo, hi) {
    Object.keys(series).forEach(function (k) {
      series[k].forEach(function (pt) { lo = Math.min(lo, pt[1]); hi = Math.max(hi, pt[1]); });
    });
    return [lo, hi];
  }

  function draw(box, data) {
    box.textContent = "";
    var end = data.end, i = 0;
    var lr = range(data.leaders, -1, 1);
    var p = panel(box, "panel-leader", "leader per partition (-1: none)", end, lr[0], lr[1], true);
    markers(p, data);
    Object.keys(data.leaders).forEach(function (k) { steps(p, data.leaders[k], end, COLORS[i % 8], k, i++); });
    i = 0;
    var ir = range(data.isr, 0, 1);
    p = panel(box, "panel-isr", "ISR size", end, 0, ir[1], true);
    markers(p, data);
    Object.keys(data.isr).forEach(function (k) { steps(p, data.isr[k], end, COLORS[i % 8], k, i++); });
    var cr = range({ c: data.controller }, -1, 1);
    p = panel(box, "panel-controller", "controller (-1: none) / quorum (1: yes)", end, cr[0], cr[1], true);
    markers(p, data);
    steps(p, data.controller, end, COLORS[0], "controller", 0);
    steps(p, data.quorum, end, COLORS[2], "quorum", 1);
    var top = data.acked.reduce(function (m, a) { return Math.max(m, a[1]); }, 1);
    p = panel(box, "panel-load", "acked records/s (shaded: write gap)", end, 0, top, false);
    data.gaps.forEach(function (g) {
      el("rect", { x: p.x(g[0]), y: T, width: Math.max(1, p.x(g[1]) - p.x(g[0])), height: H - T - B,
                   class: "gap" }, p.svg);
    });
    markers(p, data);
    var w = Math.max(1, p.x(data.interval) - p.x(0) - 1);
    data.acked.forEach(function (a) {
      el("rect", { x: p.x(a[0]), y: p.y(a[1]), width: w, height: p.y(0) - p.y(a[1]), class: "bar" }, p.svg);
    });
    if (!data.acked.length) el("text", { x: L + 10, y: H / 2, class: "tick" }, p.svg, "no drill load (yet)");
    box.dataset.drawn = String(Date.now());
  }

  function redraw() {
    var box = document.getElementById("drill-charts");
    var json = document.getElementById("drill-data");
    if (!box || !json) return;
    try { draw(box, JSON.parse(json.textContent)); } catch (e) { box.textContent = "cannot draw: " + e; }
  }

  redraw();
  var region = document.getElementById("live");
  if (region) new MutationObserver(redraw).observe(region, { childList: true });
})();
