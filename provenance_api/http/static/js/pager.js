// One paged, filtered list (stored turns, traces): each load asks the API for a page of the filters'
// results, appends its rows, says how many match and offers the next page. A load started before a newer
// filter was asked for is dropped when it answers.
import { h, showError } from './dom.js';
import { plural } from './format.js';

/**
 * @param {object} o
 * @param {HTMLElement} o.list the list the rows go in
 * @param {HTMLElement} o.count the line saying how many match
 * @param {HTMLElement} o.more where the "Show more" button goes (and a failed load's error)
 * @param {{values: () => object}} o.filters the filter form
 * @param {(values: object, cursor: string|null) => Promise<{items: object[], next_cursor: string|null, total?: number}>} o.fetchPage
 * @param {(item: object) => HTMLElement} o.row
 * @param {(items: object[]) => void} o.onItems what else a page's items fill (datalists)
 * @param {string} o.noun "turn", "trace"
 * @param {(values: object) => boolean} o.filtered whether the values filter anything
 * @param {(filtered: boolean) => string} o.empty the line when nothing is listed
 * @param {string} o.moreId the "Show more" button's id
 * @returns {(reset: boolean) => Promise<void>} load: the first page again (reset) or the next one
 */
export function pagedList({ list, count, more, filters, fetchPage, row, onItems, noun, filtered, empty, moreId }) {
  let generation = 0;
  let cursor = null;
  let shown = 0;
  async function load(reset) {
    const mine = reset ? ++generation : generation;
    if (reset) { cursor = null; shown = 0; }
    count.textContent = 'Loading…';
    const values = filters.values();
    let page;
    try {
      page = await fetchPage(values, cursor);
    } catch (err) {
      if (mine !== generation) return;
      count.textContent = '';
      if (reset) list.replaceChildren();
      showError(err, more);
      return;
    }
    if (mine !== generation) return; // a newer filter was asked for meanwhile
    if (reset) { list.replaceChildren(); more.replaceChildren(); }
    for (const item of page.items) list.append(row(item));
    onItems(page.items);
    shown += page.items.length;
    cursor = page.next_cursor;
    const narrowed = filtered(values);
    const total = typeof page.total === 'number' ? page.total : shown;
    count.dataset.total = String(total);
    count.textContent = total === 0
      ? empty(narrowed)
      : plural(total, noun) + (narrowed ? ' match' + (total === 1 ? 'es' : '') : '') + (shown < total ? ' · ' + shown + ' shown' : '');
    more.replaceChildren();
    if (cursor) more.append(h('button', { type: 'button', class: 'button', id: moreId, onclick: () => load(false) }, 'Show more ' + noun + 's'));
  }
  return load;
}
