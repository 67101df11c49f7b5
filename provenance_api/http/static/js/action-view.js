/* An action's provenance, drawn the same way on the turn page (GET /v1/turns/{id}/actions) and in a trace of
 * the action: where each argument value came from (a source and its line, the user's request, or nowhere),
 * the origin as the glossary words it, and the way along the chain — sentence → action → cause — as buttons
 * that scroll to and focus the other end. */

import { announce, h } from './dom.js';
import { clip, lineSpan } from './format.js';
import { labelNode, termHelp } from './glossary.js';
import { openSource } from './sources.js';
import { state } from './state.js';

/** A source id in words: the user's request, the earlier conversation, or "s0 · its label". */
export function sourceWords(id) {
  if (id === 'query') return "the user's request";
  if (/^history:/.test(id)) return 'the earlier conversation (' + id + ')';
  const known = state.turn && state.turn.sourceById[id];
  return known ? id + ' · ' + known.label : id;
}

/** The source named by `id` at `lines`, as a button that opens it there (`mark` marked) when the turn's
 * sources hold it, else its name in words. `text`: the button's words (default: the source and lines). */
export function sourceLink(id, lines, mark, text, props) {
  const where = text || sourceWords(id) + (lines ? ', ' + lineSpan(lines[0], lines[1]) : '');
  const known = state.turn && state.turn.sourceById[id];
  const dataset = { sourceId: id };
  if (lines) { dataset.lineStart = String(lines[0]); dataset.lineEnd = String(lines[1]); }
  const p = Object.assign({}, props || {});
  if (!known) return h('span', Object.assign(p, { class: ((p.class || '') + ' src-ref').trim(), dataset }), where);
  const button = h('button', Object.assign(p, { type: 'button', class: ((p.class || '') + ' link-like src-ref').trim(), dataset }), where);
  button.addEventListener('click', () => openSource(id, lines ? lines[0] : null, lines ? lines[1] : null, button, mark || null));
  return button;
}

/** The origin of an action as a badge with the glossary's words and its "?" explanation. */
export function originBadge(origin) {
  const key = 'origin.' + origin;
  return h('span', { class: 'origin', dataset: { origin } },
    termHelp(key, labelNode(key, null, { class: 'badge origin-badge origin-' + origin })));
}

function argumentItem(a) {
  const where = a.source_id === null
    ? h('span', { class: 'arg-nowhere' }, 'nowhere the agent could read: made up or computed')
    : [sourceLink(a.source_id, a.lines, a.value),
      a.also_in && a.also_in.length ? h('span', { class: 'muted' }, ' (also in ' + a.also_in.join(', ') + ')') : null];
  return h('li', { class: 'arg', dataset: { path: a.path, sourceId: a.source_id === null ? 'none' : a.source_id } },
    h('span', { class: 'arg-value' }, h('code', { class: 'arg-path' }, a.path), ' = ', h('code', { class: 'arg-val' }, clip(a.value, 200))),
    h('span', { class: 'arg-where' }, h('span', { 'aria-hidden': 'true' }, ' ← '), h('span', { class: 'visually-hidden' }, ', from '), where),
    a.quote && a.source_id !== null ? h('span', { class: 'arg-quote' }, '“' + clip(a.quote, 240) + '”') : null,
    a.decisive ? null : h('span', { class: 'note' }, 'Free text: not counted for the origin.'));
}

/** Where each argument value came from, one line each (the first source holding it, or nowhere). */
export function argumentList(args, props) {
  const list = args || [];
  if (!list.length) return h('p', Object.assign({ class: 'muted small' }, props || {}), 'No argument value to look up (none, or only booleans and small numbers).');
  return h('ul', Object.assign({ class: 'arg-list' }, props || {}), list.map(argumentItem));
}

// ---- the chain: sentence → action → cause

function mark(elements) {
  document.querySelectorAll('.chain-target').forEach((el) => el.classList.remove('chain-target'));
  elements.forEach((el) => el.classList.add('chain-target'));
}

function land(el, words, scroll) {
  if (!el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1');
  if (scroll) scroll();
  else el.scrollIntoView({ block: 'center', inline: 'nearest' });
  el.focus({ preventScroll: true });
  announce(words);
}

const MARGIN = 16;

/** Scroll as little as shows the card from its head to the cause (the steered flag; else the sentences
 * that report it), so the sentence one came from may stay on the screen; the card's top when it cannot. */
function scrollToChain(card) {
  const top = card.getBoundingClientRect().top;
  const end = (card.querySelector('.steered') || card.querySelector('.reported') || card).getBoundingClientRect().bottom;
  if (end - top + 2 * MARGIN > window.innerHeight) card.scrollIntoView({ block: 'start' });
  else if (top < MARGIN) window.scrollBy(0, top - MARGIN);
  else if (end > window.innerHeight - MARGIN) window.scrollBy(0, end - window.innerHeight + MARGIN);
}

/** Scroll to the action's card in the turn's actions, mark and focus it. */
export function goToAction(id) {
  const card = document.getElementById('action-' + id);
  if (!card) return;
  mark([card]);
  const title = card.querySelector('.action-title');
  land(card, 'Action ' + id + (title ? ': ' + title.textContent : ''), () => scrollToChain(card));
}

/** Scroll to the answer's sentence, mark its parts and focus the first. */
export function goToSentence(id) {
  const parts = Array.from(document.querySelectorAll('#response .seg[data-seg="' + CSS.escape(id) + '"]'));
  if (!parts.length) return;
  mark(parts);
  land(parts[0], 'Sentence ' + id + ': ' + parts.map((p) => p.textContent).join(''));
}

/** Scroll to a source's node in the result's tree, mark and focus it. */
export function goToTreeSource(id) {
  const node = document.querySelector('#tree .src-node[data-source-id="' + CSS.escape(id) + '"]');
  if (!node) return;
  mark([node]);
  land(node, 'Source ' + sourceWords(id) + ' in the tree');
}
