// compare.js - projects (or departments) side by side over time: three
// stacked charts on one time axis, one band per project, from
// GET /metrics/query?metric=allocated|utilized|pending_gpus&by=project|department
// (no key: every project the token may see, so a member sees its own).
// Allocated against utilized shows who holds GPUs without using them;
// pending demand shows who waits and since when. The eight largest keys
// over the window get their own band and colour, the rest one "other" band.
// Fetched again once the window moved by a step, at most every 30 s (the
// answers are big on a big cluster; a comparison needs no 5 s freshness).

import {get} from './api.js';
import {el, setText, show, gpus} from './dom.js';
import {SvgChart, align, lastIndex} from './svgchart.js';

const FIGURES = [
  {metric: 'allocated', title: 'Allocated GPUs'},
  {metric: 'utilized', title: 'Utilized GPUs'},
  {metric: 'pending_gpus', title: 'Pending demand: GPUs asked by waiting jobs'},
];
const RANGES = [
  {value: '900', label: 'Last 15 minutes'},
  {value: '3600', label: 'Last hour'},
  {value: '21600', label: 'Last 6 hours'},
  {value: '86400', label: 'Last 24 hours'},
  {value: '604800', label: 'Last 7 days'},
];
// distinguishable hues with white text contrast as fills; "other" is grey
const PALETTE = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed', '#0891b2', '#65a30d', '#b91c1c'];
const OTHER = '#9ca3af';
const EVERY_MS = 30000; // at most one load in this time, but for a change of the controls

function isoSeconds(ms) {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

// The sum of the values that are not null; null when all are.
function sum(values) {
  let any = false;
  let s = 0;
  for (const v of values)
    if (v !== null && v !== undefined) {
      any = true;
      s += v;
    }
  return any ? s : null;
}

export class ComparePanel {
  constructor(root) {
    this.by = 'project';
    this.range = '3600';
    this.fetchedAt = 0;
    this.step = 0;
    this.seq = 0;
    this.bySel = el('select', {id: 'compare-by', onchange: () => this.changed()},
      el('option', {value: 'project'}, 'Projects'), el('option', {value: 'department'}, 'Departments'));
    this.rangeSel = el('select', {id: 'compare-range', onchange: () => this.changed()},
      ...RANGES.map((r) => el('option', {value: r.value}, r.label)));
    this.rangeSel.value = this.range;
    this.legend = el('ul', {class: 'legend-list', 'aria-label': 'bands, the lowest first'});
    this.message = el('p', {class: 'empty', hidden: true});
    this.figures = FIGURES.map((f) => {
      const chart = new SvgChart({label: `${f.title} by project over time, stacked`});
      const summary = el('p', {id: `compare-${f.metric}-summary`, class: 'chart-summary'});
      const box = el('figure', {class: 'compare-figure', 'data-metric': f.metric},
        el('figcaption', {}, f.title), chart.root, summary);
      return {...f, chart, summary, box};
    });
    root.append(
      el('div', {class: 'controls'},
        el('span', {class: 'field'}, el('label', {for: 'compare-by'}, 'Compare'), this.bySel),
        el('span', {class: 'field'}, el('label', {for: 'compare-range'}, 'Over'), this.rangeSel)),
      this.legend, this.message,
      el('div', {class: 'compare-grid'}, ...this.figures.map((f) => f.box)));
  }

  // Forget what was drawn (another token signs in).
  reset() {
    this.seq++;
    this.fetchedAt = 0;
    this.legend.replaceChildren();
    for (const f of this.figures) {
      f.chart.root.replaceChildren();
      f.chart.last = null;
      setText(f.summary, '');
    }
  }

  changed() {
    this.by = this.bySel.value;
    this.range = this.rangeSel.value;
    this.fetchedAt = 0;
    this.load();
  }

  // Called on every overview refresh: fetch again when a step has passed.
  // One load at a time; a change of the controls starts one regardless.
  async refresh() {
    if (this.loading || (this.fetchedAt && Date.now() - this.fetchedAt < Math.max(this.step * 1000, EVERY_MS))) return;
    this.loading = true;
    try {
      await this.load();
    } finally {
      this.loading = false;
    }
  }

  async load() {
    const seq = ++this.seq;
    const to = Date.now();
    const query = {by: this.by, from: isoSeconds(to - Number(this.range) * 1000), to: isoSeconds(to)};
    let answers;
    try {
      answers = await Promise.all(this.figures.map((f) => get('/metrics/query', {metric: f.metric, ...query})));
    } catch (e) {
      if (seq === this.seq) this.say(`Could not load the series: ${e.message}`);
      return;
    }
    if (seq !== this.seq) return; // a newer request superseded this one
    this.fetchedAt = Date.now();
    this.step = answers[0].step_seconds || 10;
    this.render(this.by, align(answers));
  }

  say(text) {
    setText(this.message, text);
    show(this.message, !!text);
  }

  // Rank keys by what they held and asked over the window; the first
  // PALETTE.length keep their band, the rest are summed into "other".
  groups(keys, maps) {
    const weight = new Map(keys.map((k) => [k, 0]));
    for (const m of maps) for (const [k, vs] of m) weight.set(k, (weight.get(k) || 0) + vs.reduce((s, v) => s + (v || 0), 0));
    const ranked = [...weight.keys()].sort((a, b) => weight.get(b) - weight.get(a) || a.localeCompare(b));
    const own = ranked.slice(0, PALETTE.length);
    const rest = ranked.slice(PALETTE.length);
    return {own, rest};
  }

  render(by, {xs, step, maps}) {
    const keys = [...new Set(maps.flatMap((m) => [...m.keys()]))];
    const noun = by === 'project' ? 'projects' : 'departments';
    if (!keys.length) {
      this.say(`No ${noun} have points in this range yet.`);
      return;
    }
    this.say('');
    const {own, rest} = this.groups(keys, maps);
    const bands = own.map((k, i) => ({key: k, label: `${by} ${k}`, color: PALETTE[i]}));
    if (rest.length) bands.push({key: '', label: `${rest.length} other ${noun}`, color: OTHER, members: rest});
    this.legend.replaceChildren(...bands.map((b) =>
      el('li', {'data-key': b.key}, el('span', {class: 'swatch', style: `background:${b.color}`}), ` ${b.key || b.label}`)));
    this.figures.forEach((f, i) => {
      const m = maps[i];
      const zero = xs.map(() => null);
      const series = bands.map((b) => ({
        ...b,
        values: b.members ? xs.map((_, j) => sum(b.members.map((k) => (m.get(k) || zero)[j]))) : m.get(b.key) || zero,
      }));
      f.chart.label = `${f.title} by ${by} over time, stacked`;
      f.chart.draw({xs, step, series, stacked: true});
      // the last bucket any band has a point in, the same for every band
      const at = Math.max(-1, ...series.map((s) => lastIndex(s.values)));
      const value = (s) => (at >= 0 ? s.values[at] || 0 : 0);
      const parts = series.map((s) => `${s.key || s.label} ${gpus(value(s))}`);
      const total = series.reduce((sum, s) => sum + value(s), 0);
      setText(f.summary, `Latest ${f.metric === 'pending_gpus' ? 'pending demand' : f.metric}: ${parts.join(', ')} (total ${gpus(total)} GPUs).`);
    });
  }
}
