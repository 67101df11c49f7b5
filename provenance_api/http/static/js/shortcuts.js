/* Keyboard shortcuts, listed by "?". None fires while typing in a field or with Ctrl, Alt or Meta held.
 *   /      focus the list's search            j / k  next / previous item in a list
 *   Enter  open the focused item              g t    the stored turns      g r  the traces
 *   c      a result's model calls             Esc    close a panel or dialog
 *   ?      this list */

import { byId, h, hideTip, restoreFocus, typing } from './dom.js';
import { closeTermHelp } from './glossary.js';
import { lastListHash } from './routes.js';

export const SHORTCUTS = [
  [['?'], 'Show these shortcuts'],
  [['/'], 'Search or filter the list'],
  [['j'], 'Next item in a list (turns, traces, model calls)'],
  [['k'], 'Previous item in a list'],
  [['Enter'], 'Open the focused item'],
  [['g', 't'], 'Go to the stored turns'],
  [['g', 'r'], 'Go to the traces'],
  [['c'], 'Open the model calls of the result on screen'],
  [['Esc'], 'Close a panel, dialog or explanation'],
];

let pendingG = false;
let helpReturn = null;

function openDialog() {
  return document.querySelector('dialog[open]');
}

function navItems() {
  const open = openDialog();
  if (open && open.id === 'calls-panel') return Array.from(open.querySelectorAll('.call > details > summary'));
  return Array.from(document.querySelectorAll('#view [data-nav="item"]'));
}

function move(step) {
  const items = navItems();
  if (!items.length) return;
  const at = items.indexOf(document.activeElement);
  const next = at < 0 ? (step > 0 ? 0 : items.length - 1) : Math.min(items.length - 1, Math.max(0, at + step));
  items[next].focus();
  items[next].scrollIntoView({ block: 'nearest' });
}

function focusSearch() {
  const field = byId('search') || document.querySelector('#view .filters input, #view .filters select');
  if (field) {
    field.focus();
    if (field.select) field.select();
    return true;
  }
  location.hash = lastListHash();
  return true;
}

export function openHelp() {
  const dialog = byId('shortcuts-help');
  helpReturn = document.activeElement;
  const rows = SHORTCUTS.map(([keys, words]) => h('tr', null,
    h('th', { scope: 'row' }, keys.map((k, i) => [i ? ' then ' : '', h('kbd', null, k)])),
    h('td', null, words)));
  const close = h('button', { type: 'button', class: 'button', id: 'shortcuts-close', onclick: () => dialog.close() }, 'Close');
  dialog.replaceChildren(
    h('h2', { id: 'shortcuts-title' }, 'Keyboard shortcuts'),
    h('p', { class: 'muted small' }, 'They do nothing while you type in a field.'),
    h('table', { class: 'shortcut-table', id: 'shortcut-table' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Keys'), h('th', { scope: 'col' }, 'What it does'))),
      h('tbody', null, rows)),
    h('div', { class: 'dialog-actions' }, close));
  if (!dialog.open) dialog.showModal();
  close.focus();
}

function onKey(ev) {
  if (ev.key === 'Escape') {
    hideTip();
    closeTermHelp();
    pendingG = false;
    return;
  }
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented || typing(ev.target)) return;
  const open = openDialog();
  if (open && open.id !== 'calls-panel') return;
  if (pendingG) {
    pendingG = false;
    if (ev.key === 't') { ev.preventDefault(); location.hash = '#/'; return; }
    if (ev.key === 'r') { ev.preventDefault(); location.hash = '#/traces'; return; }
  }
  if (ev.key === '?') { ev.preventDefault(); openHelp(); return; }
  if (ev.key === 'j') { ev.preventDefault(); move(1); return; }
  if (ev.key === 'k') { ev.preventDefault(); move(-1); return; }
  if (open) return;
  if (ev.key === '/') { ev.preventDefault(); focusSearch(); return; }
  if (ev.key === 'g') { pendingG = true; return; }
  if (ev.key === 'c') {
    const button = byId('open-calls');
    if (button) { ev.preventDefault(); button.click(); }
  }
}

export function wireShortcuts() {
  document.addEventListener('keydown', onKey);
  const dialog = byId('shortcuts-help');
  dialog.addEventListener('close', () => {
    const back = helpReturn;
    helpReturn = null;
    restoreFocus(back);
  });
  const hint = byId('shortcuts-hint');
  if (hint) hint.addEventListener('click', openHelp);
}
