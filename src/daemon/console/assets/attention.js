// What needs the user's eye whatever view is open: sessions suspended for their violations,
// questions nobody answered in time (missed), and attempts to reach outside every root. Each
// shows in the attention area above every view, as a mark on its view's tab, and as "(!)"
// in the page's title, until it is resolved (a session resumed) or dismissed. Names and
// paths are a server's text: built with textContent only (console.js's helpers).
'use strict';

(() => {
  const { h, button, errorEl, post, timeEl, sanitise, setAttention, dismissMissed, show } =
    window.fsbroker;
  const $ = (sel, root = document) => root.querySelector(sel);

  let suspended = [];
  let missed = [];
  // Escape attempts by server: how many, and the latest, since the user last dismissed them.
  const escapes = new Map();

  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

  function goTo(view) {
    location.hash = view;
    show(view);
  }

  function suspendedItem(s) {
    const key = 'a:' + s.server;
    const x = s.suspended;
    const resume = button('btn-primary btn-small resume', 'Resume', () =>
      post('/api/resume', { server: s.server }, key, [resume]));
    resume.setAttribute('aria-label', `Resume ${s.server}`);
    return h('div', { class: 'banner banner-danger attention-item', dataset: { attention: 'suspended', server: s.server } },
      h('p', {},
        h('strong', { class: 'server-name', text: sanitise(s.server) }), ' is suspended ', timeEl(x.since, 'muted'),
        `: ${x.total} security violations within a minute (${x.summary}). Every request it makes is refused until you resume it.`),
      h('div', { class: 'actions' },
        button('btn-ghost btn-small', 'See it in Sessions', () => goTo('sessions')), resume),
      errorEl(key));
  }

  function missedItem() {
    const n = missed.length;
    const servers = Array.from(new Set(missed.map((q) => sanitise(q.server)))).join(', ');
    return h('div', { class: 'banner banner-warning attention-item', dataset: { attention: 'missed' } },
      h('p', {},
        h('strong', { text: `${plural(n, 'question', 'questions')} missed` }),
        `: nobody answered in time (${servers}), so ${n === 1 ? 'it' : 'they'} timed out and the broker denied ${n === 1 ? 'it' : 'them'}.`),
      h('div', { class: 'actions' },
        button('btn-ghost btn-small', 'See them', () => goTo('consent')),
        button('btn-ghost btn-small dismiss-missed', 'Dismiss', () => dismissMissed(missed.map((q) => q.id)))));
  }

  function escapeItem(server, x) {
    // The path when the broker kept it (a link leading out); a place outside every root
    // is not kept, as in the audit log.
    const where = x.last.path
      ? h('code', { class: 'escape-path', text: sanitise(x.last.path) })
      : 'a place outside every root';
    return h('div', { class: 'banner banner-danger attention-item', dataset: { attention: 'escape', server } },
      h('p', {},
        h('strong', { class: 'server-name', text: sanitise(server) }),
        ` tried to reach outside every root ${x.count === 1 ? 'once' : x.count + ' times'}; the last: `,
        where, ' (', h('code', { text: sanitise(x.last.method || '') }), ') ',
        timeEl(x.last.time, 'muted'), x.count === 1 ? '. It was refused.' : '. Each was refused.'),
      h('div', { class: 'actions' },
        button('btn-ghost btn-small', 'See Activity', () => goTo('activity')),
        button('btn-ghost btn-small dismiss-escape', 'Dismiss', () => { escapes.delete(server); render(); })));
  }

  function alarm(view, n, what) {
    const b = $('#alarm-' + view);
    if (!b) return;
    b.hidden = !n;
    b.textContent = n ? `!${n}` : '';
    b.title = n ? what : '';
  }

  function render() {
    const area = $('#attention');
    const items = [
      ...suspended.map(suspendedItem),
      missed.length ? missedItem() : null,
      ...Array.from(escapes, ([server, x]) => escapeItem(server, x)),
    ].filter(Boolean);
    // Redrawn only when what it says changed, so a button is not swapped under the pointer.
    const sig = JSON.stringify([suspended.map((s) => [s.server, s.suspended]), missed.map((q) => q.id),
      Array.from(escapes, ([s, x]) => [s, x.count])]);
    if (area._sig !== sig) { area._sig = sig; area.replaceChildren(...items); }
    area.hidden = items.length === 0;
    const escaped = Array.from(escapes.values()).reduce((n, x) => n + x.count, 0);
    alarm('sessions', suspended.length, `${plural(suspended.length, 'session', 'sessions')} suspended`);
    alarm('consent', missed.length, `${plural(missed.length, 'question', 'questions')} missed`);
    alarm('activity', escaped, `${plural(escaped, 'escape attempt', 'escape attempts')}`);
    setAttention(suspended.length + missed.length + escapes.size);
  }

  document.addEventListener('fsbroker:state', (ev) => {
    suspended = (ev.detail.sessions || []).filter((s) => s.suspended);
    render();
  });
  document.addEventListener('fsbroker:missed', (ev) => {
    missed = ev.detail || [];
    render();
  });
  // An escape attempt: refused for reaching outside every root (a link leading out among
  // them), or a consent asked for such a place.
  document.addEventListener('fsbroker:audit', (ev) => {
    const e = ev.detail;
    const outside = e.reason === 'outside_root'
      || (Array.isArray(e.decidedBy) && e.decidedBy.includes('confinement'));
    if (!outside || !e.server) return;
    const x = escapes.get(e.server) || { count: 0, last: e };
    x.count += 1;
    if (!(Date.parse(x.last.time) > Date.parse(e.time))) x.last = e;
    escapes.set(e.server, x);
    render();
  });
})();
