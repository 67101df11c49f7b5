/* When an action was made and the operator's freshness rules checked for it (GET /v1/turns/{id}/actions, or a
 * trace of the action): its produced_at ("not recorded" when the history has none), then each finding —
 * pass, breach (the rule, the source judged, its age; the finding's words name each condition failed) or not
 * checkable and why.
 * No rule configured: no findings, and nothing is said of them. */

import { sourceLink } from './action-view.js';
import { h } from './dom.js';
import { labelNode, termHelp } from './glossary.js';

/** "Made at 2026-03-02T09:00:45Z" (the glossary's words), or "not recorded". */
export function producedAt(iso, props) {
  return h('p', Object.assign({ class: 'produced-at small' }, props || {}),
    termHelp('action.produced_at', h('span', null, labelNode('action.produced_at', { capital: true }), ': ',
      iso ? h('time', { datetime: iso }, iso) : labelNode('not_recorded', null, { class: 'not-recorded' }))));
}

function statusKey(status) {
  return 'freshness.' + String(status).replace(/ /g, '_');
}

/** One finding. `ages`: the action's source_ages (the age in the API's words). */
function finding(f, ages) {
  const key = statusKey(f.status);
  const known = f.source_id ? (ages || []).find((a) => a.source_id === f.source_id) : null;
  const age = known ? known.age : null;
  return h('li', { class: 'finding finding-' + key.slice(10), dataset: { status: f.status, sourceId: f.source_id || '' } },
    termHelp(key, labelNode(key, null, { class: 'badge finding-status' })), ' ',
    h('span', { class: 'finding-rule' }, f.rule),
    // no source: the agent had read nothing from the evidence tool, which the finding's words say
    f.source_id ? h('span', { class: 'finding-source' }, ' · ', sourceLink(f.source_id, null, null)) : null,
    age ? h('span', { class: 'finding-age' }, ' · ' + age + (f.age_seconds === null || f.age_seconds === undefined ? '' : ' old')) : null,
    h('span', { class: 'finding-because note' }, f.because));
}

/** The findings as a list under a heading; null when none (no rule for this tool, or none configured). */
export function freshnessFindings(findings, ages, props) {
  if (!findings || !findings.length) return null;
  return h('div', Object.assign({ class: 'freshness' }, props || {}),
    h('p', { class: 'freshness-title' }, termHelp('freshness', labelNode('freshness', { capital: true }))),
    h('ul', { class: 'finding-list' }, findings.map((f) => finding(f, ages))));
}
