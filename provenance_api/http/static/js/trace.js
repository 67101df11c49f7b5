/* One trace on the turn view: start it (after the gate), follow it, or show how it ended — its result,
 * or why it has none. */

import { api } from './api.js';
import { byId, h, showError } from './dom.js';
import { enc } from './format.js';
import { callsFigures, callsSentence } from './numbers.js';
import { loadPastTraces, markCurrentTrace } from './past.js';
import { followRun } from './progress.js';
import { renderResult } from './result.js';
import { turnHash } from './routes.js';
import { state } from './state.js';

export function startRun(job, quote) {
  history.pushState(null, '', turnHash(state.turn.turn_id, job.trace_id));
  markCurrentTrace(job.trace_id);
  highlightClaim(job.segment_id);
  byId('result').replaceChildren();
  followRun(job.trace_id, job.claim || (quote && quote.claim), job.calls ? job.calls.planned : quote.planned_calls, afterRun);
}

async function afterRun(t, ended) {
  if (t && ended === 'succeeded') show(t, true);
  await loadPastTraces();
}

export async function showTrace(traceId, afterRunEnded) {
  const box = byId('result');
  if (!box) return;
  let t;
  try {
    t = await api('/v1/traces/' + enc(traceId));
  } catch (err) {
    showError(err, box);
    return;
  }
  show(t, afterRunEnded);
}

function show(t, afterRunEnded) {
  const box = byId('result');
  if (!box) return;
  state.traceShown = t.trace_id;
  if (!afterRunEnded) byId('run').hidden = true;
  if (t.status === 'queued' || t.status === 'running') {
    followRun(t.trace_id, t.claim, t.calls.planned, afterRun);
    return;
  }
  if (t.status !== 'succeeded') {
    box.replaceChildren(h('div', { class: 'panel', id: 'ended-panel' },
      h('h2', { id: 'result-title', tabindex: '-1' }, 'Trace ' + t.status),
      h('blockquote', { class: 'claim' }, t.claim),
      h('p', { class: 'notice bad' }, 'This trace ' + t.status + ': ' + (t.reason || 'no reason given') + '. ' + callsSentence(t.calls) + '. A trace that did not finish has no result.'),
      callsFigures(t.calls, { id: 'ended-calls' })));
    return;
  }
  box.replaceChildren(renderResult(t));
  highlightClaim(t.segment_id);
  if (!afterRunEnded) {
    const heading = byId('result-title');
    if (heading) heading.focus();
  }
}

/** Mark what the trace on screen traces: the sentence's parts in the response, or the action's card. */
export function highlightClaim(segmentId) {
  document.querySelectorAll('.seg.selected-claim, .action-card.selected-claim').forEach((el) => el.classList.remove('selected-claim'));
  if (!segmentId) return;
  const id = CSS.escape(segmentId);
  document.querySelectorAll('.seg[data-seg="' + id + '"], .action-card[data-action="' + id + '"]').forEach((el) => el.classList.add('selected-claim'));
}
