// job.js - one job's page (#/jobs/ID): what it is and where it runs
// (GET /jobs/{id}), why it waits when it is pending or resuming (its reason
// code, sentence and queue position), what happened to it (GET /jobs/{id}/events)
// and its output, streamed live (GET /jobs/{id}/logs?follow=true, text/plain
// read chunk by chunk until the job finishes or the page is left); what it
// holds (allocation: GPUs, node, devices and the memory packed on each); its
// GPUs over time (jobchart.js, once it has started); and
// the actions its state allows (DELETE /jobs/{id}, POST /jobs/{id}/suspend
// and /resume;
// cancel asks to be confirmed), offered to every role but viewers: the
// server decides, and its refusal (403, 409) is shown as it says it.

import {request, get} from './api.js';
import {el, setText, show, gpus, gpuRequest, bytes, percent, time} from './dom.js';
import {Table} from './table.js';
import {JobChart} from './jobchart.js';

const LOG_KEEP = 512 * 1024; // characters of output kept on the page
const FINISHED = new Set(['succeeded', 'failed', 'cancelled']);

// What a job holds: "1 GPU on node-1: GPU 0" or "0.5 GPU on node-2: GPU 1
// (40 GiB packed)".
export function holding(j) {
  const a = j.allocation;
  if (!a || !j.node) return '–';
  const devs = (a.devices || []).map((d) => `GPU ${d.index}${a.gpus < (a.devices || []).length && d.memory_bytes ? ` (${bytes(d.memory_bytes)} packed)` : ''}`);
  return `${gpus(a.gpus)} GPU${a.gpus > 1 ? 's' : ''} on ${j.node}${devs.length ? `: ${devs.join(', ')}` : ''}`;
}

export class JobPage {
  // toast(msg) tells of a done action; role() is the token's role;
  // loaded(job) is told of each job the page shows
  constructor(root, toast = () => {}, role = () => '', loaded = () => {}) {
    this.root = root;
    this.toast = toast;
    this.role = role;
    this.loaded = loaded;
    this.chart = new JobChart();
    this.id = null;
    this.title = el('h2', {id: 'job-title', tabindex: '-1'});
    this.stateBadge = el('span', {class: 'state'});
    this.facts = el('dl', {class: 'facts'});
    this.reasonCode = el('code', {class: 'reason-code'});
    this.reasonText = el('p', {class: 'reason-text'});
    this.reasonPos = el('p', {class: 'reason-position'});
    this.reason = el('section', {class: 'reason', 'aria-labelledby': 'reason-title', hidden: true},
      el('h3', {id: 'reason-title'}, 'Why it waits'), this.reasonCode, this.reasonText, this.reasonPos);
    this.error = el('p', {class: 'form-error', role: 'alert', hidden: true});
    this.cancelBtn = el('button', {type: 'button', onclick: () => this.askCancel()}, 'Cancel job');
    this.confirmBtn = el('button', {type: 'button', class: 'danger', hidden: true, onclick: () => this.act('cancel')}, 'Yes, cancel it');
    this.keepBtn = el('button', {type: 'button', hidden: true, onclick: () => this.keep()}, 'Keep it');
    this.suspendBtn = el('button', {type: 'button', onclick: () => this.act('suspend')}, 'Suspend');
    this.resumeBtn = el('button', {type: 'button', onclick: () => this.act('resume')}, 'Resume');
    this.actions = el('div', {class: 'job-actions', role: 'group', 'aria-label': 'job actions', hidden: true},
      this.suspendBtn, this.resumeBtn, this.cancelBtn, this.confirmBtn, this.keepBtn);
    // an action's refusal stays until the next action or job, not the next refresh
    this.actionError = el('p', {class: 'form-error action-error', role: 'alert', hidden: true});
    this.events = new Table({
      caption: 'Events of this job',
      pageSize: 100,
      empty: 'No events yet.',
      columns: [
        {label: 'Time', cell: (e) => ({text: time(e.at), title: e.at})},
        {label: 'Event', cell: (e) => ({text: e.type, cls: 'code'})},
        {label: 'Message', cls: 'wide', cell: (e) => e.message},
      ],
    });
    this.follow = el('input', {id: 'log-follow', type: 'checkbox', checked: true, onchange: () => this.followChanged()});
    this.logState = el('span', {class: 'panel-note', role: 'status'});
    this.log = el('pre', {class: 'log', tabindex: '0', 'aria-label': 'job output'});
    this.back = el('a', {href: '#/', class: 'back'}, '‹ Back to the overview');
    root.append(
      el('p', {}, this.back),
      el('header', {class: 'job-header'}, this.title, this.stateBadge),
      this.actions, this.actionError, this.error, this.reason,
      el('section', {'aria-labelledby': 'facts-title'}, el('h3', {id: 'facts-title'}, 'Details'), this.facts),
      this.chart.root,
      el('section', {'aria-labelledby': 'events-title'}, el('h3', {id: 'events-title'}, 'Events'), this.events.root),
      el('section', {'aria-labelledby': 'log-title'},
        el('div', {class: 'log-head'}, el('h3', {id: 'log-title'}, 'Output'),
          el('span', {class: 'field'}, this.follow, el('label', {for: 'log-follow'}, 'Follow live')), this.logState),
        this.log));
  }

  // open(id, back): show job id; back is the overview's address to return to.
  open(id, back = '#/') {
    this.close();
    this.setBack(back);
    this.id = id;
    this.job = null;
    this.chart.reset(id);
    setText(this.title, `Job ${id}`);
    this.facts.replaceChildren();
    this.events.update([]);
    this.log.textContent = '';
    show(this.reason, false);
    show(this.error, false);
    show(this.actions, false);
    show(this.actionError, false);
    this.keep();
    this.title.focus();
    this.streamLog();
    return this.refresh();
  }

  // Where "Back to the overview" leads.
  setBack(href) {
    this.back.setAttribute('href', href);
  }

  close() {
    if (this.abort) this.abort.abort();
    this.abort = null;
    this.id = null;
  }

  async refresh() {
    const id = this.id;
    if (id === null) return;
    let job;
    let events;
    try {
      [job, events] = await Promise.all([get(`/jobs/${id}`), get(`/jobs/${id}/events`)]);
    } catch (e) {
      if (id !== this.id) return;
      setText(this.error, e.status === 404 ? `There is no job ${id}.` : `Could not load job ${id}: ${e.message}`);
      show(this.error, true);
      return;
    }
    if (id !== this.id) return;
    show(this.error, false);
    this.job = job;
    this.render(job, events.events || []);
    this.loaded(job);
    await this.chart.refresh(job);
  }

  render(j, events) {
    setText(this.title, `Job ${j.name}`);
    document.title = `${j.name} · Tessera`;
    setText(this.stateBadge, j.state);
    this.stateBadge.className = `state state-${j.state}`;
    const r = j.pending_reason;
    // a resuming job waits too: for its GPU memory to come back (waiting_for_memory)
    show(this.reason, (j.state === 'pending' || j.state === 'resuming') && !!r);
    if (r) {
      setText(this.reasonCode, r.code);
      setText(this.reasonText, r.message);
      setText(this.reasonPos, r.queue_position ? `Position ${r.queue_position} in the queue.` : '');
    }
    const u = j.usage || {};
    const facts = [
      ['Id', j.id],
      ['Project', j.project],
      ['Kind', j.kind],
      ['Priority', j.priority],
      ['Preemptible', j.preemptible ? 'yes' : 'no'],
      ['GPU request', gpuRequest(j.gpu)],
      ['Node', j.node || '–'],
      ['Holds', holding(j)],
      ['GPU utilization', j.state === 'running' ? percent(u.gpu_utilization) : '–'],
      ['GPU memory used', j.state === 'running' ? bytes(u.gpu_memory_used_bytes) : '–'],
      ['GPU memory in host swap', j.state === 'running' && j.swapped_bytes > 0 ? bytes(j.swapped_bytes) : '–'],
      ['Idle swap after', j.idle_swap_after_seconds > 0 ? j.idle_swap_after : 'never'],
      ['Last active', time(u.last_active_at)],
      ['Project deserved / fair share', j.fair_share ? `${gpus(j.fair_share.project_deserved_gpus)} / ${gpus(j.fair_share.project_fair_share_gpus)} GPUs` : '–'],
      ['Submitted', time(j.created_at)],
      ['Started', time(j.started_at)],
      ['Finished', time(j.finished_at)],
      ['Exit code', j.exit_code === null || j.exit_code === undefined ? '–' : j.exit_code],
      ['Resumed', `${j.resume_count || 0} times`],
      ['Command', (j.command || []).join(' ')],
    ];
    if (this.facts.children.length !== facts.length * 2)
      this.facts.replaceChildren(...facts.flatMap(([k]) => [el('dt', {}, k), el('dd')]));
    facts.forEach(([, v], i) => setText(this.facts.children[i * 2 + 1], v));
    this.events.update(events);
    this.renderActions(j);
  }

  // What the job's state allows: suspend a running job that accepts swap,
  // resume one suspended on request, cancel any that has not finished.
  renderActions(j) {
    const busy = !!this.acting;
    show(this.actions, this.role() !== 'viewer' && !FINISHED.has(j.state));
    show(this.suspendBtn, j.state === 'running' && j.swap !== false);
    show(this.resumeBtn, j.state === 'suspended' && !!j.suspend_held);
    show(this.cancelBtn, !this.confirming && !['cancelling'].includes(j.state));
    show(this.confirmBtn, !!this.confirming);
    show(this.keepBtn, !!this.confirming);
    for (const b of [this.suspendBtn, this.resumeBtn, this.cancelBtn, this.confirmBtn, this.keepBtn]) b.disabled = busy;
  }

  askCancel() {
    this.confirming = true;
    if (this.job) this.renderActions(this.job);
    this.confirmBtn.focus();
  }

  keep() {
    this.confirming = false;
    if (this.job) this.renderActions(this.job);
  }

  // The action (cancel: DELETE /jobs/{id}; suspend, resume: POST
  // /jobs/{id}/ACTION), then the page again; a refusal shown as the server
  // words it.
  async act(action) {
    const id = this.id;
    this.acting = action;
    this.confirming = false;
    show(this.actionError, false);
    if (this.job) this.renderActions(this.job);
    try {
      const r = action === 'cancel'
        ? await request(`/jobs/${id}`, {method: 'DELETE'})
        : await request(`/jobs/${id}/${action}`, {method: 'POST'});
      if (id !== this.id) return;
      const past = {cancel: 'cancelled', suspend: 'is suspending', resume: 'will resume'}[action];
      this.toast(`Job ${(r.data && r.data.name) || id} ${past}${r.data && r.data.state ? ` (${r.data.state})` : ''}.`);
    } catch (e) {
      if (id !== this.id) return;
      setText(this.actionError, `Could not ${action} the job: ${e.message}${e.hint ? ` (${e.hint})` : ''}`);
      show(this.actionError, true);
    } finally {
      this.acting = null;
    }
    await this.refresh();
  }

  followChanged() {
    if (this.follow.checked) this.streamLog();
    else if (this.abort) {
      this.abort.abort();
      this.abort = null;
      setText(this.logState, 'paused');
    }
  }

  append(text) {
    const atBottom = this.log.scrollTop + this.log.clientHeight >= this.log.scrollHeight - 4;
    this.log.append(text);
    if (this.log.textContent.length > LOG_KEEP) this.log.textContent = this.log.textContent.slice(-LOG_KEEP / 2);
    if (atBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  // Output so far (the last 1000 lines), then new output as it comes.
  async streamLog() {
    if (this.abort) this.abort.abort();
    const id = this.id;
    const abort = new AbortController();
    this.abort = abort;
    this.log.textContent = '';
    const follow = this.follow.checked;
    setText(this.logState, follow ? 'following' : '');
    try {
      const r = await request(`/jobs/${id}/logs`, {query: {follow: follow ? 'true' : 'false', tail: 1000}, stream: true, signal: abort.signal, headers: {Accept: 'text/plain'}});
      const reader = r.response.body.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const {done, value} = await reader.read();
        if (done) break;
        this.append(decoder.decode(value, {stream: true}));
      }
      this.append(decoder.decode());
      if (this.abort === abort) setText(this.logState, this.job && FINISHED.has(this.job.state) ? 'the job has finished' : 'end of output');
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (this.abort === abort) setText(this.logState, `could not read the output: ${e.message}`);
    }
  }
}
