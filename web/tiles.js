// tiles.js - the figures at the top: ready nodes, GPUs ready of total, GPUs
// allocated, GPUs allocated but idle (utilization 0), running and pending
// jobs. Node and GPU figures come from GET /nodes, job counts from the
// projects' status (GET /projects), so no job list is fetched for them.

import {el, setText, gpus} from './dom.js';

const TILES = [
  {id: 'nodes', label: 'Ready nodes'},
  {id: 'gpus', label: 'GPUs ready'},
  {id: 'allocated', label: 'GPUs allocated'},
  {id: 'idle', label: 'Allocated but idle'},
  {id: 'running', label: 'Running jobs'},
  {id: 'pending', label: 'Pending jobs'},
];

// Figures from the nodes and projects as the API gives them; project ''
// counts every project. Exported for the tests' sake and reuse.
export function figures(nodes, projects, project) {
  const f = {nodes: 0, nodesTotal: 0, gpus: 0, gpusTotal: 0, allocated: 0, allocatedShare: 0, idle: 0, running: 0, pending: 0};
  for (const n of nodes) {
    f.nodesTotal++;
    const ready = n.state === 'ready';
    if (ready) f.nodes++;
    for (const g of n.gpus || []) {
      f.gpusTotal++;
      if (ready) f.gpus++;
      if (g.allocated > 0) {
        f.allocated++;
        if (!(g.utilization > 0)) f.idle++;
      }
    }
  }
  for (const p of projects) {
    if (project && p.name !== project) continue;
    const s = p.status || {};
    f.allocatedShare += s.allocated_gpus || 0;
    f.running += s.running_jobs || 0;
    f.pending += s.pending_jobs || 0;
  }
  return f;
}

export class Tiles {
  constructor(root) {
    this.values = {};
    this.notes = {};
    const list = el('ul', {class: 'tiles'});
    for (const t of TILES) {
      this.values[t.id] = el('span', {class: 'tile-value', 'data-tile': t.id});
      this.notes[t.id] = el('span', {class: 'tile-note'});
      list.append(el('li', {class: `tile tile-${t.id}`}, el('span', {class: 'tile-label'}, t.label), this.values[t.id], this.notes[t.id]));
    }
    root.append(list);
  }

  update(state) {
    const f = figures(state.nodes, state.projects, state.project);
    const v = this.values;
    const n = this.notes;
    setText(v.nodes, `${f.nodes} / ${f.nodesTotal}`);
    setText(n.nodes, f.nodesTotal - f.nodes ? `${f.nodesTotal - f.nodes} not ready or drained` : 'all ready');
    setText(v.gpus, `${f.gpus} / ${f.gpusTotal}`);
    setText(n.gpus, 'on ready nodes');
    setText(v.allocated, `${f.allocated} / ${f.gpusTotal}`);
    setText(n.allocated, state.project ? `project ${state.project} holds ${gpus(f.allocatedShare)} GPUs` : `${gpus(f.allocatedShare)} GPUs by share`);
    setText(v.idle, String(f.idle));
    setText(n.idle, 'allocated GPUs at 0% utilization');
    v.idle.parentElement.classList.toggle('warn', f.idle > 0);
    setText(v.running, String(f.running));
    setText(n.running, state.project ? `in ${state.project}` : 'scheduled, running or stopping');
    setText(v.pending, String(f.pending));
    setText(n.pending, state.project ? `in ${state.project}` : 'waiting in the queue');
  }
}
