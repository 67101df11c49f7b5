/* Every number and label explained where it appears: the texts come from GET /v1/glossary (one line a
 * non-specialist reads, and a paragraph one click away), and so do the short labels shown in place of a
 * value (a verdict, a role, what a source says, an estimator): the page holds no copy of them.
 *   label(key)            the word shown for a value (labelNode: the same in a <span> kept up to date);
 *   explain(key)          a <details>: the one-line explanation always shown, the detail on a click;
 *   termHelp(key, label)  a small "?" button beside a repeated label (a role, a support word) that
 *                         shows the same two texts in place.
 * The glossary needs no key, so the page loads it before its first view. Until it has loaded (or when it
 * could not be), a label reads as the value's own name (internal_knowledge: "internal knowledge"); when
 * it arrives later, every labelNode on the page is rewritten with the glossary's word. */

import { api } from './api.js';
import { h } from './dom.js';

let terms = new Map();
let loading = null;
let serial = 0;
let retries = 0;
let retryTimer = 0;

/** Load the glossary once per page (it needs no sign-in); the page works without it. A failed load is
 * tried again a few times, and on the next view. */
export function loadGlossary() {
  if (!loading) {
    window.clearTimeout(retryTimer);
    loading = api('/v1/glossary')
      .then((data) => {
        terms = new Map((data.terms || []).map((t) => [t.key, t]));
        refreshLabels();
      })
      .catch(() => {
        loading = null;
        if (retries < 4) {
          retries += 1;
          retryTimer = window.setTimeout(loadGlossary, 2000 * 2 ** retries);
        }
      });
  }
  return loading || Promise.resolve();
}

function capitalise(text) {
  return text ? text.charAt(0).toUpperCase() + text.slice(1) : text;
}

/**
 * The word shown in place of a value: the glossary's label of `key` (verdict.attributed, role.grounds,
 * support.silent, estimator.judged, proxy.confirmed …). opts: {instructions: on a source of the
 * instructions layer (its instruction label, where the term has one), capital: first letter upper case,
 * fallback: the words to show while the glossary is missing (else the value's own name)}.
 */
export function label(key, opts) {
  const o = opts || {};
  const t = terms.get(key);
  const text = t ? (o.instructions && t.instruction_label) || t.label
    : o.fallback || key.slice(key.lastIndexOf('.') + 1).replace(/_/g, ' ');
  return o.capital ? capitalise(text) : text;
}

/** label(key, opts) in a <span> (props: its other attributes), rewritten in place when the glossary
 * arrives after it was drawn. */
export function labelNode(key, opts, props) {
  const o = opts || {};
  const dataset = { glossaryLabel: key };
  if (o.instructions) dataset.labelInstructions = 'true';
  if (o.capital) dataset.labelCapital = 'true';
  if (o.fallback) dataset.labelFallback = o.fallback;
  const p = Object.assign({}, props || {});
  p.dataset = Object.assign({}, p.dataset || {}, dataset);
  return h('span', p, label(key, o));
}

function refreshLabels() {
  for (const el of document.querySelectorAll('[data-glossary-label]')) {
    el.textContent = label(el.dataset.glossaryLabel, {
      instructions: el.dataset.labelInstructions === 'true',
      capital: el.dataset.labelCapital === 'true',
      fallback: el.dataset.labelFallback,
    });
  }
}

/** A diagnosis the estimator returned (its text), as the glossary words it; itself when none does. */
export function diagnosisLabel(diagnosis) {
  for (const t of terms.values()) if (t.value === diagnosis) return t.label;
  return diagnosis;
}

export function term(key) {
  return terms.get(key) || null;
}

/** Every term of the glossary, in its order (none until it has loaded). */
export function allTerms() {
  return [...terms.values()];
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
