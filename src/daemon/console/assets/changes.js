// The Changes view: what servers changed in the user's files, grouped by session, newest
// first, each with what the recovery store kept of what it replaced, and the ways back
// (Restore one change, Undo a whole session). Paths and names are a server's text: built
// with textContent only, as everywhere on this page (console.js's helpers).
'use strict';

(() => {
  const { h, button, errorEl, post, getJson, timeEl, bytes, pathCode, reconcile, announce, sig } =
    window.fsbroker;
  const $ = (sel, root = document) => root.querySelector(sel);

  // The methods whose success the journal records: an audit event of one means the list
  // is out of date.
  const CHANGING = new Set(['files/write', 'files/create', 'files/delete', 'files/rename']);
  // While the view shows, it asks again this often too, for what no audit event tells of
  // (a restore from the command line, or from another tab).
  const POLL_MS = 15000;

  let data = null;
  let loading = null;
  let again = false;
  let soon = null;
  // What the last undo of each session did, until the user dismisses it: kept apart from the
  // list, which a reload redraws.
  const outcomes = new Map();

  const visible = () => !$('[data-view="changes"]').hidden;

  // Loads the list and draws it; a load asked for while one runs is made once it ends.
  async function load() {
    if (loading) { again = true; return loading; }
    loading = (async () => {
      const d = await getJson('/api/changes', 'changes');
      if (d) { data = d; render(); }
    })();
    await loading;
    loading = null;
    if (again) { again = false; await load(); }
    return undefined;
  }

  function loadSoon() {
    clearTimeout(soon);
    soon = setTimeout(load, 300);
  }

  // ---------- Words for people ----------

  // What the change did, as a verb.
  function verb(c) {
    switch (c.method) {
      case 'files/write': return c.kept || c.notKept ? 'Overwrote' : 'Created';
      case 'files/create': return 'Created';
      case 'files/delete': return 'Deleted';
      case 'files/rename': return c.kept || c.notKept ? 'Renamed over' : 'Renamed';
      case 'restore': return 'Replaced';
      default: return c.method;
    }
  }

  function keptWhat(c) {
    const k = c.kept;
    if (k.kind === 'directory') return k.how === 'empty' ? 'The empty folder' : 'The folder, with all in it';
    const thing = k.kind === 'file' ? 'file' : k.kind === 'symlink' ? 'link' : 'entry';
    if (c.method === 'files/delete') return `The deleted ${thing}`;
    if (c.method === 'files/rename') return `The ${thing} it replaced`;
    if (c.method === 'restore') return 'What stood there';
    return `The old ${thing}`;
  }

  function keptCell(c) {
    if (c.pruned) return h('span', { class: 'muted', text: 'Removed to make room: it can no longer be restored' });
    if (c.notKept) {
      return [h('span', { class: 'label label-failed', text: 'not recoverable' }),
        h('span', { class: 'muted small not-kept', text: c.notKept })];
    }
    if (c.kept) {
      return h('span', { class: 'kept-what', text: keptWhat(c), title: `${bytes(c.kept.bytes)} in the recovery store` });
    }
    return h('span', { class: 'muted', text: c.to ? 'Nothing: the new name was free' : 'Nothing: it did not exist before' });
  }

  // Why undo left a change alone, in plain words (the store's own words otherwise).
  function plain(why) {
    const w = String(why || '');
    if (/ changed since$/.test(w)) {
      return 'it was changed again after this session changed it, so undo left it as it is. ' +
        'Its Restore button still puts the old content back (what is there now is kept).';
    }
    if (/^already restored/.test(w)) return 'it was already restored.';
    if (/pruned/.test(w)) return 'its old content was removed to make room, so it cannot be restored.';
    const notKept = /^its content was not kept: (.*)$/.exec(w);
    if (notKept) return `its old content was never kept (${notKept[1]}), so it cannot be restored.`;
    if (/directory that held .* is gone/.test(w)) {
      return 'the folder it was in no longer exists: restore that folder first, then this.';
    }
    if (/no longer in the store/.test(w)) return 'its old content is no longer in the recovery store.';
    return w;
  }

  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const restorable = (c) => !c.restoredBy && !c.pruned && !c.notKept;

  // ---------- Drawing ----------

  function render() {
    const off = !!data && data.enabled === false;
    const changes = (data && data.changes) || [];
    // One group a session, in the order of their newest change (the list is newest first).
    // The user's own changes are told apart by `by`, which the broker sets, never by a name:
    // a server that called itself `user` is a server, with its own group and its Undo.
    const groups = new Map();
    for (const c of changes) {
      const user = c.by === 'user';
      const key = (user ? 'u:' : 's:') + c.session;
      if (!groups.has(key)) groups.set(key, { key, user, session: c.session, server: c.server, identity: c.identity || null, items: [] });
      groups.get(key).items.push(c);
    }
    // The user's own restores come last: the view is about what servers did.
    const list = Array.from(groups.values());
    list.sort((a, b) => a.user - b.user);
    reconcile($('#changes'), list, (g) => g.key,
      (g) => sig(g) + sig(outcomes.get(g.session) || null), groupCard);
    $('#changes-off').hidden = !off;
    $('#changes-empty').hidden = off || !data || changes.length > 0;
    const info = [];
    if (data && data.enabled) {
      info.push(`Kept in ${data.store}, which uses ${bytes(data.usage && data.usage.bytes)}.`);
      if (data.total > changes.length) {
        info.push(`Showing the newest ${changes.length} of ${data.total} changes; \`fsbroker history\` lists them all.`);
      }
    }
    $('#changes-info').textContent = info.join(' ');
  }

  function groupCard(g) {
    const user = g.user;
    const key = 'u:' + g.key;
    const open = g.items.filter(restorable).length;
    let undo = null;
    if (!user && open > 0) {
      undo = button('btn-small undo', 'Undo this session', async () => {
        if (!confirm(`Undo the ${plural(open, 'change', 'changes')} ${g.server} made in this session? ` +
          'Each goes back to how it was before; what is there now is kept, so this too can be taken back.')) return;
        const r = await post('/api/undo', { server: g.session }, key, [undo]);
        if (!r) return;
        outcomes.set(g.session, { restored: r.restored || [], conflicts: r.conflicts || [] });
        const left = (r.conflicts || []).length;
        announce(`Undid ${plural((r.restored || []).length, 'change', 'changes')} of ${g.server}` +
          (left ? `; ${left} left as ${left === 1 ? 'it is' : 'they are'}.` : '.'));
        await load();
      });
      undo.setAttribute('aria-label', `Undo this session of ${g.server}`);
    }
    return h('article', { class: 'card changes-session', dataset: { changes: g.session, by: user ? 'user' : 'server' } },
      h('header', { class: 'card-head' },
        h('div', { class: 'card-head-main' },
          h('span', { class: 'server-name big', text: user ? 'Your restores' : g.server, title: user ? null : `session ${g.session}` }),
          h('span', { class: 'muted small' }, `${plural(g.items.length, 'change', 'changes')} · `, span(g)),
          // The program the session was, by the first digits of its identity's digest: two
          // programs that took one name are two groups with two digests.
          !user && g.identity
            ? h('code', { class: 'muted small program', title: 'Identity digest of the program that made these changes', text: g.identity.slice(0, 12) })
            : null),
        undo),
      user ? h('p', { class: 'muted small group-note', text: 'What your restores replaced, kept in turn. Restore one to take that restore back.' }) : null,
      outcomeBlock(g.session),
      h('div', { class: 'table-wrap' },
        h('table', { class: 'table changes' },
          h('thead', {}, h('tr', {},
            h('th', { scope: 'col', text: 'When' }), h('th', { scope: 'col', text: 'Change' }),
            h('th', { scope: 'col', text: 'Path' }), h('th', { scope: 'col', text: 'Kept' }),
            h('th', { scope: 'col' }, h('span', { class: 'sr-only', text: 'Actions' })))),
          h('tbody', {}, g.items.map(changeRow)))),
      errorEl(key));
  }

  // When a group's changes were made: one time, or from the first to the last. Sessions of
  // one server are told apart by it.
  function span(g) {
    const last = g.items[0].time;
    const first = g.items[g.items.length - 1].time;
    // Within a minute, the two would read the same.
    if (Math.abs(Date.parse(last) - Date.parse(first)) < 60000) return timeEl(last);
    return h('span', {}, timeEl(first), ' to ', timeEl(last));
  }

  function changeRow(c) {
    const key = 'c:' + c.id;
    const done = !!c.restoredBy;
    return h('tr', { class: done ? 'restored' : '', dataset: { change: c.id, path: c.path } },
      h('td', { class: 'when' }, timeEl(c.time)),
      h('td', { class: 'what', text: verb(c) }),
      h('td', { class: 'path' }, pathCode(c.path), c.to ? [h('span', { class: 'arrow', text: ' → ' }), pathCode(c.to)] : null,
        errorEl(key)),
      h('td', { class: 'kept' }, keptCell(c)),
      h('td', { class: 'cell-actions' }, action(c, key)));
  }

  function action(c, key) {
    if (c.restoredBy) {
      return h('span', { class: 'badge badge-ok state-restored', text: 'Restored', title: 'Put back; what stood there is kept under Your restores' });
    }
    if (!restorable(c)) return null;
    const [label, title] = c.kept
      ? ['Restore', 'Put back what this change replaced; what is there now is kept']
      : c.to
        ? ['Move back', 'Rename it back to its old name']
        : ['Remove', 'Take away what this change created; it is kept, so this too can be undone'];
    const b = button('btn-small restore', label, async () => {
      const r = await post('/api/restore', { id: c.id }, key, [b]);
      if (!r) return;
      announce(`Restored ${c.path}.`);
      await load();
    }, { title });
    b.setAttribute('aria-label', `${label} ${c.path}`);
    return b;
  }

  function outcomeBlock(session) {
    const o = outcomes.get(session);
    if (!o) return null;
    const done = o.restored.length;
    const left = o.conflicts;
    const dismiss = button('btn-ghost btn-small dismiss', 'Dismiss', () => { outcomes.delete(session); render(); });
    return h('div', { class: 'undo-outcome' + (left.length ? ' has-conflicts' : ''), role: 'status' },
      h('div', { class: 'undo-text' },
        h('p', { class: 'undo-summary' },
          done ? `Undid ${plural(done, 'change', 'changes')}.` : 'Nothing was undone.',
          left.length ? ` ${plural(left.length, 'change was', 'changes were')} left as ${left.length === 1 ? 'it is' : 'they are'}:` : ''),
        left.length
          ? h('ul', { class: 'conflicts' }, left.map((c) => h('li', { dataset: { conflict: c.id } }, pathCode(c.path), ': ', plain(c.why))))
          : null),
      dismiss);
  }

  // ---------- Start ----------

  document.addEventListener('fsbroker:view', (ev) => { if (ev.detail === 'changes') load(); });
  document.addEventListener('fsbroker:audit', (ev) => {
    const e = ev.detail || {};
    if (visible() && CHANGING.has(e.method) && e.outcome === 'ok') loadSoon();
  });
  setInterval(() => { if (visible() && document.visibilityState === 'visible') load(); }, POLL_MS);
  // console.js may have shown this view before this script ran.
  if (visible()) load();
})();
