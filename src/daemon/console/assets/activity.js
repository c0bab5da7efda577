// The Activity view: every audit event, newest first, each with its severity (an attack, a
// refusal, a failure or routine) and a detail view of the whole event. Names, paths and
// methods are a server's text: built with textContent only (console.js's helpers).
'use strict';

(() => {
  const { h, bytes, absTime, pathCode, severity, sanitise } = window.fsbroker;
  const $ = (sel, root = document) => root.querySelector(sel);

  const MAX_EVENTS = 500;
  // What each severity is called on its tag; routine work carries none.
  const TAGS = { attack: 'attack', refusal: 'refused', failed: 'failed' };
  const FILTERS = [['all', 'All'], ['attack', 'Attacks'], ['refusal', 'Refusals'],
    ['failed', 'Failed'], ['routine', 'Routine']];

  let paused = false;
  let missedTotal = 0;
  const pausedEvents = [];
  const servers = new Set();
  const outcomes = new Set();

  function hms(iso) {
    const t = iso ? Date.parse(iso) : NaN;
    if (Number.isNaN(t)) return String(iso ?? '');
    return new Date(t).toLocaleTimeString([], { hour12: false, hour: '2-digit', minute: '2-digit', second: '2-digit' });
  }

  // A consent the time limit denied is no answer of the user's: said so, never "denied".
  const timedOut = (e) => Array.isArray(e.decidedBy) && e.decidedBy.includes('timeout');

  function outcomeText(e) {
    if (timedOut(e)) return 'timed out';
    return String(e.outcome ?? '');
  }

  function addEvent(e) {
    if (e.server && !servers.has(e.server)) { servers.add(e.server); refreshServerFilter(); }
    if (e.outcome && !outcomes.has(e.outcome)) { outcomes.add(e.outcome); refreshOutcomeFilter(); }
    if (paused) {
      pausedEvents.push(e);
      if (pausedEvents.length > MAX_EVENTS) pausedEvents.shift();
      updatePause();
      return;
    }
    insertEvent(e);
    updateInfo();
  }

  function insertEvent(e) {
    const tbody = $('#events');
    const row = eventRow(e);
    row.hidden = !matchesFilter(row);
    tbody.insertBefore(row, tbody.firstChild);
    while (tbody.children.length > MAX_EVENTS) tbody.lastChild.remove();
  }

  // The path an event names, made inert and readable; an escape attempt whose path the
  // broker does not keep (a place outside every root) says so rather than showing nothing.
  function pathCell(e) {
    if (e.path) return pathCode(sanitise(e.path));
    if (e.reason === 'outside_root') return h('span', { class: 'muted', text: 'outside every root' });
    return h('span', { class: 'muted', text: '—' });
  }

  function eventRow(e) {
    const sev = severity(e);
    const ms = Number(e.durationMs);
    const tag = TAGS[sev]
      || (Array.isArray(e.decidedBy) && e.outcome !== 'ok' ? 'answered' : null);
    const server = sanitise(e.server ?? '');
    const row = h('tr', {
      class: `ev ${sev}` + (e.outcome === 'ok' ? ' ok' : ''),
      dataset: { event: e.time || '', server: e.server || '', severity: sev, outcome: e.outcome || '' },
      onclick: (ev) => { if (!ev.target.closest('button')) openDetail(e); },
    },
    h('td', { class: 'time' }, h('button', {
      type: 'button', class: 'ev-open', title: absTime(e.time) + ' (details)',
      'aria-label': `Details of ${e.method || 'the event'} at ${hms(e.time)}`,
      text: hms(e.time), onclick: () => openDetail(e),
    })),
    h('td', { class: 'server', title: server, text: server }),
    h('td', { class: 'method' }, h('code', { text: sanitise(e.method ?? '') })),
    h('td', { class: 'path' }, pathCell(e)),
    h('td', { class: 'outcome' },
      tag ? h('span', { class: `label label-${sev}`, text: tag }) : null,
      h('span', { class: 'outcome-code', text: outcomeText(e) })),
    h('td', { class: 'reason' },
      e.reason ? h('code', { text: e.reason }) : null,
      consentSummary(e)),
    h('td', { class: 'num bytes', text: e.bytes ? bytes(e.bytes) : '—' }),
    h('td', { class: 'num duration', text: Number.isFinite(ms) ? (ms < 10 ? ms.toFixed(2) : ms.toFixed(0)) : '' }));
    return row;
  }

  function consentSummary(e) {
    if (!Array.isArray(e.approved) && !Array.isArray(e.denied)) return null;
    const part = (label, list) => (list && list.length ? `${label} ${list.map((p) => sanitise(p)).join(', ')}` : null);
    const text = [part('approved', e.approved),
      part(timedOut(e) ? 'timed out' : 'denied', e.denied),
      e.outside ? `${e.outside} outside every root` : null].filter(Boolean).join('; ');
    return text ? h('span', { class: 'muted small consent-summary', text }) : null;
  }

  // The whole event as JSON, as the audit stream gave it: text, never markup.
  function openDetail(e) {
    const dialog = $('#event-detail');
    $('#event-detail-title').textContent = `${sanitise(e.method || 'event')} · ${absTime(e.time)}`;
    // JSON escapes control characters; format and direction ones are escaped too, so that
    // none reorders or hides what the text says. It stays the same JSON.
    $('#event-json').textContent = JSON.stringify(e, null, 2)
      .replace(/[\p{Cf}\u2028\u2029]/gu, (c) => Array.from(c.split(''),
        (unit) => '\\u' + unit.charCodeAt(0).toString(16).padStart(4, '0')).join(''));
    if (!dialog.open) dialog.showModal();
  }

  function matchesFilter(row) {
    const server = $('#filter-server').value;
    const outcome = $('#filter-outcome').value;
    if (server && row.dataset.server !== server) return false;
    if (outcome === 'all') return true;
    if (outcome.startsWith('=')) return row.dataset.outcome === outcome.slice(1);
    return row.dataset.severity === outcome;
  }

  function applyFilter() {
    for (const row of $('#events').children) row.hidden = !matchesFilter(row);
    updateInfo();
  }

  function updateInfo() {
    const rows = $('#events').children;
    const shown = Array.from(rows).filter((r) => !r.hidden).length;
    $('#activity-info').textContent = rows.length
      ? (shown === rows.length ? `${rows.length} events` : `${shown} of ${rows.length} events`)
      : '';
    const empty = $('#activity-empty');
    empty.hidden = shown > 0;
    empty.textContent = rows.length ? 'No event matches the filters.' : 'Nothing has happened yet.';
    $('.table.activity').closest('.table-wrap').hidden = shown === 0;
  }

  // Rebuilds a <select>'s options, keeping what was chosen.
  function fillSelect(select, fixed, groupLabel, values) {
    const chosen = select.value;
    const opts = fixed.map(([v, t]) => h('option', { value: v, text: t }));
    if (values.length) {
      opts.push(groupLabel
        ? h('optgroup', { label: groupLabel }, values.map((v) => h('option', { value: '=' + v, text: v })))
        : values.map((v) => h('option', { value: v, text: sanitise(v) })));
    }
    select.replaceChildren(...opts.flat());
    select.value = chosen;
    if (select.value !== chosen) select.value = fixed[0][0];
  }

  function refreshServerFilter() {
    const sel = $('#filter-server');
    const list = Array.from(servers).sort();
    if (sel._sig === list.join('\u0000')) return;
    sel._sig = list.join('\u0000');
    fillSelect(sel, [['', 'All servers']], null, list);
  }

  function refreshOutcomeFilter() {
    fillSelect($('#filter-outcome'), FILTERS, 'Exact outcome',
      Array.from(outcomes).filter((o) => o !== 'ok').sort());
  }

  function togglePause() {
    paused = !paused;
    if (!paused) {
      pausedEvents.splice(0).forEach(insertEvent);
      updateInfo();
    }
    updatePause();
  }

  function updatePause() {
    const b = $('#pause');
    b.setAttribute('aria-pressed', String(paused));
    b.textContent = paused ? (pausedEvents.length ? `Resume (${pausedEvents.length} new)` : 'Resume') : 'Pause';
  }

  function noteMissed(n) {
    missedTotal += n;
    const el = $('#missed');
    el.hidden = missedTotal === 0;
    el.textContent = `${missedTotal} event${missedTotal === 1 ? '' : 's'} missed: the stream fell behind.`;
  }

  function start() {
    $('#filter-server').addEventListener('change', applyFilter);
    $('#filter-outcome').addEventListener('change', applyFilter);
    $('#pause').addEventListener('click', togglePause);
    $('#event-detail-close').addEventListener('click', () => $('#event-detail').close());
    refreshOutcomeFilter();
    updateInfo();
  }

  document.addEventListener('fsbroker:audit', (ev) => addEvent(ev.detail));
  document.addEventListener('fsbroker:missed-events', (ev) => noteMissed(Number(ev.detail) || 0));
  document.addEventListener('fsbroker:state', (ev) => {
    let added = false;
    for (const s of ev.detail.sessions || []) {
      if (!servers.has(s.server)) { servers.add(s.server); added = true; }
    }
    if (added) refreshServerFilter();
  });

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
