/* Readable evidence: where a verified quote sits in its source, and a view of it a person can read.
 *
 * Quotes are verified as the service does (casefold, JSON escapes decoded, whitespace collapsed), so a
 * quote is found in the source's raw text by the same rule, with a map back to raw offsets. A source
 * that is JSON (a tool's return, often with JSON inside its strings) is shown pretty-printed, with the
 * quoted span found again in the pretty text (whitespace ignored) and marked. */

import { h } from './dom.js';

const ESCAPES = { '"': '"', n: '\n', r: '\r', t: '\t', '/': '/', '\\': '\\' };
const MAX_NEST = 4;
const CONTEXT_LINES = 2;

/** The text normalised for matching, with each normalised character's raw [start, end). */
function normalised(raw, dropSpace) {
  let text = '';
  const starts = [];
  const ends = [];
  let inSpace = false;
  for (let i = 0; i < raw.length; i += 1) {
    let c = raw[i];
    let width = 1;
    if (c === '\\' && i + 1 < raw.length && raw[i + 1] in ESCAPES) { c = ESCAPES[raw[i + 1]]; width = 2; }
    if (/\s/.test(c)) {
      if (!dropSpace && !inSpace && text.length) { text += ' '; starts.push(i); ends.push(i + width); }
      inSpace = true;
    } else {
      const lower = c.toLowerCase();
      for (const ch of lower) { text += ch; starts.push(i); ends.push(i + width); }
      inSpace = false;
    }
    i += width - 1;
  }
  return { text, starts, ends };
}

function norm(text, dropSpace) {
  return normalised(text, dropSpace).text.trim();
}

/** [start, end) of the quote in raw text (by the service's rule, else ignoring whitespace), or null. */
export function locate(raw, quote, from) {
  for (const dropSpace of [false, true]) {
    const needle = norm(quote, dropSpace);
    if (!needle) return null;
    const hay = normalised(raw, dropSpace);
    let lo = 0;
    if (from) while (lo < hay.starts.length && hay.starts[lo] < from) lo += 1;
    const at = hay.text.indexOf(needle, lo);
    if (at >= 0) return [hay.starts[at], hay.ends[at + needle.length - 1]];
  }
  return null;
}

/** A JSON value with JSON-looking strings inside it parsed too (a tool return often nests them). */
function unnest(value, depth) {
  if (depth > MAX_NEST) return value;
  if (typeof value === 'string') {
    const t = value.trim();
    if ((t.startsWith('{') && t.endsWith('}')) || (t.startsWith('[') && t.endsWith(']'))) {
      try { return unnest(JSON.parse(t), depth + 1); } catch (err) { return value; }
    }
    return value;
  }
  if (Array.isArray(value)) return value.map((v) => unnest(v, depth + 1));
  if (value && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = unnest(v, depth + 1);
    return out;
  }
  return value;
}

/** The source pretty-printed when it is JSON (nested JSON strings opened too), else null. */
export function prettyJson(raw) {
  const t = raw.trim();
  if (!t || !'{["'.includes(t[0])) return null;
  try {
    const value = unnest(JSON.parse(t), 0);
    if (value === null || typeof value !== 'object') return null;
    return JSON.stringify(value, null, 2);
  } catch (err) {
    return null;
  }
}

const MAX_SIDE = 400;

function lineStartBefore(text, pos, count) {
  let start = text.lastIndexOf('\n', pos - 1) + 1;
  for (let k = 0; k < count && start > 0; k += 1) start = text.lastIndexOf('\n', start - 2) + 1;
  return start;
}

function lineEndAfter(text, pos, count) {
  let end = text.indexOf('\n', pos);
  for (let k = 0; k < count && end >= 0; k += 1) end = text.indexOf('\n', end + 1);
  return end < 0 ? text.length : end;
}

/** The lines of `text` around [a, b) (`context` more on each side, at most MAX_SIDE characters each). */
function excerpt(text, a, b, context) {
  let top = lineStartBefore(text, a, context);
  let bottom = lineEndAfter(text, b, context);
  top = Math.max(top, a - MAX_SIDE);
  bottom = Math.min(bottom, b + MAX_SIDE);
  return { before: text.slice(top, a), marked: text.slice(a, b), after: text.slice(b, bottom), clippedTop: top > 0, clippedBottom: bottom < text.length };
}

/**
 * A readable view of a quote in its source: the source pretty-printed when it is JSON, else the raw text,
 * cut to the lines around the quote, with the quoted span in <mark>. Null when the quote is not found.
 */
export function readableQuote(raw, quote) {
  const pretty = prettyJson(raw);
  if (pretty !== null) {
    const span = locate(pretty, quote);
    if (span) return render(excerpt(pretty, span[0], span[1], CONTEXT_LINES), true);
  }
  const span = locate(raw, quote);
  if (!span) return null;
  return render(excerpt(raw, span[0], span[1], 0), false);
}

function render(part, json) {
  return h('span', { class: 'evidence' + (json ? ' json' : ''), dataset: { format: json ? 'json' : 'text' } },
    part.clippedTop ? '… ' : '', part.before, h('mark', null, part.marked), part.after, part.clippedBottom ? ' …' : '');
}
