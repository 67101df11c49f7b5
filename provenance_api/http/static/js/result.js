/* A finished trace's result: the verdict and its numbers (Γ, s(1), s(0)) each explained, what removing each
 * part did (the chart), where the claim comes from (the tree, with verified quotes), warnings, and the
 * model calls and cost in the same five numbers as the gate and the progress panel. From here: the
 * model-call panel and the exports. */

import { h } from './dom.js';
import { renderChart } from './chart.js';
import { callsButton } from './calls.js';
import { exportActions } from './export.js';
import { fmtBilled, fmtDate, fmtScore } from './format.js';
import { explain, labelNode, termHelp, warningList } from './glossary.js';
import { callsFigures, callsSentence } from './numbers.js';
import { renderProxy } from './proxy.js';
import { state } from './state.js';
import { renderTree } from './tree.js';
import { diagnosisWords, isAlarm, verdictExplanation } from './words.js';

function numbersExplained(r) {
  const wrap = h('div', { class: 'explains', id: 'numbers-explained' },
    explain('gamma', 'Γ = ' + fmtScore(r.gamma)),
    explain('s_all', 's(1) = ' + fmtScore(r.s_all)),
    explain('s_none', 's(0) = ' + fmtScore(r.s_none)));
  const tauGamma = r.thresholds && r.thresholds.tau_gamma_nats !== undefined ? r.thresholds.tau_gamma_nats : (r.params || {}).tau_gamma;
  if (typeof tauGamma === 'number') wrap.append(explain('tau_gamma', 'τΓ = ' + tauGamma.toFixed(2)));
  return wrap;
}

export function renderResult(t) {
  const r = t.result;
  state.resultTrace = t;
  const wrap = h('div', { class: 'panel', id: 'result-panel' });
  const estimator = r.estimator || 'judged';
  // The estimator of the scores shown: after a proxy's fallback the judge's; under both the judged trace's
  // (its log-probability trace and their agreement are beside it in the result).
  const scores = (estimator === 'proxy' && r.confirmed === false) || estimator === 'both' ? 'judged' : estimator;
  wrap.append(
    h('h2', { id: 'result-title', tabindex: '-1' }, 'Result'),
    h('blockquote', { class: 'claim' }, t.claim),
    h('div', { id: 'verdict', class: 'verdict-box ' + r.verdict, dataset: { verdict: r.verdict } },
      h('p', { class: 'verdict-title' }, labelNode('verdict.' + r.verdict, { capital: true, fallback: r.verdict_text })),
      explain('verdict.' + r.verdict),
      h('p', null, verdictExplanation(r)),
      h('p', { id: 'gamma', class: 'gamma' },
        'Γ = ' + fmtScore(r.gamma) + ' — support with every source s(1) = ' + fmtScore(r.s_all) + ', with none s(0) = ' + fmtScore(r.s_none) + '.'),
      numbersExplained(r),
      r.diagnosis ? h('p', null, h('span', { id: 'claim-diagnosis', class: 'diag' + (isAlarm(r.diagnosis) ? ' alarm' : ' neutral'), dataset: { diagnosis: r.diagnosis } }, diagnosisWords(r.diagnosis))) : null,
      r.round2_skipped_reason ? h('p', { class: 'note' }, 'Per-source round skipped: ' + r.round2_skipped_reason) : null),
    h('div', { class: 'result-actions', id: 'result-actions' }, callsButton(t), exportActions(t)));
  if (estimator === 'proxy') wrap.append(renderProxy(r, t));

  wrap.append(h('h3', { id: 'chart-title' }, 'What removing each part did'));
  wrap.append(renderChart(r));

  wrap.append(h('h3', { id: 'tree-title' }, 'Where it comes from'));
  wrap.append(renderTree(r));

  if (r.omitted.length) wrap.append(h('p', { class: 'note warn' }, '⚠ Not checked (over the source limit): ' + r.omitted.join(', ') + '.'));
  if (r.unscorable.length) wrap.append(h('p', { class: 'note warn' }, '⚠ Attachments that could not be scored: ' + r.unscorable.join(', ') + '.'));
  if (r.warnings.length) wrap.append(h('h3', { id: 'warnings-title' }, 'Warnings'), warningList(r.warnings, { id: 'result-warnings' }));

  const saved = r.calls ? r.calls.saved : 0;
  wrap.append(
    h('h3', { id: 'calls-title' }, 'Model calls and cost'),
    callsFigures(t.calls, { id: 'result-calls-figures', saved, cost: r.cost_usd }),
    h('p', { class: 'calls-line', id: 'result-calls' },
      callsSentence(t.calls) + ' · cost ' + fmtBilled(r.cost_usd) + ' · judge ' + r.model + ' · ' + fmtDate(t.finished_at)),
    h('p', { class: 'calls-line', id: 'result-estimator' }, 'Scores: ',
      termHelp('estimator.' + scores, labelNode('estimator.' + scores))));
  return wrap;
}
