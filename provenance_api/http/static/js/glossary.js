/* Every number and label explained where it appears: the texts come from GET /v1/glossary (one line a
 * non-specialist reads, and a paragraph one click away). Two forms:
 *   explain(key)          a <details>: the one-line explanation always shown, the detail on a click;
 *   termHelp(key, label)  a small "?" button beside a repeated label (a role, a support word) that
 *                         shows the same two texts in place. */

import { api } from './api.js';
import { h } from './dom.js';

let terms = new Map();
let loading = null;
let serial = 0;

/** Load the glossary once per page (after sign-in); the page works without it. */
export function loadGlossary() {
  if (!loading) {
    loading = api('/v1/glossary')
      .then((data) => { terms = new Map((data.terms || []).map((t) => [t.key, t])); })
      .catch(() => { loading = null; });
  }
  return loading || Promise.resolve();
}

export function term(key) {
  return terms.get(key) || null;
}

/** The one-line explanation of a term ('' when the glossary lacks it). */
export function short(key) {
  const t = terms.get(key);
  return t ? t.short : '';
}

/** A <details> whose summary is the term's one-line explanation and whose body is its detail. */
export function explain(key, lead) {
  const t = terms.get(key);
  if (!t) return null;
  return h('details', { class: 'explain', dataset: { term: key } },
    h('summary', null, lead ? h('span', { class: 'explain-lead' }, lead) : null, h('span', { class: 'short' }, t.short)),
    h('p', { class: 'detail' }, t.detail));
}

/** A label with a "?" toggle that shows the term's explanation (one line, then the detail) below it. */
export function termHelp(key, label) {
  const wrap = h('span', { class: 'term', dataset: { term: key } }, label);
  const t = terms.get(key);
  if (!t) return wrap;
  serial += 1;
  const id = 'term-' + serial;
  const pop = h('span', { class: 'term-pop', id, hidden: true },
    h('span', { class: 'short' }, t.short), ' ', h('span', { class: 'detail' }, t.detail));
  const button = h('button', {
    type: 'button', class: 'term-toggle', 'aria-expanded': 'false', 'aria-controls': id,
    'aria-label': 'What “' + (typeof label === 'string' ? label : label.textContent || t.label) + '” means',
  }, '?');
  button.addEventListener('click', () => {
    const open = button.getAttribute('aria-expanded') !== 'true';
    button.setAttribute('aria-expanded', String(open));
    pop.hidden = !open;
  });
  wrap.append(' ', button, pop);
  return wrap;
}

/** Close every open "?" explanation (Escape). */
export function closeTermHelp() {
  document.querySelectorAll('.term-toggle[aria-expanded="true"]').forEach((b) => {
    b.setAttribute('aria-expanded', 'false');
    const pop = document.getElementById(b.getAttribute('aria-controls'));
    if (pop) pop.hidden = true;
  });
}

/** The glossary key of a warning sentence, when one explains it. */
export function warningKey(text) {
  if (/look-?alike/i.test(text)) return 'warning.lookalike';
  if (/paraphras|reword/i.test(text)) return 'warning.paraphrase';
  if (/cut to|was cut|scoring window|first part|truncat/i.test(text)) return 'warning.truncated';
  return null;
}

/** A list of warnings, each with its explanation when the glossary has one. */
export function warningList(warnings, props) {
  return h('ul', Object.assign({ class: 'warnings', 'aria-label': 'Warnings' }, props || {}),
    warnings.map((w) => {
      const key = warningKey(w);
      return h('li', { dataset: key ? { term: key } : null }, h('span', { class: 'warning-text' }, '⚠ ' + w), key ? explain(key) : null);
    }));
}
