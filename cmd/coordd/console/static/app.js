// coordd console: plain JavaScript, no framework, no build step.
//
// Every value that comes from the server is put on the page as text
// (textContent, or el() below, which only ever makes text nodes), never as
// markup: a znode whose data is "<script>" shows as those characters.
'use strict';

// ---- small helpers ----

const $ = (sel) => document.querySelector(sel);

// el makes an element; attrs are attributes (class, title...) or event
// handlers (onclick...); children are elements or strings, added as text.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function fmtNum(v, digits) {
  if (v === null || v === undefined) return '–';
  return Number(v).toLocaleString(undefined, { maximumFractionDigits: digits || 0 });
}

function count(n, one, many) {
  return fmtNum(n) + ' ' + (n === 1 ? one : many || one + 's');
}

function fmtTime(ms) {
  return new Date(ms).toLocaleTimeString(undefined, { hour12: false });
}

function fmtBytes(n) {
  if (n < 1024) return n + ' B';
  if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB';
  return (n / (1 << 20)).toFixed(1) + ' MiB';
}

function showBanner(text) {
  const b = $('#banner');
  b.textContent = text || '';
  b.hidden = !text;
}

// api calls a JSON endpoint; a failure throws an Error with .code and
// .status from the console's {code, error} answer.
async function api(path, body) {
  const opts = { headers: {} };
  if (body !== undefined) {
    opts.method = 'POST';
    opts.headers['Content-Type'] = 'application/json';
    opts.headers['X-Console-Token'] = state.info.token || '';
    opts.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    const err = new Error('the console does not answer: ' + e.message);
    err.code = 'Unreachable';
    throw err;
  }
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) {
    const err = new Error((data && data.error) || resp.statusText);
    err.code = (data && data.code) || String(resp.status);
    err.status = resp.status;
    throw err;
  }
  return data;
}

function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function utf8(bytes) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (e) {
    return null;
  }
}

function hexdump(bytes, limit) {
  const lines = [];
  const n = Math.min(bytes.length, limit);
  for (let off = 0; off < n; off += 16) {
    const row = bytes.subarray(off, Math.min(off + 16, n));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const asc = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : '.')).join('');
    lines.push(off.toString(16).padStart(8, '0') + '  ' + hex.padEnd(48) + ' ' + asc);
  }
  if (bytes.length > n) lines.push('… ' + (bytes.length - n) + ' more bytes');
  return lines.join('\n');
}

// confirmAction shows the confirmation dialog: title, then body (elements
// or text); it resolves true when the person confirms.
function confirmAction(title, body, okLabel) {
  const d = $('#confirm');
  $('#confirm-title').textContent = title;
  $('#confirm-body').replaceChildren(...[].concat(body));
  $('#confirm-ok').textContent = okLabel || 'Confirm';
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.returnValue = '';
    d.showModal();
  });
}

// ---- state and routing ----

const state = {
  info: {},
  view: '',
  streams: [], // EventSources of the current view
  timers: [],
};

function stopStreams() {
  state.streams.forEach((s) => s.close());
  state.timers.forEach((t) => clearInterval(t));
  state.streams = [];
  state.timers = [];
}

function stream(url, handlers) {
  const es = new EventSource(url);
  for (const [name, fn] of Object.entries(handlers)) {
    es.addEventListener(name, (ev) => fn(name === 'error' ? ev : JSON.parse(ev.data)));
  }
  state.streams.push(es);
  return es;
}

// route shows the view the location's hash names: #cluster, #tree:/path,
// #sessions, #locks:/path, #events:/path.
function route() {
  const h = decodeURIComponent(location.hash.slice(1)) || 'cluster';
  const colon = h.indexOf(':');
  const view = colon < 0 ? h : h.slice(0, colon);
  const arg = colon < 0 ? '' : h.slice(colon + 1);
  const views = { cluster: showCluster, tree: showTree, sessions: showSessions, locks: showLocks, events: showEvents };
  const show = views[view] || showCluster;
  const name = views[view] ? view : 'cluster';
  if (name !== state.view || name === 'locks' || name === 'events') {
    stopStreams();
    showBanner('');
  }
  document.querySelectorAll('main > section').forEach((s) => { s.hidden = s.id !== 'view-' + name; });
  document.querySelectorAll('nav a').forEach((a) => a.classList.toggle('active', a.dataset.view === name));
  const first = name !== state.view;
  state.view = name;
  show(arg, first);
}

function go(hash) {
  if (location.hash === '#' + hash) route();
  else location.hash = hash;
}

// ---- cluster ----

const chart = { samples: [], spanMs: 300000 };
const lastCells = new Map(); // "member/column" -> last value, to flash changes

function showCluster(_, first) {
  if (!first && state.streams.length) return;
  stream('api/cluster', {
    history: (samples) => { chart.samples = samples; drawChart(); },
    cluster: (view) => {
      if (view.error) {
        showBanner(view.error);
        $('#members').classList.add('stale');
        return;
      }
      showBanner('');
      renderMembers(view);
      if (view.sample) {
        chart.samples.push(view.sample);
        const cut = view.t - chart.spanMs;
        while (chart.samples.length && chart.samples[0].t < cut) chart.samples.shift();
      }
      drawChart();
    },
    error: () => showBanner('lost the connection to the console; retrying…'),
  });
}

function renderMembers(view) {
  const leader = view.leader ? 'leader ' + view.leader + ', term ' + view.term : 'no leader';
  $('#cluster-summary').replaceChildren(
    el('strong', {}, leader),
    ' · as seen by server ' + view.server,
    ' · ' + count(view.znodes, 'znode') + ' · ' + count(view.sessions, 'session') + ' · ' + count(view.watches, 'watch', 'watches') + ' on this server',
  );
  const rows = view.members.map((m) => {
    const cell = (col, text, cls) => {
      const key = m.id + '/' + col;
      const changed = lastCells.has(key) && lastCells.get(key) !== text;
      lastCells.set(key, text);
      return el('td', { class: [cls, changed ? 'changed' : ''].join(' ').trim() || undefined }, text);
    };
    const contact = m.role === 'unreachable' ? '–' : m.leader || m.role === 'leader' ? 'leader'
      : m.lastContactMs < 0 ? 'never' : fmtNum(m.lastContactMs) + ' ms ago';
    const reach = m.role !== 'unreachable';
    return el('tr', { class: m.leader ? 'leader' : m.role === 'unreachable' ? 'unreachable' : undefined, 'data-member': m.id },
      el('td', {}, m.id),
      el('td', { class: 'role-' + m.role }, m.role),
      el('td', {}, m.voter ? 'voter' : 'non-voter'),
      cell('term', reach ? fmtNum(m.term) : '–', 'num'),
      cell('commit', reach ? fmtNum(m.commit) : '–', 'num'),
      cell('applied', reach ? fmtNum(m.applied) : '–', 'num'),
      el('td', { class: 'num' }, contact),
      cell('reads', fmtNum(m.reads, 1), 'num'),
      cell('writes', fmtNum(m.writes, 1), 'num'),
      el('td', {}, m.clientAddress || '–'),
      el('td', {}, m.version || '–'),
    );
  });
  $('#members tbody').replaceChildren(...rows);
  $('#members').classList.remove('stale');
}

function drawChart() {
  const cv = $('#chart');
  const ratio = window.devicePixelRatio || 1;
  const w = cv.clientWidth || 960, h = cv.clientHeight || 240;
  cv.width = w * ratio; cv.height = h * ratio;
  const g = cv.getContext('2d');
  g.scale(ratio, ratio);
  g.clearRect(0, 0, w, h);
  const pad = { l: 48, r: 52, t: 10, b: 22 };
  const pw = w - pad.l - pad.r, ph = h - pad.t - pad.b;
  const now = chart.samples.length ? chart.samples[chart.samples.length - 1].t : Date.now();
  // The span grows a minute at a time with the samples, up to the history kept.
  const first = chart.samples.length ? chart.samples[0].t : now;
  const span = Math.min(chart.spanMs, Math.max(60000, Math.ceil((now - first + 1) / 60000) * 60000));
  const t0 = now - span;
  const minutes = Math.round(span / 60000);
  $('#chart-span').textContent = minutes === 1 ? '(last minute)' : '(last ' + minutes + ' minutes)';
  const maxOps = niceMax(Math.max(1, ...chart.samples.map((s) => Math.max(s.reads, s.writes))));
  const maxLat = niceMax(Math.max(1, ...chart.samples.map((s) => s.latencyMs || 0)));
  const css = getComputedStyle(document.documentElement);
  const color = (name) => css.getPropertyValue(name).trim();
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#e4e8ec'; g.fillStyle = color('--muted'); g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = pad.t + ph - (ph * i) / 4;
    g.beginPath(); g.moveTo(pad.l, y); g.lineTo(pad.l + pw, y); g.stroke();
    g.textAlign = 'right'; g.fillText(fmtNum((maxOps * i) / 4, 2), pad.l - 6, y + 4);
    g.textAlign = 'left'; g.fillText(fmtNum((maxLat * i) / 4, 2), pad.l + pw + 6, y + 4);
  }
  g.textAlign = 'center';
  const step = span <= 60000 ? 10000 : span <= 300000 ? 60000 : 300000;
  for (let d = 0; d <= span; d += step) {
    const x = pad.l + pw - (pw * d) / span;
    g.fillText(d === 0 ? 'now' : d < 60000 ? '-' + d / 1000 + 's' : '-' + d / 60000 + 'm', x, h - 6);
  }
  const line = (key, max, col, dash) => {
    g.strokeStyle = col; g.lineWidth = 2; g.setLineDash(dash || []);
    g.beginPath();
    let started = false, lastT = 0;
    for (const s of chart.samples) {
      const v = s[key];
      if (v === null || v === undefined || s.t < t0) { started = false; continue; }
      const x = pad.l + (pw * (s.t - t0)) / span;
      const y = pad.t + ph - (ph * Math.min(v, max)) / max;
      if (!started || s.t - lastT > 5000) g.moveTo(x, y); else g.lineTo(x, y);
      started = true; lastT = s.t;
    }
    g.stroke();
    g.setLineDash([]);
  };
  line('reads', maxOps, color('--reads'));
  line('writes', maxOps, color('--writes'));
  line('latencyMs', maxLat, color('--latency'), [4, 3]);
}

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// ---- tree ----

const tree = { selected: '/', node: null, mode: '', items: new Map() };

async function showTree(path, first) {
  path = path || '/';
  if (first || !$('#tree').firstChild) {
    $('#tree').replaceChildren(treeItem('/', '/', null));
    tree.rootLoaded = expand('/');
  }
  await tree.rootLoaded;
  selectNode(path);
}

// treeItem is one node of the tree pane; its children load when opened.
function treeItem(path, name, info) {
  const toggle = el('button', { class: 'toggle', type: 'button', title: 'open or close' }, '▸');
  const label = el('span', { class: 'name', 'data-path': path }, name);
  label.addEventListener('click', () => go('tree:' + path));
  const row = el('div', { class: 'row' }, toggle, label);
  if (info && info.ephemeral) row.append(el('span', { class: 'eph', title: 'ephemeral' }, 'eph'));
  if (info && info.numChildren > 0) row.append(el('span', { class: 'count' }, '(' + fmtNum(info.numChildren) + ')'));
  const li = el('li', {}, row);
  if (info && info.numChildren === 0) toggle.style.visibility = 'hidden';
  toggle.addEventListener('click', () => (li.dataset.open ? collapse(path) : expand(path)));
  tree.items.set(path, { li, toggle, label });
  return li;
}

async function expand(path, offset) {
  const it = tree.items.get(path);
  if (!it) return;
  offset = offset || 0;
  let page;
  try {
    page = await api('api/children?path=' + encodeURIComponent(path) + '&offset=' + offset + '&limit=100');
  } catch (e) {
    showNodeError(e);
    return;
  }
  let ul = it.li.querySelector(':scope > ul');
  if (!ul || offset === 0) {
    if (ul) ul.remove();
    ul = el('ul');
    it.li.append(ul);
  }
  const more = ul.querySelector(':scope > li.more-item');
  if (more) more.remove();
  for (const c of page.children) {
    if (c.gone) continue;
    const p = path === '/' ? '/' + c.name : path + '/' + c.name;
    ul.append(treeItem(p, c.name, c));
  }
  const shown = page.offset + page.children.length;
  if (shown < page.total) {
    const btn = el('button', { class: 'more', type: 'button' }, 'show more (' + fmtNum(page.total - shown) + ' of ' + fmtNum(page.total) + ' left)');
    btn.addEventListener('click', () => expand(path, shown));
    ul.append(el('li', { class: 'more-item' }, btn));
  }
  it.li.dataset.open = '1';
  it.toggle.textContent = '▾';
  if (page.total === 0) it.toggle.style.visibility = 'hidden';
  markSelected();
}

function collapse(path) {
  const it = tree.items.get(path);
  const ul = it.li.querySelector(':scope > ul');
  if (ul) ul.remove();
  delete it.li.dataset.open;
  it.toggle.textContent = '▸';
}

function markSelected() {
  document.querySelectorAll('.tree .name.selected').forEach((n) => n.classList.remove('selected'));
  const it = tree.items.get(tree.selected);
  if (it && !it.label.classList.contains('selected')) {
    it.label.classList.add('selected');
    it.label.scrollIntoView({ block: 'center' });
  }
}

function showNodeError(e) {
  const p = $('#node-error');
  p.textContent = e ? e.code + ': ' + e.message : '';
  p.hidden = !e;
}

async function selectNode(path) {
  if (path !== tree.selected) tree.mode = ''; // each node opens in the view that fits its data
  tree.selected = path;
  markSelected();
  $('#node-path').textContent = path;
  $('#node-as-lock').href = '#locks:' + path;
  $('#node-events').href = '#events:' + path;
  showNodeError(null);
  let n;
  try {
    n = await api('api/node?path=' + encodeURIComponent(path));
  } catch (e) {
    $('#node-body').hidden = true;
    showNodeError(e);
    return;
  }
  if (tree.selected !== path) return;
  // Open the ancestors, so that the node shows in the tree.
  const parts = path.split('/').filter(Boolean);
  let p = '';
  for (const part of parts.slice(0, -1)) {
    p += '/' + part;
    const it = tree.items.get(p);
    if (it && !it.li.dataset.open) await expand(p);
  }
  const parent = parts.length ? '/' + parts.slice(0, -1).join('/') : null;
  if (parent && !tree.items.has(path) && tree.items.get(parent) && !tree.items.get(parent).li.dataset.open) await expand(parent);
  markSelected();
  renderNode(n);
  const it = tree.items.get(path);
  if (it && n.numChildren > 0 && !it.li.dataset.open) expand(path);
}

function renderNode(n) {
  tree.node = n;
  tree.bytes = b64bytes(n.data);
  tree.text = utf8(tree.bytes);
  $('#node-body').hidden = false;
  $('#node-delete').disabled = n.path === '/' || n.numChildren > 0;
  $('#node-delete').title = n.numChildren > 0 ? 'delete its children first' : '';
  let json = null;
  if (tree.text !== null && tree.text.trim() !== '') {
    try { json = JSON.parse(tree.text); } catch (e) { json = null; }
  }
  tree.json = json;
  if (!tree.mode) tree.mode = json !== null ? 'json' : tree.text !== null ? 'text' : 'hex';
  renderData();
  const editable = !n.truncated && tree.text !== null;
  $('#node-edit').value = editable ? tree.text : '';
  $('#node-edit').disabled = !editable;
  $('#node-save').disabled = !editable;
  $('#edit-note').textContent = editable ? 'saved with version ' + n.version + ': a change made meanwhile fails with BadVersion'
    : n.truncated ? 'too large to edit here' : 'binary data: edit it with coordctl';
  $('#stat tbody').replaceChildren(...n.stat.map((f) => el('tr', {}, el('td', {}, f.name), el('td', { title: f.title }, f.value))));
  if (n.aclError) $('#acl').replaceChildren(el('li', { class: 'muted' }, 'not readable: ' + n.aclError));
  else if (n.acl) $('#acl').replaceChildren(...n.acl.map((a) => el('li', {}, a)));
}

function renderData() {
  const n = tree.node;
  let text;
  if (tree.mode === 'json') {
    text = tree.json !== null ? JSON.stringify(tree.json, null, 2) : 'not JSON';
  } else if (tree.mode === 'text') {
    text = tree.text !== null ? tree.text : 'not UTF-8 text: see Hex';
  } else {
    text = hexdump(tree.bytes, 64 * 1024);
  }
  $('#node-data').textContent = text;
  document.querySelectorAll('#data-tabs button').forEach((b) => b.classList.toggle('active', b.dataset.mode === tree.mode));
  $('#data-note').textContent = fmtBytes(n.dataLength) + (n.truncated ? ', the first ' + fmtBytes(tree.bytes.length) + ' shown' : '');
}

async function saveNode() {
  const n = tree.node;
  const text = $('#node-edit').value;
  const ok = await confirmAction('Set ' + n.path + '?', [
    el('p', {}, 'Replace the data (' + fmtBytes(new TextEncoder().encode(text).length) + ') if the node is still at version ' + n.version + '.'),
    el('pre', {}, text.length > 2000 ? text.slice(0, 2000) + '…' : text),
  ], 'Set');
  if (!ok) return;
  try {
    renderNode(await api('api/set', { path: n.path, data: text, encoding: 'text', version: n.version }));
    showNodeError(null);
  } catch (e) {
    showNodeError(e);
  }
}

async function deleteNode() {
  const n = tree.node;
  const ok = await confirmAction('Delete ' + n.path + '?', el('p', {}, 'Delete the node if it is still at version ' + n.version + '.'), 'Delete');
  if (!ok) return;
  try {
    await api('api/delete', { path: n.path, version: n.version });
    const parent = n.path.slice(0, n.path.lastIndexOf('/')) || '/';
    refreshChildren(parent);
    go('tree:' + parent);
  } catch (e) {
    showNodeError(e);
  }
}

async function createChild() {
  const n = tree.node;
  const name = el('input', { type: 'text', id: 'create-name', placeholder: 'name' });
  const data = el('input', { type: 'text', id: 'create-data', placeholder: 'data (text)' });
  const kind = el('select', { id: 'create-kind' }, el('option', { value: 'persistent' }, 'persistent'),
    el('option', { value: 'container' }, 'container'), el('option', { value: 'ttl' }, 'TTL'));
  const seq = el('input', { type: 'checkbox', id: 'create-seq' });
  const ttl = el('input', { type: 'number', id: 'create-ttl', min: '1', value: '60000' });
  const ok = await confirmAction('Create a child of ' + n.path, [
    el('label', { for: 'create-name' }, 'name'), name,
    el('label', { for: 'create-data' }, 'data'), data,
    el('label', { for: 'create-kind' }, 'kind'), kind,
    el('label', {}, seq, ' sequential (a counter is appended to the name)'),
    el('label', { for: 'create-ttl' }, 'TTL in ms (TTL nodes)'), ttl,
  ], 'Create');
  if (!ok) return;
  const path = (n.path === '/' ? '' : n.path) + '/' + name.value;
  try {
    const made = await api('api/create', {
      path, data: data.value, encoding: 'text', kind: kind.value, sequential: seq.checked,
      ttlMs: kind.value === 'ttl' ? Number(ttl.value) : 0,
    });
    refreshChildren(n.path);
    go('tree:' + made.path);
  } catch (e) {
    showNodeError(e);
  }
}

function refreshChildren(path) {
  const it = tree.items.get(path);
  if (it) expand(path);
}

// ---- sessions ----

function showSessions() {
  const load = async () => {
    try {
      const out = await api('api/sessions');
      showBanner('');
      $('#sessions-summary').textContent = count(out.sessions.length, 'open session');
      $('#sessions tbody').replaceChildren(...out.sessions.map((s) => el('tr', { class: s.console ? 'mine' : undefined },
        el('td', {}, s.id), el('td', {}, s.server || '–'), el('td', { class: 'num' }, fmtNum(s.timeoutMs / 1000, 1) + ' s'),
        el('td', { class: 'num' }, fmtNum(s.ephemerals)), el('td', { class: 'num' }, fmtNum(s.watches)),
        el('td', {}, s.console ? 'this console' : ''))));
    } catch (e) {
      showBanner(e.code + ': ' + e.message);
    }
  };
  load();
  state.timers.push(setInterval(load, 2000));
}

// ---- locks and elections ----

const locks = { holder: '' };

function code(text) {
  return el('code', {}, text);
}

// showLocks follows the lock or election at path; without one it lists
// those that exist (api/recipes), to pick from.
function showLocks(path) {
  $('#locks-path').value = path;
  $('#handoffs').replaceChildren();
  locks.holder = '';
  $('#holders tbody').replaceChildren();
  $('#waiting tbody').replaceChildren();
  $('#locks-live').textContent = '';
  $('#recipes-pane').hidden = !!path;
  $('#lock-pane').hidden = !path;
  if (!path) {
    loadRecipes();
    state.timers.push(setInterval(loadRecipes, 3000));
    return;
  }
  $('#locks-live').textContent = 'connecting…';
  stream('api/locks?path=' + encodeURIComponent(path), {
    contenders: (cs) => {
      showBanner('');
      $('#locks-live').textContent = 'live · ' + (cs.semaphore ? 'a semaphore · ' : '') + 'updated ' + new Date(cs.at).toLocaleTimeString(undefined, { hour12: false });
      // A holder whose session expired but whose node a lock-delay keeps
      // says so, and until when, where its server would be.
      const server = (k) => k.lockDelayUntil
        ? el('span', { class: 'lock-delay', title: 'the session expired; the lock-delay keeps its node until ' + k.lockDelayUntil }, 'expired · lock-delay until ' + fmtTime(Date.parse(k.lockDelayUntil)))
        : (k.server || '–');
      const row = (k, first) => el('tr', {},
        el('td', {}, first), el('td', {}, k.node + (k.kind ? ' (' + k.kind + ')' : '')), el('td', {}, k.session), el('td', {}, server(k)),
        el('td', { title: 'hex ' + k.tokenHex }, k.token), el('td', {}, new Date(k.since).toLocaleString()), el('td', {}, k.value || ''));
      $('#holders tbody').replaceChildren(...cs.holders.map((k) => row(k, 'holds')));
      $('#waiting tbody').replaceChildren(...cs.waiting.map((k, i) => row(k, String(i + 1))));
      const holder = cs.holders.map((k) => k.session + '/' + k.token).join(',');
      if (holder !== locks.holder) {
        const who = cs.holders.length ? cs.holders.map((k) => 'session ' + k.session + ' (token ' + k.token + ')').join(', ') : 'nobody';
        $('#handoffs').prepend(el('li', {}, fmtTime(Date.parse(cs.at)) + ' held by ' + who));
        locks.holder = holder;
      }
    },
    failure: (e) => showBanner(e.code + ': ' + e.error),
    error: () => { $('#locks-live').textContent = 'reconnecting…'; },
  });
}

async function loadRecipes() {
  let out;
  try {
    out = await api('api/recipes');
  } catch (e) {
    showBanner(e.code + ': ' + e.message);
    return;
  }
  if (state.view !== 'locks' || $('#recipes-pane').hidden) return; // the page moved on meanwhile
  showBanner('');
  const roots = out.roots.join(' and ');
  $('#recipes-note').textContent = '(under ' + roots + (out.more ? '; ' + fmtNum(out.more) + ' more not listed' : '') + ')';
  $('#recipes tbody').replaceChildren(...out.recipes.map((r) => el('tr', { 'data-path': r.path },
    el('td', {}, el('a', { href: '#locks:' + r.path }, r.path)),
    el('td', {}, r.kind),
    el('td', { class: 'num' }, r.holders ? fmtNum(r.holders) : 'free'),
    el('td', { class: 'num' }, fmtNum(r.waiting)))));
  const none = out.recipes.length === 0;
  $('#recipes').hidden = none;
  $('#recipes-empty').hidden = !none;
  if (none) {
    $('#recipes-empty').replaceChildren(
      'No locks or elections under ' + out.roots.join(' or ') + ' yet. ',
      code('coordctl lock /locks/NAME -- CMD'), ' runs CMD holding a lock, ',
      code('coordctl elect NAME -- CMD'), ' runs it while it leads the election at /elections/NAME; they show here. ',
      'For a lock or election elsewhere, type its path above, or open its node in the Tree and choose “Follow as lock”.');
  }
}

// ---- events ----

// eventsEmpty says, while the feed has shown nothing, what brings events.
function eventsEmpty(path) {
  const p = $('#events-empty');
  p.hidden = $('#events tbody').children.length > 0;
  if (p.hidden) return;
  const demo = (path === '/' ? '' : path) + '/demo';
  p.replaceChildren('No changes under ' + path + ' since the feed started. Every znode created, changed or deleted under it shows here as it happens: try ',
    code('coordctl create ' + demo + ' hello'), ', then ', code('coordctl set ' + demo + ' again'), ' and ', code('coordctl delete ' + demo),
    ' in a terminal.');
}

function showEvents(path, first) {
  path = path || '/';
  $('#events-path').value = path;
  if (first || $('#events tbody').dataset.path !== path) $('#events tbody').replaceChildren();
  $('#events tbody').dataset.path = path;
  $('#events-empty').hidden = true;
  $('#events-live').textContent = 'connecting…';
  stream('api/watch?path=' + encodeURIComponent(path), {
    watching: (w) => { showBanner(''); $('#events-live').textContent = 'live · ' + w.how; eventsEmpty(path); },
    event: (ev) => {
      $('#events-empty').hidden = true;
      const link = el('a', { href: '#tree:' + ev.path }, ev.path);
      const tb = $('#events tbody');
      const note = ev.note ? el('span', { class: 'muted' }, ' — ' + ev.note) : null;
      tb.prepend(el('tr', {}, el('td', {}, fmtTime(ev.received)), el('td', { class: 'ev-' + ev.type }, ev.type), el('td', {}, link, note), el('td', {}, ev.zxid || '–')));
      while (tb.children.length > 500) tb.lastChild.remove();
    },
    failure: (e) => showBanner(e.code + ': ' + e.error),
    error: () => { $('#events-live').textContent = 'reconnecting…'; },
  });
}

// ---- start ----

async function start() {
  try {
    state.info = await api('api/info');
  } catch (e) {
    showBanner(e.message);
  }
  const info = state.info;
  chart.spanMs = (info.historySeconds || 300) * 1000;
  $('#server').textContent = 'console of ' + (info.server || '?');
  const mode = $('#mode');
  mode.textContent = info.writes ? 'writes enabled' : 'read-only';
  mode.classList.toggle('rw', !!info.writes);
  document.body.classList.toggle('readonly', !info.writes);
  $('#identity').textContent = info.identity ? 'acting as ' + info.identity : '';

  $('#node-reload').addEventListener('click', () => { refreshChildren(tree.selected); selectNode(tree.selected); });
  $('#node-save').addEventListener('click', saveNode);
  $('#node-delete').addEventListener('click', deleteNode);
  $('#node-create').addEventListener('click', createChild);
  document.querySelectorAll('#data-tabs button').forEach((b) => b.addEventListener('click', () => { tree.mode = b.dataset.mode; renderData(); }));
  $('#locks-form').addEventListener('submit', (ev) => { ev.preventDefault(); go('locks:' + $('#locks-path').value.trim()); });
  $('#events-form').addEventListener('submit', (ev) => { ev.preventDefault(); go('events:' + ($('#events-path').value.trim() || '/')); });
  $('#events-stop').addEventListener('click', () => { stopStreams(); $('#events-live').textContent = 'stopped'; });
  window.addEventListener('hashchange', route);
  window.addEventListener('resize', () => { if (state.view === 'cluster') drawChart(); });
  route();
}

start();
