// app.js - the dashboard's entry: sign-in, the hash router (#/ overview,
// #/?project=NAME filtered, #/jobs/ID a job), and the refresh loop.
//
// Every few seconds the overview fetches only aggregate lists —
// GET /nodes, /projects, /departments and /queue (and, with a project
// filter, that project's placed jobs) — never every job; the panels update
// the DOM in place. A refresh starts only when the previous one finished,
// waits longer when a refresh was slow (a big cluster), and pauses while
// the tab is hidden.

import {request, get, getToken, setToken} from './api.js';
import {setText, show, el} from './dom.js';
import {Tiles} from './tiles.js';
import {Chart} from './chart.js';
import {QuotaPanel} from './quota.js';
import {QueuePanel} from './queue.js';
import {NodesPanel} from './nodes.js';
import {ComparePanel} from './compare.js';
import {IdleHours} from './idlehours.js';
import {JobPage} from './job.js';

const INTERVAL_MS = 5000;
const NAME_FETCHES = 25; // job names looked up per refresh, at most
const PLACED = 'scheduled,running,evicting,cancelling';

const $ = (id) => document.getElementById(id);

const state = {
  nodes: [],
  projects: [],
  departments: [],
  queue: [],
  project: '', // the project filter, '' for all
  projectJobIds: null, // ids of the filtered project's placed jobs
  isAdmin: false,
  role: '', // the token's role, from GET /whoami
  jobs: new Map(), // id -> {name, project}: names for the grid
};

const timing = {refreshes: 0, lastMs: 0, lastRenderMs: 0};
let panels = null;
let timer = null;
let inFlight = false;
let again = false; // asked for while a refresh was running
let signedIn = false;
let view = 'overview';

function buildPanels() {
  panels = {
    tiles: new Tiles($('tiles-panel')),
    chart: new Chart($('chart-panel')),
    quota: new QuotaPanel($('quota-panel'), (msg) => {
      toast(msg);
      refreshSoon();
    }),
    queue: new QueuePanel($('queue-panel')),
    nodes: new NodesPanel($('grid-panel'), $('idle-panel')),
    compare: new ComparePanel($('compare-panel')),
    idleHours: new IdleHours($('idle-hours-panel')),
    job: new JobPage($('job-page'), (msg) => toast(msg), () => state.role, jobLoaded),
  };
}

// A job of another project than the filter's: the filter is dropped, so
// that neither the header nor the way back keeps a project the job is not
// in (the overview it returns to shows every project).
function jobLoaded(job) {
  if (!state.project || !job.project || job.project === state.project) return;
  setFilter('');
  panels.job.setBack('#/');
}

function setFilter(project) {
  state.project = project;
  state.projectJobIds = null;
  $('project-filter').value = project;
  panels.chart.setProject(project);
}

function toast(text) {
  const t = $('toast');
  setText(t, text);
  show(t, true);
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => show(t, false), 6000);
}

function banner(text) {
  setText($('banner'), text || '');
  show($('banner'), !!text);
}

// ---- sign-in ---------------------------------------------------------------

function showSignIn(message) {
  signedIn = false;
  clearTimeout(timer);
  show($('signin'), true);
  show($('overview'), false);
  show($('job-page'), false);
  show($('top-controls'), false);
  if (panels) panels.job.close();
  const err = $('signin-error');
  setText(err, message || '');
  show(err, !!message);
  $('token').focus();
}

async function signIn(event) {
  event.preventDefault();
  const token = $('token').value.trim();
  if (!token) return;
  try {
    await request('/projects', {token});
  } catch (e) {
    const msg = e.status === 401 ? 'This token was not accepted: check that it is complete and not revoked.'
      : e.status === 403 ? 'This token may not read the cluster (an agent token?): use an admin, member or viewer token.'
      : `Could not sign in: ${e.message}`;
    showSignIn(msg);
    return;
  }
  setToken(token);
  $('token').value = '';
  start();
}

function signOut() {
  setToken(null);
  state.isAdmin = false;
  showSignIn('');
}

// Admins see the quota editor: GET /whoami names the token's role.
async function probeAdmin() {
  try {
    const me = (await request('/whoami')).data;
    state.isAdmin = !!me && me.role === 'admin';
    state.role = (me && me.role) || '';
  } catch (e) {
    state.isAdmin = false;
    state.role = '';
  }
}

async function start() {
  signedIn = true;
  show($('signin'), false);
  show($('top-controls'), true);
  // nothing the last token could see stays on screen for this one
  panels.compare.reset();
  panels.idleHours.reset();
  await probeAdmin();
  route();
}

// ---- routing ---------------------------------------------------------------

function parseHash() {
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, query] = h.split('?');
  const m = path.match(/^\/jobs\/(\d+)$/);
  const params = new URLSearchParams(query || '');
  return {job: m ? Number(m[1]) : null, project: params.get('project') || ''};
}

function route() {
  if (!signedIn) return;
  const r = parseHash();
  if (r.job !== null) {
    view = 'job';
    show($('overview'), false);
    show($('job-page'), true);
    panels.job.open(r.job, state.project ? `#/?project=${encodeURIComponent(state.project)}` : '#/');
  } else {
    view = 'overview';
    panels.job.close();
    document.title = 'Tessera';
    show($('job-page'), false);
    show($('overview'), true);
    if (r.project !== state.project || !refresh.done) setFilter(r.project);
  }
  refreshSoon();
}

function filterChanged() {
  const p = $('project-filter').value;
  location.hash = p ? `#/?project=${encodeURIComponent(p)}` : '#/';
}

function updateProjectOptions() {
  const sel = $('project-filter');
  const names = state.projects.map((p) => p.name).sort();
  if (state.project && !names.includes(state.project)) names.push(state.project);
  const have = [...sel.options].slice(1).map((o) => o.value);
  if (have.join('\n') === names.join('\n')) return;
  sel.replaceChildren(el('option', {value: ''}, 'All projects'), ...names.map((n) => el('option', {value: n}, n)));
  sel.value = state.project;
}

// ---- refresh ---------------------------------------------------------------

function refreshSoon() {
  clearTimeout(timer);
  timer = setTimeout(refresh, 0);
}

async function projectJobs(project) {
  const ids = new Set();
  let cursor;
  for (let page = 0; page < 10; page++) {
    const r = await get('/jobs', {project, state: PLACED, limit: 1000, cursor});
    for (const j of r.jobs || []) {
      ids.add(j.id);
      state.jobs.set(j.id, {name: j.name, project: j.project});
    }
    cursor = r.next_cursor;
    if (!cursor) break;
  }
  return ids;
}

// Names of the jobs on screen that the page has not seen yet.
async function fetchNames(ids) {
  const want = ids.slice(0, NAME_FETCHES);
  if (!want.length) return false;
  await Promise.all(want.map(async (id) => {
    try {
      const j = await get(`/jobs/${id}`);
      state.jobs.set(id, {name: j.name, project: j.project});
    } catch (e) {
      if (e.status === 404 || e.status === 403) state.jobs.set(id, {name: `#${id}`, project: ''});
    }
  }));
  return true;
}

async function refreshOverview() {
  const project = state.project;
  const [nodes, projects, departments, queue, mine] = await Promise.all([
    get('/nodes'),
    get('/projects'),
    get('/departments'),
    get('/queue', {project: project || undefined}),
    project ? projectJobs(project) : Promise.resolve(null),
  ]);
  if (project !== state.project) return; // the filter changed meanwhile
  const t0 = performance.now();
  state.nodes = nodes.nodes || [];
  state.projects = projects.projects || [];
  state.departments = departments.departments || [];
  state.queue = queue.jobs || [];
  state.projectJobIds = mine;
  if (state.jobs.size > 50000) state.jobs.clear();
  updateProjectOptions();
  panels.tiles.update(state);
  panels.quota.update(state);
  panels.queue.update(state);
  panels.nodes.update(state);
  timing.lastRenderMs = performance.now() - t0;
  // not awaited: their series are big on a big cluster, and the overview's
  // pace (4x a refresh's duration) should not wait for them; each loads
  // one at a time and shows its own errors
  panels.compare.refresh();
  panels.idleHours.refresh();
  if (await fetchNames(panels.nodes.missingJobIds())) panels.nodes.render();
  await panels.chart.refresh(state);
}

async function refresh() {
  if (!signedIn) return;
  if (inFlight) {
    again = true;
    return;
  }
  if (document.hidden) return; // visibilitychange brings it back
  inFlight = true;
  const t0 = performance.now();
  try {
    if (view === 'job') await panels.job.refresh();
    else await refreshOverview();
    refresh.done = true;
    banner('');
    setText($('updated'), `Updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    if (e.status !== 401) banner(`Could not refresh: ${e.message}. Showing the last figures; trying again.`);
  } finally {
    inFlight = false;
    timing.refreshes++;
    timing.lastMs = performance.now() - t0;
    if (signedIn) {
      clearTimeout(timer);
      timer = setTimeout(refresh, again ? 0 : Math.max(INTERVAL_MS, 4 * timing.lastMs));
      again = false;
    }
  }
}

// ---- boot ------------------------------------------------------------------

function boot() {
  buildPanels();
  $('signin-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', signOut);
  $('project-filter').addEventListener('change', filterChanged);
  window.addEventListener('hashchange', route);
  window.addEventListener('tessera:unauthorized', () => {
    setToken(null);
    showSignIn('Your token is no longer accepted: sign in again.');
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && signedIn) refreshSoon();
  });
  // For tests and for people curious about the page's cost.
  window.tessera = {state, timing};
  if (getToken()) start();
  else showSignIn('');
}

boot();
