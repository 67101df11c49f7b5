/* The page's addresses (hash routes, so nothing secret is ever in a URL):
 *   #/?q=&model=&agent=&since=&until=&min_traceable=&sort=   stored turns, filtered and sorted
 *   #/traces?verdict=&model=&status=&estimator=&sort=         every trace of the tenant
 *   #/turn/<id>                                              one turn: response, sources, past traces
 *   #/turn/<id>/trace/<tid>?order=layers                     the same, with one trace's progress or result
 *                                                            (its sources by layer; by effect without order=)
 * A list's filters live in its address, so a filtered list can be bookmarked, shared, and restored with Back. */

import { enc } from './format.js';
import { state } from './state.js';

/** The current route: {name: 'turns'|'traces'|'turn', turnId, traceId, params: URLSearchParams}. */
export function parseRoute() {
  const hash = location.hash || '#/';
  if (!hash.startsWith('#/')) return null;
  const body = hash.slice(2);
  const cut = body.indexOf('?');
  const path = cut < 0 ? body : body.slice(0, cut);
  const params = new URLSearchParams(cut < 0 ? '' : body.slice(cut + 1));
  const parts = path.split('/').filter(Boolean).map((p) => decodeURIComponent(p));
  if (parts[0] === 'turn' && parts[1]) {
    if (parts[2] === 'trace' && parts[3]) return { name: 'turn', turnId: parts[1], traceId: parts[3], params };
    return { name: 'turn', turnId: parts[1], traceId: null, params };
  }
  if (parts[0] === 'traces') return { name: 'traces', params };
  return { name: 'turns', params };
}

/** A turn's address (with a trace's); the sources' order chosen on a result is kept (order.js). */
export function turnHash(turnId, traceId) {
  return '#/turn/' + enc(turnId) + (traceId ? '/trace/' + enc(traceId) : '') + (state.sourceOrder === 'layers' ? '?order=layers' : '');
}

/** A list's address with its filters (empty ones left out, in a stable order). */
export function listHash(name, filters) {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(filters)) {
    if (value !== null && value !== undefined && String(value).trim() !== '') q.set(key, String(value).trim());
  }
  const text = q.toString();
  return '#/' + (name === 'traces' ? 'traces' : '') + (text ? '?' + text : '');
}

let lastControl = null;

/** Record a list's new filters in the address: a new history entry when another control changed
 * them (so Back restores the previous filter), the same entry while one text field is typed into. */
export function rememberFilters(name, filters, control) {
  const hash = listHash(name, filters);
  if (hash === (location.hash || '#/')) return;
  if (control && control === lastControl) history.replaceState(null, '', hash);
  else history.pushState(null, '', hash);
  lastControl = control || null;
}

export function forgetControl() {
  lastControl = null;
}

let lastList = '#/';

/** Remember the list the user came from (with its filters), for the turn view's "back" link. */
export function rememberList(hash) {
  lastList = hash || '#/';
}

export function lastListHash() {
  return lastList;
}
