// table.js - a paginated table that updates in place: rows are reused by
// position and a cell is written only when its value changed, so a refresh
// neither flickers nor loses the reader's place. Only one page of rows is
// ever in the DOM, however long the list (1,000 nodes, 10,000 jobs).
//
// new Table({caption, columns, pageSize, empty, rowClass})
//   columns: [{label, num, cls, cell(item) -> value}]
//   value: a string or number; or {text, href, title, cls}; or
//          {key, node()} where node() builds the cell's content afresh
//          whenever key changes.
// table.root is the element to place; table.update(items) renders.

import {el, setText, setAttr} from './dom.js';

function signature(v) {
  if (v === null || v === undefined) return '';
  if (typeof v !== 'object') return `s:${v}`;
  if (v.node) return `n:${v.key}`;
  return `o:${v.text}|${v.href || ''}|${v.title || ''}|${v.cls || ''}`;
}

function fill(td, v) {
  const sig = signature(v);
  if (td._sig === sig) return;
  td._sig = sig;
  if (v === null || v === undefined || typeof v !== 'object') {
    if (td.firstElementChild) td.replaceChildren();
    setText(td, v);
    setAttr(td, 'title', null);
    return;
  }
  if (v.node) {
    td.replaceChildren(v.node());
    return;
  }
  if (v.href) {
    td.replaceChildren(el('a', {href: v.href, class: v.cls, title: v.title}, v.text));
  } else {
    td.replaceChildren(v.cls ? el('span', {class: v.cls}, v.text) : document.createTextNode(String(v.text)));
    setAttr(td, 'title', v.title);
  }
}

export class Table {
  constructor(opts) {
    this.columns = opts.columns;
    this.pageSize = opts.pageSize || 25;
    this.rowClass = opts.rowClass;
    this.page = 0;
    this.items = [];
    this.tbody = el('tbody');
    const head = el('tr', {}, ...this.columns.map((c) => el('th', {scope: 'col', class: c.num ? 'num' : c.cls}, c.label)));
    this.table = el('table', {class: opts.cls || 'data'}, opts.caption ? el('caption', {class: 'visually-hidden'}, opts.caption) : null, el('thead', {}, head), this.tbody);
    this.emptyRow = el('p', {class: 'empty', hidden: true}, opts.empty || 'Nothing to show.');
    this.prev = el('button', {type: 'button', class: 'small', onclick: () => this.go(-1)}, '‹ Previous');
    this.next = el('button', {type: 'button', class: 'small', onclick: () => this.go(1)}, 'Next ›');
    this.range = el('span', {class: 'range'});
    this.pager = el('nav', {class: 'pager', 'aria-label': `${opts.caption || 'table'} pages`, hidden: true}, this.prev, this.range, this.next);
    this.root = el('div', {class: 'table-wrap'}, el('div', {class: 'scroll'}, this.table), this.emptyRow, this.pager);
  }

  go(delta) {
    this.page += delta;
    this.render();
  }

  update(items) {
    this.items = items;
    this.render();
  }

  render() {
    const n = this.items.length;
    const pages = Math.max(1, Math.ceil(n / this.pageSize));
    this.page = Math.min(Math.max(this.page, 0), pages - 1);
    const start = this.page * this.pageSize;
    const slice = this.items.slice(start, start + this.pageSize);
    const rows = this.tbody.rows;
    while (rows.length > slice.length) this.tbody.lastElementChild.remove();
    while (rows.length < slice.length) this.tbody.append(el('tr', {}, ...this.columns.map((c) => el('td', {class: c.num ? 'num' : c.cls}))));
    slice.forEach((item, i) => {
      const tr = rows[i];
      if (this.rowClass) setAttr(tr, 'class', this.rowClass(item) || null);
      this.columns.forEach((c, k) => fill(tr.cells[k], c.cell(item)));
    });
    this.emptyRow.hidden = n > 0;
    this.table.hidden = n === 0;
    this.pager.hidden = n <= this.pageSize;
    this.prev.disabled = this.page === 0;
    this.next.disabled = this.page >= pages - 1;
    setText(this.range, n ? `${start + 1}–${start + slice.length} of ${n}` : '');
  }

  // The items on the current page (for fetching details of visible rows).
  visible() {
    const start = this.page * this.pageSize;
    return this.items.slice(start, start + this.pageSize);
  }
}
