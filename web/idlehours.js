// idlehours.js - idle GPU-hours per project over a chosen window, from
// GET /metrics/idle?from=: the GPUs each project's running jobs held while
// their own utilization was under 1 % of their allocation, integrated over
// the window, beside all the GPU-hours it was allocated; most idle first
// (the server's order). Fetched again at most every 30 s or when the window
// changes: the figures move slowly.

import {get} from './api.js';
import {el, setText, show} from './dom.js';
import {Table} from './table.js';

const WINDOWS = [
  {value: '1h', label: 'Last hour'},
  {value: '6h', label: 'Last 6 hours'},
  {value: '24h', label: 'Last 24 hours'},
  {value: '168h', label: 'Last 7 days'},
  {value: '720h', label: 'Last 30 days'},
];
const EVERY_MS = 30000;

// GPU-hours: two decimals, or two significant digits under 0.01 so that a
// few idle minutes do not read as 0.
export function gpuHours(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return '–';
  if (v === 0) return '0';
  if (v < 0.01) return String(Number(v.toPrecision(2)));
  return String(Math.round(v * 100) / 100);
}

export class IdleHours {
  constructor(root) {
    this.window = '24h';
    this.fetchedAt = 0;
    this.seq = 0;
    this.windowSel = el('select', {id: 'idle-hours-window', onchange: () => {
      this.window = this.windowSel.value;
      this.load();
    }}, ...WINDOWS.map((w) => el('option', {value: w.value}, w.label)));
    this.windowSel.value = this.window;
    this.table = new Table({
      caption: 'Idle, allocated and unused GPU-hours per project, most idle first',
      pageSize: 25,
      empty: 'No project held GPUs in this window.',
      columns: [
        {label: 'Project', cell: (p) => ({text: p.project, href: `#/?project=${encodeURIComponent(p.project)}`})},
        {label: 'Idle GPU-hours', num: true, cell: (p) => gpuHours(p.idle_gpu_hours)},
        {label: 'Allocated GPU-hours', num: true, cell: (p) => gpuHours(p.allocated_gpu_hours)},
        {label: 'Idle share', num: true, cell: (p) => (p.allocated_gpu_hours > 0 ? `${Math.round((100 * p.idle_gpu_hours) / p.allocated_gpu_hours)}%` : '–')},
        {label: 'Unused GPU-hours', num: true, cell: (p) => gpuHours(p.unused_gpu_hours)},
      ],
    });
    this.note = el('p', {class: 'panel-note'});
    this.error = el('p', {class: 'form-error', role: 'alert', hidden: true});
    root.append(
      el('div', {class: 'controls'}, el('span', {class: 'field'}, el('label', {for: 'idle-hours-window'}, 'Window'), this.windowSel)),
      this.note, this.error, this.table.root);
  }

  // Forget what was shown (another token signs in).
  reset() {
    this.seq++;
    this.fetchedAt = 0;
    this.table.update([]);
    setText(this.note, '');
  }

  // One load at a time; a change of the window starts one regardless.
  async refresh() {
    if (this.loading || (this.fetchedAt && Date.now() - this.fetchedAt < EVERY_MS)) return;
    this.loading = true;
    try {
      await this.load();
    } finally {
      this.loading = false;
    }
  }

  async load() {
    const seq = ++this.seq;
    let r;
    try {
      r = await get('/metrics/idle', {from: this.window});
    } catch (e) {
      if (seq !== this.seq) return;
      setText(this.error, `Could not load the idle GPU-hours: ${e.message}`);
      show(this.error, true);
      return;
    }
    if (seq !== this.seq) return;
    this.fetchedAt = Date.now();
    show(this.error, false);
    const rows = r.projects || [];
    this.table.update(rows);
    const idle = rows.reduce((s, p) => s + (p.idle_gpu_hours || 0), 0);
    const alloc = rows.reduce((s, p) => s + (p.allocated_gpu_hours || 0), 0);
    setText(this.note, `${gpuHours(idle)} of ${gpuHours(alloc)} allocated GPU-hours idle, from ${new Date(r.from).toLocaleString()} to ${new Date(r.to).toLocaleString()}. A job is idle while its own GPU utilization is under 1% of what it holds.`);
  }
}
