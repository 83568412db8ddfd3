// api.js - every call to the Tessera API goes through here: the token from
// sessionStorage as "Authorization: Bearer", JSON in and out, and errors as
// ApiError carrying the server's problem+json (code, detail, hint).

const TOKEN_KEY = 'tessera.token';
// Relative, so the dashboard also works behind a proxy that mounts the
// server under a path prefix.
const BASE = 'api/v1';

export class ApiError extends Error {
  constructor(status, problem, path) {
    const p = problem || {};
    super(p.detail || p.title || `HTTP ${status} on ${path}`);
    this.status = status;
    this.code = p.code || (status === 0 ? 'network' : `http_${status}`);
    this.detail = p.detail || '';
    this.hint = p.hint || '';
    this.field = p.field || '';
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function url(path, query) {
  const u = new URL(BASE + path, document.baseURI);
  for (const [k, v] of Object.entries(query || {}))
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  return u;
}

// request(path, {method, query, body, headers, signal, token}) ->
// {status, data, etag, response}. data is parsed JSON (or null). Throws
// ApiError on a status >= 400 or a network failure; a 401 also fires
// "tessera:unauthorized" on window so the page can ask for a token again.
export async function request(path, opts = {}) {
  const headers = {Accept: 'application/json', ...(opts.headers || {})};
  const token = opts.token !== undefined ? opts.token : getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(url(path, opts.query), {method: opts.method || 'GET', headers, body, signal: opts.signal, cache: 'no-store'});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, {detail: `could not reach the server: ${e.message}`}, path);
  }
  if (opts.stream && res.ok) return {status: res.status, response: res};
  const text = await res.text();
  let data = null;
  if (text && /json/.test(res.headers.get('Content-Type') || '')) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      throw new ApiError(res.status, {detail: `malformed JSON from ${path}`}, path);
    }
  } else if (text) {
    data = text;
  }
  if (!res.ok) {
    if (res.status === 401 && opts.token === undefined) window.dispatchEvent(new CustomEvent('tessera:unauthorized'));
    throw new ApiError(res.status, typeof data === 'object' ? data : {detail: data}, path);
  }
  return {status: res.status, data, etag: res.headers.get('ETag'), response: res};
}

export async function get(path, query, signal) {
  return (await request(path, {query, signal})).data;
}
