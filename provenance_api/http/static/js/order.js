/* The order a result's sources are shown in: by effect (the default) or by layer, a view option kept in the
 * address (#/turn/<id>/trace/<tid>?order=layers) like a list's filters, so Back restores it and a link to a
 * result opens it the same way.
 *
 * By effect: the largest effect first. A source's effect is the size of its drop |Δ|; a redundant source's
 * drop reads zero (another source still says the same), so its effect is what it carries kept alone: its
 * keep-alone score above s(0), on the same scale as a drop (so is a source measured only kept alone). Sources
 * whose effect was not measured come last; ties keep the layer order. The Markdown citation
 * (citation_markdown.py) orders by the same rule. */

import { h } from './dom.js';
import { parseRoute } from './routes.js';
import { state } from './state.js';

export const ORDERS = ['effect', 'layers'];

const num = (x) => typeof x === 'number' && Number.isFinite(x);

/** Whether a source or layer was measured kept alone and carries the claim so (its role is redundant). */
export function carriesAlone(x) {
  return x.role === 'redundant' && num(x.alone);
}

/** A source's effect on the claim (see above); null when nothing about it was measured. A source measured
 * only kept alone (round 2 did not remove it) is ranked by that score too. */
export function effectOf(s, r) {
  const lift = num(s.alone) ? s.alone - (num(r.s_none) ? r.s_none : 0) : null;
  if (carriesAlone(s)) return lift;
  return num(s.delta) ? Math.abs(s.delta) : lift;
}

/** The sources by effect, largest first (unmeasured last, ties in layer order). */
export function byEffect(sources, r) {
  const ranked = sources.map((s, k) => ({ s, k, e: effectOf(s, r) }));
  ranked.sort((a, b) => {
    if (a.e === null || b.e === null) return (a.e === null) - (b.e === null) || a.k - b.k;
    return b.e - a.e || a.k - b.k;
  });
  return ranked.map((x) => x.s);
}

/** The order on screen: the address's, else effect. */
export function currentOrder() {
  const r = parseRoute();
  const asked = r && r.params ? r.params.get('order') : null;
  state.sourceOrder = ORDERS.includes(asked) ? asked : 'effect';
  return state.sourceOrder;
}

/** `hash` with the order in its parameters (none for the default). */
function withOrder(hash, order) {
  const cut = hash.indexOf('?');
  const params = new URLSearchParams(cut < 0 ? '' : hash.slice(cut + 1));
  if (order === 'effect') params.delete('order');
  else params.set('order', order);
  const query = params.toString();
  return (cut < 0 ? hash : hash.slice(0, cut)) + (query ? '?' + query : '');
}

/** Record the order in the address (a new history entry, so Back restores the previous order) and in the
 * page's links to a turn or a result (past traces), so the next result opens the same way. */
function remember(order) {
  const hash = location.hash || '#/';
  const next = withOrder(hash, order);
  if (next !== hash) history.pushState(null, '', next);
  state.sourceOrder = order;
  for (const link of document.querySelectorAll('#view a[href^="#/turn/"]')) link.setAttribute('href', withOrder(link.getAttribute('href'), order));
}

/** The two buttons that switch the order; `redraw(order)` draws the sources again. */
export function orderToggle(redraw) {
  const current = currentOrder();
  const wrap = h('div', { class: 'order-toggle', id: 'source-order', role: 'group', 'aria-label': 'Order of the sources' },
    h('span', { class: 'order-lead' }, 'Sources in order of:'));
  for (const [order, words] of [['effect', 'effect (largest first)'], ['layers', 'layer']]) {
    const button = h('button', { type: 'button', class: 'button order-button', 'aria-pressed': String(order === current), dataset: { order } }, words);
    button.addEventListener('click', () => {
      if (state.sourceOrder === order) return;
      remember(order);
      for (const b of wrap.querySelectorAll('button')) b.setAttribute('aria-pressed', String(b.dataset.order === order));
      redraw(order);
    });
    wrap.append(button);
  }
  return wrap;
}
