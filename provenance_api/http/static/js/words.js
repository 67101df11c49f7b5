/* Which of the result's words applies where: a verdict, a role, what a source's span check found, a
 * diagnosis, an estimator. The words themselves are the glossary's labels (GET /v1/glossary, read through
 * glossary.js), defined once on the server; this module only picks the key. */

import { diagnosisLabel } from './glossary.js';
import { LAYER_NAMES } from './icons.js';

/** The verdicts a result can carry, in the order a filter offers them. */
export const VERDICTS = ['attributed', 'redundant', 'internal_knowledge', 'no_information'];

/** The roles of a layer or source, in the order the chart's legend shows them. */
export const ROLES = ['grounds', 'distractor', 'irrelevant', 'redundant'];

/** The estimators a trace list can be filtered by. */
export const ESTIMATORS = ['judged', 'expected', 'logprob', 'both'];

/** The diagnosis (the estimator's words) as a reader is shown it. */
export function diagnosisWords(diagnosis) {
  return diagnosisLabel(diagnosis);
}

export function isAlarm(diagnosis) {
  return /misread|overrode/.test(diagnosis);
}

export function verdictExplanation(r) {
  const layers = r.contributing_layers.map((l) => (LAYER_NAMES[l] || l).toLowerCase());
  const action = !!(r.target && r.target.kind === 'action');
  if (r.verdict === 'attributed') {
    return 'Removing the ' + (layers.join(' and ') || 'context') + ' layer' + (layers.length === 1 ? '' : 's') + (action
      ? ' lowered how strongly the context calls for this call: that is what made the agent make it. The quotes below show the exact text.'
      : ' lowered the support for this claim: that is where it comes from. The quotes below show the exact text.');
  }
  if (r.verdict === 'redundant') {
    return 'Removing everything changed the answer, but removing any one layer did not — each carries this independently, so no single layer is solely responsible. Their drops below are real zeros for that reason: each part that carries the claim alone is drawn with its score kept alone instead, and the quotes show the text.';
  }
  if (r.verdict === 'internal_knowledge') {
    return action
      ? 'The call survives the removal of the entire context: nothing the agent had read calls for it. Not necessarily wrong — just outside what this turn can explain.'
      : 'The claim survives the removal of the entire context: no source in this turn carries it. Not necessarily wrong — just outside what this turn can verify.';
  }
  return r.verdict_text;
}

/** Which label says what a source's span check found: {key, instructions} for label() (an instruction
 * directs rather than states, so the instructions layer has words of its own). */
export function supportLabel(layer, v) {
  if (v.no_information) return { key: 'verdict.no_information' };
  return { key: 'support.' + v.verdict, instructions: layer === 'instructions' };
}

/** A proxy trace's outcome (the line beside it is the result's own `confirmation`). */
export function proxyKey(confirmed) {
  return confirmed ? 'proxy.confirmed' : 'proxy.fallback';
}
