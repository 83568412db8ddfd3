// nodes.js - the node × GPU grid (GET /nodes: each GPU's allocated
// fraction, utilization and the jobs on it, and where the node runs them
// when its node-level scheduler moved them to another GPU) and the jobs holding GPUs while
// idle (allocated GPUs at 0% utilization). Job names come from a cache the
// page fills with GET /jobs/{id} for the rows on screen only.

import {el, gpus, percent, bytes} from './dom.js';
import {Table} from './table.js';

const idleGpu = (g) => g.allocated > 0 && !(g.utilization > 0);
const byName = (a, b) => a.name.localeCompare(b.name, undefined, {numeric: true});

function jobLabel(state, id) {
  const j = state.jobs.get(id);
  return j ? j.name : `#${id}`;
}

function bar(cls, frac, label) {
  const w = Math.max(0, Math.min(1, frac || 0)) * 100;
  return el('span', {class: `bar ${cls}`, title: label, 'aria-hidden': 'true'}, el('span', {class: 'fill', style: `width:${w.toFixed(1)}%`}));
}

function gpuChip(state, node, g) {
  const jobs = g.jobs || [];
  const desc = `GPU ${g.index}: allocated ${percent(g.allocated)}, utilization ${percent(g.utilization)}, memory used ${bytes(g.memory_used_bytes)} of ${bytes(g.memory_bytes)}`;
  const chip = el('div', {class: `gpu${idleGpu(g) ? ' idle' : ''}${g.allocated > 0 ? ' busy' : ''}`, role: 'group', 'aria-label': `${node.name} ${desc}`, title: `${g.model || ''}\n${desc}`},
    el('span', {class: 'gpu-index'}, String(g.index)),
    bar('alloc', g.allocated, `allocated ${percent(g.allocated)}`),
    bar('util', g.utilization, `utilization ${percent(g.utilization)}`),
    el('span', {class: 'gpu-figures'}, `${percent(g.allocated)} · ${percent(g.utilization)}`));
  // the node-level scheduler may run a job allocated here on another of
  // the node's GPUs: allocated here, it says where it runs; running here,
  // it says where it is allocated
  const movedTo = new Map((g.moved_jobs || []).map((m) => [m.id, m.physical_index]));
  if (jobs.length) {
    const list = el('span', {class: 'gpu-jobs'});
    for (const id of jobs) {
      const mine = state.projectJobIds && state.projectJobIds.has(id);
      list.append(el('a', {href: `#/jobs/${id}`, class: mine ? 'mine' : null}, jobLabel(state, id)));
      if (movedTo.has(id))
        list.append(el('span', {class: 'gpu-moved', title: `allocated on GPU ${g.index}, runs on GPU ${movedTo.get(id)} of ${node.name}`}, ` → GPU ${movedTo.get(id)}`));
      list.append(' ');
    }
    chip.append(list);
  }
  const movedIn = [];
  for (const o of node.gpus || [])
    for (const m of o.moved_jobs || [])
      if (m.physical_index === g.index) movedIn.push([m.id, o.index]);
  if (movedIn.length) {
    const list = el('span', {class: 'gpu-runs'}, 'runs ');
    for (const [id, from] of movedIn)
      list.append(el('a', {href: `#/jobs/${id}`, title: `allocated on GPU ${from}, runs on GPU ${g.index} of ${node.name}`}, jobLabel(state, id)), el('span', {class: 'gpu-moved'}, ` from GPU ${from}`), ' ');
    chip.append(list);
  }
  // a project-limited token sees other projects' jobs only as a count
  if (g.hidden_jobs > 0)
    chip.append(el('span', {class: 'gpu-hidden'}, `${g.hidden_jobs} job${g.hidden_jobs > 1 ? 's' : ''} of other projects`));
  return chip;
}

export class NodesPanel {
  constructor(gridRoot, idleRoot) {
    this.state = null;
    this.search = el('input', {id: 'node-search', type: 'search', placeholder: 'node name', oninput: () => this.render()});
    this.sort = el('select', {id: 'node-sort', onchange: () => this.render()},
      el('option', {value: 'name'}, 'name'),
      el('option', {value: 'idle'}, 'most idle allocated GPUs'),
      el('option', {value: 'alloc'}, 'most allocated'),
      el('option', {value: 'util'}, 'least utilized'));
    const controls = el('div', {class: 'controls'},
      el('span', {class: 'field'}, el('label', {for: 'node-search'}, 'Find node'), this.search),
      el('span', {class: 'field'}, el('label', {for: 'node-sort'}, 'Sort by'), this.sort),
      el('span', {class: 'legend'}, el('span', {class: 'swatch alloc'}), ' allocated ', el('span', {class: 'swatch util'}), ' utilization ', el('span', {class: 'swatch idle'}), ' allocated but idle'));
    this.grid = new Table({
      caption: 'Nodes and their GPUs',
      cls: 'data grid',
      pageSize: 25,
      empty: 'No node matches.',
      columns: [
        {label: 'Node', cell: (n) => n.name},
        {label: 'State', cell: (n) => ({text: n.state.replace('_', ' '), cls: `state state-${n.state}`})},
        {label: 'Allocated', num: true, cell: (n) => `${gpus(n.allocated_gpus)} / ${(n.gpus || []).length}`},
        {label: 'Utilized', num: true, cell: (n) => gpus(n.utilized_gpus)},
        {label: 'Jobs', num: true, cell: (n) => n.running_jobs},
        {label: 'GPUs', cls: 'gpus', cell: (n) => ({key: this.chipKey(n), node: () => el('div', {class: 'chips'}, ...(n.gpus || []).map((g) => gpuChip(this.state, n, g)))})},
      ],
    });
    gridRoot.append(controls, this.grid.root);

    this.idle = new Table({
      caption: 'Jobs holding allocated GPUs at 0% utilization',
      pageSize: 25,
      empty: 'No job holds an idle GPU.',
      columns: [
        {label: 'Job', cell: (j) => ({text: jobLabel(this.state, j.id), href: `#/jobs/${j.id}`, title: `job ${j.id}`})},
        {label: 'Project', cell: (j) => (this.state.jobs.get(j.id) || {}).project || ''},
        {label: 'Node', cell: (j) => j.node},
        {label: 'Idle GPUs', num: true, cell: (j) => `${j.idle} of ${j.gpus.length}`},
        {label: 'GPUs', cell: (j) => j.gpus.join(', ')},
        {label: 'Memory used on those GPUs', num: true, cell: (j) => bytes(j.memory)},
      ],
    });
    idleRoot.append(this.idle.root);
  }

  chipKey(n) {
    const s = this.state;
    return (n.gpus || []).map((g) => `${g.index}:${Math.round(g.allocated * 1000)}:${Math.round((g.utilization || 0) * 100)}:${(g.jobs || []).map((id) => `${id}${s.jobs.has(id) ? 'n' : ''}${s.projectJobIds && s.projectJobIds.has(id) ? 'm' : ''}`).join('.')}:${g.hidden_jobs || 0}:${(g.moved_jobs || []).map((m) => `${m.id}>${m.physical_index}`).join('.')}`).join('|');
  }

  update(state) {
    this.state = state;
    this.render();
  }

  render() {
    const state = this.state;
    if (!state) return;
    const q = this.search.value.trim().toLowerCase();
    const mine = state.projectJobIds;
    let nodes = state.nodes.filter((n) => (!q || n.name.toLowerCase().includes(q)) &&
      (!mine || (n.gpus || []).some((g) => (g.jobs || []).some((id) => mine.has(id)))));
    const idleCount = (n) => (n.gpus || []).filter(idleGpu).length;
    const by = {
      name: byName,
      idle: (a, b) => idleCount(b) - idleCount(a) || byName(a, b),
      alloc: (a, b) => b.allocated_gpus - a.allocated_gpus || byName(a, b),
      util: (a, b) => a.utilized_gpus / Math.max(1, a.gpus.length) - b.utilized_gpus / Math.max(1, b.gpus.length) || byName(a, b),
    }[this.sort.value];
    nodes = nodes.slice().sort(by);
    this.grid.update(nodes);

    const held = new Map();
    for (const n of state.nodes)
      for (const g of n.gpus || [])
        for (const id of g.jobs || []) {
          if (mine && !mine.has(id)) continue;
          let j = held.get(id);
          if (!j) held.set(id, (j = {id, node: n.name, gpus: [], idle: 0, memory: 0}));
          j.gpus.push(`${n.name}/${g.index}`);
          j.memory += g.memory_used_bytes || 0;
          if (idleGpu(g)) j.idle++;
        }
    const idle = [...held.values()].filter((j) => j.idle > 0).sort((a, b) => b.idle - a.idle || a.id - b.id);
    this.idle.update(idle);
  }

  // Job ids on screen whose names are not known yet.
  missingJobIds() {
    const ids = new Set();
    for (const n of this.grid.visible()) for (const g of n.gpus || []) for (const id of g.jobs || []) if (!this.state.jobs.has(id)) ids.add(id);
    for (const j of this.idle.visible()) if (!this.state.jobs.has(j.id)) ids.add(j.id);
    return [...ids];
  }
}
