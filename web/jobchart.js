// jobchart.js - one job's GPUs over its run on its page: what it requested,
// what it was allocated and what it used, from
// GET /metrics/query?metric=capacity|allocated|utilized&by=job&key=ID
// (a job has points while it is running). The window runs from its start
// (at most 7 days back) to its end or now; fetched again once it moved by a
// step while the job runs.

import {get} from './api.js';
import {el, setText, show, gpus} from './dom.js';
import {SvgChart, align, lastIndex} from './svgchart.js';

const LINES = [
  {metric: 'allocated', label: 'Allocated', color: '#2563eb'},
  {metric: 'utilized', label: 'Utilized', color: '#15803d'},
  {metric: 'capacity', label: 'Requested', color: '#6b7280', dash: '6 4'},
];
const MAX_BACK_MS = 7 * 86400e3;

function isoSeconds(ms) {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export class JobChart {
  constructor() {
    this.chart = new SvgChart({label: 'GPUs requested, allocated and utilized by this job over time', height: 200});
    this.summary = el('p', {id: 'job-chart-summary', class: 'chart-summary'});
    this.legend = el('ul', {class: 'legend-list'},
      ...LINES.map((l) => el('li', {}, el('span', {class: `swatch${l.dash ? ' dashed' : ''}`, style: `background:${l.color}`}), ` ${l.label}`)));
    this.root = el('section', {class: 'job-chart', 'aria-labelledby': 'job-chart-title', hidden: true},
      el('h3', {id: 'job-chart-title'}, 'GPUs over time'), this.legend, this.chart.root, this.summary);
    this.seq = 0;
    this.reset(null);
  }

  reset(id) {
    this.id = id;
    this.fetchedAt = 0;
    this.step = 0;
    this.seq++;
    this.final = false;
    show(this.root, false);
  }

  // Called with every refresh of the job page.
  async refresh(job) {
    if (!job || job.id !== this.id || !job.started_at) return;
    if (this.final) return;
    if (this.fetchedAt && Date.now() - this.fetchedAt < this.step * 1000) return;
    const seq = ++this.seq;
    const end = job.finished_at ? new Date(job.finished_at).getTime() + 60e3 : Date.now();
    const start = Math.max(new Date(job.started_at).getTime() - 60e3, end - MAX_BACK_MS);
    const query = {by: 'job', key: String(job.id), from: isoSeconds(start), to: isoSeconds(end)};
    let answers;
    try {
      answers = await Promise.all(LINES.map((l) => get('/metrics/query', {metric: l.metric, ...query})));
    } catch (e) {
      if (seq !== this.seq) return;
      show(this.root, true);
      setText(this.summary, `Could not load the job's series: ${e.message}`);
      return;
    }
    if (seq !== this.seq) return;
    this.fetchedAt = Date.now();
    this.step = answers[0].step_seconds || 10;
    this.final = !!job.finished_at; // its points will not change
    const {xs, step, maps} = align(answers);
    const key = String(job.id);
    const series = LINES.map((l, i) => ({key: l.metric, label: l.label, color: l.color, dash: l.dash, values: maps[i].get(key) || xs.map(() => null)}));
    show(this.root, true);
    this.chart.draw({xs, step, series, stacked: false});
    const at = Math.max(-1, ...series.map((s) => lastIndex(s.values)));
    if (at < 0) {
      setText(this.summary, 'No samples of this job yet: they come while it runs.');
      return;
    }
    const [a, u, c] = series.map((s) => s.values[at]);
    setText(this.summary, `Latest for job ${job.name}: allocated ${gpus(a)}, utilized ${gpus(u)}, requested ${gpus(c)} GPUs.`);
  }
}
