/* The result's words: verdicts, roles, support labels and diagnoses in plain language. The glossary
 * (GET /v1/glossary) explains each; these are the short labels shown in place. */

import { LAYER_NAMES } from './icons.js';

export const VERDICT_TITLES = {
  attributed: 'Attributed',
  redundant: 'Carried by several sources',
  internal_knowledge: "Answered from the model's own knowledge",
  no_information: 'No information',
};

export const ROLE_WORDS = {
  grounds: 'grounds the claim',
  distractor: 'distracts: removing it raised support',
  irrelevant: 'no effect',
  redundant: 'redundant: it carries the claim alone, and so do others',
};

export const ROLE_LEGEND = {
  grounds: 'grounds: removing it lowers support',
  distractor: 'distracts: removing it raises support',
  irrelevant: 'no effect',
  redundant: 'redundant: carries the claim alone, as others do',
};

/** Diagnoses (the estimator's words) as a reader would say them. */
const DIAGNOSIS_WORDS = {
  'model knew it, data agrees': 'the model already knew this, and your data agrees',
};

export function diagnosisWords(diagnosis) {
  return DIAGNOSIS_WORDS[diagnosis] || diagnosis;
}

export function isAlarm(diagnosis) {
  return /misread|overrode/.test(diagnosis);
}

export function verdictExplanation(r) {
  const layers = r.contributing_layers.map((l) => (LAYER_NAMES[l] || l).toLowerCase());
  if (r.verdict === 'attributed') {
    return 'Removing the ' + (layers.join(' and ') || 'context') + ' layer' + (layers.length === 1 ? '' : 's') + ' lowered the support for this claim: that is where it comes from. The quotes below show the exact text.';
  }
  if (r.verdict === 'redundant') {
    return 'Removing everything changed the answer, but removing any one layer did not — each carries this independently, so no single layer is solely responsible. The layer scores below are real zeros for that reason; the quotes are the answer here.';
  }
  if (r.verdict === 'internal_knowledge') {
    return 'The claim survives the removal of the entire context: no source in this turn carries it. Not necessarily wrong — just outside what this turn can verify.';
  }
  return r.verdict_text;
}

/** What a source's span check found, in words (instructions direct rather than state). */
export function verdictWords(layer, v) {
  if (v.no_information) return 'no information';
  if (v.verdict === 'contradicted') return 'contradicts the claim';
  if (layer === 'instructions') return v.verdict === 'supported' ? 'directs this response' : 'no instruction here bears on this';
  return v.verdict === 'supported' ? 'states the claim' : 'says nothing about this claim';
}

export const ESTIMATOR_WORDS = {
  judged: 'judge’s 1–9 score',
  expected: 'judge’s expected score (from its probabilities)',
  logprob: 'log-probability of the claim (nats)',
  proxy: 'log-probability from a proxy model (nats)',
};

/** A proxy trace's outcome in one word or two (the line beside it is the result's own `confirmation`). */
export const PROXY_WORDS = {
  confirmed: 'Confirmed',
  fallback: 'Not confirmed',
};
