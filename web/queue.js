// queue.js - the pending queue (GET /queue, filtered by project on the
// server): each job's position, what it asks for, how long it has waited
// and why it waits (the scheduler's stable code and its sentence).

import {el, gpus, gpuRequest, ago} from './dom.js';
import {Table} from './table.js';

export class QueuePanel {
  constructor(root) {
    this.table = new Table({
      caption: 'Pending jobs in scheduling order',
      pageSize: 25,
      empty: 'No job is waiting.',
      columns: [
        {label: 'Position', num: true, cell: (j) => (j.pending_reason ? j.pending_reason.queue_position : '')},
        {label: 'Job', cls: 'nowrap', cell: (j) => ({text: j.name, href: `#/jobs/${j.id}`, title: `job ${j.id}`})},
        {label: 'Project', cell: (j) => j.project},
        {label: 'Kind', cell: (j) => j.kind},
        {label: 'Priority', num: true, cell: (j) => j.priority},
        {label: 'GPUs', cell: (j) => gpuRequest(j.gpu)},
        {label: 'Waiting', num: true, cell: (j) => ago(j.created_at)},
        {label: 'Reason', cell: (j) => (j.pending_reason ? {text: j.pending_reason.code, cls: 'code'} : '')},
        {label: 'Why', cls: 'wide', cell: (j) => (j.pending_reason ? j.pending_reason.message : '')},
      ],
    });
    this.count = el('p', {class: 'panel-note'});
    root.append(this.count, this.table.root);
  }

  update(state) {
    this.table.update(state.queue);
    const wanted = state.queue.reduce((s, j) => s + (j.gpu && j.gpu.count ? j.gpu.count : j.gpu && j.gpu.portion ? j.gpu.portion * (j.gpu.devices || 1) : 0), 0);
    const text = state.queue.length ? `${state.queue.length} waiting, asking for about ${gpus(wanted)} GPUs.` : '';
    if (this.count.textContent !== text) this.count.textContent = text;
  }
}
