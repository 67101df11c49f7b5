/* The turn's actions under the answer (GET /v1/turns/{id}/actions, no model call): each tool call the agent
 * made with its origin, the "steered by tool data" flag with the instruction quoted, where each argument value
 * came from, the sentences that report it, and "Trace this action" (the same cost gate as a sentence). A
 * sentence that reports an action carries a link to it, so sentence → action → cause reads on one screen. */

import { argumentList, goToAction, goToSentence, originBadge, sourceLink, sourceWords } from './action-view.js';
import { h } from './dom.js';
import { clip, lineSpan } from './format.js';
import { explain, label, labelNode, termHelp } from './glossary.js';
import { openActionGate } from './gate.js';
import { freshnessFindings, producedAt } from './freshness.js';
import { incidentLink } from './incident.js';
import { state } from './state.js';

function sentenceText(id) {
  const segment = state.turn.segments.segments.find((s) => s.id === id);
  return segment ? segment.text : '';
}

function steeredBox(a) {
  const inj = a.injection;
  const id = 'steered-' + a.id;
  const box = h('div', { class: 'steered', id, dataset: { sourceId: inj.source_id || '' } },
    h('p', { class: 'steered-title' }, h('span', { 'aria-hidden': 'true' }, '⚠ '),
      termHelp('suspect_injection', labelNode('suspect_injection', { capital: true }, { class: 'steered-label' }))),
    h('p', { class: 'steered-because', id: id + '-because' }, inj.because));
  if (inj.quote) {
    box.append(h('div', { class: 'cause-box' },
      h('span', { class: 'cause-lead' }, 'The instruction, as it stands in ', sourceWords(inj.source_id) + (inj.lines ? ', ' + lineSpan(inj.lines[0], inj.lines[1]) : '') + ':'),
      h('span', { class: 'cause-text' }, '“' + inj.quote + '”'),
      inj.source_id ? sourceLink(inj.source_id, inj.lines, inj.quote, (inj.lines ? lineSpan(inj.lines[0], inj.lines[1]) + ' — ' : '') + 'open the source here', { class: 'cause-open' }) : null));
  }
  if (inj.cues && inj.cues.length) box.append(h('p', { class: 'note' }, 'What makes it an instruction to the agent: ' + inj.cues.join('; ') + '.'));
  return box;
}

function reportedBy(a) {
  if (!a.reported_by.length) return h('p', { class: 'reported muted small' }, 'No sentence of the answer reports it.');
  return h('p', { class: 'reported' }, 'Reported by ',
    a.reported_by.map((sid, k) => {
      const button = h('button', { type: 'button', class: 'link-like report-link', dataset: { sentence: sid } },
        sid + ': “' + clip(sentenceText(sid), 90) + '”');
      button.addEventListener('click', () => goToSentence(sid));
      return [k ? ', ' : '', button];
    }));
}

function actionCard(a) {
  const titleId = 'action-' + a.id + '-title';
  const trace = h('button', { type: 'button', class: 'button trace-action', dataset: { action: a.id } },
    'Trace this action', h('span', { class: 'visually-hidden' }, ' ' + a.id + ' (' + a.tool + ')'));
  trace.addEventListener('click', () => openActionGate(a, trace));
  return h('li', {
    class: 'action-card' + (a.suspect_injection ? ' is-steered' : ''), id: 'action-' + a.id,
    dataset: { action: a.id, origin: a.origin, steered: String(a.suspect_injection) },
  },
  h('h3', { class: 'action-head', id: titleId },
    h('span', { class: 'action-id' }, a.id), ' ',
    h('code', { class: 'action-title' }, a.tool),
    a.call_id ? h('span', { class: 'action-call muted' }, ' · call ' + a.call_id) : null),
  h('p', { class: 'action-origin' }, 'Origin: ', originBadge(a.origin)),
  reportedBy(a),
  a.suspect_injection ? steeredBox(a) : null,
  producedAt(a.produced_at),
  freshnessFindings(a.freshness, a.source_ages),
  h('h4', { class: 'arg-title' }, 'Arguments and where each came from'),
  argumentList(a.argument_sources),
  h('div', { class: 'action-tools' }, trace, ' ', incidentLink(state.turn.turn_id, a.id)));
}

/** The "Actions" section, or null for a turn without tool calls. `data`: the actions' JSON, or {error}. */
export function renderActionsSection(data) {
  if (!data) return null;
  if (data.error) {
    return h('section', { id: 'actions', class: 'actions', 'aria-labelledby': 'actions-title' },
      h('h2', { id: 'actions-title' }, 'Actions'),
      h('p', { class: 'notice bad', role: 'alert' }, 'The actions could not be loaded: ' + (data.error.message || String(data.error))));
  }
  if (!data.actions.length) return null;
  return h('section', { id: 'actions', class: 'actions', 'aria-labelledby': 'actions-title' },
    h('h2', { id: 'actions-title' }, 'Actions'),
    h('p', { id: 'actions-summary', class: 'summary-line' }, data.summary),
    explain('action'),
    h('ol', { class: 'action-list', id: 'action-list', 'aria-labelledby': 'actions-title' }, data.actions.map(actionCard)));
}

/** After each sentence that reports actions, a small link to each (⚠ when the screen flags it steered). */
export function linkReportingSentences(root, data) {
  if (!data || data.error || !data.actions.length) return;
  const bySentence = new Map();
  for (const a of data.actions) {
    for (const sid of a.reported_by) {
      if (!bySentence.has(sid)) bySentence.set(sid, []);
      bySentence.get(sid).push(a);
    }
  }
  for (const [sid, actions] of bySentence) {
    const parts = root.querySelectorAll('.seg[data-seg="' + CSS.escape(sid) + '"]');
    if (!parts.length) continue;
    let after = parts[parts.length - 1];
    if (after.nextElementSibling && after.nextElementSibling.classList.contains('quote-mark') && after.nextSibling === after.nextElementSibling) after = after.nextElementSibling;
    const refs = h('span', { class: 'action-refs', dataset: { sentence: sid } },
      actions.map((a) => {
        const button = h('button', {
          type: 'button', class: 'action-ref' + (a.suspect_injection ? ' is-steered' : ''), dataset: { action: a.id, sentence: sid },
          'aria-label': 'Action ' + a.id + ': ' + a.tool + (a.suspect_injection ? ' (' + label('suspect_injection') + ')' : '') + ', which this sentence reports',
        }, a.suspect_injection ? h('span', { 'aria-hidden': 'true' }, '⚠ ') : null, a.id);
        button.addEventListener('click', () => goToAction(a.id));
        return button;
      }));
    after.after(refs);
  }
}
