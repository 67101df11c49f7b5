/* A source's evidence envelope under it, in the turn's sources and in a trace result's tree: the producing
 * tool (server, resource), when it was observed and its age when the answer or the action was produced, for
 * whom (principal · tenant · scope), the transformations, what it was derived from, its digest, and a custody
 * badge — verified by the gateway (the record's server and time) or as the agent's history reports it.
 * A field the history did not carry reads the glossary's "not recorded", never blank and never guessed.
 * Collapsed in a <details> (its summary: the tool, the age and the custody) so the page stays readable. */

import { announce, h } from './dom.js';
import { labelNode, termHelp } from './glossary.js';
import { state } from './state.js';

const DIGEST_SHOWN = 12;

function notRecorded() {
  return labelNode('not_recorded', null, { class: 'not-recorded' });
}

/** A value, or the glossary's "not recorded" when the history did not carry it. */
function orNot(value, wrap) {
  if (value === null || value === undefined || value === '') return notRecorded();
  return wrap ? wrap(value) : h('span', { class: 'env-value' }, value);
}

/** A list the service writes itself (transformations, derived from): empty is known, so "none". */
function listOrNone(items) {
  if (!items || !items.length) return labelNode('envelope.none', null, { class: 'env-none' });
  return h('ul', { class: 'env-list' }, items.map((item) => h('li', null, item)));
}

function timeNode(iso) {
  return h('time', { datetime: iso, class: 'env-time' }, iso);
}

function row(key, ...value) {
  return [h('dt', { dataset: { field: key } }, labelNode('envelope.' + key, { capital: true })),
    h('dd', { dataset: { field: key } }, value)];
}

function aged(age) {
  return !!age && age.age_seconds !== null && age.age_seconds !== undefined;
}

/** The age in the summary: "45 s old", or "age not recorded (the source's time)" (the API's own words). */
function ageNode(age) {
  if (!age) return null;
  if (aged(age)) return h('span', { class: 'env-age' }, age.age + ' old');
  return h('span', { class: 'env-age', dataset: { aged: 'false' } }, labelNode('age'), ' ' + age.age);
}

function digestNode(digest) {
  const shown = h('code', { class: 'env-digest', title: digest, dataset: { digest } }, digest.slice(0, DIGEST_SHOWN) + '…');
  const copy = h('button', { type: 'button', class: 'link-like env-copy', 'aria-label': 'Copy the whole digest ' + digest }, 'copy');
  copy.addEventListener('click', () => {
    navigator.clipboard.writeText(digest).then(() => announce('Digest copied.'), () => announce(digest));
  });
  return [shown, ' ', copy];
}

/** The custody badge: the glossary's words for custody.gateway or custody.history. */
export function custodyBadge(custody) {
  const key = 'custody.' + (custody === 'gateway' ? 'gateway' : 'history');
  return labelNode(key, null, { class: 'badge custody-badge custody-' + (custody === 'gateway' ? 'gateway' : 'history'), dataset: { custody: custody || 'history' } });
}

function custodyRecord(c) {
  if (c.custody !== 'gateway') return null;
  return h('span', { class: 'custody-record' }, ' — ', orNot(c.custody_server, (v) => h('code', null, v)), ', ',
    orNot(c.custody_observed_at, timeNode));
}

/** The envelope block. `env`: the envelope; `age`: {age_seconds, age} at the moment (or null: none shown);
 * `moment`: the words of that moment; `c`: {custody, custody_server, custody_observed_at} (the binding). */
export function envelopeBlock(sourceId, env, age, moment, c) {
  const custody = c && c.custody ? c : { custody: env.custody };
  const summary = h('summary', { class: 'env-summary' },
    labelNode('envelope', { capital: true }, { class: 'env-title' }), ' · ', h('code', { class: 'env-tool' }, env.tool),
    age ? [' · ', ageNode(age)] : null, ' · ', custodyBadge(custody.custody));
  const list = h('dl', { class: 'env-fields' },
    row('tool', h('code', null, env.tool)),
    row('server', orNot(env.server)),
    row('resource', orNot(env.resource, (v) => h('code', null, v))),
    row('observed_at', orNot(env.observed_at, timeNode),
      aged(age) ? h('span', { class: 'env-age-note' }, ' (' + age.age + ' old ' + moment + ')') : null),
    row('principal', orNot(env.principal)),
    row('tenant', orNot(env.tenant)),
    row('scope', orNot(env.scope)),
    row('transformations', listOrNone(env.transformations)),
    row('derived_from', listOrNone(env.derived_from)),
    row('digest', env.digest ? digestNode(env.digest) : notRecorded()),
    [h('dt', { dataset: { field: 'custody' } }, termHelp('custody', labelNode('custody', { capital: true }))),
      h('dd', { dataset: { field: 'custody' } }, custodyBadge(custody.custody), custodyRecord(custody))]);
  return h('details', { class: 'envelope', dataset: { sourceId, custody: custody.custody || 'history' } }, summary, list);
}

// ---- the turn's own figures, looked up by source id

function turnSource(sourceId) {
  const seg = state.turn && state.turn.segments;
  return seg && seg.sources ? seg.sources.find((s) => s.id === sourceId) || null : null;
}

/** The ages of what the action could read when it was made ([{source_id, age_seconds, age}]), from the
 * turn's actions; [] when they are not on the page. */
export function actionSourceAges(actionId) {
  const actions = state.turn && state.turn.actions;
  const a = actions && !actions.error ? actions.actions.find((x) => x.id === actionId) : null;
  return a ? a.source_ages : [];
}

function actionAge(actionId, sourceId) {
  return actionSourceAges(actionId).find((x) => x.source_id === sourceId) || null;
}

const AT_ANSWER = 'when the answer was produced';
const AT_ACTION = 'when the action was made';

/** The envelope of a source of the turn's sources list (GET /segments' sources), aged at the answer. */
export function turnEnvelope(sourceId) {
  const s = turnSource(sourceId);
  if (!s || !s.envelope) return null;
  return envelopeBlock(sourceId, s.envelope, s, AT_ANSWER, s);
}

/** The envelope of a source in a trace result (`s`: the result's source), aged at the answer for a sentence,
 * at the call for an action; custody as the turn binds it now. */
export function resultEnvelope(s, r) {
  if (!s.envelope) return null;
  const known = turnSource(s.source_id);
  const action = r.target && r.target.kind === 'action' ? r.target.id : null;
  const age = action ? actionAge(action, s.source_id) : known;
  return envelopeBlock(s.source_id, s.envelope, age, action ? AT_ACTION : AT_ANSWER, known);
}
