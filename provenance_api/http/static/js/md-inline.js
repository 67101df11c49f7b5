/* Markdown inline syntax (code, links, emphasis, autolinks, breaks) over a joined run of lines, as a
 * tree of nodes that point back into the string by offsets ({t: 'text', a, b}). */

export function joinLines(lines) {
  let s = '';
  const map = [];
  lines.forEach((line, k) => {
    if (k > 0) {
      const prev = lines[k - 1];
      s += '\n';
      map.push(prev.start + prev.text.length);
    }
    s += line.text;
    for (let j = 0; j < line.text.length; j += 1) map.push(line.start + j);
  });
  return { s, map };
}

const PUNCT = /[!-/:-@[-`{-~]/;
const WORD = /[\p{L}\p{N}]/u;
const SPACE = /\s/;

function findCodeClose(s, from, end, n) {
  let j = from;
  while (j < end) {
    const k = s.indexOf('`', j);
    if (k < 0 || k >= end) return -1;
    let run = 1;
    while (k + run < end && s[k + run] === '`') run += 1;
    if (run === n) return k;
    j = k + run;
  }
  return -1;
}

function parseLinkAt(s, i, end) {
  // s[i] === '['; returns {ta, tb, href, end} or null
  let depth = 0;
  let j = i;
  for (; j < end; j += 1) {
    const c = s[j];
    if (c === '\\') { j += 1; continue; }
    if (c === '`') {
      let n = 1;
      while (j + n < end && s[j + n] === '`') n += 1;
      const close = findCodeClose(s, j + n, end, n);
      if (close >= 0) { j = close + n - 1; continue; }
      j += n - 1;
      continue;
    }
    if (c === '[') depth += 1;
    else if (c === ']') { depth -= 1; if (depth === 0) break; }
  }
  if (j >= end || s[j + 1] !== '(') return null;
  let k = j + 2;
  let parens = 1;
  for (; k < end; k += 1) {
    const c = s[k];
    if (c === '\\') { k += 1; continue; }
    if (c === '(') parens += 1;
    else if (c === ')') { parens -= 1; if (parens === 0) break; }
    else if (c === '\n') return null;
  }
  if (k >= end) return null;
  let dest = s.slice(j + 2, k).trim();
  const titled = /^(\S+)\s+("[^"]*"|'[^']*'|\([^)]*\))$/.exec(dest);
  if (titled) dest = titled[1];
  if (dest.startsWith('<') && dest.endsWith('>')) dest = dest.slice(1, -1);
  return { ta: i + 1, tb: j, href: dest, end: k + 1 };
}

// A link's destination as the browser reads it (WHATWG URL parsing: tabs and newlines dropped, a backslash
// read as a slash in http(s) URLs, so "/\evil.example" is another host). Kept: a fragment ("#…", the
// viewer's own routes), a link that resolves to this origin, or one that names http, https or mailto itself;
// returned resolved, so the page links exactly where the check looked. Anything else is shown as text.
const EXTERNAL = new Set(['http:', 'https:', 'mailto:']);

export function safeHref(href) {
  const raw = String(href || '').trim();
  if (!raw) return null;
  let url;
  try {
    url = new URL(raw, location.origin);
  } catch {
    return null;
  }
  if (raw.startsWith('#')) return url.hash || '#';
  if (url.origin === location.origin && (url.protocol === 'http:' || url.protocol === 'https:')) return url.href;
  const named = /^([a-z][a-z0-9+.-]*):/i.exec(raw.replace(/[\t\n\r]/g, ''));
  if (named && EXTERNAL.has(named[1].toLowerCase() + ':') && EXTERNAL.has(url.protocol)) return url.href;
  return null;
}

function canOpen(s, i, n, c, lo) {
  const after = s[i + n];
  if (after === undefined || SPACE.test(after)) return false;
  const before = i > lo ? s[i - 1] : ' ';
  if (c === '_' && WORD.test(before)) return false;
  if (PUNCT.test(after) && !(SPACE.test(before) || PUNCT.test(before))) return false;
  return true;
}

function findClose(s, from, end, c, n) {
  for (let j = from; j <= end - n; j += 1) {
    if (s[j] === '\\') { j += 1; continue; }
    if (s[j] === '`') {
      let run = 1;
      while (j + run < end && s[j + run] === '`') run += 1;
      const close = findCodeClose(s, j + run, end, run);
      if (close >= 0) j = close + run - 1;
      continue;
    }
    if (s[j] !== c) continue;
    let run = 1;
    while (j + run < end && s[j + run] === c) run += 1;
    if (run >= n && !(n === 1 && run === 2) && !SPACE.test(s[j - 1])) {
      const after = s[j + run];
      if (c === '_' && after !== undefined && WORD.test(after)) { j += run - 1; continue; }
      return j; // a longer closing run (as in ***a***) closes the inner span first
    }
    j += run - 1;
  }
  return -1;
}

export function parseInline(s, lo, hi) {
  const out = [];
  let textFrom = lo;
  let i = lo;
  const flush = (to) => { if (to > textFrom) out.push({ t: 'text', a: textFrom, b: to }); };
  while (i < hi) {
    const c = s[i];
    if (c === '\\' && i + 1 < hi) {
      if (s[i + 1] === '\n') { flush(i); out.push({ t: 'br' }); i += 2; textFrom = i; continue; }
      if (PUNCT.test(s[i + 1])) { flush(i); out.push({ t: 'text', a: i + 1, b: i + 2 }); i += 2; textFrom = i; continue; }
    }
    if (c === '`') {
      let n = 1;
      while (i + n < hi && s[i + n] === '`') n += 1;
      const close = findCodeClose(s, i + n, hi, n);
      if (close >= 0) {
        flush(i);
        let a = i + n;
        let b = close;
        if (b - a >= 2 && s[a] === ' ' && s[b - 1] === ' ' && s.slice(a, b).trim()) { a += 1; b -= 1; }
        out.push({ t: 'code', a, b });
        i = close + n;
        textFrom = i;
        continue;
      }
      i += n;
      continue;
    }
    if ((c === '[' || (c === '!' && s[i + 1] === '[')) && i + 1 < hi) {
      const image = c === '!';
      const link = parseLinkAt(s, image ? i + 1 : i, hi);
      if (link) {
        flush(i);
        out.push({ t: image ? 'image' : 'link', href: link.href, kids: parseInline(s, link.ta, link.tb) });
        i = link.end;
        textFrom = i;
        continue;
      }
    }
    if (c === '<') {
      const m = /^<(https?:\/\/[^\s<>]+|mailto:[^\s<>]+)>/i.exec(s.slice(i, Math.min(hi, i + 2048)));
      if (m) {
        flush(i);
        out.push({ t: 'link', href: m[1], kids: [{ t: 'text', a: i + 1, b: i + 1 + m[1].length }] });
        i += m[0].length;
        textFrom = i;
        continue;
      }
    }
    if ((c === 'h' || c === 'H') && (i === lo || /[\s(*_~[]/.test(s[i - 1]))) {
      const m = /^https?:\/\/[^\s<>]*[^\s<>.,:;"'!?)\]*_~]/i.exec(s.slice(i, Math.min(hi, i + 2048)));
      if (m) {
        flush(i);
        out.push({ t: 'link', href: m[0], kids: [{ t: 'text', a: i, b: i + m[0].length }] });
        i += m[0].length;
        textFrom = i;
        continue;
      }
    }
    if (c === '*' || c === '_' || c === '~') {
      let n = 1;
      while (i + n < hi && s[i + n] === c) n += 1;
      const node = emphasis(s, i, n, c, lo, hi);
      if (node) {
        flush(i);
        out.push(node.node);
        i = node.end;
        textFrom = i;
        continue;
      }
      i += n;
      continue;
    }
    if (c === '\n') {
      let k = i;
      while (k > textFrom && s[k - 1] === ' ') k -= 1;
      if (i - k >= 2) { flush(k); out.push({ t: 'br' }); i += 1; textFrom = i; continue; }
    }
    i += 1;
  }
  flush(hi);
  return out;
}

function emphasis(s, i, n, c, lo, hi) {
  if (c === '~') {
    if (n !== 2 || !canOpen(s, i, 2, c, lo)) return null;
    const close = findClose(s, i + 2, hi, c, 2);
    if (close < 0) return null;
    return { node: { t: 'del', kids: parseInline(s, i + 2, close) }, end: close + 2 };
  }
  const width = n >= 2 ? 2 : 1;
  const open = i + (n - width);
  if (!canOpen(s, open, width, c, lo)) return null;
  const close = findClose(s, open + width + 1, hi, c, width);
  if (close < 0) return null;
  let node = { t: width === 2 ? 'strong' : 'em', kids: parseInline(s, open + width, close) };
  let end = close + width;
  if (n >= 3 && s[end] === c) {
    node = { t: 'em', kids: [node] };
    end += 1;
  } else if (n > width) {
    // leading delimiters left over stay literal text
    return { node: { t: 'group', kids: [{ t: 'text', a: i, b: open }, node] }, end };
  }
  return { node, end };
}

