// The operator page of turnstile serve: the locks held now, one key's
// history, the instance's metrics, force unlock for an admin. It talks to
// its own origin only: the Connect JSON API and the page's /ui/api/.
'use strict';

(() => {
  const TOKEN = 'turnstile-token';
  const $ = (id) => document.getElementById(id);
  const session = { role: null };
  const list = { prefix: '', kind: 'lock', permits: '', page: 0, pages: 1 };
  // When the page first saw each (key, token): the age of a lock it did
  // not see granted is at least that.
  const firstSeen = new Map();
  let view = null; // the view shown: 'list' or 'key'
  let stopView = () => {};

  // ---- calls ----

  function headers(extra) {
    const h = Object.assign({}, extra);
    const t = sessionStorage.getItem(TOKEN);
    if (t) h.Authorization = 'Bearer ' + t;
    return h;
  }

  class CallError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  async function answer(r) {
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new CallError(r.status, body.code || '', body.message || r.statusText);
    return body;
  }

  async function get(path, signal) {
    return answer(await fetch(path, { headers: headers(), cache: 'no-store', signal }));
  }

  // call makes a unary call of the API, Connect's JSON over HTTP.
  async function call(service, method, msg, signal) {
    return answer(await fetch('/turnstile.v1.' + service + '/' + method, {
      method: 'POST', signal, cache: 'no-store',
      headers: headers({ 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1' }),
      body: JSON.stringify(msg),
    }));
  }

  // watch streams the API's Watch events of a prefix (Connect's
  // streaming JSON: each message after a flags byte and a 4-byte length)
  // until signal aborts it or the stream ends.
  async function watch(prefix, onEvent, signal) {
    const msg = new TextEncoder().encode(JSON.stringify({ key: prefix, prefix: true }));
    const body = new Uint8Array(5 + msg.length);
    new DataView(body.buffer).setUint32(1, msg.length);
    body.set(msg, 5);
    const r = await fetch('/turnstile.v1.Locks/Watch', {
      method: 'POST', signal, cache: 'no-store',
      headers: headers({ 'Content-Type': 'application/connect+json' }), body,
    });
    if (!r.ok) await answer(r);
    const reader = r.body.getReader();
    let buf = new Uint8Array(0);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const joined = new Uint8Array(buf.length + value.length);
      joined.set(buf);
      joined.set(value, buf.length);
      buf = joined;
      while (buf.length >= 5) {
        const n = new DataView(buf.buffer, buf.byteOffset).getUint32(1);
        if (buf.length < 5 + n) break;
        const flags = buf[0];
        const m = JSON.parse(new TextDecoder().decode(buf.subarray(5, 5 + n)));
        buf = buf.slice(5 + n);
        if (flags & 2) {
          if (m.error) throw new CallError(0, m.error.code || '', m.error.message || 'the watch ended');
          return;
        }
        if (m.event) onEvent(m.event);
      }
    }
  }

  // keepWatching watches prefix again after the stream ends or fails,
  // until signal aborts.
  async function keepWatching(prefix, onEvent, signal) {
    while (!signal.aborted) {
      try {
        await watch(prefix, onEvent, signal);
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof CallError && (e.status === 401 || e.status === 403)) return;
      }
      await sleep(2000, signal);
    }
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  // ---- rendering helpers (text only: nothing from the store is HTML) ----

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') e.className = v;
      else if (k === 'data') Object.assign(e.dataset, v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  function showError(e) {
    if (e && e.name === 'AbortError') return;
    $('error').textContent = e ? (e.message || String(e)) : '';
    if (e instanceof CallError && e.status === 401) login();
  }

  function duration(ms) {
    if (ms < 0) return '—';
    if (ms < 10000) return (ms / 1000).toFixed(1) + ' s';
    const s = Math.floor(ms / 1000);
    if (s < 120) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 120) return m + ' min ' + (s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }

  function kindOf(apiKind) {
    return (apiKind || 'KIND_LOCK').replace('KIND_', '').toLowerCase();
  }

  // ttlCell is a TTL that counts down between refreshes.
  function ttlCell(ttlMs) {
    if (ttlMs < 0) return el('td', { class: 'num' }, 'session');
    return el('td', { class: 'num ttl', data: { ttl: String(ttlMs), at: String(performance.now()) } }, duration(ttlMs));
  }

  function ageCell(key, token) {
    const id = key + '\u0000' + token;
    let first = firstSeen.get(id);
    if (first === undefined) {
      first = { at: Date.now(), granted: false };
      firstSeen.set(id, first);
    }
    return el('td', { class: 'num age', data: { since: String(first.at), exact: first.granted ? '1' : '' } }, '');
  }

  function tick() {
    const now = performance.now();
    for (const td of document.querySelectorAll('td.ttl')) {
      const left = Number(td.dataset.ttl) - (now - Number(td.dataset.at));
      td.textContent = duration(Math.max(0, left));
      td.classList.toggle('low', left < 5000);
    }
    const wall = Date.now();
    for (const td of document.querySelectorAll('td.age')) {
      td.textContent = (td.dataset.exact ? '' : '≥ ') + duration(wall - Number(td.dataset.since));
    }
  }

  function keyLink(key, kind, permits) {
    let h = '#/key/' + encodeURIComponent(key) + '?kind=' + encodeURIComponent(kind);
    if (permits) h += '&permits=' + encodeURIComponent(permits);
    return el('a', { href: h, class: 'key' }, key);
  }

  function locksQuery(prefix, page, size) {
    const q = new URLSearchParams({ prefix, kind: list.kind, page: String(page) });
    if (list.kind === 'semaphore') q.set('permits', list.permits || '2');
    if (size) q.set('size', String(size));
    return '/ui/api/locks?' + q.toString();
  }

  // ---- session ----

  async function start() {
    try {
      const s = await get('/ui/api/session');
      if (!s.authenticated) return login();
      session.role = s.role;
      $('who').textContent = 'role: ' + s.role;
      $('logout').hidden = !sessionStorage.getItem(TOKEN);
      $('login-view').hidden = true;
      $('charts-note').hidden = !s.charts;
      call('Locks', 'Info', {}).then((i) => {
        $('info').textContent = i.store + ' · instance ' + i.instance + (i.version ? ' · ' + i.version : '');
      }, showError);
      if (s.charts) startCharts();
      route();
    } catch (e) {
      showError(e);
    }
  }

  function login() {
    stopView();
    view = null;
    session.role = null;
    chartRun++;
    $('list-view').hidden = true;
    $('key-view').hidden = true;
    $('login-view').hidden = false;
    $('logout').hidden = true;
    $('who').textContent = '';
  }

  $('login-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN, $('login-token').value.trim());
    $('login-token').value = '';
    $('error').textContent = '';
    start();
  });

  $('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN);
    location.hash = '#/';
    login();
  });

  // ---- routing ----

  function route() {
    if (!session.role) return;
    stopView();
    $('error').textContent = '';
    const h = location.hash;
    if (h.startsWith('#/key/')) {
      const [path, query] = h.slice('#/key/'.length).split('?');
      const q = new URLSearchParams(query || '');
      showKey(decodeURIComponent(path), q.get('kind') || 'lock', q.get('permits') || '');
    } else {
      showList();
    }
  }
  window.addEventListener('hashchange', route);

  // ---- the lock list ----

  function showList() {
    view = 'list';
    $('key-view').hidden = true;
    $('list-view').hidden = false;
    const ctl = new AbortController();
    let pending = null;
    const refresh = () => {
      if (pending) return;
      pending = setTimeout(() => { pending = null; loadList(ctl.signal); }, 100);
    };
    stopView = () => { ctl.abort(); clearTimeout(pending); };
    loadList(ctl.signal);
    // Poll, and refresh at once on the instance's events under the prefix.
    (async () => {
      while (!ctl.signal.aborted) {
        await sleep(2000, ctl.signal);
        if (!ctl.signal.aborted) refresh();
      }
    })();
    keepWatching(list.prefix, (ev) => {
      if (ev.type === 'EVENT_TYPE_ACQUIRED' && ev.token) {
        firstSeen.set(ev.key + '\u0000' + ev.token, { at: ev.time ? Date.parse(ev.time) : Date.now(), granted: true });
      }
      refresh();
    }, ctl.signal);
  }

  let listSeq = 0;
  async function loadList(signal) {
    const seq = ++listSeq;
    try {
      const p = await get(locksQuery(list.prefix, list.page), signal);
      if (seq !== listSeq || signal.aborted) return;
      list.pages = p.pages;
      if (list.page >= p.pages) list.page = p.pages - 1;
      const rows = p.locks.map((l) => {
        const h = l.holders[0] || { owner: '', instance: '', token: l.token, ttl_ms: -1 };
        const more = l.holders.length > 1 ? ' (+' + (l.holders.length - 1) + ')' : '';
        return el('tr', { data: { key: l.key } },
          el('td', { class: 'mono' }, keyLink(l.key, l.kind, list.kind === 'semaphore' ? (list.permits || '2') : '')),
          el('td', {}, l.kind),
          el('td', { class: 'mono owner' }, h.owner + more),
          el('td', { class: 'mono' }, h.instance),
          el('td', { class: 'num token' }, h.token),
          ageCell(l.key, h.token),
          ttlCell(h.ttl_ms),
          el('td', { class: 'num waiters' }, l.queued ? l.waiters + ' queued' : String(l.waiters)));
      });
      $('locks').tBodies[0].replaceChildren(...rows);
      // When the first page of locks was shown: the benchmark reads it.
      if (!performance.getEntriesByName('turnstile-locks').length) performance.mark('turnstile-locks');
      $('page-no').textContent = 'page ' + (p.page + 1) + ' of ' + p.pages;
      $('prev').disabled = p.page === 0;
      $('next').disabled = p.page + 1 >= p.pages;
      let note = p.listed + (p.listed === 1 ? ' lock' : ' locks') + ' held' + (list.prefix ? ' under "' + list.prefix + '"' : '');
      if (p.more) note = 'The first ' + p.listed + ' locks the store listed (it holds more: narrow the prefix)';
      $('list-note').textContent = note + ' · listed in ' + p.took_ms + ' ms';
      tick();
      $('error').textContent = '';
    } catch (e) {
      if (!signal.aborted) showError(e);
    }
  }

  $('search').addEventListener('submit', (ev) => {
    ev.preventDefault();
    list.prefix = $('prefix').value;
    list.kind = $('kind').value;
    list.permits = $('permits').value;
    list.page = 0;
    route();
  });
  $('kind').addEventListener('change', () => { $('permits-label').hidden = $('kind').value !== 'semaphore'; });
  $('prev').addEventListener('click', () => { if (list.page > 0) { list.page--; route(); } });
  $('next').addEventListener('click', () => { if (list.page + 1 < list.pages) { list.page++; route(); } });

  // ---- elections ----

  async function loadLeaders() {
    const names = (sessionStorage.getItem('turnstile-elections') || '').split(',').map((s) => s.trim()).filter(Boolean);
    const rows = [];
    for (const name of names) {
      try {
        const r = await call('Elections', 'Leader', { name });
        const l = r.leader || {};
        rows.push(el('tr', {}, el('td', { class: 'mono' }, name),
          el('td', { class: 'mono' }, l.elected ? l.value : 'no leader'),
          el('td', { class: 'num' }, l.elected ? (l.term || '0') : ''),
          el('td', { class: 'mono' }, l.owner || '')));
      } catch (e) {
        rows.push(el('tr', {}, el('td', { class: 'mono' }, name), el('td', { class: 'error' }, e.message), el('td', {}, ''), el('td', {}, '')));
      }
    }
    $('leaders').tBodies[0].replaceChildren(...rows);
  }

  $('elections-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('turnstile-elections', $('elections').value);
    loadLeaders();
  });
  $('elections').value = sessionStorage.getItem('turnstile-elections') || '';
  setInterval(() => { if (view === 'list' && $('elections').value) loadLeaders(); }, 3000);

  // ---- one key ----

  function showKey(key, kind, permits) {
    view = 'key';
    $('list-view').hidden = true;
    $('key-view').hidden = false;
    $('key-title').textContent = key;
    $('key-kind').textContent = kind + (permits ? ' of ' + permits : '');
    $('history').tBodies[0].replaceChildren();
    $('force-result').textContent = '';
    $('force-confirm').value = '';
    $('force-button').disabled = true;
    // The control is not there at all for a token that may not use it.
    $('force').hidden = session.role !== 'admin';
    const ctl = new AbortController();
    stopView = () => ctl.abort();
    const grants = new Map(); // owner → its open grant, for "held for"
    const load = async () => {
      try {
        const q = new URLSearchParams({ key, kind });
        if (permits) q.set('permits', permits);
        const st = await get('/ui/api/lock?' + q.toString(), ctl.signal);
        const l = st.held ? st : null;
        const rows = l ? l.holders.map((h) => el('tr', {},
          el('td', { class: 'mono owner' }, h.owner), el('td', { class: 'mono' }, h.instance),
          el('td', { class: 'num token' }, h.token), ageCell(key, h.token), ttlCell(h.ttl_ms))) : [];
        $('key-state').tBodies[0].replaceChildren(...rows);
        $('key-summary').textContent = l
          ? 'Held · highest token ' + l.token + ' · waiters: ' + (l.queued ? l.waiters + ' queued in the store' : l.waiters)
          : 'Not held now.';
        $('key-summary').dataset.waiters = l ? String(l.waiters) : '0';
        tick();
      } catch (e) {
        if (!ctl.signal.aborted) showError(e);
      }
    };
    load();
    (async () => {
      while (!ctl.signal.aborted) {
        await sleep(1000, ctl.signal);
        if (!ctl.signal.aborted) await load();
      }
    })();
    keepWatching(key, (ev) => {
      if (ev.key !== key || ev.type === 'EVENT_TYPE_EXTENDED') return;
      const at = ev.time ? new Date(ev.time) : new Date();
      let token = ev.token && ev.token !== '0' ? ev.token : '';
      let held = '';
      if (ev.type === 'EVENT_TYPE_ACQUIRED') {
        grants.set(ev.owner || token, { token, at });
        firstSeen.set(key + '\u0000' + token, { at: at.getTime(), granted: true });
      } else {
        // A release by a lease's handle may carry no token, and the
        // store's notice no owner either: it ends the open grant of its
        // owner, or the last one.
        let g = grants.get(ev.owner || '');
        if (!g && !ev.owner) g = [...grants.values()].pop();
        if (g) {
          if (!token || ev.type !== 'EVENT_TYPE_FORCE_RELEASED') token = g.token;
          held = duration(at - g.at);
          grants.delete(ev.owner || [...grants.keys()].pop());
        }
      }
      const type = ev.type.replace('EVENT_TYPE_', '').toLowerCase().replace('_', ' ');
      $('history').tBodies[0].append(el('tr', { data: { type, token } },
        el('td', { class: 'num' }, at.toLocaleTimeString()), el('td', { class: 'event' }, type),
        el('td', { class: 'mono' }, ev.owner || ''), el('td', { class: 'num token' }, token),
        el('td', { class: 'num' }, held), el('td', {}, (ev.source || '').replace('EVENT_SOURCE_', '').toLowerCase())));
      load();
    }, ctl.signal);

    $('force-confirm').oninput = () => { $('force-button').disabled = $('force-confirm').value !== key; };
    $('force-form').onsubmit = async (ev) => {
      ev.preventDefault();
      $('force-button').disabled = true;
      try {
        const r = await answer(await fetch('/ui/api/force-release', {
          method: 'POST', cache: 'no-store',
          headers: headers({ 'Content-Type': 'application/json', 'X-Turnstile-Csrf': '1' }),
          body: JSON.stringify({ key, kind, permits, confirm: $('force-confirm').value }),
        }));
        $('force-result').textContent = (r.removed.held ? 'Unlocked' : 'Nobody held it') + '; the fence is at token ' + r.fence_floor + ': every later token is greater.';
        $('force-confirm').value = '';
        load();
      } catch (e) {
        $('force-result').textContent = 'Refused: ' + e.message;
      }
    };
  }

  // ---- charts ----

  const samples = [];
  const charts = [
    { id: 'acq', title: 'Acquisitions /s', lines: [['acquired', '#2b6cb0'], ['not acquired', '#a0aec0']] },
    { id: 'p50', title: 'Acquire wait p50 (ms)', threshold: 'acquire_p50', scale: 1000, lines: [['p50', '#2b6cb0']] },
    { id: 'p99', title: 'Acquire wait p99 (ms)', threshold: 'acquire_p99', scale: 1000, lines: [['p99', '#2b6cb0']] },
    { id: 'lost', title: 'Leases lost /min', threshold: 'forced_expiries_per_min', lines: [['lost', '#c53030']] },
    { id: 'renew', title: 'Renewal failures (%)', threshold: 'renewal_failures', scale: 100, lines: [['failed', '#c53030']] },
    { id: 'errors', title: 'Store errors /s', lines: [['errors', '#c53030']] },
    { id: 'holds', title: 'Holds in flight', lines: [['held streams', '#2b6cb0'], ['leases', '#38a169'], ['waiting calls', '#d69e2e']] },
  ];

  let chartRun = 0; // the sampling loop that runs; login() ends it
  function startCharts() {
    const run = ++chartRun;
    samples.length = 0;
    if (!$('charts').childElementCount) for (const c of charts) {
      c.canvas = el('canvas', { width: '300', height: '120' });
      c.caption = el('figcaption', {}, c.title);
      $('charts').append(el('figure', { id: 'chart-' + c.id }, c.caption, c.canvas));
    }
    const poll = async () => {
      if (run !== chartRun || !session.role) return;
      try {
        const s = await get('/ui/api/metrics');
        samples.push(s);
        if (samples.length > 151) samples.shift();
        drawCharts();
      } catch (e) {
        if (e instanceof CallError && e.status === 401) return;
      }
      setTimeout(poll, 2000);
    };
    poll();
  }

  // quantile of the latency histogram between two samples, in seconds.
  function quantile(q, a, b) {
    const n = b.counts.length;
    if (!n || a.counts.length !== n) return 0;
    const d = b.counts.map((c, i) => c - a.counts[i]);
    const total = d[n - 1];
    if (total <= 0) return 0;
    const rank = q * total;
    for (let i = 0; i < n; i++) {
      if (d[i] >= rank) {
        const lo = i ? b.buckets[i - 1] : 0;
        const below = i ? d[i - 1] : 0;
        const inBucket = d[i] - below;
        return inBucket > 0 ? lo + (b.buckets[i] - lo) * (rank - below) / inBucket : b.buckets[i];
      }
    }
    return b.buckets[n - 1];
  }

  function series() {
    const out = Object.fromEntries(charts.map((c) => [c.id, c.lines.map(() => [])]));
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i];
      const dt = Math.max(0.001, (b.time_ms - a.time_ms) / 1000);
      out.acq[0].push((b.acquired - a.acquired) / dt);
      out.acq[1].push((b.not_acquired - a.not_acquired) / dt);
      out.p50[0].push(quantile(0.5, a, b) * 1000);
      out.p99[0].push(quantile(0.99, a, b) * 1000);
      out.lost[0].push((b.forced_expiries - a.forced_expiries) / dt * 60);
      const renewals = b.renewals - a.renewals;
      out.renew[0].push(renewals > 0 ? (b.renewal_failures - a.renewal_failures) / renewals * 100 : 0);
      out.errors[0].push((b.store_errors - a.store_errors) / dt);
      out.holds[0].push(b.holds);
      out.holds[1].push(b.leases_held);
      out.holds[2].push(b.waiters);
    }
    return out;
  }

  function drawCharts() {
    const data = series();
    const th = samples.length ? samples[samples.length - 1].thresholds : {};
    for (const c of charts) {
      const lines = data[c.id];
      const last = lines.map((l) => (l.length ? l[l.length - 1] : 0));
      c.caption.textContent = c.title + ': ' + c.lines.map((l, i) => l[0] + ' ' + fmt(last[i])).join(', ');
      const t = c.threshold && th[c.threshold];
      const levels = t ? [[t.warning * (c.scale || 1), '#d69e2e'], [t.critical * (c.scale || 1), '#c53030']] : [];
      draw(c.canvas, lines, c.lines.map((l) => l[1]), levels);
    }
  }

  function fmt(v) {
    if (!isFinite(v)) return '—';
    return v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2);
  }

  function draw(canvas, lines, colors, levels) {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(100, canvas.clientWidth) * dpr, h = Math.max(60, canvas.clientHeight) * dpr;
    if (canvas.width !== w) canvas.width = w;
    if (canvas.height !== h) canvas.height = h;
    const g = canvas.getContext('2d');
    g.clearRect(0, 0, w, h);
    const points = 150;
    let top = 0;
    for (const l of lines) for (const v of l) top = Math.max(top, v);
    for (const [v] of levels) top = Math.max(top, v);
    top = top > 0 ? top * 1.1 : 1;
    const x = (i, n) => w - (n - 1 - i) * (w / (points - 1));
    const y = (v) => h - 2 * dpr - (v / top) * (h - 14 * dpr);
    g.font = (10 * dpr) + 'px sans-serif';
    for (const [v, color] of levels) {
      g.strokeStyle = color;
      g.setLineDash([4 * dpr, 4 * dpr]);
      g.beginPath(); g.moveTo(0, y(v)); g.lineTo(w, y(v)); g.stroke();
      g.fillStyle = color;
      g.fillText(fmt(v), 2 * dpr, y(v) - 2 * dpr);
    }
    g.setLineDash([]);
    g.lineWidth = 1.5 * dpr;
    lines.forEach((l, k) => {
      g.strokeStyle = colors[k];
      g.beginPath();
      l.forEach((v, i) => (i ? g.lineTo(x(i, l.length), y(v)) : g.moveTo(x(i, l.length), y(v))));
      g.stroke();
    });
    g.fillStyle = '#4a5568';
    g.fillText('max ' + fmt(top / 1.1), w - 60 * dpr, 10 * dpr);
  }

  setInterval(tick, 200);
  start();
})();
