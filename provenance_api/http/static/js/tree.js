/* Where the claim comes from: the sources by effect (largest first), or layers then their sources (order.js),
 * each with its drop and role — a source that carries the claim alone with its score kept alone — its span
 * check (what it says about the claim, the verified quote shown readably with the quoted words marked, the
 * judge's self-reported confidence), its diagnosis, and the probe beside a grounding source (a sentence's;
 * a trace of an action tags the source its injection finding names instead). Above them, "How to read
 * this": every term of the glossary with its definition. */

import { h } from './dom.js';
import { readableQuote } from './evidence.js';
import { fmtDrop, fmtScore, lineSpan } from './format.js';
import { allTerms, labelNode, termHelp } from './glossary.js';
import { kindIcon, kindName, LAYER_NAMES } from './icons.js';
import { byEffect, carriesAlone } from './order.js';
import { probeControl } from './probe.js';
import { loadSource, openSource } from './sources.js';
import { resultEnvelope } from './envelope.js';
import { state } from './state.js';
import { diagnosisWords, isAlarm, supportLabel } from './words.js';

function roleWords(role) {
  return termHelp('role.' + role, labelNode('role.' + role));
}

/** Every term the glossary holds, each with its label, its one line and its paragraph. */
function howToRead() {
  const terms = allTerms();
  if (!terms.length) return null;
  const list = h('dl', { class: 'glossary-list explain', id: 'how-to-read-terms' },
    terms.map((t) => h('div', { class: 'glossary-entry', dataset: { glossaryTerm: t.key } },
      h('dt', null, h('span', { class: 'glossary-label' }, t.label),
        t.instruction_label ? h('span', { class: 'muted' }, ' · ' + t.instruction_label) : null),
      h('dd', null, h('span', { class: 'short' }, t.short), ' ', h('span', { class: 'detail' }, t.detail)))));
  return h('details', { class: 'how-to-read', id: 'how-to-read' },
    h('summary', null, 'How to read this: every word and number, defined (' + terms.length + ')'), list);
}

/** Whether the measurement says the source carries the claim: its removal lowers the score, or kept alone
 * it keeps it. */
function carries(s) {
  return !s.no_information && (s.role === 'grounds' || carriesAlone(s));
}

export function renderTree(r, order) {
  const tree = h('ul', { class: 'tree', id: 'tree', 'aria-labelledby': 'tree-title', dataset: { order: order || 'effect' } });
  if (order === 'layers') {
    const layerOrder = r.layers.map((l) => l.layer);
    for (const s of r.sources) if (!layerOrder.includes(s.layer)) layerOrder.push(s.layer);
    for (const layerName of layerOrder) {
      const layer = r.layers.find((l) => l.layer === layerName);
      const sources = r.sources.filter((s) => s.layer === layerName);
      const head = h('div', { class: 'layer-head' },
        (LAYER_NAMES[layerName] || layerName) + ' (' + sources.length + ')',
        layer ? h('span', { class: 'role' }, ' · Δ ' + fmtDrop(layer.delta),
          carriesAlone(layer) ? [' · ', labelNode('alone'), ' ' + fmtScore(layer.alone)] : null, ' · ',
          layer.no_information ? labelNode('verdict.no_information') : roleWords(layer.role)) : null);
      const children = h('ul');
      for (const s of sources) children.append(renderSourceNode(s, r, false));
      tree.append(h('li', { dataset: { layer: layerName } }, head, children));
    }
  } else {
    for (const s of byEffect(r.sources, r)) tree.append(renderSourceNode(s, r, true));
  }
  const guide = howToRead();
  return guide ? h('div', null, guide, tree) : tree;
}

let quoteSerial = 0;

/** The quote box: the quote at once, then (when its source is loaded) the readable view with the span
 * marked; below it the button that opens the source at the quote. */
function quoteBox(s, v) {
  quoteSerial += 1;
  const id = 'quote-' + quoteSerial;
  const text = h('span', { class: 'quote-text', id }, '“' + v.quote + '”');
  const button = h('button', {
    type: 'button', class: 'quote-button link-like ' + v.verdict, 'aria-describedby': id,
    dataset: { sourceId: s.source_id, lineStart: String(v.line_start), lineEnd: String(v.line_end), quote: v.quote },
  }, lineSpan(v.line_start, v.line_end) + ' — open the source here', h('span', { class: 'visually-hidden' }, ' (' + s.label + ')'));
  button.addEventListener('click', () => openSource(s.source_id, v.line_start, v.line_end, button, v.quote));
  const box = h('div', { class: 'quote-box ' + v.verdict, dataset: { sourceId: s.source_id } }, text, button);
  loadSource(s.source_id).then((src) => {
    const readable = readableQuote(src.lines.join('\n'), v.quote);
    if (readable) {
      text.replaceChildren(readable);
      box.dataset.evidence = readable.dataset.format;
    }
  }).catch(() => { /* the plain quote stays */ });
  return box;
}

/** What the span check found. On a source that carries the claim (by its drop, or kept alone) a silent
 * answer is not "says nothing about this claim" — the measurement says it carries it — but its own line:
 * the span check found no quote (the glossary's support.no_quote). */
function spanCheck(s, v) {
  const span = [];
  if (v.quote) span.push(quoteBox(s, v));
  const which = !v.no_information && v.verdict === 'silent' && carries(s)
    ? { key: 'support.no_quote', instructions: s.layer === 'instructions' }
    : supportLabel(s.layer, v);
  const words = labelNode(which.key, { instructions: which.instructions }, { class: 'words' });
  span.push(h('p', { class: 'verdict-words', dataset: { support: which.key } },
    v.no_information ? words : termHelp(which.key, words),
    v.no_information ? '' : h('span', { class: 'confidence' }, ' · ',
      termHelp('confidence', "judge's own confidence " + (v.confidence === null ? '—' : v.confidence.toFixed(2))))));
  if (v.no_information && v.reason) span.push(h('span', { class: 'note' }, v.reason));
  else if (v.reason) span.push(h('span', { class: 'note' }, 'Judge: ' + v.reason));
  if (v.downgraded) span.push(h('span', { class: 'note warn' }, '⚠ Downgraded: the quoted text could not be found in the source, so this verdict was lowered to “silent”.'));
  return span;
}

/** A tag on the source an action's injection finding names. */
function injectionTag(inj) {
  return h('p', { class: 'inj-tag' + (inj.suspected ? ' suspected' : '') },
    inj.suspected ? '⚠ The instruction this call obeyed is here (the injection finding above).' : 'Holds text aimed at the agent; the measurement does not show it steered this call.');
}

/** The source's measurements in its head: its drop, its score kept alone (against s(1)), its role. */
function measured(s, r, withLayer) {
  const parts = [' · ' + s.source_id + ' · ' + kindName(s.kind) + (withLayer ? ' · ' + (LAYER_NAMES[s.layer] || s.layer) : '')];
  if (s.delta !== null) parts.push(' · Δ ' + fmtDrop(s.delta));
  if (typeof s.alone === 'number') {
    parts.push(' · ', h('span', { class: 'alone-score', dataset: { alone: String(s.alone) } },
      labelNode('alone'), ' ' + fmtScore(s.alone) + ' (s(1) ' + fmtScore(r.s_all) + ')'));
  }
  if ((s.delta !== null || carriesAlone(s)) && s.role) parts.push(' · ', roleWords(s.role));
  return h('span', { class: 'role' }, parts);
}

function renderSourceNode(s, r, withLayer) {
  const claimDiagnosis = r.diagnosis;
  const action = !!r.target;
  const known = state.turn.sourceById[s.source_id] || {};
  const head = h('div', { class: 'src-head' }, kindIcon(s.kind), h('span', null, s.label, measured(s, r, withLayer)));
  const node = h('li', { class: 'src-node', dataset: { sourceId: s.source_id, layer: s.layer, role: s.role || 'none' } }, head);
  if (r.injection && r.injection.source_id === s.source_id) node.append(injectionTag(r.injection));
  const v = s.support;
  // the probe regenerates an answer: it is for sentences only
  if (!action && (s.role === 'grounds' || (v && v.verdict === 'supported' && v.quote && !v.downgraded))) node.append(probeControl(s));
  const span = h('div', { class: 'span-node' });
  if (!v) span.append(h('p', { class: 'note' }, 'Not span-checked.'));
  else span.append(...spanCheck(s, v));
  if (s.diagnosis && s.diagnosis !== claimDiagnosis) {
    const alarm = isAlarm(s.diagnosis);
    span.append(h('span', { class: 'diag' + (alarm ? ' alarm' : ''), dataset: { diagnosis: s.diagnosis } }, (alarm ? '⚠ ' : '') + diagnosisWords(s.diagnosis)));
  }
  if (known.unversioned) span.append(h('span', { class: 'note warn' }, 'current text; an edit since this turn can\'t be detected'));
  if (known.truncated_for_span_check) span.append(h('span', { class: 'note' }, 'Only the first part of this source was checked for a quote.'));
  span.append(...[resultEnvelope(s, r)].filter(Boolean));
  node.append(span);
  return node;
}
