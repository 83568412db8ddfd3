// dom.js - small DOM and formatting helpers every panel uses. Updates go
// through setText/setAttr, which touch the DOM only when a value changed, so
// a refresh every few seconds repaints nothing that stayed the same.

// el('a', {href: '#/', class: 'x'}, 'text', child...) -> a new element.
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function setText(node, text) {
  const s = text === undefined || text === null ? '' : String(text);
  if (node.textContent !== s) node.textContent = s;
}

export function setAttr(node, name, value) {
  if (value === undefined || value === null || value === false) {
    if (node.hasAttribute(name)) node.removeAttribute(name);
    return;
  }
  const s = value === true ? '' : String(value);
  if (node.getAttribute(name) !== s) node.setAttribute(name, s);
}

export function show(node, visible) {
  if (node.hidden === visible) node.hidden = !visible;
}

// GPUs: at most two decimals, no trailing zeros (2.5, 0.25, 3).
export function gpus(v) {
  if (v === undefined || v === null || Number.isNaN(v)) return '–';
  return String(Math.round(v * 100) / 100);
}

export function percent(frac) {
  if (frac === undefined || frac === null || Number.isNaN(frac)) return '–';
  return `${Math.round(frac * 100)}%`;
}

export function bytes(n) {
  if (n === undefined || n === null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Math.round(v * 10) / 10} ${units[i]}`;
}

// "2024-05-01T12:00:00Z" -> local "12:00:00" today, else "May 1, 12:00".
export function time(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString();
  return d.toLocaleString(undefined, {month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit'});
}

// How long ago, coarse: "45 s", "12 min", "3 h", "2 d".
export function ago(iso) {
  if (!iso) return '–';
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

// A job's GPU request in words: "2 GPUs", "0.5 GPU (≤ 1)", "16 GiB (≤ 60 GiB)".
export function gpuRequest(g) {
  if (!g) return 'none';
  if (g.count) return `${g.count} GPU${g.count > 1 ? 's' : ''}`;
  const dev = g.devices > 1 ? ` × ${g.devices}` : '';
  if (g.portion !== undefined) {
    const lim = g.portion_limit && g.portion_limit !== g.portion ? ` (≤ ${gpus(g.portion_limit)})` : '';
    return `${gpus(g.portion)} GPU${lim}${dev}`;
  }
  if (g.memory !== undefined) {
    const m = typeof g.memory === 'number' ? bytes(g.memory) : g.memory;
    const l = g.memory_limit !== undefined ? ` (≤ ${typeof g.memory_limit === 'number' ? bytes(g.memory_limit) : g.memory_limit})` : '';
    return `${m}${l}${dev}`;
  }
  return JSON.stringify(g);
}

// CSV text from rows of values (RFC 4180 quoting).
export function csv(header, rows) {
  const q = (v) => {
    const s = v === null || v === undefined ? '' : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [header, ...rows].map((r) => r.map(q).join(',')).join('\r\n') + '\r\n';
}

// Offer text as a file download.
export function download(filename, text, type = 'text/csv') {
  const url = URL.createObjectURL(new Blob([text], {type}));
  const a = el('a', {href: url, download: filename, hidden: true});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
