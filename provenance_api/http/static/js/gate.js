/* The cost gate: before a trace runs, the service's quote for the claim (a sentence, or an action: a tool
 * call) and judge model — the planned (worst-case) calls reserved from the budget, tokens and worst-case
 * cost, with any warnings — and Accept to run it or Cancel.
 *
 * The judge model is the operator's to allow (GET /ui/session: allowed_models, the default first). The gate
 * first prices without naming one, so the service picks the model it will actually run — the turn's own when
 * the operator allows it, else the default — and pre-fills that (with the quote's reason); it offers only the
 * allowed models. Naming the turn's own model when it is not allowed would be refused (422), on every click. */

import { api } from './api.js';
import { announce, byId, h, restoreFocus, showError } from './dom.js';
import { clip, fmtCost, fmtInt } from './format.js';
import { explain, warningList } from './glossary.js';
import { state } from './state.js';
import { startRun } from './trace.js';

let gateReturn = null;
let gateQuote = null;

/** The judge models this tenant may choose: the session's allowed_models (else the default alone), the
 * turn's own model and those of its past traces first when they are among them. */
function modelOptions() {
  const session = state.session || {};
  const allowed = session.allowed_models || (session.default_model ? [session.default_model] : []);
  const seen = new Set();
  const out = [];
  const push = (m) => { if (m && allowed.includes(m) && !seen.has(m)) { seen.add(m); out.push(m); } };
  push(state.turn.turn.model);
  for (const t of state.turn.pastTraces || []) push(t.model);
  allowed.forEach(push);
  return out;
}

/** The gate for a sentence of the response (its id, or any text of it). */
export function openGate(sentence, claimText, returnTo) {
  openFor({ sentence }, claimText, returnTo);
}

/** The gate for an action (a tool call, from GET /v1/turns/{id}/actions): the same figures and model
 * choice, priced on what the agent had seen when it made the call; the claim shown is the call as traced. */
export function openActionGate(action, returnTo) {
  openFor({ target: { action: action.id } }, action.id + ' · ' + action.tool, returnTo);
}

function openFor(what, claimText, returnTo) {
  const dialog = byId('gate');
  const isAction = !!what.target;
  gateReturn = returnTo || document.activeElement;
  gateQuote = null;
  // empty until the first quote: the service names the model it will run
  const modelInput = h('input', { id: 'gate-model', type: 'text', list: 'gate-models', autocomplete: 'off', spellcheck: 'false', value: '', 'aria-describedby': 'gate-model-hint' });
  const datalist = h('datalist', { id: 'gate-models' }, modelOptions().map((m) => h('option', { value: m })));
  const reprice = h('button', { type: 'button', class: 'button', id: 'gate-reprice' }, 'Price with this model');
  const figures = h('div', { id: 'gate-figures', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Pricing…'));
  const accept = h('button', { type: 'button', class: 'button primary', id: 'gate-accept', disabled: true }, 'Accept and run');
  const cancel = h('button', { type: 'button', class: 'button', id: 'gate-cancel' }, 'Cancel');
  const errorBox = h('div', { id: 'gate-error', role: 'alert' });
  const claim = isAction
    ? h('pre', { class: 'claim call-text', id: 'gate-claim' }, clipCall(claimText))
    : h('blockquote', { class: 'claim', id: 'gate-claim' }, clip(claimText, 700));
  dialog.replaceChildren(
    h('h2', { id: 'gate-title' }, isAction ? 'Cost gate: trace this action?' : 'Cost gate: trace this claim?'),
    claim,
    isAction ? h('p', { class: 'hint', id: 'gate-action-hint' }, 'Action ' + what.target.action + ': measured over what the agent had seen when it made this call — the sources before it, never its own result.') : null,
    h('div', { class: 'field' },
      h('label', { for: 'gate-model' }, 'Judge model'),
      h('span', { id: 'gate-model-hint', class: 'hint' }, 'The judge this service will run: the turn\u2019s own model when the operator allows it, else the default. Only allowed models are offered.'),
      h('div', { class: 'row' }, modelInput, reprice), datalist),
    figures, errorBox,
    h('div', { class: 'dialog-actions' }, cancel, accept));
  const price = async () => {
    accept.disabled = true;
    errorBox.replaceChildren();
    figures.replaceChildren(h('p', { class: 'muted' }, 'Pricing…'));
    const body = Object.assign({ turn_id: state.turn.turn_id }, what);
    const model = modelInput.value.trim();
    if (model) body.model = model;
    try {
      gateQuote = await api('/v1/quotes', { method: 'POST', body });
    } catch (err) {
      gateQuote = null;
      figures.replaceChildren();
      showError(err, errorBox);
      return;
    }
    if (!modelInput.value.trim()) modelInput.value = gateQuote.model;  // the model the service runs
    if (gateQuote.model_reason) byId('gate-model-hint').textContent = 'The judge this service will run: ' + gateQuote.model_reason + '. Only allowed models are offered.';
    if (isAction) claim.textContent = clipCall(gateQuote.claim);  // the call exactly as it will be traced
    renderQuote(gateQuote, figures);
    accept.disabled = gateQuote.refused !== null;
    announce(gateQuote.refused ? 'The cost gate refuses this trace.' : 'Priced: ' + gateQuote.planned_calls + ' model calls, ' + fmtCost(gateQuote.cost_usd) + '.');
  };
  reprice.addEventListener('click', price);
  modelInput.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); price(); } });
  modelInput.addEventListener('change', price);
  cancel.addEventListener('click', () => dialog.close());
  accept.addEventListener('click', async () => {
    if (!gateQuote || gateQuote.refused) return;
    accept.disabled = true;
    try {
      const job = await api('/v1/traces', { method: 'POST', body: { quote_id: gateQuote.quote_id } });
      const quote = gateQuote;
      dialog.close();
      startRun(job, quote);
    } catch (err) {
      showError(err, errorBox);
      accept.disabled = true;
    }
  });
  dialog.onclose = () => {
    const back = gateReturn;
    gateReturn = null;
    if (!state.run) restoreFocus(back);
  };
  dialog.showModal();
  modelInput.focus();
  price();
}

/** A call's text, cut when very long (a call's arguments can be large). */
function clipCall(text) {
  const t = String(text || '');
  return t.length <= 1200 ? t : t.slice(0, 1199) + '…';
}

function renderQuote(q, target) {
  const items = [];
  if (q.refused) {
    items.push(h('p', { id: 'gate-refused', class: 'notice bad', role: 'alert' }, 'Refused: ' + q.refused));
  }
  const calls = q.calls;
  const stages = [['layers', calls.round1], ['sources', calls.round2], ['redundancy checks', calls.redundancy], ['span checks', calls.spans], ['probe', calls.probe]];
  const breakdown = stages.filter(([, n]) => n).map(([words, n]) => words + ' ' + n).join(' · ');
  items.push(h('dl', { class: 'figures' },
    h('dt', null, 'Sources'), h('dd', { id: 'gate-sources' }, String(q.sources)),
    h('dt', null, 'Planned model calls (worst case)'),
    h('dd', null, h('span', { id: 'gate-calls' }, String(q.planned_calls)), ' ', h('span', { class: 'breakdown' }, '(' + breakdown + ')'), explain('calls.planned')),
    h('dt', null, 'Est. input tokens'), h('dd', { id: 'gate-tokens' }, fmtInt(q.input_tokens)),
    h('dt', null, 'Worst-case cost'),
    h('dd', null, h('span', { id: 'gate-cost' }, fmtCost(q.cost_usd)),
      h('span', { class: 'hint block' }, 'If every planned call is sent and billed. Answers from the judgement cache cost $0, so the bill is often lower.')),
    h('dt', null, 'Judge model'), h('dd', { id: 'gate-judge', class: 'mono' }, q.model)));
  if (q.warnings.length) items.push(warningList(q.warnings, { id: 'gate-warnings' }));
  target.replaceChildren(...items);
}
