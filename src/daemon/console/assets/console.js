// The fsbroker console's page: everything a server sends (names, messages, paths) is
// untrusted text, so the DOM is built with createElement/textContent only, never markup.
'use strict';

(() => {
  const VIEWS = ['consent', 'sessions', 'activity', 'changes', 'roots', 'remembered'];
  // Audit events older than this were replayed at connect: never a reason to notify.
  const pageLoaded = Date.now();

  let state = null;
  let stream = null;
  let live = false;
  let signedOut = false;
  let retryDelay = 1000;
  let firstState = true;
  const seenEventKeys = new Set();
  const seenQuestions = new Set();
  // Withdrawn questions the user dismissed: the daemon shows them a while longer.
  const dismissedQuestions = new Set();
  // Questions nobody answered in time, kept until dismissed.
  const missedKept = new Map();
  let openQuestions = 0;
  let attention = 0;
  const seenOffers = new Set();
  const touched = new Map(); // server -> Set of mounts it has used
  const errors = new Map(); // error key -> message, so a redrawn card keeps its error

  const $ = (sel, root = document) => root.querySelector(sel);
  const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

  // ---------- DOM building ----------

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'onclick') el.addEventListener('click', v);
      else if (k in el && !k.includes('-')) el[k] = v;
      else if (v !== false) el.setAttribute(k, v === true ? '' : String(v));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }

  const button = (cls, text, onclick, extra) =>
    h('button', { type: 'button', class: 'btn ' + cls, text, onclick, ...extra });

  function errorEl(key) {
    const msg = errors.get(key);
    return h('p', { class: 'error', dataset: { errorFor: key }, hidden: !msg, text: msg || '' });
  }

  function setError(key, msg) {
    if (msg) errors.set(key, msg);
    else errors.delete(key);
    for (const el of $$('[data-error-for]')) {
      if (el.dataset.errorFor !== key) continue;
      el.textContent = msg || '';
      el.hidden = !msg;
    }
  }

  // ---------- Formatting ----------

  const parseTime = (iso) => (iso ? Date.parse(iso) : NaN);

  function absTime(iso) {
    const t = parseTime(iso);
    return Number.isNaN(t) ? String(iso ?? '') : new Date(t).toLocaleString();
  }

  function relTime(iso) {
    const t = parseTime(iso);
    if (Number.isNaN(t)) return String(iso ?? '—');
    const s = Math.round((Date.now() - t) / 1000);
    const a = Math.abs(s);
    let text;
    if (a < 10) return 'just now';
    if (a < 60) text = `${a} s`;
    else if (a < 3600) text = `${Math.floor(a / 60)} min`;
    else if (a < 86400) text = `${Math.floor(a / 3600)} h`;
    else text = `${Math.floor(a / 86400)} d`;
    return s >= 0 ? `${text} ago` : `in ${text}`;
  }

  // A <time> whose text the ticker keeps fresh.
  const timeEl = (iso, cls = '') =>
    h('time', { class: ('rel ' + cls).trim(), dateTime: iso || '', title: absTime(iso), text: relTime(iso) });

  function bytes(n) {
    n = Number(n) || 0;
    if (n < 1024) return `${n} B`;
    const units = ['KiB', 'MiB', 'GiB', 'TiB'];
    let i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
    return `${n.toFixed(n < 10 ? 1 : 0)} ${units[i]}`;
  }

  function timeLeft(iso) {
    const ms = parseTime(iso) - Date.now();
    if (Number.isNaN(ms)) return { text: '', urgent: false };
    if (ms <= 0) return { text: 'expired', urgent: true };
    const s = Math.ceil(ms / 1000);
    const text = s >= 60 ? `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')} left` : `${s} s left`;
    return { text, urgent: s <= 20 };
  }

  const accessBadge = (access) =>
    h('span', { class: 'badge access-' + (access === 'write' ? 'write' : 'read'), text: access === 'write' ? 'read & write' : 'read' });

  const mountOf = (path) => String(path).split('/')[0];

  // A path as text with break opportunities after each '/', so a long path wraps between
  // its parts rather than forcing the table wide or breaking inside a name.
  function pathCode(path, cls) {
    const el = h('code', { class: cls || null, title: path });
    String(path).split('/').forEach((part, i, all) => {
      el.appendChild(document.createTextNode(part + (i < all.length - 1 ? '/' : '')));
      if (i < all.length - 1) el.appendChild(document.createElement('wbr'));
    });
    return el;
  }

  // ---------- Talking to the daemon ----------

  // The sign-in's key: handed over once in the address's fragment (which the browser sends
  // to no server) and kept for this tab only. Every API request carries it beside the
  // cookie: a cookie may be sent to any listener on 127.0.0.1, the key only to this page.
  const KEY = (() => {
    const m = /^#key=([0-9a-f]{64})$/.exec(location.hash);
    if (m) {
      try { sessionStorage.setItem('fsbroker-key', m[1]); } catch { /* storage refused */ }
      history.replaceState(null, '', location.pathname + '#consent');
      return m[1];
    }
    try { return sessionStorage.getItem('fsbroker-key') || ''; } catch { return ''; }
  })();

  async function post(url, body, errKey, controls = []) {
    setError(errKey, null);
    controls.forEach((c) => { c.disabled = true; });
    try {
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Fsbroker-Key': KEY },
        body: JSON.stringify(body),
        credentials: 'same-origin',
      });
      let data = null;
      try { data = await r.json(); } catch { /* an empty or non-JSON answer */ }
      if (r.status === 401) signOut();
      if (!r.ok) {
        const msg = data && typeof data.error === 'string' ? data.error : `The daemon answered ${r.status}.`;
        setError(errKey, msg);
        return null;
      }
      // Normally a state event follows every change; without the stream, ask for it.
      if (!live) loadState();
      return data || {};
    } catch {
      setError(errKey, 'Could not reach the daemon.');
      return null;
    } finally {
      controls.forEach((c) => { c.disabled = false; });
    }
  }

  // A GET of the API: its JSON, or null (and the error under `errKey`, when given).
  async function getJson(url, errKey) {
    if (errKey) setError(errKey, null);
    try {
      const r = await fetch(url, {
        credentials: 'same-origin', cache: 'no-store', headers: { 'X-Fsbroker-Key': KEY },
      });
      if (r.status === 401) { signOut(); return null; }
      let data = null;
      try { data = await r.json(); } catch { /* an empty or non-JSON answer */ }
      if (!r.ok) {
        if (errKey) setError(errKey, data && typeof data.error === 'string' ? data.error : `The daemon answered ${r.status}.`);
        return null;
      }
      return data;
    } catch {
      if (errKey) setError(errKey, 'Could not reach the daemon.');
      return null;
    }
  }

  async function loadState() {
    const s = await getJson('/api/state');
    if (!s) return false;
    applyState(s);
    return true;
  }

  function connect() {
    if (signedOut) return;
    const es = new EventSource('/api/events?key=' + encodeURIComponent(KEY));
    stream = es;
    const parse = (ev) => { try { return JSON.parse(ev.data); } catch { return null; } };
    es.addEventListener('open', () => { retryDelay = 1000; setLive(true); });
    es.addEventListener('state', (ev) => { const s = parse(ev); if (s) applyState(s); setLive(true); });
    es.addEventListener('audit', (ev) => { const e = parse(ev); if (e) addEvent(e); });
    es.addEventListener('missed', (ev) => {
      const m = parse(ev);
      if (m) document.dispatchEvent(new CustomEvent('fsbroker:missed-events', { detail: Number(m.missed) || 0 }));
    });
    es.addEventListener('error', () => {
      if (stream !== es) return;
      setLive(false);
      // CONNECTING: the browser retries by itself. CLOSED: it gave up, which is what an
      // answer other than 200 does (a 401 among them), so find out which and retry ourselves.
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        stream = null;
        loadState().then(() => {
          if (signedOut) return;
          setTimeout(connect, retryDelay);
          retryDelay = Math.min(retryDelay * 2, 15000);
        });
      }
    });
  }

  function setLive(on) {
    if (signedOut) return;
    live = on;
    const st = $('#status');
    st.textContent = on ? 'live' : 'disconnected';
    st.className = 'status ' + (on ? 'live' : 'down');
    $('#banner-disconnected').hidden = on;
  }

  function signOut() {
    if (signedOut) return;
    signedOut = true;
    live = false;
    if (stream) { stream.close(); stream = null; }
    const st = $('#status');
    st.textContent = 'signed out';
    st.className = 'status down';
    $('#banner-disconnected').hidden = true;
    $('#banner-signed-out').hidden = false;
    $('#main').inert = true;
    $('#main').classList.add('inert');
  }

  // ---------- State ----------

  function applyState(s) {
    state = s;
    renderConsent();
    renderSessions();
    renderRoots();
    renderRemembered();
    renderFooter();
    noticeNew();
    noticeSuspended();
    firstState = false;
    document.dispatchEvent(new CustomEvent('fsbroker:state', { detail: s }));
  }

  // Notifies of each session newly suspended for its violations: the user alone lifts it.
  const seenSuspended = new Set();
  function noticeSuspended() {
    for (const sess of state.sessions || []) {
      const key = sess.server + ' ' + (sess.suspended ? sess.suspended.since : '');
      if (!sess.suspended || seenSuspended.has(key)) continue;
      seenSuspended.add(key);
      if (firstState) continue;
      notify(`${sess.server} was suspended`,
        `${sess.suspended.total} security violations within a minute (${sess.suspended.summary}). Resume it in Sessions.`,
        'suspended:' + sess.server);
    }
  }

  // Notifies of questions and offers that were not there before (not of those already
  // waiting when the page opened: the user is looking at them).
  function noticeNew() {
    for (const q of state.questions || []) {
      if (seenQuestions.has(q.id)) continue;
      seenQuestions.add(q.id);
      if (firstState || q.withdrawn) continue;
      const n = (q.paths || []).length;
      announce(`${q.server} asks for ${q.access} access to ${n === 1 ? q.paths[0].path : n + ' paths'}.`);
      notify(`${q.server} asks for access`, (q.paths || []).map((p) => p.path).join(', '), 'q-' + q.id);
    }
    for (const o of state.offers || []) {
      if (seenOffers.has(o.id)) continue;
      seenOffers.add(o.id);
      if (!firstState) announce(`${o.server} was refused ${o.path}. Allow it?`);
    }
  }

  function announce(text) {
    const region = $('#announce');
    region.appendChild(h('p', { text }));
    while (region.children.length > 5) region.firstChild.remove();
  }

  // Keeps the children of `container` in step with `items`: an element whose item did not
  // change is left alone (so what the user typed or focused in it stays), a changed one is
  // patched in place where `patch` can, else rebuilt with focus put back on the same control.
  function reconcile(container, items, keyOf, sigOf, build, patch) {
    const old = new Map(Array.from(container.children, (el) => [el._key, el]));
    const used = new Set();
    let prev = null;
    for (const item of items) {
      let key = String(keyOf(item));
      while (used.has(key)) key += '\u0000';
      used.add(key);
      const sig = sigOf(item);
      let el = old.get(key);
      if (el && el._sig !== sig && !(patch && patch(el, item))) {
        const focus = focusSelector(el);
        const fresh = build(item);
        el.replaceWith(fresh);
        el = fresh;
        if (focus) { const f = el.matches(focus) ? el : $(focus, el); if (f) f.focus(); }
      } else if (!el) {
        el = build(item);
      }
      el._key = key;
      el._sig = sig;
      const want = prev ? prev.nextSibling : container.firstChild;
      if (el !== want) container.insertBefore(el, want);
      prev = el;
    }
    for (const [key, el] of old) if (!used.has(key)) el.remove();
  }

  const HOOKS = ['session', 'grant', 'root', 'remembered', 'changes', 'change', 'path'];

  // A selector for the focused control inside `root`, by the hooks around it.
  function focusSelector(root) {
    const el = document.activeElement;
    if (!el || el === document.body || !root.contains(el)) return null;
    const parts = [];
    for (let n = el.parentElement; n && n !== root; n = n.parentElement) {
      const hook = HOOKS.find((k) => k in n.dataset);
      if (hook) parts.unshift(`[data-${hook}="${CSS.escape(n.dataset[hook])}"]`);
    }
    parts.push(el.tagName.toLowerCase() + Array.from(el.classList, (c) => '.' + CSS.escape(c)).join(''));
    return parts.join(' ');
  }

  const sig = (x) => JSON.stringify(x);

  // ---------- Consent ----------

  function renderConsent() {
    // A withdrawn question (its server left, or stopped waiting) is shown so until the user
    // dismisses it or the daemon lets it go; it takes no answer. One nobody answered in
    // time (missed) is kept until the user dismisses it, even once the daemon lets it go.
    const listed = state.questions || [];
    for (const q of listed) if (q.missed && !dismissedQuestions.has(q.id)) missedKept.set(q.id, q);
    const ids = new Set(listed.map((q) => q.id));
    const questions = listed.concat(Array.from(missedKept.values()).filter((q) => !ids.has(q.id)))
      .filter((q) => !dismissedQuestions.has(q.id));
    openQuestions = questions.filter((q) => !q.withdrawn).length;
    const open = openQuestions;
    const offers = state.offers || [];
    reconcile($('#questions'), questions, (q) => q.id, (q) => q.id + ':' + (q.withdrawn || ''),
      (q) => (q.withdrawn ? withdrawnCard(q) : questionCard(q)));
    renderOffers(offers);
    $('#offers-block').hidden = offers.length === 0;
    const empty = $('#consent-empty');
    empty.hidden = questions.length + offers.length > 0;
    const d = state.daemon || {};
    const modeSig = `${d.consentMode} ${d.fallback}`;
    if (empty._sig !== modeSig) { empty._sig = modeSig; empty.replaceChildren(...consentEmpty(d)); }
    setBadge('consent', open + offers.length);
    updateTitle();
    tickCountdowns();
    document.dispatchEvent(new CustomEvent('fsbroker:missed', { detail: Array.from(missedKept.values()) }));
  }

  // Dismisses missed questions `ids`: out of the Consent view and of the attention area.
  function dismissMissed(ids) {
    for (const id of ids) { dismissedQuestions.add(id); missedKept.delete(id); }
    if (state) renderConsent();
  }

  // The title says how many questions wait, and "(!)" while something needs attention
  // (a suspension, a missed question, an escape attempt), so a background tab shows it.
  function setAttention(n) {
    attention = n;
    updateTitle();
  }

  function updateTitle() {
    document.title = (attention ? '(!) ' : '') + (openQuestions ? `(${openQuestions}) ` : '') + 'fsbroker console';
  }

  // What each consent mode means for this page: whether a question can ever come to it.
  function modeSays(mode, fallback) {
    const m = String(mode || '');
    if (m === 'ui') return [true, 'questions come to this page.'];
    if (m === 'auto') return [false, 'every path inside the roots is allowed without asking anyone. No question will come to this page.'];
    if (m === 'deny') return [false, 'every request is denied without asking anyone. No question will come to this page.'];
    if (m === 'tty') return [false, "questions are asked on the daemon's terminal. None come to this page."];
    if (m.startsWith('command:')) return [false, `the program ${m.slice(8)} answers. No question comes to this page.`];
    if (m === 'elicit') {
      const f = String(fallback || '');
      return [f === 'ui', 'questions are asked in the app that started the server (its host), in its own form. '
        + (f === 'ui'
          ? 'Only a server whose host cannot show a form is asked here.'
          : `Where the host cannot show a form, the fallback ${f} answers: no question will come to this page.`)];
    }
    return [false, 'questions go where the policy says.'];
  }

  // The Consent view with nothing waiting: which mode is in force (with `auto`, `deny`, or
  // `elicit` and another fallback, nothing ever comes here), how to attach a server, and
  // where the docs are.
  function consentEmpty(d) {
    const [here, says] = modeSays(d.consentMode, d.fallback);
    // As the README gives it; SERVER is the server's package (or its own command after --).
    const snippet = [
      '{',
      '  "mcpServers": {',
      '    "files": {',
      '      "command": "fsbroker",',
      '      "args": ["proxy", "--daemon", "--", "npx", "-y", "SERVER"]',
      '    }',
      '  }',
      '}',
    ].join('\n');
    const link = (href, text) => h('a', { href, target: '_blank', rel: 'noopener noreferrer', text });
    return [
      h('p', { class: 'empty-title', text: 'No server is waiting for you.' }),
      h('p', { class: 'consent-mode' + (here ? '' : ' not-here') },
        'Consent mode ', h('code', { text: String(d.consentMode || '?') }),
        d.consentMode === 'elicit' ? [' (fallback ', h('code', { text: String(d.fallback || '?') }), ')'] : null,
        ': ' + says),
      h('p', { class: 'muted' }, "Attach a server to this daemon: in the app's ", h('code', { text: 'mcpServers' }),
        ' settings, run it through ', h('code', { class: 'nowrap', text: 'fsbroker proxy --daemon' }),
        ', the server\'s own command after ', h('code', { class: 'nowrap', text: '--' }), ':'),
      h('pre', { class: 'snippet' }, h('code', { text: snippet })),
      h('p', { class: 'muted small' }, 'More: ', link('/docs/README.md', 'the README'),
        ' (the daemon and its console), ', link('/docs/console.md', 'the console'), '.'),
    ];
  }

  function questionCard(q) {
    // A question about seeing roots grants nothing but their names in roots/list: nothing
    // to narrow, lower or remember.
    const roots = q.purpose === 'roots';
    const write = !roots && q.access === 'write';
    const paths = q.paths || [];
    const key = 'q:' + q.id;
    const card = h('article', { class: 'card question', dataset: { question: q.id } });
    const answerBtn = button('btn-primary answer', 'Answer', () => submitQuestion(q, card, false));
    const denyBtn = button('btn-danger-outline deny-all', 'Deny all', () => submitQuestion(q, card, true));
    append(card, [
      h('header', { class: 'card-head' },
        roots
          ? h('div', { class: 'card-head-main' },
            h('span', { class: 'server-name', text: q.server }),
            h('span', { class: 'muted', text: 'asks to see these shared folders: their names and places, nothing in them' }))
          : h('div', { class: 'card-head-main' },
            h('span', { class: 'server-name', text: q.server }),
            h('span', { class: 'muted', text: 'asks for' }),
            accessBadge(q.access),
            h('span', { class: 'muted', text: `access to ${paths.length} path${paths.length === 1 ? '' : 's'}` })),
        h('div', { class: 'card-head-side' },
          h('span', { class: 'muted small' }, 'asked ', timeEl(q.asked)),
          h('span', { class: 'time-left', dataset: { expires: q.expires || '' }, title: 'Denied when the time runs out: ' + absTime(q.expires) }))),
      // A question about seeing roots is the broker's, at the server's first roots/list:
      // the server said nothing.
      roots ? null : q.message !== null && q.message !== undefined && q.message !== ''
        ? h('div', { class: 'message' },
          h('span', { class: 'message-label', text: 'The server says' }),
          h('p', { class: 'message-text', text: q.message }))
        : h('p', { class: 'message-none muted small', text: 'The server gave no reason.' }),
      programLine(q.program),
      (q.askedAgain || []).length
        ? h('div', { class: 'banner banner-warning asked-again', role: 'note' },
          (q.askedAgain || []).map((why) => h('p', { text: 'Asked again: ' + why })))
        : null,
      h('div', { class: 'paths' }, paths.map((p, i) => pathRow(q, p, i, write, roots))),
      h('footer', { class: 'card-foot' },
        roots
          ? h('span', { class: 'muted small', text: 'Asked once for this session.' })
          : lifetimeChoice(`life-${q.id}`, q.server),
        h('div', { class: 'actions' }, denyBtn, answerBtn)),
      errorEl(key),
    ]);
    return card;
  }

  // Who a server is beyond the name it chose: what it runs, the first digits of its
  // identity's digest, and what started it; said plainly when it could not be told.
  function programLine(p) {
    if (!p) {
      return h('p', { class: 'program muted small', text: 'Program: unknown (it could not be told)' });
    }
    // The nearest few: what a person recognises (an editor, a terminal) is close by.
    const chain = p.launchedBy || [];
    const by = chain.length
      ? ', launched by ' + chain.slice(0, 3).join(' < ') + (chain.length > 3 ? ' < …' : '')
      : '';
    return h('p', { class: 'program small', title: 'The program the broker found, not the name the server gave' },
      h('span', { class: 'label-muted', text: 'Program ' }),
      h('code', { class: 'program-what', text: p.what }),
      h('span', { class: 'muted', text: ` digest ${p.digest}${by}` }));
  }

  // A question that no longer waits: what was asked, why it went, and nothing to answer.
  function withdrawnCard(q) {
    const paths = q.paths || [];
    const dismiss = button('btn-ghost btn-small dismiss', 'Dismiss', () => dismissMissed([q.id]));
    // Nobody answered in time: the broker denied it, which is no answer of the user's.
    const note = q.missed
      ? [`Missed: nobody answered within the time limit, so it timed out and the broker denied it. `,
        'Nothing was granted or remembered; if the server asks again, a new question comes.']
      : [`This question was withdrawn: ${q.withdrawn}. Nothing was granted or remembered; `,
        'if the server asks again, a new question comes.'];
    return h('article', { class: 'card question withdrawn' + (q.missed ? ' missed' : ''), dataset: { question: q.id } },
      h('header', { class: 'card-head' },
        h('div', { class: 'card-head-main' },
          h('span', { class: 'server-name', text: q.server }),
          h('span', { class: 'muted', text: q.purpose === 'roots' ? 'asked to see shared folders' : `asked for ${q.access} access to` }),
          h('span', { class: 'muted', text: `${paths.length} path${paths.length === 1 ? '' : 's'}` })),
        h('div', { class: 'card-head-side' },
          h('span', { class: 'badge state-withdrawn', text: q.missed ? 'Missed · timed out' : 'Withdrawn' }))),
      h('p', { class: 'withdrawn-note', role: 'status' }, ...note),
      h('div', { class: 'paths' }, paths.map((p) => h('div', { class: 'path-row', dataset: { path: p.path } },
        h('div', { class: 'path-info' }, h('div', { class: 'path-main' }, pathCode(p.path, 'mount-path')))))),
      h('footer', { class: 'card-foot' }, h('span', { class: 'muted small' }, 'asked ', timeEl(q.asked)),
        h('div', { class: 'actions' }, dismiss)));
  }

  function pathRow(q, p, i, write, roots) {
    const name = `q-${q.id}-${i}`;
    return h('div', { class: 'path-row', dataset: { path: p.path } },
      h('div', { class: 'path-info' },
        h('div', { class: 'path-main' },
          pathCode(p.path, 'mount-path'),
          p.folder ? h('span', { class: 'tag', text: 'folder' }) : null),
        h('div', { class: 'host-path', text: p.hostPath || '', title: p.hostPath || '' })),
      h('div', { class: 'segmented', role: 'radiogroup', 'aria-label': 'Decision for ' + p.path },
        h('label', { class: 'seg seg-allow' }, h('input', { type: 'radio', name, value: 'allow' }), 'Allow'),
        h('label', { class: 'seg seg-deny' }, h('input', { type: 'radio', name, value: 'deny', checked: true }), 'Deny')),
      roots ? h('span', { class: 'check-placeholder' }) : h('label', { class: 'narrow-field' + (p.folder ? '' : ' is-disabled') },
        h('span', { class: 'narrow-label', text: 'Narrow to' }),
        h('input', {
          type: 'text', class: 'narrow', placeholder: p.folder ? 'sub/folder' : 'files cannot be narrowed',
          disabled: !p.folder, autocomplete: 'off', spellcheck: false,
          title: p.folder ? 'Grant only a place beneath this folder, relative to it' : '',
        })),
      write
        ? h('label', { class: 'check' }, h('input', { type: 'checkbox', class: 'read-only' }), 'Read only')
        : h('span', { class: 'check-placeholder' }));
  }

  async function submitQuestion(q, card, denyAll) {
    const key = 'q:' + q.id;
    const rows = $$('[data-path]', card);
    const answers = [];
    for (const [i, p] of (q.paths || []).entries()) {
      const row = rows[i];
      const approve = !denyAll && !!row && $('input[value=allow]', row).checked;
      const a = { path: p.path, approve };
      if (approve) {
        const narrowBox = $('input.narrow', row);
        const narrow = narrowBox ? narrowBox.value.trim() : '';
        if (narrow && p.folder) {
          if (narrow.startsWith('/') || narrow.split('/').some((seg) => seg === '..')) {
            setError(key, `Narrow ${p.path} to a place beneath it, relative to it, like sub/folder.`);
            return;
          }
          a.narrow = narrow.replace(/\/+$/, '');
        }
        const ro = $('input.read-only', row);
        if (ro && ro.checked) a.access = 'read';
      }
      answers.push(a);
    }
    // How long it holds (a question about seeing roots is for the session, and has none).
    const chosen = $('.lifetime input:checked', card);
    const body = chosen && !denyAll ? { answers, lifetime: chosen.value } : { answers };
    const controls = $$('button, input', card);
    const ok = await post(`/api/questions/${encodeURIComponent(q.id)}`, body, key, controls);
    if (ok) settle(card, denyAll ? 'Denied.' : 'Answered.');
  }

  // The card stays until the next state drops it; until then nothing in it can be sent twice.
  function settle(card, text) {
    card.classList.add('settled');
    $$('button, input', card).forEach((c) => { c.disabled = true; });
    const foot = $('.card-foot .actions', card);
    if (foot) foot.replaceChildren(h('span', { class: 'muted', text }));
  }

  // How long an answer holds: the next request only, the session, an hour, or until
  // revoked (remembered for the server while it runs this program).
  const LIFETIMES = [
    ['once', 'This request', 'Only the next request the server makes'],
    ['session', 'This session', 'Until the server stops'],
    ['hour', 'An hour', 'For an hour, and never past the session'],
    ['forever', 'Until revoked', 'Remembered: this server gets it again next time, while it runs this program'],
  ];

  function lifetimeChoice(name, server) {
    const base = server.replace(/#\d+$/, '');
    return h('div', { class: 'lifetime', role: 'radiogroup', 'aria-label': 'Allow for how long' },
      h('span', { class: 'lifetime-label', text: 'Allow for' }),
      h('div', { class: 'segmented' }, LIFETIMES.map(([value, text, title]) =>
        h('label', { class: 'seg seg-life', title: value === 'forever' ? `Remembered for ${base} while it runs this program` : title },
          h('input', { type: 'radio', name, value, class: value === 'forever' ? 'remember' : null, checked: value === 'session' }),
          text))));
  }

  // Most offers shown for one server; the rest are counted ("and N more").
  const OFFERS_SHOWN = 8;

  // The offers grouped by the server refused, each group capped, with a way to dismiss a
  // server's offers or all of them at once.
  function renderOffers(offers) {
    const groups = new Map();
    for (const o of offers) {
      if (!groups.has(o.server)) groups.set(o.server, []);
      groups.get(o.server).push(o);
    }
    const list = Array.from(groups, ([server, items]) => ({ server, items }));
    reconcile($('#offers'), list, (g) => g.server, (g) => g.items.map((o) => o.id).join(' '), offerGroup);
    const all = $('.dismiss-all-offers');
    if (!all._wired) {
      all._wired = true;
      all.addEventListener('click', () => post('/api/offers/dismiss', {}, 'offers', [all]));
    }
  }

  function offerGroup(g) {
    const key = 'og:' + g.server;
    const more = g.items.length - OFFERS_SHOWN;
    const dismiss = button('btn-ghost btn-small dismiss-server', `Dismiss all from ${g.server}`, () =>
      post('/api/offers/dismiss', { server: g.server }, key, [dismiss]));
    return h('section', { class: 'offer-group', dataset: { offerServer: g.server } },
      h('header', { class: 'offer-group-head' },
        h('span', { class: 'server-name', text: g.server }),
        h('span', { class: 'muted small', text: `${g.items.length} refused` }),
        dismiss),
      h('div', { class: 'stack' }, g.items.slice(0, OFFERS_SHOWN).map(offerCard)),
      more > 0
        ? h('p', { class: 'offer-more muted small', text: `and ${more} more from ${g.server} (dismiss these to see them)` })
        : null,
      errorEl(key));
  }

  function offerCard(o) {
    const key = 'o:' + o.id;
    const card = h('article', { class: 'card offer', dataset: { offer: o.id } });
    const send = (allow, lifetime) => async () => {
      const body = allow ? { allow, lifetime } : { allow };
      const ok = await post(`/api/offers/${encodeURIComponent(o.id)}`, body, key, $$('button', card));
      if (ok) settle(card, allow ? 'Allowed.' : 'Dismissed.');
    };
    append(card, [
      h('div', { class: 'offer-body' },
        h('p', { class: 'offer-text' },
          h('strong', { class: 'server-name', text: o.server }), ' was refused ',
          h('code', { text: o.method || 'an operation' }), ' on ',
          h('code', { text: o.path }), ' because it has no consent for it. Allow ',
          h('strong', { text: o.access === 'write' ? 'read & write' : 'read' }), ' access?'),
        o.hostPath ? h('div', { class: 'host-path', text: o.hostPath, title: o.hostPath }) : null,
        o.wholeRoot
          ? h('p', { class: 'banner banner-warning whole-root', role: 'note',
            text: `This is the whole root ${o.path}: allowing it allows everything in it.` })
          : null,
        programLine(o.program),
        h('span', { class: 'muted small' }, timeEl(o.at))),
      h('div', { class: 'actions' },
        button('btn-ghost dismiss', 'Dismiss', send(false)),
        button('allow-once', 'Allow once', send(true, 'once')),
        button('allow-hour', 'For an hour', send(true, 'hour')),
        button('allow-remember', 'Allow and remember', send(true, 'forever')),
        button('btn-primary allow', 'Allow', send(true, 'session'))),
      errorEl(key),
    ]);
    return card;
  }

  function tickCountdowns() {
    for (const el of $$('.time-left')) {
      const { text, urgent } = timeLeft(el.dataset.expires);
      el.textContent = text;
      el.classList.toggle('urgent', urgent);
    }
  }

  // ---------- Sessions ----------

  function renderSessions() {
    const sessions = state.sessions || [];
    reconcile($('#sessions'), sessions.map(withRemembered), (s) => s.server, sig, sessionCard, patchSession);
    $('#sessions-empty').hidden = sessions.length > 0;
    setBadge('sessions', sessions.length);
  }

  function sandboxText(sb) {
    if (!sb) return null;
    if (sb.abi !== undefined && sb.abi !== null) return `sandboxed (Landlock ABI ${sb.abi})`;
    if (sb.mode) return `sandboxed (${sb.mode}${sb.caps ? '; caps ' + sb.caps : ''})`;
    return 'sandboxed';
  }

  // What changes with every operation (counters, last activity, watches) is redrawn in
  // place; the card itself, with its buttons, only when what it may reach changes, so a
  // busy server does not swap a button from under the pointer between press and release.
  const LIVE = ['started', 'pid', 'serverPid', 'inFlight', 'lastActivity', 'counters', 'watches', 'uploads',
    'throttled', 'process'];
  const stableSig = (s) => JSON.stringify(Object.entries(s).filter(([k]) => !LIVE.includes(k)));

  function patchSession(el, s) {
    if (el._stable !== stableSig(s)) return false;
    $('.session-live', el).replaceChildren(...sessionLive(s).filter(Boolean));
    return true;
  }

  function sessionCard(s) {
    const key = 's:' + s.server;
    const sandbox = sandboxText(s.sandbox);
    const card = h('article', { class: 'card session', dataset: { session: s.server } });
    card._stable = stableSig(s);
    const revokeAll = button('btn-danger-outline btn-small revoke-server', "Revoke all of this server's access", async () => {
      if (!confirm(`Revoke all of ${s.server}'s access? Its grants end at its next operation.`)) return;
      await post('/api/revoke', { server: s.server }, key, [revokeAll]);
    });
    append(card, [
      h('header', { class: 'card-head' },
        h('div', { class: 'card-head-main' },
          h('span', { class: 'server-name big', text: s.server }),
          s.attached ? h('span', { class: 'badge', text: 'attached' }) : null,
          h('span', { class: 'badge ' + (sandbox ? 'badge-ok' : 'badge-warn'), text: sandbox || 'not sandboxed' }),
          s.era ? h('span', { class: 'badge badge-muted', text: s.era + ' era' }) : null),
        revokeAll),
      suspendedBanner(s, key),
      programLine(s.program),
      h('div', { class: 'session-live' }, sessionLive(s)),
      h('div', { class: 'kv' },
        h('span', { class: 'label-muted', text: 'Roots it sees' }),
        h('div', { class: 'chips' }, (s.roots || []).length
          ? s.roots.map((r) => h('code', { class: 'chip', text: r }))
          : h('span', { class: 'muted', text: 'none' }))),
      grantsTable(s),
      errorEl(key),
    ]);
    return card;
  }

  // A suspended session: why, and the one way back, which is the user's.
  function suspendedBanner(s, key) {
    const x = s.suspended;
    if (!x) return null;
    const resume = button('btn-primary btn-small resume', 'Resume', () =>
      post('/api/resume', { server: s.server }, key, [resume]));
    resume.setAttribute('aria-label', `Resume ${s.server}`);
    return h('div', { class: 'banner banner-danger suspended', role: 'alert' },
      h('p', {},
        h('strong', { text: 'Suspended' }), ' ', timeEl(x.since, 'muted'), ': ',
        `${x.total} security violations within a minute (${x.summary}). `,
        'Every request is refused and its watches ended; its grants stay until you resume it or revoke them.'),
      resume);
  }

  function sessionLive(s) {
    const c = s.counters || {};
    // The server's own processes, when a proxy started one (a `serve` relay has none).
    const p = s.process && s.process.processes > 0 ? s.process : null;
    const la = s.lastActivity;
    const pids = [
      s.pid !== undefined && s.pid !== null ? `pid ${s.pid}` : null,
      s.serverPid !== undefined && s.serverPid !== null ? `server pid ${s.serverPid}` : null,
    ].filter(Boolean);
    const stat = (label, value, cls = '') => h('div', { class: 'stat ' + cls },
      h('span', { class: 'stat-value', text: value }), h('span', { class: 'stat-label', text: label }));
    const chipRow = (label, list, text) => (list && list.length
      ? h('div', { class: 'kv' }, h('span', { class: 'label-muted', text: label }),
        h('div', { class: 'chips' }, list.map((x) => h('code', { class: 'chip', text: text(x) }))))
      : null);
    return [
      h('p', { class: 'meta muted small' },
        'started ', timeEl(s.started),
        pids.length ? ' · ' + pids.join(' · ') : '',
        ` · ${Number(s.inFlight) || 0} in flight`),
      h('div', { class: 'last-activity' },
        h('span', { class: 'label-muted', text: 'Last activity' }),
        la
          ? h('span', {},
            h('code', { text: la.method }), ' ', la.path ? pathCode(la.path, 'path') : null, ' ',
            h('span', { class: 'label label-' + severity(la), text: la.outcome }), ' ',
            timeEl(la.at, 'muted'))
          : h('span', { class: 'muted', text: 'nothing yet' })),
      h('div', { class: 'stats' },
        stat('requests', String(c.requests ?? 0)),
        stat('refused', String(c.refused ?? 0), c.refused ? 'stat-danger' : ''),
        // The daemon counts a refusal among the failures too: shown once, as refused.
        stat('failed', String(otherFailures(c)), otherFailures(c) ? 'stat-warn' : ''),
        c.cancelled ? stat('cancelled', String(c.cancelled)) : null,
        stat('read', bytes(c.bytesRead)),
        stat('written', bytes(c.bytesWritten)),
        c.entriesListed ? stat('listed', String(c.entriesListed)) : null,
        stat('CPU', cpuTime(c.cpuMs)),
        c.throttled ? stat('throttled', String(c.throttled), 'stat-warn') : null,
        p ? stat('server CPU', cpuTime(p.cpuMs)) : null,
        p ? stat('server memory', bytes(p.rssBytes)) : null),
      s.throttled
        ? h('p', { class: 'meta small throttled' },
          h('span', { class: 'label label-failed', text: 'throttled' }), ' ',
          `spent its ${s.throttled.budget} budget; last refused `, timeEl(s.throttled.at, 'muted'))
        : null,
      chipRow('Watches', s.watches, (w) => w.path + (w.recursive ? ' (recursive)' : '')),
      chipRow('Uploads', s.uploads, (u) => `${u.path} · ${bytes(u.stagedBytes)} staged`),
    ];
  }

  const otherFailures = (c) => Math.max(0, (Number(c.failed) || 0) - (Number(c.refused) || 0));

  function cpuTime(ms) {
    const n = Number(ms) || 0;
    return n < 1000 ? `${n} ms` : `${(n / 1000).toFixed(n < 10000 ? 1 : 0)} s`;
  }

  // A session with the paths remembered for its server (its name without the #N): their
  // grants can be forgotten as they are revoked.
  function withRemembered(s) {
    const base = s.server.replace(/#\d+$/, '');
    const remembered = (state.remembered || []).filter((m) => m.server === base).map((m) => m.path);
    return { ...s, remembered };
  }

  // How long a grant holds, as the Sessions view says it; a timed one counts down.
  function grantLasts(g) {
    switch (g.lifetime) {
      case 'once': return h('span', { class: 'lasts muted', text: 'next request only' });
      case 'timed': return h('span', { class: 'lasts time-left', dataset: { expires: g.expires || '' }, title: 'Ends at ' + absTime(g.expires) });
      case 'standing': return h('span', { class: 'lasts muted', text: 'until revoked' });
      default: return h('span', { class: 'lasts muted', text: 'this session' });
    }
  }

  function grantActions(s, g, key) {
    const revoke = button('btn-danger-outline btn-small revoke', 'Revoke', () =>
      post('/api/revoke', { server: s.server, path: g.path }, key, [revoke]));
    revoke.setAttribute('aria-label', `Revoke ${g.path}`);
    if (!(s.remembered || []).includes(g.path)) return [revoke];
    // A remembered grant comes back at the next session unless it is forgotten too.
    const forget = button('btn-danger-outline btn-small revoke-forget', 'Revoke and forget', () =>
      post('/api/revoke', { server: s.server, path: g.path, forget: true }, key, [revoke, forget]));
    forget.title = 'Revoke it and forget it, so that it does not come back next time';
    return [revoke, forget];
  }

  function grantsTable(s) {
    const grants = s.grants || [];
    if (!grants.length) return h('p', { class: 'muted small grants-none', text: 'No grants: it can reach nothing yet.' });
    const key = 's:' + s.server;
    return h('div', { class: 'table-wrap' },
      h('table', { class: 'table grants' },
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col', text: 'Grant' }), h('th', { scope: 'col', text: 'Access' }),
          h('th', { scope: 'col', text: 'Origin' }), h('th', { scope: 'col', text: 'Lasts' }),
          h('th', { scope: 'col', text: 'Since' }),
          h('th', { scope: 'col' }, h('span', { class: 'sr-only', text: 'Actions' })))),
        h('tbody', {}, grants.map((g) => {
          // A part revoked beneath the grant is carved out of it: shown, so that the grant
          // does not read as whole.
          const except = (g.except || []).length
            ? h('span', { class: 'muted small except' }, ' (except ',
              ...g.except.flatMap((p, i) => (i ? [', ', pathCode(p)] : [pathCode(p)])), ')')
            : null;
          return h('tr', { dataset: { grant: g.path, lifetime: g.lifetime || 'session' } },
            h('td', {}, pathCode(g.path), except),
            h('td', {}, accessBadge(g.access)),
            h('td', { class: 'muted', text: g.origin }),
            h('td', {}, grantLasts(g)),
            h('td', {}, timeEl(g.since, 'muted')),
            h('td', { class: 'cell-actions' }, grantActions(s, g, key)));
        }))));
  }

  // ---------- Activity ----------

  // Refusals that mean a server tried to reach past what it was given at all: outside every
  // root (a link leading out among them), a path that is no path, or on while suspended.
  const ATTACK_REASONS = new Set(['outside_root', 'malformed', 'symlink_escape', 'suspended']);

  // How much an audit event matters: `attack` (see above; and a consent asked for a place
  // outside every root), `refusal` (no consent, revoked, read only, a rule, the time limit),
  // `failed` (an error that is no refusal: not found, the disk), `routine` (done, cancelled,
  // or a consent answered, in whole or in part: the answer is the user's or their
  // provider's own). Each event has one: a refusal is never counted again as failed.
  function severity(e) {
    const o = e.outcome;
    if (e.reason && ATTACK_REASONS.has(e.reason)) return 'attack';
    const by = Array.isArray(e.decidedBy) ? e.decidedBy : null;
    if (by) {
      if (by.includes('confinement')) return 'attack';
      if (o === 'ok') return 'routine';
      if (by.includes('timeout')) return 'refusal';
      const answered = by.includes('provider') || by.includes('auto');
      return answered ? 'routine' : 'refusal';
    }
    if (o === 'ok' || o === 'cancelled' || o === 'abandoned') return 'routine';
    if (e.reason || o === 'refused' || o === 'denied') return 'refusal';
    return 'failed';
  }

  // Each audit event once (a reconnected stream replays its last 200), told to the views.
  // The daemon numbers its events: two alike in every field (two refusals in one
  // millisecond) are still two.
  function addEvent(e) {
    const k = e.seq !== undefined ? 'seq:' + e.seq + '|' + e.time
      : [e.time, e.server, e.method, e.path, e.outcome, e.reason, e.bytes, e.durationMs].join('\u0000');
    if (seenEventKeys.has(k)) return;
    seenEventKeys.add(k);
    if (seenEventKeys.size > 2000) seenEventKeys.delete(seenEventKeys.values().next().value);
    noticeTouch(e);
    document.dispatchEvent(new CustomEvent('fsbroker:audit', { detail: e }));
  }

  function noticeTouch(e) {
    if (!e.server || !e.path) return;
    const mount = mountOf(e.path);
    let set = touched.get(e.server);
    if (!set) { set = new Set(); touched.set(e.server, set); }
    if (set.has(mount)) return;
    set.add(mount);
    if (parseTime(e.time) >= pageLoaded) notify(`${e.server} is using ${mount}`, `${e.method} ${e.path}`, `t-${e.server}-${mount}`);
  }

  // Server-controlled text made safe to read: control, format and direction characters
  // (which could hide or reorder what follows) shown as escapes, and cut to `max`.
  function sanitise(text, max = 300) {
    const clean = String(text).replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu,
      (c) => `\\u{${c.codePointAt(0).toString(16)}}`);
    const chars = Array.from(clean);
    return chars.length > max ? chars.slice(0, max).join('') + '…' : clean;
  }

  // ---------- Roots ----------

  function renderRoots() {
    const roots = state.roots || [];
    reconcile($('#roots'), roots, (r) => r.mount, sig, rootRow);
    $('#roots-empty').hidden = roots.length > 0;
    $('#roots').closest('.table-wrap').hidden = roots.length === 0;
    setBadge('roots', roots.length);
  }

  function rootRow(r) {
    const key = 'r:' + r.mount;
    const writable = r.access === 'write';
    const toggle = h('button', {
      type: 'button', class: 'switch toggle-access', role: 'switch', 'aria-checked': String(writable),
      'aria-label': `${r.mount} writable`, title: writable ? 'Make it read only' : 'Make it writable',
      onclick: () => post('/api/roots', { op: 'access', mount: r.mount, access: writable ? 'read' : 'write' }, key, [toggle]),
    }, h('span', { class: 'switch-track' }, h('span', { class: 'switch-thumb' })),
    h('span', { class: 'switch-text', text: writable ? 'Writable' : 'Read only' }));
    const remove = button('btn-danger-outline btn-small remove', 'Remove', async () => {
      if (!confirm(`Remove the root ${r.mount} (${r.path})? Servers stop seeing it and their grants under it end.`)) return;
      await post('/api/roots', { op: 'remove', mount: r.mount }, key, [remove]);
    });
    remove.setAttribute('aria-label', `Remove ${r.mount}`);
    const only = r.servers || [];
    return h('tr', { dataset: { root: r.mount } },
      h('td', {},
        h('code', { class: 'mount', text: r.mount }),
        r.fromConsole ? h('span', { class: 'badge badge-muted', text: 'added here' }) : null),
      h('td', { class: 'host-path-cell', title: r.path, text: r.path }),
      h('td', {}, toggle),
      h('td', {}, only.length
        ? h('div', { class: 'chips' }, only.map((s) => h('span', { class: 'chip', text: s })))
        : h('span', { class: 'muted', text: 'all servers' })),
      h('td', { class: 'cell-actions' }, remove, errorEl(key)));
  }

  async function addRoot(ev) {
    ev.preventDefault();
    const form = ev.currentTarget;
    const path = form.elements.path.value.trim();
    const mount = form.elements.mount.value.trim();
    if (!path) {
      setError('add-root', 'Give the host directory to add, as a full path.');
      form.elements.path.focus();
      return;
    }
    const body = { op: 'add', path, access: form.elements.access.value };
    if (mount) body.mount = mount;
    const ok = await post('/api/roots', body, 'add-root', $$('input, select, button', form));
    if (ok) form.reset();
  }

  // ---------- Remembered ----------

  function renderRemembered() {
    const list = state.remembered || [];
    reconcile($('#remembered'), list, (m) => `${m.server} ${m.path}`, sig, rememberedRow);
    $('#remembered-empty').hidden = list.length > 0;
    $('#remembered').closest('.table-wrap').hidden = list.length === 0;
    setBadge('remembered', list.length);
  }

  function rememberedRow(m) {
    const key = `m:${m.server} ${m.path}`;
    const forget = button('btn-danger-outline btn-small forget', 'Forget', () =>
      post('/api/remembered/forget', { server: m.server, path: m.path }, key, [forget]));
    forget.setAttribute('aria-label', `Forget ${m.path} for ${m.server}`);
    return h('tr', { dataset: { remembered: `${m.server} ${m.path}` } },
      h('td', {}, h('span', { class: 'server-name', text: m.server }),
        m.program
          ? h('div', { class: 'muted small program', text: `${m.program.what} (${m.program.digest})` })
          : h('div', { class: 'muted small program', text: 'remembered before programs were told apart: held by none' })),
      h('td', {}, pathCode(m.path)),
      h('td', {}, accessBadge(m.access)),
      h('td', {}, timeEl(m.since, 'muted')),
      h('td', { class: 'cell-actions' }, forget, errorEl(key)));
  }

  // ---------- Frame ----------

  function renderFooter() {
    const d = state.daemon || {};
    const parts = [
      d.version ? `fsbroker ${d.version}` : 'fsbroker',
      d.socket ? `socket ${d.socket}` : null,
      d.policy ? `policy ${d.policy}` : null,
      d.consentTimeoutSecs ? `questions wait ${d.consentTimeoutSecs} s` : null,
    ].filter(Boolean);
    $('#daemon-info').replaceChildren(...parts.map((p) => h('span', { text: p })));
  }

  function setBadge(view, n) {
    const b = $('#badge-' + view);
    if (!b) return;
    b.hidden = !n;
    b.textContent = String(n);
    const tab = $(`[data-nav="${view}"]`);
    const name = view[0].toUpperCase() + view.slice(1);
    tab.setAttribute('aria-label', n ? `${name} (${n})` : name);
  }

  function show(view) {
    if (!VIEWS.includes(view)) view = 'consent';
    for (const sec of $$('[data-view]')) sec.hidden = sec.dataset.view !== view;
    for (const b of $$('[data-nav]')) {
      if (b.dataset.nav === view) b.setAttribute('aria-current', 'page');
      else b.removeAttribute('aria-current');
    }
    if (location.hash !== '#' + view) history.replaceState(null, '', '#' + view);
    document.dispatchEvent(new CustomEvent('fsbroker:view', { detail: view }));
  }

  // ---------- Notifications ----------

  function notify(title, body, tag) {
    if (!('Notification' in window) || Notification.permission !== 'granted') return;
    try {
      const n = new Notification(title, { body, tag });
      n.onclick = () => { window.focus(); n.close(); };
    } catch { /* some platforms only allow notifications from a service worker */ }
  }

  function updateNotifyButton() {
    const b = $('#notify');
    b.hidden = !('Notification' in window) || Notification.permission !== 'default';
  }

  // ---------- Shared with the other views' scripts ----------

  // changes.js draws the Changes view with these: one way to build the DOM, to talk to the
  // daemon and to show an error, for every view.
  window.fsbroker = Object.freeze({
    h, append, button, errorEl, setError, post, getJson, timeEl, absTime, bytes, pathCode,
    reconcile, announce, sig, severity, sanitise, setAttention, dismissMissed, show,
  });

  // ---------- Start ----------

  function start() {
    for (const b of $$('[data-nav]')) {
      b.addEventListener('click', () => { location.hash = b.dataset.nav; show(b.dataset.nav); });
    }
    // Left and right arrows move along the views, as in any tab strip.
    $('.tabs').addEventListener('keydown', (ev) => {
      if (ev.key !== 'ArrowLeft' && ev.key !== 'ArrowRight') return;
      const tabs = $$('[data-nav]');
      const i = tabs.indexOf(document.activeElement);
      if (i < 0) return;
      const next = tabs[(i + (ev.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      next.focus();
      next.click();
      ev.preventDefault();
    });
    window.addEventListener('hashchange', () => show(location.hash.slice(1)));
    show(location.hash.slice(1));

    $('form.add-root').addEventListener('submit', addRoot);
    $('#notify').addEventListener('click', async () => {
      try { await Notification.requestPermission(); } catch { /* dismissed */ }
      updateNotifyButton();
    });
    updateNotifyButton();

    setInterval(() => {
      tickCountdowns();
      for (const t of $$('time.rel')) t.textContent = relTime(t.dateTime);
    }, 1000);

    loadState().then(() => { if (!signedOut) connect(); });
  }

  // After every deferred script has run: the other views' listen before the feed starts.
  document.addEventListener('DOMContentLoaded', start);
})();
