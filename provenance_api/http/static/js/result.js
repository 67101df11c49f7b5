/* A finished trace's result: the verdict and its numbers (Γ, s(1), s(0)) each explained, what removing each
 * part did (the chart), where the claim comes from (the tree, with verified quotes), warnings, and the
 * model calls and cost in the same five numbers as the gate and the progress panel. From here: the
 * model-call panel and the exports. A trace of an action is drawn the same way, headed by the call, with
 * the injection finding first and where each argument value came from. */

import { argumentList, goToAction, goToTreeSource, sourceLink, sourceWords } from './action-view.js';
import { h } from './dom.js';
import { renderChart } from './chart.js';
import { callsButton } from './calls.js';
import { actionSourceAges } from './envelope.js';
import { exportActions } from './export.js';
import { freshnessFindings } from './freshness.js';
import { incidentLink } from './incident.js';
import { fmtBilled, fmtDate, fmtDrop, fmtScore, lineSpan } from './format.js';
import { explain, labelNode, termHelp, warningList } from './glossary.js';
import { callsFigures, callsSentence } from './numbers.js';
import { currentOrder, orderToggle } from './order.js';
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

/** The action a trace traced: its id, tool and call id, and the call exactly as traced. */
function actionHead(target) {
  const go = h('button', { type: 'button', class: 'link-like', id: 'result-go-action' }, 'Show ' + target.id + ' in the turn\'s actions');
  go.addEventListener('click', () => goToAction(target.id));
  return [
    h('h3', { id: 'result-target-title', class: 'target-title' },
      'Action ' + target.id + ': ', h('code', null, target.tool), target.call_id ? ' · call ' + target.call_id : ''),
    h('pre', { class: 'claim call-text', id: 'result-call' }, target.text),
    document.getElementById('action-' + target.id) ? h('p', { class: 'small' }, go) : null,
  ].filter(Boolean);
}

/** The injection finding of an action's trace: suspected or not, in words, the instruction quoted from its
 * source, and that source's place in the tree below. */
function injectionFinding(inj) {
  const box = h('div', { id: 'injection', class: 'injection-box' + (inj.suspected ? ' suspected' : ''), dataset: { suspected: String(inj.suspected), sourceId: inj.source_id || '' } },
    h('p', { class: 'injection-title' }, h('span', { 'aria-hidden': 'true' }, inj.suspected ? '⚠ ' : '✓ '),
      termHelp('injection', labelNode('injection', { capital: true })), ': ',
      h('strong', { id: 'injection-verdict' }, inj.suspected ? 'suspected' : 'not suspected')),
    h('p', { id: 'injection-because' }, inj.because));
  if (inj.quote) {
    box.append(h('div', { class: 'cause-box', id: 'injection-quote' },
      h('span', { class: 'cause-lead' }, 'The instruction, as it stands in ' + sourceWords(inj.source_id) + (inj.lines ? ', ' + lineSpan(inj.lines[0], inj.lines[1]) : '') + ':'),
      h('span', { class: 'cause-text' }, '“' + inj.quote + '”'),
      inj.source_id ? sourceLink(inj.source_id, inj.lines, inj.quote, (inj.lines ? lineSpan(inj.lines[0], inj.lines[1]) + ' — ' : '') + 'open the source here', { class: 'cause-open' }) : null));
  }
  if (inj.source_id) {
    const inTree = h('button', { type: 'button', class: 'link-like inj-source', dataset: { sourceId: inj.source_id } },
      sourceWords(inj.source_id) + ' — its place in the tree below');
    inTree.addEventListener('click', () => goToTreeSource(inj.source_id));
    box.append(h('p', { class: 'injection-source' }, 'Source: ', inTree,
      inj.delta !== null && inj.delta !== undefined ? h('span', { class: 'muted' }, ' · removing it changes the score by Δ ' + fmtDrop(inj.delta)) : null));
  }
  box.append(h('p', { class: 'note', id: 'injection-screened' }, inj.screened
    ? 'The free screen had flagged this action too.'
    : 'The free screen had not flagged this action.'));
  return box;
}

/** The result's redundancy findings ("any one of s0, s1 and s3 is enough"), in the estimator's words. */
function redundancyBox(r) {
  if (!r.redundancy || !r.redundancy.length) return null;
  return h('div', { id: 'redundancy', class: 'redundancy-box' },
    h('p', { class: 'redundancy-title' }, termHelp('alone', 'What carries the claim alone')),
    h('ul', { id: 'redundancy-lines' }, r.redundancy.map((line) => h('li', null, line))));
}

/** Kinds of disagreement between the judge's scores: the verdict rests on them, so it is hedged. A score
 * that disagrees with a span check (carrier_silent) is listed without hedging the verdict. */
const SCORES_DISAGREE = new Set(['drop_exceeds_gamma', 'distractor_carries_alone', 'context_without_ground']);

function scoresDisagree(r) {
  return (r.disagreements || []).some((d) => SCORES_DISAGREE.has(d.kind));
}

/** Measurements of this trace that contradict each other (a noisy judge), each in the estimator's words
 * with its numbers; nothing when they agree. */
function disagreementBox(r) {
  if (!r.disagreements || !r.disagreements.length) return null;
  return h('div', { id: 'disagreements', class: 'redundancy-box disagreement-box', role: 'note' },
    h('p', { class: 'redundancy-title' }, termHelp('disagreement', labelNode('disagreement', { capital: true }))),
    h('ul', { id: 'disagreement-lines' }, r.disagreements.map((d) => h('li', { dataset: { kind: d.kind, subject: d.subject } },
      labelNode('disagreement.' + d.kind, { capital: true }), ': ', d.text))));
}

/** The drop chart and the tree, their sources in `order` (order.js). */
function sourcesPart(r, order) {
  return [
    h('h3', { id: 'chart-title' }, 'What removing each part did'),
    renderChart(r, order),
    h('h3', { id: 'tree-title' }, 'Where it comes from'),
    renderTree(r, order),
  ];
}

export function renderResult(t) {
  const r = t.result;
  const target = r.target && r.target.kind === 'action' ? r.target : null;
  state.resultTrace = t;
  const wrap = h('div', { class: 'panel', id: 'result-panel', dataset: { target: target ? 'action' : 'sentence' } });
  const estimator = r.estimator || 'judged';
  // The estimator of the scores shown: after a proxy's fallback the judge's; under both the judged trace's
  // (its log-probability trace and their agreement are beside it in the result).
  const scores = (estimator === 'proxy' && r.confirmed === false) || estimator === 'both' ? 'judged' : estimator;
  wrap.append(...[
    h('h2', { id: 'result-title', tabindex: '-1' }, 'Result'),
    ...(target ? actionHead(target) : [h('blockquote', { class: 'claim' }, t.claim)]),
    target && r.injection ? injectionFinding(r.injection) : null,
    h('div', { id: 'verdict', class: 'verdict-box ' + r.verdict, dataset: { verdict: r.verdict } },
      h('p', { class: 'verdict-title' }, labelNode('verdict.' + r.verdict, { capital: true, fallback: r.verdict_text }),
        scoresDisagree(r) ? h('span', { id: 'verdict-hedge', class: 'hedge' }, ' — ', labelNode('disagreement')) : null),
      explain('verdict.' + r.verdict),
      h('p', null, verdictExplanation(r)),
      h('p', { id: 'gamma', class: 'gamma' },
        'Γ = ' + fmtScore(r.gamma) + ' — support with every source s(1) = ' + fmtScore(r.s_all) + ', with none s(0) = ' + fmtScore(r.s_none) + '.'),
      numbersExplained(r),
      r.diagnosis ? h('p', null, h('span', { id: 'claim-diagnosis', class: 'diag' + (isAlarm(r.diagnosis) ? ' alarm' : ' neutral'), dataset: { diagnosis: r.diagnosis } }, diagnosisWords(r.diagnosis))) : null,
      r.round2_skipped_reason ? h('p', { class: 'note' }, 'Per-source round skipped: ' + r.round2_skipped_reason) : null),
    target ? freshnessFindings(r.freshness, actionSourceAges(target.id), { id: 'result-freshness' }) : null,
    h('div', { class: 'result-actions', id: 'result-actions' }, callsButton(t), exportActions(t),
      // the action traced, or the sentence (none for a free selection of text)
      target || t.segment_id ? incidentLink(t.turn_id, target ? target.id : t.segment_id, { id: 'result-incident' }) : null)].filter(Boolean));
  if (estimator === 'proxy') wrap.append(renderProxy(r, t));

  // what carries the claim alone, then the sources: by effect, or by layer one click away
  const sources = h('div', { id: 'result-sources' }, sourcesPart(r, currentOrder()));
  const toggle = orderToggle((order) => sources.replaceChildren(...sourcesPart(r, order)));
  wrap.append(...[disagreementBox(r), redundancyBox(r), toggle, sources].filter(Boolean));

  if (target) {
    wrap.append(h('h3', { id: 'arguments-title' }, 'Where each argument value came from'),
      argumentList(r.argument_sources, { id: 'result-arguments' }));
  }

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
