/* DOM helpers: elements are built from props and children; text is only ever inserted as text nodes. */

const SVG_NS = 'http://www.w3.org/2000/svg';

function add(el, kids) {
  for (const kid of kids.flat(Infinity)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

function setProps(el, props) {
  if (!props) return el;
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.setAttribute('class', value);
    else if (key === 'text') el.textContent = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  return el;
}

/** An HTML element: h('p', {class: 'note'}, 'text', child, [more]). */
export function h(tag, props, ...kids) {
  return add(setProps(document.createElement(tag), props), kids);
}

/** An SVG element, as h(). */
export function svg(tag, props, ...kids) {
  return add(setProps(document.createElementNS(SVG_NS, tag), props), kids);
}

export function byId(id) {
  return document.getElementById(id);
}

/** Say something to screen readers through the page's polite live region. */
export function announce(message) {
  const region = byId('announce');
  region.textContent = '';
  window.setTimeout(() => { region.textContent = message; }, 30);
}

/** The main view's container. */
export function view() {
  return byId('view');
}

/** Move focus to the view's first heading (after a route change). */
export function focusHeading() {
  const heading = view().querySelector('h1');
  if (heading) {
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: false });
  }
}

/** An error as an alert, replacing what `where` (default: the view) shows. */
export function showError(err, where) {
  const target = where || view();
  target.replaceChildren(h('p', { class: 'notice bad', role: 'alert' }, err.message || String(err)));
}

/** True while the user types into a field (shortcuts stay quiet then). */
export function typing(target) {
  const el = target instanceof Element ? target : null;
  if (!el) return false;
  if (el.isContentEditable) return true;
  const tag = el.tagName;
  if (tag === 'TEXTAREA' || tag === 'SELECT') return true;
  if (tag !== 'INPUT') return false;
  return !['button', 'checkbox', 'radio', 'submit', 'reset'].includes(el.type);
}

/** The floating tip under an element (hover or focus on a quoted sentence). */
export function showTip(anchor, text) {
  const tip = byId('tip');
  tip.textContent = text;
  tip.hidden = false;
  const r = anchor.getBoundingClientRect();
  const left = Math.max(8, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8));
  tip.style.left = left + 'px';
  tip.style.top = (window.scrollY + r.bottom + 6) + 'px';
}

export function hideTip() {
  const tip = byId('tip');
  if (tip) tip.hidden = true;
}

/** Give focus back to `el` after a dialog closed, unless something else took it meanwhile (a shortcut, or
 * the browser's own return of focus): the dialog's close event comes a moment after it closes. */
export function restoreFocus(el) {
  if (!el || !el.isConnected) return;
  const active = document.activeElement;
  if (!active || active === document.body || active.closest('dialog:not([open])')) el.focus();
}
