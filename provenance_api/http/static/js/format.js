/* How numbers, dates and spans read on the page. */

import { label } from './glossary.js';

const NUM = new Intl.NumberFormat('en-US');

export const enc = encodeURIComponent;

export function fmtInt(n) {
  return n === null || n === undefined ? '—' : NUM.format(n);
}

/** An estimated cost (the gate): "~$0.123", "$0.00", or why it is unknown. */
export function fmtCost(usd) {
  if (usd === null || usd === undefined) return 'unknown — no price is known for this model';
  if (usd === 0) return '$0.00';
  if (usd < 0.01) return '~$' + usd.toFixed(4);
  return '~$' + usd.toFixed(3);
}

/** A cost actually billed: "$0.0123", or "unknown". */
export function fmtBilled(usd) {
  if (usd === null || usd === undefined) return 'unknown';
  return '$' + usd.toFixed(4);
}

export function fmtScore(x) {
  return x === null || x === undefined ? label('verdict.no_information') : x.toFixed(2);  // a score that carried none
}

export function fmtDrop(x) {
  if (x === null || x === undefined) return 'not measured';
  return (x >= 0 ? '+' : '−') + Math.abs(x).toFixed(2);
}

export function fmtDate(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
}

export function fmtSeconds(s) {
  if (s === null || s === undefined) return '—';
  return s < 10 ? s.toFixed(2) + ' s' : s.toFixed(1) + ' s';
}

export function plural(n, one, many) {
  return NUM.format(n) + ' ' + (n === 1 ? one : many || one + 's');
}

export function lineSpan(a, b) {
  if (a === null || a === undefined) return '';
  return a === b ? 'line ' + a : 'lines ' + a + '–' + b;
}

export function clip(text, n) {
  const flat = String(text || '').replace(/\s+/g, ' ').trim();
  return flat.length <= n ? flat : flat.slice(0, n - 1).trimEnd() + '…';
}
