/* A list's filter form whose values live in the page's address: built from the route's query, read back
 * as an object, and re-read after each change (a text field after a pause in typing). */

import { h } from './dom.js';
import { rememberFilters } from './routes.js';

/**
 * fields: [{key, label, type: 'search'|'text'|'date'|'number'|'select', options?: [[value, words]],
 *           hint?, list?: datalist id, wide?: bool}]
 * Returns {form, values(), onChange(fn), inputs}.
 */
export function filterForm(listName, fields, params, props) {
  const inputs = {};
  const handlers = [];
  let timer = 0;
  const form = h('form', Object.assign({ role: 'search', class: 'filters' }, props || {}));
  const grid = h('div', { class: 'filter-grid' });
  for (const f of fields) {
    const id = f.id || 'f-' + f.key;
    const value = params.get(f.key) || '';
    let input;
    if (f.type === 'select') {
      input = h('select', { id, name: f.key }, f.options.map(([v, words]) => h('option', { value: v, selected: v === value }, words)));
      if (!f.options.some(([v]) => v === value)) input.value = f.options[0][0];
    } else {
      input = h('input', {
        id, name: f.key, type: f.type, value, autocomplete: 'off', spellcheck: 'false',
        list: f.list || null, min: f.type === 'number' ? '0' : null, step: f.type === 'number' ? '1' : null,
        inputmode: f.type === 'number' ? 'numeric' : null, 'aria-describedby': f.hint ? id + '-hint' : null,
      });
    }
    inputs[f.key] = input;
    const field = h('div', { class: 'field' + (f.wide ? ' wide' : '') },
      h('label', { for: id }, f.label),
      f.hint ? h('span', { id: id + '-hint', class: 'hint' }, f.hint) : null,
      input);
    if (f.wide) form.append(field);
    else grid.append(field);
    const changed = () => {
      if (!form.isConnected) return; // a pause in typing that ended after the page moved on
      const values = read();
      rememberFilters(listName, values, input);
      for (const fn of handlers) fn(values);
    };
    if (f.type === 'search' || f.type === 'text' || f.type === 'number') {
      input.addEventListener('input', () => { window.clearTimeout(timer); timer = window.setTimeout(changed, 300); });
      input.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); window.clearTimeout(timer); changed(); } });
    } else {
      input.addEventListener('change', changed);
    }
  }
  const clear = h('button', { type: 'button', class: 'button quiet', id: listName + '-clear' }, 'Clear filters');
  clear.addEventListener('click', () => {
    for (const f of fields) inputs[f.key].value = f.type === 'select' ? f.options[0][0] : '';
    const values = read();
    rememberFilters(listName, values, clear);
    for (const fn of handlers) fn(values);
  });
  grid.append(h('div', { class: 'field filter-actions' }, clear));
  form.append(grid);
  form.addEventListener('submit', (ev) => ev.preventDefault());

  function read() {
    const out = {};
    for (const f of fields) {
      const raw = inputs[f.key].value.trim();
      const isDefault = f.type === 'select' && raw === f.options[0][0];
      out[f.key] = isDefault ? '' : raw;
    }
    return out;
  }

  return { form, inputs, values: read, onChange: (fn) => handlers.push(fn) };
}

/** Options of a datalist (distinct, sorted). */
export function fillDatalist(list, values) {
  const seen = new Set(Array.from(list.options).map((o) => o.value));
  for (const v of values) if (v && !seen.has(v)) { seen.add(v); list.append(h('option', { value: v })); }
}
