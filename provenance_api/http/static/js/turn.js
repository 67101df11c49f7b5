/* One turn: the response with its free-tier marks, the question, the actions the agent took (each linked to
 * the sentences that report it), the sources and the past traces; the trace part (live progress or a
 * result) below them. */

import { linkReportingSentences, renderActionsSection } from './actions.js';
import { api } from './api.js';
import { byId, focusHeading, h, showError, view } from './dom.js';
import { clip, enc, fmtDate, plural } from './format.js';
import { openGate } from './gate.js';
import { renderMarkdown } from './markdown.js';
import { currentOrder } from './order.js';
import { loadPastTraces, markCurrentTrace } from './past.js';
import { decorateSegments, selectionInResponse } from './segments.js';
import { lastListHash, parseRoute } from './routes.js';
import { renderSourcesPanel } from './sources.js';
import { state } from './state.js';
import { showTrace } from './trace.js';

const QUESTION_CHARS = 600;

export async function showTurn(turnId, traceId) {
  currentOrder(); // the sources' order the address asks for, before any link to a result is drawn
  if (state.turn && state.turn.turn_id === turnId && byId('response')) {
    // same turn already on screen: only the trace part changes
    markCurrentTrace(traceId);
    if (traceId) await showTrace(traceId);
    else byId('result').replaceChildren();
    return;
  }
  view().replaceChildren(h('p', { class: 'muted' }, 'Loading the turn…'));
  let turn;
  let segments;
  let sources;
  let actions;
  try {
    [turn, segments, sources, actions] = await Promise.all([
      api('/v1/turns/' + enc(turnId)),
      api('/v1/turns/' + enc(turnId) + '/segments'),
      api('/v1/turns/' + enc(turnId) + '/sources'),
      // the actions are a part of the page: when they cannot be read, the rest of the turn still shows
      api('/v1/turns/' + enc(turnId) + '/actions').catch((error) => ({ error })),
    ]);
  } catch (err) {
    view().replaceChildren(h('p', { class: 'crumbs' }, h('a', { href: lastListHash() }, '← All turns')));
    view().append(h('h1', null, 'Turn ' + turnId));
    showError(err, view().appendChild(h('div')));
    return;
  }
  const now = parseRoute();
  if (!now || now.name !== 'turn' || now.turnId !== turnId) return; // the page moved on meanwhile
  state.turn = { turn_id: turnId, turn: turn.turn, segments, sources, sourceById: indexSources(sources), actions };
  state.selection = null;
  renderTurn();
  focusHeading();
  await loadPastTraces();
  if (traceId) await showTrace(traceId);
}

/** A message content's text: a string, or the text parts of a list (as the service reads it). */
function contentText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((item) => (typeof item === 'string' ? item
    : item && typeof (item.text ?? item.content) === 'string' ? (item.text ?? item.content) : null))
    .filter((x) => x !== null).join('\n');
}

/** The user's request the response answers, as the service reads it (StoredTurn.effective_query): the
 * turn's query, else the last user message with text of the request, else the last user prompt of the
 * agent's own message log. */
export function turnQuestion(turn) {
  if (turn.query) return turn.query;
  const messages = (turn.request_payload && turn.request_payload.messages) || [];
  for (const m of [...messages].reverse()) {
    const text = m.role === 'user' ? contentText(m.content) : '';
    if (text.trim()) return text;
  }
  for (const msg of [...(turn.model_messages || [])].reverse()) {
    for (const part of [...(msg.parts || [])].reverse()) {
      const text = part.part_kind === 'user-prompt' ? contentText(part.content) : '';
      if (text.trim()) return text;
    }
  }
  return '';
}

function indexSources(sources) {
  const out = {};
  for (const layer of sources.layers) for (const s of layer.sources) out[s.id] = s;
  return out;
}

function renderTurn() {
  const { turn, segments, sources, actions } = state.turn;
  const title = (turn.agent || 'Unnamed agent') + ' — turn ' + turn.turn_id;
  const meta = [turn.model ? 'model ' + turn.model : 'model not recorded', fmtDate(turn.created_at)].filter(Boolean).join(' · ');
  const query = turnQuestion(turn).trim();

  const { root, runs } = renderMarkdown(turn.response);
  root.id = 'response';
  root.setAttribute('aria-describedby', 'summary-line');
  const decorated = decorateSegments(root, runs, segments.segments);
  linkReportingSentences(root, actions);

  const selButton = h('button', { id: 'trace-selection', type: 'button', class: 'button', disabled: true, 'aria-describedby': 'selection-hint' }, 'Trace the selected text');
  selButton.addEventListener('mousedown', (ev) => ev.preventDefault());
  selButton.addEventListener('click', () => {
    if (state.selection) openGate(state.selection.sentence, state.selection.text, null);
  });

  const main = h('div', { class: 'turn-main' },
    h('p', { class: 'crumbs' }, h('a', { href: lastListHash() }, '← All turns')),
    h('h1', null, title),
    h('p', { class: 'turn-meta' }, meta),
    query ? h('div', { class: 'asked', id: 'turn-question' },
      h('span', { class: 'label' }, 'The user asked'),
      h('p', { class: 'asked-text', id: 'turn-question-text' }, query.length > QUESTION_CHARS ? clip(query, QUESTION_CHARS) : query),
      query.length > QUESTION_CHARS ? h('details', { class: 'asked-more' }, h('summary', null, 'The whole request'),
        h('p', { class: 'asked-text' }, query)) : null) : null,
    h('section', { 'aria-labelledby': 'response-title' },
      h('h2', { id: 'response-title' }, 'Response'),
      h('p', { id: 'summary-line', class: 'summary-line' }, segments.summary.line),
      h('p', { class: 'legend' },
        h('span', null, h('span', { class: 'sample-traceable' }, 'dotted underline'), ': worth tracing — click it, or focus it and press Enter'),
        h('span', null, h('span', { class: 'quote-mark', 'aria-hidden': 'true' }, '❞'), ' quoted directly from a source (hover or focus for where)'),
        h('span', null, 'no mark: nothing to trace')),
      h('div', { class: 'response-toolbar' }, selButton,
        h('span', { id: 'selection-hint', class: 'muted small' }, 'Or select any part of the response and trace that.')),
      h('article', { class: 'panel' }, root, decorated.descriptions)),
    renderActionsSection(actions),
    h('section', { id: 'run', class: 'run', 'aria-labelledby': 'run-title', hidden: true }),
    h('section', { id: 'result', 'aria-live': 'off' }));

  const side = h('aside', { class: 'turn-side', 'aria-label': 'Sources and past traces' },
    renderSourcesPanel(sources),
    h('section', { class: 'panel', 'aria-labelledby': 'past-title' },
      h('h2', { id: 'past-title' }, 'Past traces of this turn'),
      h('div', { id: 'past-traces' }, h('p', { class: 'muted small' }, 'Loading…'))));

  view().replaceChildren(h('div', { class: 'turn-layout' }, main, side));
  document.removeEventListener('selectionchange', onSelectionChange);
  document.addEventListener('selectionchange', onSelectionChange);
}

function onSelectionChange() {
  const button = byId('trace-selection');
  const root = byId('response');
  if (!button || !root || !state.turn) return;
  const picked = selectionInResponse(root);
  if (picked) {
    state.selection = picked;
    button.disabled = false;
    button.textContent = 'Trace the selected text (' + plural(picked.text.length, 'character') + ')';
  } else if (!document.activeElement || document.activeElement.id !== 'trace-selection') {
    state.selection = null;
    button.disabled = true;
    button.textContent = 'Trace the selected text';
  }
}
