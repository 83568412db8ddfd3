// chart.js - allocation vs utilization vs capacity (a project's quota) over
// time, for the cluster, a project, a node or a GPU, from
// GET /metrics/query?metric=allocated|utilized|capacity&by=&key=&from=&to=.
// Drawn with uPlot (web/vendor/, MIT); where a project's allocation runs
// over its quota the plot is shaded. "Download CSV" saves the points shown.

import {get} from './api.js';
import {el, setText, show, gpus, csv, download} from './dom.js';

const RANGES = [
  {value: '900', label: 'Last 15 minutes'},
  {value: '3600', label: 'Last hour'},
  {value: '21600', label: 'Last 6 hours'},
  {value: '86400', label: 'Last 24 hours'},
  {value: '604800', label: 'Last 7 days'},
  {value: 'custom', label: 'Custom range…'},
];
const METRICS = ['allocated', 'utilized', 'capacity'];
const OVER = 'rgba(220, 38, 38, 0.14)';

function isoSeconds(ms) {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

// datetime-local input value <-> epoch ms, in local time.
function localInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

// Shade, behind the lines, each bucket where allocated > capacity.
function shadeOverQuota(u) {
  if (!u._shade) return;
  const [xs, alloc, , cap] = u.data;
  const ctx = u.ctx;
  ctx.save();
  ctx.fillStyle = OVER;
  for (let i = 0; i < xs.length; i++) {
    if (alloc[i] === null || cap[i] === null || !(alloc[i] > cap[i] + 1e-9)) continue;
    const next = i + 1 < xs.length ? xs[i + 1] : xs[i] + (u._step || 0);
    const x0 = u.valToPos(xs[i], 'x', true);
    const x1 = u.valToPos(next, 'x', true);
    ctx.fillRect(x0, u.bbox.top, Math.max(1, x1 - x0), u.bbox.height);
  }
  ctx.restore();
}

export class Chart {
  constructor(root) {
    this.scope = 'cluster';
    this.key = '';
    this.range = '3600';
    this.data = null;
    this.plot = null;
    this.fetchedAt = 0;
    this.keysSig = '';
    this.seq = 0;

    const id = (s) => `chart-${s}`;
    this.scopeSel = el('select', {id: id('scope'), onchange: () => {
      this.keyInput.value = ''; // another kind of name: the first one by default
      this.changed(true);
    }},
      ...['cluster', 'project', 'node', 'gpu'].map((s) => el('option', {value: s}, s === 'gpu' ? 'GPU' : s[0].toUpperCase() + s.slice(1))));
    this.keyInput = el('input', {id: id('key'), list: id('keys'), autocomplete: 'off', placeholder: 'name', size: 18, onchange: () => this.changed(true)});
    this.keyList = el('datalist', {id: id('keys')});
    this.keyLabel = el('label', {for: id('key')}, 'Name');
    this.keyBox = el('span', {class: 'field', hidden: true}, this.keyLabel, this.keyInput, this.keyList);
    this.rangeSel = el('select', {id: id('range'), onchange: () => this.changed(true)}, ...RANGES.map((r) => el('option', {value: r.value}, r.label)));
    this.rangeSel.value = this.range;
    this.fromInput = el('input', {id: id('from'), type: 'datetime-local', onchange: () => this.changed(true)});
    this.toInput = el('input', {id: id('to'), type: 'datetime-local', onchange: () => this.changed(true)});
    this.customBox = el('span', {class: 'field', hidden: true},
      el('label', {for: id('from')}, 'From'), this.fromInput, el('label', {for: id('to')}, 'To'), this.toInput);
    this.csvBtn = el('button', {type: 'button', class: 'small', onclick: () => this.downloadCsv(), disabled: true}, 'Download CSV');
    const controls = el('div', {class: 'controls'},
      el('span', {class: 'field'}, el('label', {for: id('scope')}, 'Show'), this.scopeSel),
      this.keyBox,
      el('span', {class: 'field'}, el('label', {for: id('range')}, 'Time range'), this.rangeSel),
      this.customBox, this.csvBtn);
    this.plotBox = el('div', {class: 'plot', role: 'img', 'aria-describedby': 'chart-summary'});
    this.message = el('p', {class: 'empty', hidden: true});
    this.summary = el('p', {id: 'chart-summary', class: 'chart-summary'});
    this.legendNote = el('p', {class: 'legend-note', hidden: true}, el('span', {class: 'swatch over'}), ' shaded: allocation over the project\'s quota');
    root.append(controls, this.plotBox, this.message, this.legendNote, this.summary);
    new ResizeObserver(() => this.resize()).observe(this.plotBox);
  }

  // The header's project filter: show that project, or the cluster.
  setProject(project) {
    this.scope = project ? 'project' : 'cluster';
    this.key = project || '';
    this.scopeSel.value = this.scope;
    this.keyInput.value = this.key;
    this.refreshControls();
    this.fetchedAt = 0;
  }

  changed(userChange) {
    this.scope = this.scopeSel.value;
    this.key = this.keyInput.value.trim();
    this.range = this.rangeSel.value;
    if (this.state) this.updateKeys(this.state);
    if (this.range === 'custom' && !this.fromInput.value) {
      this.toInput.value = localInput(Date.now());
      this.fromInput.value = localInput(Date.now() - 3600e3);
    }
    this.refreshControls();
    this.fetchedAt = 0;
    if (userChange) this.load();
  }

  refreshControls() {
    show(this.keyBox, this.scope !== 'cluster');
    setText(this.keyLabel, this.scope === 'gpu' ? 'GPU (node/index)' : `${this.scope[0].toUpperCase()}${this.scope.slice(1)} name`);
    show(this.customBox, this.range === 'custom');
  }

  // Names for the key field, from the last refresh; rebuilt only on change.
  updateKeys(state) {
    this.state = state;
    let names = [];
    if (this.scope === 'project') names = state.projects.map((p) => p.name);
    else if (this.scope === 'node') names = state.nodes.map((n) => n.name);
    else if (this.scope === 'gpu') for (const n of state.nodes) for (const g of n.gpus || []) names.push(`${n.name}/${g.index}`);
    const sig = `${this.scope}:${names.length}:${names[0] || ''}:${names[names.length - 1] || ''}`;
    if (sig !== this.keysSig) {
      this.keysSig = sig;
      this.keyList.replaceChildren(...names.slice(0, 5000).map((n) => el('option', {value: n})));
    }
    if (this.scope !== 'cluster' && !this.key && names.length) {
      this.key = names[0];
      this.keyInput.value = this.key;
      this.fetchedAt = 0;
    }
  }

  window() {
    if (this.range === 'custom') {
      const from = new Date(this.fromInput.value).getTime();
      const to = new Date(this.toInput.value).getTime();
      return {from, to, fixed: true};
    }
    const to = Date.now();
    return {from: to - Number(this.range) * 1000, to, fixed: false};
  }

  // Called on every refresh: fetch again when the window moved by a step.
  async refresh(state) {
    this.updateKeys(state);
    const stepMs = ((this.data && this.data.step) || 0) * 1000;
    if (this.fetchedAt && (this.range === 'custom' || Date.now() - this.fetchedAt < stepMs)) return;
    await this.load();
  }

  async load() {
    if (this.scope !== 'cluster' && !this.key) {
      this.showMessage(`Choose a ${this.scope === 'gpu' ? 'GPU' : this.scope} to show.`);
      return;
    }
    const w = this.window();
    if (!(w.from < w.to)) {
      this.showMessage('The range must start before it ends.');
      return;
    }
    const seq = ++this.seq;
    const query = {by: this.scope, key: this.scope === 'cluster' ? undefined : this.key, from: isoSeconds(w.from), to: isoSeconds(w.to)};
    let answers;
    try {
      answers = await Promise.all(METRICS.map((m) => get('/metrics/query', {metric: m, ...query})));
    } catch (e) {
      if (seq === this.seq) this.showMessage(`Could not load the series: ${e.message}`);
      return;
    }
    if (seq !== this.seq) return; // a newer request superseded this one
    this.fetchedAt = Date.now();
    const points = answers.map((a) => ((a.series || [])[0] || {points: []}).points);
    const xs = points[0].map((p) => p[0]);
    const byTime = points.map((ps) => new Map(ps.map((p) => [p[0], p[1]])));
    const cols = byTime.map((m) => xs.map((t) => (m.has(t) ? m.get(t) : null)));
    this.data = {xs, cols, step: answers[0].step_seconds, scope: this.scope, key: this.key, from: answers[0].from, to: answers[0].to};
    this.draw();
  }

  showMessage(text) {
    setText(this.message, text);
    show(this.message, true);
  }

  draw() {
    const d = this.data;
    show(this.message, false);
    const project = d.scope === 'project';
    const capLabel = project ? 'Quota' : 'Capacity';
    const sig = `${d.scope}`;
    if (!this.plot || this.plotSig !== sig) {
      if (this.plot) this.plot.destroy();
      this.plotSig = sig;
      const width = Math.max(300, this.plotBox.clientWidth || 600);
      this.plot = new window.uPlot({
        width,
        height: 260,
        scales: {x: {time: true}, y: {range: (u, min, max) => [0, Math.max(1, (max || 0) * 1.15)]}},
        axes: [{}, {label: 'GPUs', size: 50}],
        series: [
          {},
          {label: 'Allocated', stroke: '#2563eb', width: 2, fill: 'rgba(37, 99, 235, 0.08)', value: (u, v) => gpus(v)},
          {label: 'Utilized', stroke: '#15803d', width: 2, value: (u, v) => gpus(v)},
          {label: capLabel, stroke: '#6b7280', width: 1.5, dash: [6, 4], value: (u, v) => gpus(v)},
        ],
        hooks: {drawClear: [shadeOverQuota]},
      }, [d.xs, ...d.cols], this.plotBox);
    } else {
      this.plot.setData([d.xs, ...d.cols]);
    }
    this.plot._shade = project;
    this.plot._step = d.step;
    this.plot.redraw(false, false);
    this.csvBtn.disabled = d.xs.length === 0;
    show(this.legendNote, project);
    this.plotBox.setAttribute('aria-label', `Allocated, utilized and ${capLabel.toLowerCase()} GPUs of ${this.what()} over time`);
    setText(this.summary, this.describe());
  }

  what() {
    const d = this.data;
    if (d.scope === 'cluster') return 'the cluster';
    return `${d.scope === 'gpu' ? 'GPU' : d.scope} ${d.key}`;
  }

  // The latest values and, for a project, how often it ran over its quota.
  describe() {
    const d = this.data;
    const last = (col) => {
      for (let i = col.length - 1; i >= 0; i--) if (col[i] !== null) return col[i];
      return null;
    };
    const [a, u, c] = d.cols.map(last);
    if (a === null && u === null && c === null) return `No samples for ${this.what()} in this range yet.`;
    const capLabel = d.scope === 'project' ? 'quota' : 'capacity';
    let s = `Latest for ${this.what()}: allocated ${gpus(a)}, utilized ${gpus(u)}, ${capLabel} ${gpus(c)} GPUs.`;
    if (d.scope === 'project') {
      let over = 0;
      let known = 0;
      d.xs.forEach((_, i) => {
        if (d.cols[0][i] === null || d.cols[2][i] === null) return;
        known++;
        if (d.cols[0][i] > d.cols[2][i] + 1e-9) over++;
      });
      s += over ? ` Over quota in ${over} of ${known} intervals.` : ' Within quota throughout.';
    }
    return s;
  }

  resize() {
    if (!this.plot) return;
    const width = Math.max(300, this.plotBox.clientWidth);
    if (Math.abs(width - this.plot.width) > 2) this.plot.setSize({width, height: 260});
  }

  downloadCsv() {
    const d = this.data;
    if (!d) return;
    const capLabel = d.scope === 'project' ? 'quota_gpus' : 'capacity_gpus';
    const rows = d.xs.map((t, i) => [new Date(t * 1000).toISOString(), d.cols[0][i], d.cols[1][i], d.cols[2][i]]);
    const name = `tessera-${d.scope}${d.key ? '-' + d.key.replace(/[^a-zA-Z0-9-]+/g, '_') : ''}-${d.from}.csv`.replace(/:/g, '');
    download(name, csv(['time', 'allocated_gpus', 'utilized_gpus', capLabel], rows));
  }
}
