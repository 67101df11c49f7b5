/* Every trace of the tenant across turns (GET /v1/traces): verdict, model, cost, time, claim, where it was
 * run (api or cli), with filters, sort and a total kept in the address (#/traces?verdict=attributed). */

import { api, query } from './api.js';
import { focusHeading, h, view } from './dom.js';
import { fillDatalist, filterForm } from './filters.js';
import { clip, fmtBilled, fmtDate } from './format.js';
import { label } from './glossary.js';
import { callsSentence } from './numbers.js';
import { pagedList } from './pager.js';
import { turnHash } from './routes.js';
import { state } from './state.js';
import { ESTIMATORS, VERDICTS } from './words.js';

const PAGE = 25;

/** The filters, their options' words read from the glossary when the list is drawn. */
const fields = () => [
  { key: 'verdict', label: 'Verdict', type: 'select', options: [['', 'Any verdict'], ...VERDICTS.map((v) => [v, label('verdict.' + v, { capital: true })])] },
  { key: 'status', label: 'Status', type: 'select', options: [['', 'Any status'], ['succeeded', 'Succeeded'], ['failed', 'Failed'], ['interrupted', 'Interrupted'], ['running', 'Running'], ['queued', 'Queued']] },
  { key: 'model', label: 'Judge model', type: 'text', list: 'trace-models' },
  { key: 'estimator', label: 'Scores', type: 'select', options: [['', 'Any'], ...ESTIMATORS.map((e) => [e, label('estimator.' + e, { capital: true })])] },
  { key: 'turn_id', label: 'Turn id', type: 'text' },
  { key: 'sort', label: 'Sort', type: 'select', options: [['', 'Newest first'], ['created_at', 'Oldest first'], ['-cost', 'Most expensive first'], ['cost', 'Cheapest first']] },
];

function outcome(t) {
  if (t.status === 'succeeded') return t.verdict ? label('verdict.' + t.verdict, { capital: true }) : 'succeeded';
  return t.status;
}

function traceRow(t) {
  const facts = [
    t.model,
    'cost ' + fmtBilled(t.cost_usd),
    'calls: ' + callsSentence(t.calls),
    fmtDate(t.created_at),
    'run from the ' + (t.source === 'cli' ? 'command line' : 'API'),
  ];
  return h('li', null,
    h('a', { class: 'trace-link', href: turnHash(t.turn_id, t.trace_id), dataset: { traceId: t.trace_id, nav: 'item', source: t.source } },
      h('span', { class: 'title' }, clip(t.claim, 160)),
      h('span', { class: 'badge verdict-badge ' + (t.status === 'succeeded' ? t.verdict || '' : 'status-' + t.status), dataset: { verdict: t.verdict || '', status: t.status } }, outcome(t)),
      h('span', { class: 'meta' }, facts.join(' · ')),
      h('span', { class: 'meta' }, 'turn ' + t.turn_id + ' · ' + t.trace_id)));
}

export async function showTraces(params) {
  state.turn = null;
  const filterFields = fields();
  const filters = filterForm('traces', filterFields, params, { id: 'trace-filters', 'aria-label': 'Filter traces' });
  const models = h('datalist', { id: 'trace-models' });
  const list = h('ul', { id: 'trace-list', class: 'turn-list trace-list', 'aria-labelledby': 'traces-title' });
  const count = h('p', { id: 'trace-count', class: 'count-line', 'aria-live': 'polite' });
  const more = h('div', { class: 'row' });
  view().replaceChildren(
    h('h1', { id: 'traces-title' }, 'Traces'),
    filters.form, models, count, list, more);
  const load = pagedList({
    list, count, more, filters, row: traceRow, noun: 'trace', moreId: 'traces-more',
    fetchPage: (values, cursor) => api('/v1/traces' + query(Object.assign({}, values, { limit: PAGE, cursor }))),
    onItems: (items) => fillDatalist(models, items.map((t) => t.model)),
    filtered: (values) => filterFields.some((f) => f.key !== 'sort' && values[f.key]),
    empty: (filtered) => (filtered ? 'No trace matches these filters.' : 'No traces yet: open a turn and click a dotted sentence to price one.'),
  });
  filters.onChange(() => load(true));
  await load(true);
  focusHeading();
}
