// svgchart.js - a small time chart drawn as plain SVG: stacked areas (one
// band per key, bottom to top in the order given) or lines. Used by the
// comparison of projects and departments (compare.js) and by a job's page
// (jobchart.js); the overview's main chart stays on uPlot (chart.js).
//
// new SvgChart({label, height}) -> chart.root is the element to place;
// chart.draw({xs, step, series: [{key, label, color, values, dash}], stacked})
//   xs: unix seconds; values: one per x, null where there is no point (a
//   gap in a line, 0 in a stack). Each band or line is a <path> carrying
//   data-key and a <title> with its name, so neither colour nor hover is
//   the only way to tell them apart (the legend lists them in stack order).

const NS = 'http://www.w3.org/2000/svg';
const M = {left: 46, right: 10, top: 8, bottom: 22};

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  for (const c of children) e.append(c);
  return e;
}

// A tick step of 1, 2 or 5 × 10^n giving about n ticks up to max.
function niceStep(max, n) {
  const raw = max / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function clock(t, span) {
  const d = new Date(t * 1000);
  // seconds where a few minutes span the axis, or its labels would repeat
  const hm = d.toLocaleTimeString([], span < 900 ? {} : {hour: '2-digit', minute: '2-digit'});
  return span > 86400 ? `${d.toLocaleDateString([], {month: 'short', day: 'numeric'})} ${hm}` : hm;
}

function fmt(v) {
  return String(Math.round(v * 100) / 100);
}

export class SvgChart {
  constructor({label, height = 180}) {
    this.label = label;
    this.height = height;
    this.root = document.createElement('div');
    this.root.className = 'svgchart';
    this.last = null;
    new ResizeObserver(() => {
      if (this.last && Math.abs(this.width() - this.drawnWidth) > 2) this.draw(this.last);
    }).observe(this.root);
  }

  width() {
    return Math.max(320, Math.floor(this.root.clientWidth || 600));
  }

  draw(d) {
    this.last = d;
    const W = this.width();
    const H = this.height;
    this.drawnWidth = W;
    const pw = W - M.left - M.right;
    const ph = H - M.top - M.bottom;
    const xs = d.xs;
    const step = d.step || 1;
    const x0 = xs.length ? xs[0] : 0;
    const x1 = xs.length ? xs[xs.length - 1] + step : 1;
    // a stack's tops; a line's own values
    const tops = [];
    let acc = xs.map(() => 0);
    for (const s of d.series) {
      if (d.stacked) {
        const bottom = acc;
        acc = acc.map((a, i) => a + (s.values[i] || 0));
        tops.push({bottom, top: acc});
      } else {
        tops.push({top: s.values});
      }
    }
    let max = 0;
    for (const t of tops) for (const v of t.top) if (v !== null && v > max) max = v;
    const yStep = niceStep(Math.max(max * 1.1, 1), 4);
    const yMax = Math.ceil(Math.max(max * 1.1, 1) / yStep) * yStep;
    const X = (t) => M.left + ((t - x0) / (x1 - x0 || 1)) * pw;
    const Y = (v) => M.top + ph - (v / yMax) * ph;

    const grid = svg('g', {class: 'axis'});
    for (let v = 0; v <= yMax + 1e-9; v += yStep) {
      grid.append(svg('line', {x1: M.left, x2: M.left + pw, y1: Y(v), y2: Y(v)}));
      grid.append(svg('text', {x: M.left - 6, y: Y(v) + 4, 'text-anchor': 'end'}, fmt(v)));
    }
    const ticks = Math.max(2, Math.min(6, Math.floor(pw / 110)));
    for (let i = 0; i <= ticks && xs.length; i++) {
      const t = x0 + ((x1 - x0) * i) / ticks;
      grid.append(svg('text', {x: X(t), y: H - 6, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle'}, clock(t, x1 - x0)));
    }
    grid.append(svg('text', {x: 4, y: M.top + 10, class: 'unit'}, 'GPUs'));

    const bands = svg('g', {class: d.stacked ? 'bands' : 'lines'});
    d.series.forEach((s, k) => {
      const t = tops[k];
      let path = '';
      if (d.stacked) {
        // over each bucket's width: flat steps, as the points are bucket averages
        const up = xs.map((x, i) => `L${X(x).toFixed(1)},${Y(t.top[i]).toFixed(1)}H${X(x + step).toFixed(1)}`);
        const down = xs.map((x, i) => `L${X(x + step).toFixed(1)},${Y(t.bottom[i]).toFixed(1)}H${X(x).toFixed(1)}`).reverse();
        if (xs.length) path = `M${X(xs[0]).toFixed(1)},${Y(t.bottom[0]).toFixed(1)}${up.join('')}${down.join('')}Z`;
        bands.append(svg('path', {d: path, fill: s.color, 'fill-opacity': 0.85, stroke: s.color, 'stroke-width': 0.5, 'data-key': s.key}, svg('title', {}, s.label)));
      } else {
        let pen = false;
        xs.forEach((x, i) => {
          const v = t.top[i];
          if (v === null || v === undefined) {
            pen = false;
            return;
          }
          path += `${pen ? 'L' : 'M'}${X(x + step / 2).toFixed(1)},${Y(v).toFixed(1)}`;
          pen = true;
        });
        bands.append(svg('path', {d: path, fill: 'none', stroke: s.color, 'stroke-width': 2, 'stroke-dasharray': s.dash, 'data-key': s.key}, svg('title', {}, s.label)));
      }
    });
    const root = svg('svg', {width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': this.label}, grid, bands);
    this.root.replaceChildren(root);
  }
}

// The index of the last value that is not null, or -1.
export function lastIndex(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return i;
  return -1;
}

// Series of one /metrics/query answer on a common time axis:
// {xs, step, byKey: Map(key -> values)}. answers: several answers of the
// same window; xs is the union of their bucket times.
export function align(answers) {
  const times = new Set();
  for (const a of answers) for (const s of a.series || []) for (const p of s.points || []) times.add(p[0]);
  const xs = [...times].sort((a, b) => a - b);
  const index = new Map(xs.map((t, i) => [t, i]));
  const maps = answers.map((a) => {
    const m = new Map();
    for (const s of a.series || []) {
      const v = xs.map(() => null);
      for (const p of s.points || []) v[index.get(p[0])] = p[1];
      m.set(s.key, v);
    }
    return m;
  });
  return {xs, step: (answers[0] && answers[0].step_seconds) || 0, maps};
}
