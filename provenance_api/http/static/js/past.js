/* The past traces of the turn on screen, newest first, the one shown marked current. */

import { api } from './api.js';
import { byId, h, showError } from './dom.js';
import { clip, enc, fmtDate } from './format.js';
import { label } from './glossary.js';
import { parseRoute, turnHash } from './routes.js';
import { state } from './state.js';

export async function loadPastTraces() {
  const box = byId('past-traces');
  const turn = state.turn;
  if (!box || !turn) return;
  let data;
  try {
    data = await api('/ui/api/turns/' + enc(turn.turn_id) + '/traces');
  } catch (err) {
    if (box.isConnected) showError(err, box);
    return;
  }
  if (state.turn !== turn || !box.isConnected) return; // the page moved on meanwhile
  turn.pastTraces = data.items;
  if (!data.items.length) {
    box.replaceChildren(h('p', { class: 'muted small' }, 'No traces yet. Click a dotted sentence to price one.'));
    return;
  }
  const current = parseRoute();
  box.replaceChildren(h('ul', { class: 'past-list' }, data.items.map((t) => h('li', null,
    h('a', { href: turnHash(turn.turn_id, t.trace_id), 'aria-current': current && current.traceId === t.trace_id ? 'true' : null, dataset: { traceId: t.trace_id } },
      h('span', { class: 'claim' }, clip(t.claim, 110)),
      h('span', { class: 'meta' }, [t.status === 'succeeded' ? (t.verdict ? label('verdict.' + t.verdict, { capital: true, fallback: t.verdict_text }) : t.verdict_text) : t.status, t.model, fmtDate(t.created_at)].join(' · ')))))));
}

export function markCurrentTrace(traceId) {
  document.querySelectorAll('#past-traces a').forEach((a) => {
    if (a.dataset.traceId === traceId) a.setAttribute('aria-current', 'true');
    else a.removeAttribute('aria-current');
  });
}
