// quota.js - the quota table (GET /projects and /departments: quota, limit,
// weight, deserved and fair share from the last scheduler cycle, allocated
// non-preemptible and preemptible, requested, running, pending) and, for
// admins, the quota editor: GET /projects/{name} for the values and their
// ETag, PUT /projects/{name}/quota with If-Match. A 412 means someone else
// changed the quota since: the editor says so and offers to reload.

import {request} from './api.js';
import {el, setText, show, gpus} from './dom.js';
import {Table} from './table.js';

const limitText = (q) => (q.limit === null || q.limit === undefined ? 'none' : gpus(q.limit));

export class QuotaPanel {
  constructor(root, onSaved) {
    this.onSaved = onSaved;
    this.admin = false;
    const over = (p) => (p.status.allocated_gpus || 0) > (p.quota.gpus || 0) + 1e-9;
    this.columns = [
      {label: 'Project', cell: (p) => p.name},
      {label: 'Department', cell: (p) => p.department},
      {label: 'Quota', num: true, cell: (p) => gpus(p.quota.gpus)},
      {label: 'Limit', num: true, cell: (p) => limitText(p.quota)},
      {label: 'Weight', num: true, cell: (p) => gpus(p.quota.over_quota_weight)},
      {label: 'Priority', num: true, cell: (p) => p.quota.priority},
      {label: 'Deserved', num: true, cell: (p) => gpus(p.status.deserved_gpus)},
      {label: 'Fair share', num: true, cell: (p) => gpus(p.status.fair_share_gpus)},
      {label: 'Allocated non-preemptible', num: true, cell: (p) => gpus(p.status.allocated_nonpreemptible_gpus)},
      {label: 'Allocated preemptible', num: true,
        cell: (p) => gpus(Math.max(0, (p.status.allocated_gpus || 0) - (p.status.allocated_nonpreemptible_gpus || 0)))},
      {label: 'Allocated', num: true,
        cell: (p) => (over(p) ? {text: gpus(p.status.allocated_gpus), cls: 'over-quota', title: 'over its quota: it uses GPUs beyond its guarantee'} : gpus(p.status.allocated_gpus))},
      {label: 'Requested', num: true, cell: (p) => gpus(p.status.requested_gpus)},
      {label: 'Running', num: true, cell: (p) => p.status.running_jobs},
      {label: 'Pending', num: true, cell: (p) => p.status.pending_jobs},
      {label: 'Edit', cls: 'actions', cell: (p) => (this.admin ? {key: p.name, node: () => el('button', {type: 'button', class: 'small', 'data-edit': p.name, 'aria-label': `Edit the quota of ${p.name}`, onclick: () => this.open(p.name)}, 'Edit')} : '')},
    ];
    this.table = new Table({caption: 'Projects and their quotas', columns: this.columns, pageSize: 50, empty: 'No projects yet.'});
    this.deptTable = new Table({
      caption: 'Departments and their quotas',
      pageSize: 50,
      empty: 'No departments yet.',
      columns: [
        {label: 'Department', cell: (d) => d.name},
        {label: 'Projects', num: true, cell: (d) => d.project_count},
        {label: 'Quota', num: true, cell: (d) => gpus(d.quota.gpus)},
        {label: 'Limit', num: true, cell: (d) => limitText(d.quota)},
        {label: 'Weight', num: true, cell: (d) => gpus(d.quota.over_quota_weight)},
        {label: 'Deserved', num: true, cell: (d) => gpus((d.status || {}).deserved_gpus)},
        {label: 'Fair share', num: true, cell: (d) => gpus((d.status || {}).fair_share_gpus)},
        {label: 'Allocated', num: true, cell: (d) => gpus((d.status || {}).allocated_gpus)},
        {label: 'Pending', num: true, cell: (d) => (d.status || {}).pending_jobs},
      ],
    });
    root.append(this.table.root, el('h3', {}, 'Departments'), this.deptTable.root);
    this.buildDialog();
  }

  update(state) {
    if (this.admin !== state.isAdmin) {
      this.admin = state.isAdmin;
      this.table.tbody.replaceChildren(); // rebuild with or without the Edit buttons
    }
    this.table.table.classList.toggle('no-edit', !this.admin);
    const projects = state.projects.filter((p) => !state.project || p.name === state.project);
    const cmp = (a, b) => a.localeCompare(b, undefined, {numeric: true});
    projects.sort((a, b) => cmp(a.department, b.department) || cmp(a.name, b.name));
    this.table.update(projects);
    const depts = state.departments.filter((d) => !state.project || projects.some((p) => p.department === d.name));
    this.deptTable.update(depts);
  }

  buildDialog() {
    const field = (id, label, attrs, help) =>
      el('p', {class: 'form-row'}, el('label', {for: id}, label), el('input', {id, name: id, type: 'number', required: attrs.required, ...attrs}), help ? el('small', {id: `${id}-help`}, help) : null);
    this.title = el('h2', {id: 'quota-title'}, 'Edit quota');
    this.status = el('p', {class: 'form-status', role: 'status'});
    this.error = el('p', {class: 'form-error', role: 'alert', hidden: true});
    this.reloadBtn = el('button', {type: 'button', onclick: () => this.reload()}, 'Reload their values');
    this.conflict = el('div', {class: 'conflict', role: 'alert', hidden: true},
      el('strong', {}, 'Someone else changed this quota.'),
      el('span', {class: 'conflict-text'}, ' It was changed after you opened this editor, so your change was not saved. Reload to see the current values, then apply your change again.'),
      ' ', this.reloadBtn);
    this.form = el('form', {method: 'dialog', novalidate: true},
      this.title,
      field('quota-gpus', 'Guaranteed GPUs (quota)', {min: 0, step: 'any', required: true}, 'Fractions allowed, e.g. 2.5'),
      field('quota-limit', 'Limit (GPUs)', {min: 0, step: 'any', 'aria-describedby': 'quota-limit-help'}, 'Empty: no limit'),
      field('quota-weight', 'Over-quota weight', {min: 0, step: 'any', required: true}),
      field('quota-priority', 'Priority', {min: -1000, max: 1000, step: 1, required: true}),
      this.conflict, this.error, this.status,
      el('p', {class: 'form-actions'},
        el('button', {type: 'submit', class: 'primary', value: 'save'}, 'Save'),
        el('button', {type: 'button', onclick: () => this.dialog.close()}, 'Cancel')));
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.save();
    });
    this.dialog = el('dialog', {id: 'quota-dialog', 'aria-labelledby': 'quota-title'}, this.form);
    document.body.append(this.dialog);
  }

  input(name) {
    return this.form.querySelector(`#quota-${name}`);
  }

  fill(project) {
    const q = project.quota;
    this.input('gpus').value = q.gpus;
    this.input('limit').value = q.limit === null || q.limit === undefined ? '' : q.limit;
    this.input('weight').value = q.over_quota_weight;
    this.input('priority').value = q.priority;
  }

  async fetchProject() {
    const r = await request(`/projects/${encodeURIComponent(this.name)}`);
    this.etag = r.etag;
    return r.data;
  }

  async open(name) {
    this.name = name;
    setText(this.title, `Edit the quota of ${name}`);
    show(this.conflict, false);
    show(this.error, false);
    setText(this.status, '');
    try {
      this.fill(await this.fetchProject());
    } catch (e) {
      this.fail(e);
    }
    if (!this.dialog.open) this.dialog.showModal();
    this.input('gpus').focus();
  }

  async reload() {
    try {
      const p = await this.fetchProject();
      this.fill(p);
      show(this.conflict, false);
      setText(this.status, `Loaded the current values of ${this.name}: quota ${gpus(p.quota.gpus)}, limit ${limitText(p.quota)}, weight ${gpus(p.quota.over_quota_weight)}, priority ${p.quota.priority}.`);
      this.input('gpus').focus();
    } catch (e) {
      this.fail(e);
    }
  }

  fail(e) {
    let text = e.message;
    if (e.status === 403) text = 'Your token may not change quotas: that needs an admin token.';
    if (e.hint) text += ` (${e.hint})`;
    setText(this.error, text);
    show(this.error, true);
  }

  async save() {
    show(this.error, false);
    show(this.conflict, false);
    setText(this.status, '');
    const num = (name) => Number(this.input(name).value);
    const limit = this.input('limit').value.trim();
    const body = {gpus: num('gpus'), over_quota_weight: num('weight'), limit: limit === '' ? null : Number(limit), priority: Math.trunc(num('priority'))};
    for (const [k, v] of Object.entries(body))
      if (v !== null && !Number.isFinite(v)) return this.fail(new Error(`${k.replace(/_/g, ' ')} must be a number`));
    try {
      const r = await request(`/projects/${encodeURIComponent(this.name)}/quota`, {method: 'PUT', body, headers: {'If-Match': this.etag || '*'}});
      this.etag = r.etag;
      this.dialog.close();
      this.onSaved(`Saved the quota of ${this.name}: ${gpus(r.data.quota.gpus)} GPUs, limit ${limitText(r.data.quota)}.`);
    } catch (e) {
      if (e.status === 412) {
        show(this.conflict, true);
        this.reloadBtn.focus();
      } else {
        this.fail(e);
      }
    }
  }
}
