/* One set of numbers: every place that reports a trace's model calls (the gate, the progress panel, the
 * result, a failed trace) uses the same five words, with the service's values:
 *   planned  the gate's worst case, reserved from the budget
 *   made     calls sent to the provider (failed ones included; not cached answers)
 *   cached   answered from the judgement cache: not sent, not billed, $0
 *   billed   calls the provider charged for
 *   failed   sent calls that failed */

import { h } from './dom.js';
import { explain } from './glossary.js';
import { fmtBilled, fmtInt } from './format.js';

export const CALL_WORDS = ['planned', 'made', 'cached', 'billed', 'failed'];

const LABELS = {
  planned: 'Planned (worst case)',
  made: 'Made (sent to the provider)',
  cached: 'Answered from cache ($0)',
  billed: 'Billed',
  failed: 'Failed',
  saved: 'Reused within this trace (not calls)',
};

/** The five counts of a TraceOut's calls (a count the service did not send reads as null). */
export function callCounts(calls) {
  const c = calls || {};
  const out = {};
  for (const word of CALL_WORDS) out[word] = typeof c[word] === 'number' ? c[word] : null;
  return out;
}

/** One sentence: "18 made of 39 planned · 3 answered from cache ($0) · 18 billed · 0 failed". */
export function callsSentence(calls) {
  const c = callCounts(calls);
  const parts = [fmtInt(c.made) + ' made of ' + fmtInt(c.planned) + ' planned'];
  if (c.cached !== null) parts.push(fmtInt(c.cached) + ' answered from cache ($0)');
  parts.push(fmtInt(c.billed) + ' billed');
  if (c.failed !== null) parts.push(fmtInt(c.failed) + ' failed');
  return parts.join(' · ');
}

/** The counts as a definition list, each with its explanation; `extra` adds the measurements answered from the trace's memo and the cost. */
export function callsFigures(calls, extra) {
  const c = callCounts(calls);
  const more = extra || {};
  const list = h('dl', { class: 'calls-figures', id: more.id || null });
  const row = (word, value, key) => {
    list.append(h('div', { class: 'calls-figure', dataset: { count: word } },
      h('dt', null, LABELS[word] || word),
      h('dd', null, h('span', { class: 'count', dataset: { value: String(value) } }, fmtInt(value)), explain(key))));
  };
  for (const word of CALL_WORDS) if (c[word] !== null) row(word, c[word], 'calls.' + word);
  if (typeof more.saved === 'number' && more.saved > 0) row('saved', more.saved, 'calls.saved');
  if ('cost' in more) {
    list.append(h('div', { class: 'calls-figure', dataset: { count: 'cost' } },
      h('dt', null, 'Cost billed'), h('dd', null, h('span', { class: 'count' }, fmtBilled(more.cost)))));
  }
  return list;
}
