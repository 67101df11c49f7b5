/* The stored turns: search, filters (model, agent, dates, sentences to trace), sort and a total, all kept in
 * the address (#/?q=refund&sort=-traceable&model=gpt-4o), so a filtered list can be bookmarked, shared and
 * restored with Back. */

import { api, query } from './api.js';
import { focusHeading, h, view } from './dom.js';
import { fillDatalist, filterForm } from './filters.js';
import { fmtDate, plural } from './format.js';
import { pagedList } from './pager.js';
import { turnHash } from './routes.js';
import { state } from './state.js';

const PAGE = 25;

const SORTS = [
  ['', 'Newest stored first'],
  ['stored_at', 'Oldest stored first'],
  ['-created_at', 'Newest answer first'],
  ['created_at', 'Oldest answer first'],
  ['model', 'Model, A–Z'],
  ['-model', 'Model, Z–A'],
  ['-traceable', 'Most sentences to trace'],
  ['traceable', 'Fewest sentences to trace'],
];

const FIELDS = [
  { key: 'q', id: 'search', label: 'Search turns by text', type: 'search', wide: true, hint: 'Matches the turn id, agent, model, the question and the response.' },
  { key: 'model', label: 'Model', type: 'text', list: 'turn-models' },
  { key: 'agent', label: 'Agent', type: 'text', list: 'turn-agents' },
  { key: 'since', label: 'From (UTC date)', type: 'date' },
  { key: 'until', label: 'To (UTC date, included)', type: 'date' },
  { key: 'min_traceable', label: 'Sentences to trace, at least', type: 'number' },
  { key: 'sort', label: 'Sort', type: 'select', options: SORTS },
];

/** The day after an ISO date (YYYY-MM-DD), as the API's exclusive `until`. */
function dayAfter(day) {
  const d = new Date(day + 'T00:00:00Z');
  if (Number.isNaN(d.getTime())) return day;
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().slice(0, 10) + 'T00:00:00Z';
}

/** The API's query for the form's values: dates are whole UTC days, the "until" day included. */
function apiFilters(values) {
  const out = Object.assign({}, values);
  if (out.since && /^\d{4}-\d{2}-\d{2}$/.test(out.since)) out.since += 'T00:00:00Z';
  if (out.until && /^\d{4}-\d{2}-\d{2}$/.test(out.until)) out.until = dayAfter(out.until);
  return out;
}

export async function showTurns(params) {
  state.turn = null;
  const filters = filterForm('turns', FIELDS, params, { id: 'turn-filters', 'aria-label': 'Filter stored turns' });
  const models = h('datalist', { id: 'turn-models' });
  const agents = h('datalist', { id: 'turn-agents' });
  const list = h('ul', { id: 'turn-list', class: 'turn-list', 'aria-labelledby': 'turns-title' });
  const count = h('p', { id: 'turn-count', class: 'count-line', 'aria-live': 'polite' });
  const more = h('div', { class: 'row' });
  view().replaceChildren(
    h('h1', { id: 'turns-title' }, 'Stored turns'),
    filters.form, models, agents, count, list, more);

  const load = pagedList({
    list, count, more, filters, row: turnRow, noun: 'turn', moreId: 'turns-more',
    fetchPage: (values, cursor) => api('/ui/api/turns' + query(Object.assign(apiFilters(values), { limit: PAGE, cursor }))),
    onItems: (items) => {
      fillDatalist(models, items.map((i) => i.model));
      fillDatalist(agents, items.map((i) => i.agent));
    },
    filtered: (values) => FIELDS.some((f) => f.key !== 'sort' && values[f.key]),
    empty: (filtered) => (filtered ? 'No stored turn matches these filters.' : 'No turns are stored yet: store one with POST /v1/turns or provenance import.'),
  });
  filters.onChange(() => load(true));
  await load(true);
  focusHeading();
}

function turnRow(item) {
  const date = fmtDate(item.created_at || item.stored_at);
  const counts = [];
  if (typeof item.traceable === 'number') counts.push(plural(item.traceable, 'sentence') + ' to trace');
  if (typeof item.traces === 'number') counts.push(plural(item.traces, 'trace') + ' run');
  return h('li', null,
    h('a', { class: 'turn-link', href: turnHash(item.turn_id), dataset: { turnId: item.turn_id, nav: 'item' } },
      h('span', { class: 'title' }, (item.agent || 'Unnamed agent') + ' — ' + item.turn_id),
      h('span', { class: 'meta' }, [item.model || 'model not recorded', date, ...counts].filter(Boolean).join(' · ')),
      h('span', { class: 'summary' }, item.summary),
      item.query ? h('span', { class: 'excerpt' }, 'Asked: ' + item.query) : null));
}
