"use strict";
// The held-out loss of each final round (the consensus loss the result settled), drawn as
// inline SVG: no chart library, nothing fetched.

const SVG_NS = "http://www.w3.org/2000/svg";
const CHART = { width: 720, height: 260, left: 64, right: 16, top: 16, bottom: 40, ticks: 5 };

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  node.append(...children);
  return node;
}

// Tick values spanning [lo, hi]: `count` evenly spaced, labelled to a sensible precision.
function ticks(lo, hi, count) {
  const step = (hi - lo) / (count - 1);
  const digits = Math.max(0, Math.min(6, 1 - Math.floor(Math.log10(step || 1))));
  return Array.from({ length: count }, (_, i) => lo + i * step).map((v) => [v, v.toFixed(digits)]);
}

function lossChart(rounds) {
  const points = rounds.filter((r) => !missing(r.heldout_loss))
    .map((r) => ({ round: Number(r.round), loss: Number(r.heldout_loss) }))
    .sort((a, b) => a.round - b.round);
  if (points.length === 0) return note("No round is final yet: the chart starts with the first settled result.");
  const c = CHART;
  const first = points[0].round;
  const last = points[points.length - 1].round;
  let lo = Math.min(...points.map((p) => p.loss));
  let hi = Math.max(...points.map((p) => p.loss));
  const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.05 || 1;
  lo -= pad;
  hi += pad;
  const x = (round) => c.left + (last === first ? 0.5 : (round - first) / (last - first)) * (c.width - c.left - c.right);
  const y = (value) => c.top + (1 - (value - lo) / (hi - lo)) * (c.height - c.top - c.bottom);
  const chart = svg("svg", { id: "loss-svg", viewBox: `0 0 ${c.width} ${c.height}`, role: "img",
    "aria-label": "held-out loss by round", "data-points": points.length });
  chart.append(svg("line", { x1: c.left, y1: c.height - c.bottom, x2: c.width - c.right, y2: c.height - c.bottom,
    class: "axis" }));
  chart.append(svg("line", { x1: c.left, y1: c.top, x2: c.left, y2: c.height - c.bottom, class: "axis" }));
  for (const [value, label] of ticks(lo, hi, c.ticks)) {
    chart.append(svg("line", { x1: c.left, y1: y(value), x2: c.width - c.right, y2: y(value), class: "grid" }));
    chart.append(svg("text", { x: c.left - 6, y: y(value) + 4, "text-anchor": "end", class: "tick" }, label));
  }
  const every = Math.max(1, Math.ceil(points.length / 12));  // at most ~12 round labels
  points.forEach((p, i) => {
    if (i % every === 0 || i === points.length - 1) {
      chart.append(svg("text", { x: x(p.round), y: c.height - c.bottom + 16, "text-anchor": "middle", class: "tick" },
        String(p.round)));
    }
  });
  chart.append(svg("text", { x: (c.left + c.width - c.right) / 2, y: c.height - 6, "text-anchor": "middle",
    class: "label" }, "round"));
  chart.append(svg("polyline", { points: points.map((p) => `${x(p.round)},${y(p.loss)}`).join(" "), class: "line" }));
  for (const p of points) {
    chart.append(svg("circle", { cx: x(p.round), cy: y(p.loss), r: 4, class: "point", "data-round": p.round,
      "data-value": p.loss }, svg("title", {}, `round ${p.round}: held-out loss ${p.loss}`)));
  }
  return chart;
}
