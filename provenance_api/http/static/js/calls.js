/* The model-call panel of a trace (GET /v1/traces/{id}/calls): every call in the order sent — its stage,
 * what it was shown (the mask, in words), outcome (a cached answer says so, at $0), the value the
 * estimator read, seconds, tokens and cost — and, opened, the rendered prompt (each message with its
 * role) and the model's reply: what the judge actually saw and said. */

import { api } from './api.js';
import { announce, byId, h, restoreFocus, showError } from './dom.js';
import { enc, fmtInt, fmtSeconds, plural } from './format.js';

const STAGES = {
  round1: 'layers (round 1)',
  round2: 'sources (round 2)',
  redundancy: 'redundancy check',
  spans: 'span check',
  probe: 'probe',
  gamma: 'all or nothing (Γ)',
  other: 'other',
};

const OUTCOMES = {
  answered: 'answered',
  cached: 'from cache, $0',
  failed: 'failed',
  failed_billed: 'failed, billed',
  refused: 'refused (over the plan)',
};

let panelReturn = null;

function fmtParsed(x) {
  if (x === null || x === undefined) return '—';
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}

function fmtCallCost(call) {
  if (call.outcome === 'cached') return '$0';
  if (call.cost_usd === null || call.cost_usd === undefined) return 'cost unknown';
  return '$' + call.cost_usd.toFixed(5);
}

function message(m, k) {
  return h('div', { class: 'msg', dataset: { role: m.role } },
    h('p', { class: 'msg-role' }, 'Message ' + (k + 1) + ' · ' + m.role),
    h('pre', { class: 'msg-text', tabindex: '0', 'aria-label': m.role + ' message' }, m.content));
}

function callItem(call) {
  const tokens = fmtInt(call.input_tokens) + ' in → ' + fmtInt(call.output_tokens) + ' out';
  const summary = h('summary', { class: 'call-summary' },
    h('span', { class: 'call-index' }, '#' + call.index),
    h('span', { class: 'call-stage' }, STAGES[call.stage] || call.stage),
    h('span', { class: 'call-mask' }, call.mask),
    h('span', { class: 'badge outcome-' + call.outcome, dataset: { outcome: call.outcome } }, OUTCOMES[call.outcome] || call.outcome),
    h('span', { class: 'call-parsed', title: 'the value the estimator read' }, 'read ' + fmtParsed(call.parsed)),
    h('span', { class: 'call-seconds' }, fmtSeconds(call.seconds)),
    h('span', { class: 'call-tokens' }, tokens),
    h('span', { class: 'call-cost' }, fmtCallCost(call)));
  const body = h('div', { class: 'call-body' });
  body.append(h('h4', null, 'Prompt, as sent'));
  if (call.prompt_truncated) body.append(h('p', { class: 'note warn call-truncated' }, '⚠ Truncated: this prompt was longer than the size kept with a trace; the end of it is cut.'));
  body.append(...call.prompt.map(message));
  body.append(h('h4', null, call.kind === 'score' ? 'Scored (no reply text)' : 'Reply'));
  if (call.reply !== null && call.reply !== undefined) body.append(h('pre', { class: 'msg-text call-reply', tabindex: '0', 'aria-label': 'reply' }, call.reply));
  else body.append(h('p', { class: 'muted small' }, call.kind === 'score' ? 'A scoring call returns log-probabilities, not text.' : 'No reply.'));
  if (call.error) body.append(h('p', { class: 'notice bad call-error' }, call.error));
  return h('li', { class: 'call', dataset: { index: String(call.index), stage: call.stage, outcome: call.outcome } },
    h('details', null, summary, body));
}

export async function openCalls(trace, returnTo) {
  const dialog = byId('calls-panel');
  panelReturn = returnTo || document.activeElement;
  const body = h('div', { id: 'calls-body' }, h('p', { class: 'muted' }, 'Loading the model calls…'));
  dialog.replaceChildren(
    h('h2', { id: 'calls-title', tabindex: '-1' }, 'Model calls of this trace'),
    h('p', { class: 'muted small' }, 'Each call in the order sent. Open one to read the prompt the judge saw and its reply.'),
    body,
    h('div', { class: 'dialog-actions' }, h('button', { type: 'button', class: 'button', id: 'calls-close', onclick: () => dialog.close() }, 'Close')));
  if (!dialog.open) dialog.showModal();
  byId('calls-title').focus();
  let data;
  try {
    data = await api('/v1/traces/' + enc(trace.trace_id) + '/calls');
  } catch (err) {
    showError(err, body);
    return;
  }
  const counts = {};
  for (const c of data.calls) counts[c.outcome] = (counts[c.outcome] || 0) + 1;
  const tally = Object.entries(counts).map(([k, n]) => n + ' ' + (OUTCOMES[k] || k)).join(' · ');
  body.replaceChildren(...[
    h('p', { id: 'calls-count', dataset: { total: String(data.total), kept: String(data.kept) } },
      plural(data.total, 'call') + (tally ? ' · ' + tally : '')),
    data.kept < data.total ? h('p', { class: 'notice', id: 'calls-capped' }, 'Only the first ' + data.kept + ' of ' + data.total + ' calls were kept with this trace (a cap on stored prompts).') : null,
    h('ol', { class: 'call-list', id: 'call-list', 'aria-labelledby': 'calls-title' }, data.calls.map(callItem)),
  ].filter(Boolean));
  announce(plural(data.kept, 'model call') + ' listed.');
}

export function wireCallsPanel() {
  byId('calls-panel').addEventListener('close', () => {
    const back = panelReturn;
    panelReturn = null;
    restoreFocus(back);
  });
}

/** The result's "Model calls" button. */
export function callsButton(trace) {
  const button = h('button', { type: 'button', class: 'button', id: 'open-calls', 'aria-haspopup': 'dialog', 'aria-keyshortcuts': 'c' }, 'Model calls');
  button.addEventListener('click', () => openCalls(trace, button));
  return button;
}
