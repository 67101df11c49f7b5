/* Provenance viewer: plain JavaScript, no build step, no third-party code.
 *
 * Views (hash routes, so nothing secret is ever in a URL):
 *   #/                         stored turns, searchable
 *   #/turn/<id>                one turn: the response with its free-tier marks, sources, past traces
 *   #/turn/<id>/trace/<tid>    the same, with one trace's live progress or result
 *
 * The API key is sent once to POST /ui/session and kept by the browser in an HttpOnly cookie; every
 * request below rides on that cookie. Text from turns is only ever inserted as text nodes.
 */
'use strict';

(function () {
  // ------------------------------------------------------------------ DOM helpers

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

  function h(tag, props, ...kids) {
    return add(setProps(document.createElement(tag), props), kids);
  }

  function svg(tag, props, ...kids) {
    return add(setProps(document.createElementNS(SVG_NS, tag), props), kids);
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function announce(message) {
    const region = byId('announce');
    region.textContent = '';
    window.setTimeout(() => { region.textContent = message; }, 30);
  }

  // ------------------------------------------------------------------ formatting

  const NUM = new Intl.NumberFormat('en-US');

  function fmtInt(n) {
    return n === null || n === undefined ? '—' : NUM.format(n);
  }

  function fmtCost(usd) {
    if (usd === null || usd === undefined) return 'unknown — no price is known for this model';
    if (usd === 0) return '$0.00';
    if (usd < 0.01) return '~$' + usd.toFixed(4);
    return '~$' + usd.toFixed(3);
  }

  function fmtScore(x) {
    return x === null || x === undefined ? 'no information' : x.toFixed(2);
  }

  function fmtDrop(x) {
    if (x === null || x === undefined) return 'not measured';
    return (x >= 0 ? '+' : '−') + Math.abs(x).toFixed(2);
  }

  function fmtDate(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    return d.toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  }

  function plural(n, one, many) {
    return n + ' ' + (n === 1 ? one : many || one + 's');
  }

  function lineSpan(a, b) {
    if (a === null || a === undefined) return '';
    return a === b ? 'line ' + a : 'lines ' + a + '–' + b;
  }

  function clip(text, n) {
    const flat = String(text || '').replace(/\s+/g, ' ').trim();
    return flat.length <= n ? flat : flat.slice(0, n - 1).trimEnd() + '…';
  }

  // ------------------------------------------------------------------ API

  class ApiError extends Error {
    constructor(status, body) {
      let text = 'HTTP ' + status;
      if (body && typeof body === 'object') {
        text = body.detail || body.title || text;
        if (body.fix) text += ' — ' + body.fix;
      }
      super(text);
      this.status = status;
      this.body = body;
    }
  }

  async function api(path, options) {
    const opts = options || {};
    const init = { method: opts.method || 'GET', headers: { Accept: 'application/json' }, credentials: 'same-origin' };
    if (opts.body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    const response = await fetch(path, init);
    const type = response.headers.get('content-type') || '';
    const data = type.includes('json') ? await response.json() : await response.text();
    if (!response.ok) {
      const error = new ApiError(response.status, data);
      if (response.status === 401 && !opts.allow401) onSignedOut();
      throw error;
    }
    return data;
  }

  const enc = encodeURIComponent;

  // ------------------------------------------------------------------ icons (inline SVG, decorative)

  const ICONS = {
    user_tool: ['M3 13 9 7', 'M8.5 3.5a3 3 0 0 0 4 4l-1.5 1.5-4-4z', 'M2.5 12.5l1 1'],
    mcp_tool: ['M5 2v3M11 2v3', 'M3.5 5h9v3a4.5 4.5 0 0 1-9 0z', 'M8 12.5V15'],
    artifact_read: ['M4 1.5h5l3 3v10H4z', 'M9 1.5v3h3', 'M6 8h4M6 10.5h4'],
    web_fetch: ['M8 1.5a6.5 6.5 0 1 0 0 13a6.5 6.5 0 1 0 0-13z', 'M1.5 8h13', 'M8 1.5c2 2 2 11 0 13M8 1.5c-2 2-2 11 0 13'],
    web_search: ['M7 2.5a4.5 4.5 0 1 0 0 9a4.5 4.5 0 1 0 0-9z', 'M10.3 10.3 14 14'],
    instructions: ['M3 2.5h10v11H3z', 'M5.5 5.5h5M5.5 8h5M5.5 10.5h3'],
    history: ['M2 3h12v7.5H7l-3 2.5v-2.5H2z'],
  };

  const KIND_NAMES = {
    user_tool: 'tool call',
    mcp_tool: 'MCP tool',
    artifact_read: 'file read',
    web_fetch: 'web page',
    web_search: 'web search',
    instructions: 'agent instructions',
    history: 'earlier message',
  };

  function kindIcon(kind) {
    const paths = ICONS[kind] || ICONS.user_tool;
    return svg('svg', { class: 'kind-icon', viewBox: '0 0 16 16', 'aria-hidden': 'true', focusable: 'false' },
      paths.map((d) => svg('path', { d })));
  }

  function kindName(kind) {
    return KIND_NAMES[kind] || kind;
  }

  const LAYER_NAMES = { tools: 'Tools', instructions: 'Instructions', history: 'History' };

  // ------------------------------------------------------------------ markdown (with source offsets)
  //
  // Every text node the renderer creates is a contiguous slice of the markdown source, and its
  // starting offset is recorded, so the server's segments (character offsets into the raw response)
  // can be laid onto the rendered text, and a selection can be mapped back onto the source.

  const RE = {
    blank: /^[ \t]*$/,
    fence: /^( {0,3})(`{3,}|~{3,})(.*)$/,
    heading: /^ {0,3}(#{1,6})(?:[ \t]+|$)/,
    hr: /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$/,
    quote: /^ {0,3}> ?/,
    item: /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)/,
    tableSep: /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/,
  };

  function splitLines(src) {
    const lines = [];
    let at = 0;
    for (;;) {
      let nl = src.indexOf('\n', at);
      if (nl < 0) nl = src.length;
      let text = src.slice(at, nl);
      if (text.endsWith('\r')) text = text.slice(0, -1);
      lines.push({ text, start: at });
      if (nl >= src.length) break;
      at = nl + 1;
    }
    return lines;
  }

  function cut(line, n) {
    return { text: line.text.slice(n), start: line.start + n };
  }

  function columns(text) {
    let col = 0;
    for (const c of text) {
      if (c === ' ') col += 1;
      else if (c === '\t') col += 4 - (col % 4);
      else break;
    }
    return col;
  }

  function dropColumns(line, cols) {
    let i = 0;
    let col = 0;
    const t = line.text;
    while (i < t.length && col < cols && (t[i] === ' ' || t[i] === '\t')) {
      col = t[i] === '\t' ? col + 4 - (col % 4) : col + 1;
      i += 1;
    }
    return cut(line, i);
  }

  function trimLine(line) {
    const lead = line.text.length - line.text.replace(/^[ \t]+/, '').length;
    const text = line.text.slice(lead).replace(/[ \t]+$/, '');
    return { text, start: line.start + lead };
  }

  function interrupts(text) {
    if (RE.fence.test(text) || RE.heading.test(text) || RE.hr.test(text) || RE.quote.test(text)) return true;
    const m = RE.item.exec(text);
    if (!m || !m[3]) return false;
    return /\d/.test(m[2]) ? parseInt(m[2], 10) === 1 : true;
  }

  function parseBlocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      const t = line.text;
      let m;
      if (RE.blank.test(t)) { i += 1; continue; }
      if ((m = RE.fence.exec(t)) && !(m[2][0] === '`' && m[3].includes('`'))) {
        const mark = m[2];
        const closing = new RegExp('^ {0,3}' + (mark[0] === '`' ? '`' : '~') + '{' + mark.length + ',}[ \\t]*$');
        const body = [];
        i += 1;
        while (i < lines.length && !closing.test(lines[i].text)) {
          body.push(dropColumns(lines[i], m[1].length));
          i += 1;
        }
        i += 1;
        out.push({ type: 'code', lines: body, info: m[3].trim() });
        continue;
      }
      if ((m = RE.heading.exec(t))) {
        let content = cut(line, m[0].length);
        const closing = /(^|[ \t]+)#+[ \t]*$/.exec(content.text);
        if (closing) content = { text: content.text.slice(0, closing.index), start: content.start };
        out.push({ type: 'heading', level: m[1].length, lines: [trimLine(content)] });
        i += 1;
        continue;
      }
      if (RE.hr.test(t)) { out.push({ type: 'hr' }); i += 1; continue; }
      if (RE.quote.test(t)) {
        const inner = [];
        while (i < lines.length && !RE.blank.test(lines[i].text)) {
          const q = RE.quote.exec(lines[i].text);
          inner.push(q ? cut(lines[i], q[0].length) : lines[i]);
          i += 1;
        }
        out.push({ type: 'quote', children: parseBlocks(inner) });
        continue;
      }
      if (RE.item.test(t)) {
        const [list, next] = parseList(lines, i);
        out.push(list);
        i = next;
        continue;
      }
      if (t.includes('|') && i + 1 < lines.length && RE.tableSep.test(lines[i + 1].text)) {
        const [table, next] = parseTable(lines, i);
        out.push(table);
        i = next;
        continue;
      }
      const para = [];
      while (i < lines.length && !RE.blank.test(lines[i].text) && !(para.length && interrupts(lines[i].text))) {
        para.push(cut(lines[i], lines[i].text.length - lines[i].text.replace(/^[ \t]+/, '').length));
        i += 1;
      }
      const last = para.length - 1;
      para[last] = { text: para[last].text.replace(/[ \t]+$/, ''), start: para[last].start };
      out.push({ type: 'para', lines: para });
    }
    return out;
  }

  function parseList(lines, i) {
    const first = RE.item.exec(lines[i].text);
    const ordered = /\d/.test(first[2]);
    const delimiter = ordered ? first[2].slice(-1) : first[2];
    const items = [];
    let loose = false;
    while (i < lines.length) {
      const m = RE.item.exec(lines[i].text);
      if (!m) break;
      const isOrdered = /\d/.test(m[2]);
      if (isOrdered !== ordered || (ordered ? m[2].slice(-1) : m[2]) !== delimiter) break;
      const markerIndent = m[1].length;
      const gap = m[3].length === 0 || m[3].length > 4 ? 1 : m[3].length;
      const contentCol = markerIndent + m[2].length + gap;
      const itemLines = [cut(lines[i], Math.min(lines[i].text.length, markerIndent + m[2].length + gap))];
      i += 1;
      let blank = false;
      while (i < lines.length) {
        const t = lines[i].text;
        if (RE.blank.test(t)) { blank = true; itemLines.push({ text: '', start: lines[i].start }); i += 1; continue; }
        const indent = columns(t);
        if (indent >= contentCol || (indent > markerIndent && RE.item.test(t))) {
          itemLines.push(dropColumns(lines[i], Math.min(indent, contentCol)));
          blank = false;
          i += 1;
          continue;
        }
        if (blank || RE.item.test(t) || interrupts(t)) break;
        itemLines.push(cut(lines[i], t.length - t.replace(/^[ \t]+/, '').length));
        i += 1;
      }
      while (itemLines.length && itemLines[itemLines.length - 1].text === '') itemLines.pop();
      if (blank && i < lines.length && RE.item.test(lines[i].text)) loose = true;
      if (itemLines.some((l) => l.text === '')) loose = true;
      items.push({ children: parseBlocks(itemLines) });
    }
    const start = ordered ? parseInt(first[2], 10) : null;
    return [{ type: 'list', ordered, start, items, loose }, i];
  }

  function splitCells(line) {
    const cells = [];
    const t = line.text;
    let i = 0;
    while (i < t.length && (t[i] === ' ' || t[i] === '\t')) i += 1;
    if (t[i] === '|') i += 1;
    let from = i;
    for (; i <= t.length; i += 1) {
      if (i < t.length && t[i] === '\\') { i += 1; continue; }
      if (i === t.length || t[i] === '|') {
        const cell = trimLine({ text: t.slice(from, i), start: line.start + from });
        if (!(i === t.length && cell.text === '' && cells.length)) cells.push(cell);
        from = i + 1;
      }
    }
    return cells;
  }

  function parseTable(lines, i) {
    const head = splitCells(lines[i]);
    const aligns = splitCells(lines[i + 1]).map((c) => {
      const l = c.text.startsWith(':');
      const r = c.text.endsWith(':');
      return l && r ? 'center' : r ? 'right' : l ? 'left' : null;
    });
    const rows = [];
    i += 2;
    while (i < lines.length && !RE.blank.test(lines[i].text) && lines[i].text.includes('|')) {
      rows.push(splitCells(lines[i]));
      i += 1;
    }
    return [{ type: 'table', head, aligns, rows }, i];
  }

  // ---- inline

  function joinLines(lines) {
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

  function safeHref(href) {
    const h2 = String(href || '').trim();
    if (/^(https?:|mailto:)/i.test(h2)) return h2;
    if (/^(#|\/(?!\/))/.test(h2)) return h2;
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

  function parseInline(s, lo, hi) {
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

  // ---- rendering

  function emitText(parent, ctx, a, b) {
    let k = a;
    while (k < b) {
      let e = k + 1;
      while (e < b && ctx.map[e] === ctx.map[e - 1] + 1) e += 1;
      const node = document.createTextNode(ctx.s.slice(k, e));
      parent.append(node);
      ctx.runs.push({ node, start: ctx.map[k] });
      k = e;
    }
  }

  function renderInline(nodes, parent, ctx) {
    for (const n of nodes) {
      if (n.t === 'text') emitText(parent, ctx, n.a, n.b);
      else if (n.t === 'code') { const el = h('code'); emitText(el, ctx, n.a, n.b); parent.append(el); }
      else if (n.t === 'strong' || n.t === 'em' || n.t === 'del') {
        const el = h(n.t);
        renderInline(n.kids, el, ctx);
        parent.append(el);
      } else if (n.t === 'group') renderInline(n.kids, parent, ctx);
      else if (n.t === 'br') parent.append(h('br'));
      else if (n.t === 'link') {
        const href = safeHref(n.href);
        const el = href ? h('a', { href, rel: 'noopener noreferrer', target: href.startsWith('#') ? null : '_blank' }) : h('span');
        renderInline(n.kids, el, ctx);
        parent.append(el);
      } else if (n.t === 'image') {
        const el = h('span', { class: 'md-image' }, '[image: ');
        renderInline(n.kids, el, ctx);
        el.append(']');
        parent.append(el);
      }
    }
  }

  function inlineInto(parent, lines, runs) {
    const { s, map } = joinLines(lines);
    renderInline(parseInline(s, 0, s.length), parent, { s, map, runs });
    return parent;
  }

  function renderBlocks(blocks, parent, runs, tight) {
    for (const b of blocks) {
      if (b.type === 'para') {
        if (tight) inlineInto(parent, b.lines, runs);
        else parent.append(inlineInto(h('p'), b.lines, runs));
      } else if (b.type === 'heading') {
        parent.append(inlineInto(h('h' + Math.min(6, b.level + 2)), b.lines, runs));
      } else if (b.type === 'hr') parent.append(h('hr'));
      else if (b.type === 'code') {
        const code = h('code');
        if (b.lines.length) {
          const { s, map } = joinLines(b.lines);
          emitText(code, { s, map, runs }, 0, s.length);
        }
        parent.append(h('pre', null, code));
      } else if (b.type === 'quote') {
        const q = h('blockquote');
        renderBlocks(b.children, q, runs, false);
        parent.append(q);
      } else if (b.type === 'list') {
        const list = h(b.ordered ? 'ol' : 'ul', { class: b.loose ? null : 'tight', start: b.ordered && b.start !== 1 ? b.start : null });
        for (const item of b.items) {
          const li = h('li');
          const simple = !b.loose && item.children.length >= 1;
          item.children.forEach((child, k) => {
            if (simple && child.type === 'para') {
              if (k > 0) li.append(h('br'));
              inlineInto(li, child.lines, runs);
            } else renderBlocks([child], li, runs, false);
          });
          list.append(li);
        }
        parent.append(list);
      } else if (b.type === 'table') {
        const table = h('table');
        const headRow = h('tr');
        b.head.forEach((cell, k) => headRow.append(inlineInto(h('th', { scope: 'col', class: null, align: b.aligns[k] || null }), [cell], runs)));
        table.append(h('thead', null, headRow));
        const body = h('tbody');
        for (const row of b.rows) {
          const tr = h('tr');
          row.forEach((cell, k) => tr.append(inlineInto(h('td', { align: b.aligns[k] || null }), [cell], runs)));
          body.append(tr);
        }
        table.append(body);
        parent.append(table);
      }
    }
  }

  function renderMarkdown(src) {
    const runs = [];
    const root = h('div', { class: 'md' });
    renderBlocks(parseBlocks(splitLines(src)), root, runs, false);
    return { root, runs };
  }

  // ------------------------------------------------------------------ state and routing

  const state = {
    session: null,
    turn: null,        // {turn_id, turn, segments, sources}
    selection: null,   // {start, end, text} of a selection in the response
    run: null,         // {traceId, source: EventSource|null}
    traceShown: null,
  };

  function view() {
    return byId('view');
  }

  function focusHeading() {
    const heading = view().querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: false });
    }
  }

  function parseRoute() {
    const hash = location.hash || '#/';
    if (!hash.startsWith('#/')) return null;
    const parts = hash.slice(2).split('/').filter(Boolean).map((p) => decodeURIComponent(p));
    if (parts[0] === 'turn' && parts[1]) {
      if (parts[2] === 'trace' && parts[3]) return { name: 'turn', turnId: parts[1], traceId: parts[3] };
      return { name: 'turn', turnId: parts[1], traceId: null };
    }
    return { name: 'turns' };
  }

  function turnHash(turnId, traceId) {
    return '#/turn/' + enc(turnId) + (traceId ? '/trace/' + enc(traceId) : '');
  }

  async function route() {
    const r = parseRoute();
    if (r === null) return;
    closeStream();
    hideTip();
    if (!state.session) {
      renderSignIn();
      return;
    }
    if (r.name === 'turn') await showTurn(r.turnId, r.traceId);
    else await showTurns();
  }

  function closeStream() {
    if (state.run && state.run.source) {
      state.run.source.close();
    }
    state.run = null;
  }

  function showError(err, where) {
    const target = where || view();
    target.replaceChildren(h('p', { class: 'notice bad', role: 'alert' }, err.message || String(err)));
  }

  // ------------------------------------------------------------------ sign-in

  function setWho() {
    const who = byId('who');
    if (state.session && state.session.signed_in) {
      byId('who-name').textContent = 'Signed in as ' + state.session.user + ' · tenant ' + state.session.tenant;
      who.hidden = false;
    } else {
      who.hidden = true;
    }
  }

  function onSignedOut() {
    state.session = null;
    setWho();
    closeStream();
    renderSignIn('Your session ended; sign in again.');
  }

  function renderSignIn(message) {
    setWho();
    const error = h('p', { id: 'signin-error', class: 'error', role: 'alert' }, message || '');
    const input = h('input', {
      id: 'signin-key', type: 'password', name: 'api_key', autocomplete: 'off', spellcheck: 'false',
      required: true, 'aria-describedby': 'signin-hint signin-error',
    });
    const form = h('form', { class: 'signin', method: 'post', action: '/ui/session', novalidate: true },
      h('div', { class: 'field' },
        h('label', { for: 'signin-key' }, 'API key'),
        h('span', { id: 'signin-hint', class: 'hint' },
          'The admin key is printed once when the service first starts, and saved owner-only as admin.key in its data directory. Other keys: provenance keys create --tenant T --user U.'),
        input),
      h('div', { class: 'row' }, h('button', { id: 'signin-submit', class: 'button primary', type: 'submit' }, 'Sign in')),
      error);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const key = input.value.trim();
      if (!key) { error.textContent = 'Enter an API key.'; input.focus(); return; }
      error.textContent = '';
      try {
        state.session = await api('/ui/session', { method: 'POST', body: { api_key: key }, allow401: true });
        input.value = '';
        setWho();
        announce('Signed in.');
        await route();
      } catch (err) {
        error.textContent = err.status === 401 ? 'That API key is not valid.' : err.message;
        input.focus();
      }
    });
    view().replaceChildren(h('h1', null, 'Sign in'), h('p', null, 'Sign in with an API key to look at stored turns and trace their claims. The key is kept in a cookie this page cannot read, and never appears in an address.'), form);
    input.focus();
  }

  async function signOut() {
    try { await api('/ui/logout', { method: 'POST' }); } catch (err) { /* signed out anyway */ }
    state.session = null;
    state.turn = null;
    closeStream();
    setWho();
    history.pushState(null, '', '#/');
    renderSignIn('Signed out.');
  }

  // ------------------------------------------------------------------ turns list

  let searchTimer = 0;

  async function showTurns() {
    state.turn = null;
    const params = new URLSearchParams(location.hash.split('?')[1] || '');
    const input = h('input', { id: 'search', type: 'search', name: 'q', value: params.get('q') || '', autocomplete: 'off', 'aria-describedby': 'search-hint' });
    const list = h('ul', { id: 'turn-list', class: 'turn-list', 'aria-labelledby': 'turns-title' });
    const count = h('p', { id: 'turn-count', class: 'muted small', 'aria-live': 'polite' });
    const more = h('div', { class: 'row' });
    const form = h('form', { role: 'search', class: 'field', onsubmit: (ev) => { ev.preventDefault(); load(true); } },
      h('label', { for: 'search' }, 'Search turns by text'),
      h('span', { id: 'search-hint', class: 'hint' }, 'Matches the turn id, agent, model, the question and the response.'),
      input);
    view().replaceChildren(h('h1', { id: 'turns-title' }, 'Stored turns'), form, count, list, more);
    let cursor = null;
    let shown = 0;
    async function load(reset) {
      if (reset) { cursor = null; shown = 0; list.replaceChildren(); more.replaceChildren(); }
      count.textContent = 'Loading…';
      const query = new URLSearchParams({ limit: '25' });
      if (input.value.trim()) query.set('q', input.value.trim());
      if (cursor) query.set('cursor', cursor);
      let page;
      try {
        page = await api('/ui/api/turns?' + query.toString());
      } catch (err) {
        count.textContent = '';
        showError(err, more);
        return;
      }
      for (const item of page.items) list.append(turnRow(item));
      shown += page.items.length;
      cursor = page.next_cursor;
      count.textContent = shown === 0 ? (input.value.trim() ? 'No stored turn matches.' : 'No turns are stored yet: store one with POST /v1/turns or provenance import.') : plural(shown, 'turn') + (cursor ? ' shown; more below' : '');
      more.replaceChildren();
      if (cursor) more.append(h('button', { type: 'button', class: 'button', onclick: () => load(false) }, 'Show more turns'));
    }
    input.addEventListener('input', () => {
      window.clearTimeout(searchTimer);
      searchTimer = window.setTimeout(() => load(true), 250);
    });
    await load(true);
    focusHeading();
  }

  function turnRow(item) {
    const date = fmtDate(item.created_at || item.stored_at);
    return h('li', null,
      h('a', { class: 'turn-link', href: turnHash(item.turn_id), dataset: { turnId: item.turn_id } },
        h('span', { class: 'title' }, (item.agent || 'Unnamed agent') + ' — ' + item.turn_id),
        h('span', { class: 'meta' }, [item.model || 'model not recorded', date].filter(Boolean).join(' · ')),
        h('span', { class: 'summary' }, item.summary),
        item.query ? h('span', { class: 'excerpt' }, 'Asked: ' + item.query) : null));
  }

  // ------------------------------------------------------------------ turn view

  async function showTurn(turnId, traceId) {
    if (state.turn && state.turn.turn_id === turnId && byId('response')) {
      // same turn already on screen: only the trace part changes
      markCurrentTrace(traceId);
      if (traceId) await showTrace(traceId);
      else byId('result').replaceChildren();
      return;
    }
    view().replaceChildren(h('p', { class: 'muted' }, 'Loading the turn…'));
    let turn;
    let segments;
    let sources;
    try {
      [turn, segments, sources] = await Promise.all([
        api('/v1/turns/' + enc(turnId)),
        api('/v1/turns/' + enc(turnId) + '/segments'),
        api('/v1/turns/' + enc(turnId) + '/sources'),
      ]);
    } catch (err) {
      view().replaceChildren(h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All turns')));
      view().append(h('h1', null, 'Turn ' + turnId));
      showError(err, view().appendChild(h('div')));
      return;
    }
    state.turn = { turn_id: turnId, turn: turn.turn, segments, sources, sourceById: indexSources(sources) };
    state.selection = null;
    renderTurn();
    focusHeading();
    await loadPastTraces();
    if (traceId) await showTrace(traceId);
  }

  function indexSources(sources) {
    const out = {};
    for (const layer of sources.layers) for (const s of layer.sources) out[s.id] = s;
    return out;
  }

  function renderTurn() {
    const { turn, segments, sources } = state.turn;
    const title = (turn.agent || 'Unnamed agent') + ' — turn ' + turn.turn_id;
    const meta = [turn.model ? 'model ' + turn.model : 'model not recorded', fmtDate(turn.created_at)].filter(Boolean).join(' · ');
    const query = (turn.query || '').trim();

    const { root, runs } = renderMarkdown(turn.response);
    root.id = 'response';
    root.setAttribute('aria-describedby', 'summary-line');
    const decorated = decorateSegments(root, runs, segments.segments);

    const selButton = h('button', { id: 'trace-selection', type: 'button', class: 'button', disabled: true, 'aria-describedby': 'selection-hint' }, 'Trace the selected text');
    selButton.addEventListener('mousedown', (ev) => ev.preventDefault());
    selButton.addEventListener('click', () => {
      if (state.selection) openGate(state.selection.sentence, state.selection.text, null);
    });

    const main = h('div', { class: 'turn-main' },
      h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All turns')),
      h('h1', null, title),
      h('p', { class: 'turn-meta' }, meta),
      query ? h('div', { class: 'asked' }, h('span', { class: 'label' }, 'The user asked'), clip(query, 600)) : null,
      h('section', { 'aria-labelledby': 'response-title' },
        h('h2', { id: 'response-title' }, 'Response'),
        h('p', { id: 'summary-line', class: 'summary-line' }, segments.summary.line),
        h('p', { class: 'legend' },
          h('span', null, h('span', { class: 'sample-traceable' }, 'dotted underline'), ': worth tracing — click it, or focus it and press Enter'),
          h('span', null, h('span', { class: 'quote-mark', 'aria-hidden': 'true' }, '❞'), ' quoted directly from a source (hover or focus for where)'),
          h('span', null, 'no mark: nothing to trace')),
        h('div', { class: 'response-toolbar' }, selButton,
          h('span', { id: 'selection-hint', class: 'muted small' }, 'Or select any part of the response and trace that.')),
        h('article', { class: 'panel' }, root, decorated.descriptions)),
      h('section', { id: 'run', class: 'run', 'aria-labelledby': 'run-title', hidden: true }),
      h('section', { id: 'result', 'aria-live': 'off' }));

    const side = h('aside', { class: 'turn-side', 'aria-label': 'Sources and past traces' },
      renderSourcesPanel(sources),
      h('section', { class: 'panel', 'aria-labelledby': 'past-title' },
        h('h2', { id: 'past-title' }, 'Past traces of this turn'),
        h('div', { id: 'past-traces' }, h('p', { class: 'muted small' }, 'Loading…'))));

    view().replaceChildren(h('div', { class: 'turn-layout' }, main, side));
    document.removeEventListener('selectionchange', onSelectionChange);
    document.addEventListener('selectionchange', onSelectionChange);
  }

  function onSelectionChange() {
    const button = byId('trace-selection');
    const root = byId('response');
    if (!button || !root || !state.turn) return;
    const picked = selectionInResponse(root);
    if (picked) {
      state.selection = picked;
      button.disabled = false;
      button.textContent = 'Trace the selected text (' + plural(picked.text.length, 'character') + ')';
    } else if (!document.activeElement || document.activeElement.id !== 'trace-selection') {
      state.selection = null;
      button.disabled = true;
      button.textContent = 'Trace the selected text';
    }
  }

  const textOffsets = new WeakMap();

  function selectionInResponse(root) {
    const sel = window.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return null;
    const range = sel.getRangeAt(0);
    if (!root.contains(range.commonAncestorContainer)) return null;
    let lo = Infinity;
    let hi = -Infinity;
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!textOffsets.has(node) || !range.intersectsNode(node)) continue;
      let a = 0;
      let b = node.data.length;
      if (node === range.startContainer) a = range.startOffset;
      if (node === range.endContainer) b = range.endOffset;
      if (b <= a) continue;
      lo = Math.min(lo, textOffsets.get(node) + a);
      hi = Math.max(hi, textOffsets.get(node) + b);
    }
    if (!(hi > lo)) return null;
    const raw = state.turn.turn.response.slice(lo, hi);
    const text = raw.trim();
    if (text.length < 2) return null;
    return { sentence: text, text: sel.toString().trim() || text, start: lo, end: hi };
  }

  function decorateSegments(root, runs, segments) {
    const sorted = segments.slice().sort((a, b) => a.start - b.start);
    const fragments = new Map();
    for (const run of runs) {
      const node = run.node;
      const start = run.start;
      const end = start + node.data.length;
      const hits = sorted.filter((sg) => sg.start < end && sg.end > start);
      if (!hits.length) { textOffsets.set(node, start); continue; }
      const frag = document.createDocumentFragment();
      let pos = start;
      for (const sg of hits) {
        const a = Math.max(sg.start, start);
        const b = Math.min(sg.end, end);
        if (a > pos) {
          const t = document.createTextNode(node.data.slice(pos - start, a - start));
          textOffsets.set(t, pos);
          frag.append(t);
        }
        const t = document.createTextNode(node.data.slice(a - start, b - start));
        textOffsets.set(t, a);
        const span = h('span', { class: 'seg seg-' + sg.status, dataset: { seg: sg.id, status: sg.status } }, t);
        if (!fragments.has(sg.id)) fragments.set(sg.id, []);
        fragments.get(sg.id).push(span);
        frag.append(span);
        pos = b;
      }
      if (pos < end) {
        const t = document.createTextNode(node.data.slice(pos - start));
        textOffsets.set(t, pos);
        frag.append(t);
      }
      node.replaceWith(frag);
    }
    const descriptions = h('div', { hidden: true });
    const traceHint = h('span', { id: 'hint-traceable' }, 'Worth tracing: opens the cost gate.');
    descriptions.append(traceHint);
    for (const sg of sorted) {
      const spans = (fragments.get(sg.id) || []).filter((s) => s.textContent.trim());
      if (!spans.length) continue;
      const all = fragments.get(sg.id);
      const hover = (on) => all.forEach((s) => s.classList.toggle('hover', on));
      if (sg.status === 'traceable') {
        spans.forEach((span, k) => {
          span.setAttribute('role', 'button');
          span.setAttribute('tabindex', k === 0 ? '0' : '-1');
          span.setAttribute('aria-label', 'Trace: ' + sg.text);
          span.setAttribute('aria-describedby', 'hint-traceable');
          span.addEventListener('click', (ev) => {
            if (selectionInResponse(root)) return; // a drag-selection is traced with the button
            ev.preventDefault();
            openGate(sg.id, sg.text, span);
          });
          span.addEventListener('keydown', (ev) => {
            if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); openGate(sg.id, sg.text, span); }
          });
          span.addEventListener('mouseenter', () => hover(true));
          span.addEventListener('mouseleave', () => hover(false));
        });
      } else if (sg.status === 'quoted') {
        const tipText = quotedText(sg);
        const descId = 'desc-' + sg.id;
        descriptions.append(h('span', { id: descId }, tipText));
        spans.forEach((span, k) => {
          span.setAttribute('tabindex', k === 0 ? '0' : '-1');
          span.setAttribute('aria-describedby', descId);
          span.dataset.tip = tipText;
          span.addEventListener('mouseenter', () => { hover(true); showTip(span, tipText); });
          span.addEventListener('mouseleave', () => { hover(false); hideTip(); });
          span.addEventListener('focus', () => showTip(span, tipText));
          span.addEventListener('blur', hideTip);
          span.addEventListener('keydown', (ev) => {
            if (ev.key === 'Escape') hideTip();
            if (ev.key === 'Enter' && sg.citations.length) { ev.preventDefault(); openCitation(sg.citations[0], span); }
          });
          span.addEventListener('click', () => {
            if (!selectionInResponse(root) && sg.citations.length) openCitation(sg.citations[0], span);
          });
        });
        spans[spans.length - 1].after(h('span', { class: 'quote-mark', 'aria-hidden': 'true' }, '❞'));
      }
    }
    return { descriptions };
  }

  function quotedText(sg) {
    const parts = sg.citations.map((c) => {
      const src = state.turn.sourceById[c.source_id];
      const label = src ? src.label : c.source_id;
      return label + ' (' + c.source_id + '), ' + lineSpan(c.line_start, c.line_end);
    });
    return 'Quoted directly from ' + (parts.join('; ') || 'a source') + '. Press Enter to open it.';
  }

  function openCitation(c, returnTo) {
    openSource(c.source_id, c.line_start, c.line_end, returnTo);
  }

  function showTip(anchor, text) {
    const tip = byId('tip');
    tip.textContent = text;
    tip.hidden = false;
    const r = anchor.getBoundingClientRect();
    const left = Math.max(8, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 8));
    tip.style.left = left + 'px';
    tip.style.top = (window.scrollY + r.bottom + 6) + 'px';
  }

  function hideTip() {
    const tip = byId('tip');
    if (tip) tip.hidden = true;
  }

  // ---- sources panel

  function sourceFlags(s) {
    const flags = [];
    if (s.truncated_for_ablation) flags.push(h('span', { class: 'trunc' }, '⚠ larger than the scoring window: only its first part is scored'));
    else if (s.truncated_for_span_check) flags.push(h('span', { class: 'trunc' }, '⚠ only its first part is checked for a quote'));
    return flags;
  }

  function renderSourcesPanel(sources) {
    const panel = h('section', { id: 'sources', class: 'panel', 'aria-labelledby': 'sources-title' },
      h('h2', { id: 'sources-title' }, 'Sources (' + sources.source_count + ')'));
    if (sources.path === 'fallback') {
      panel.append(h('p', { class: 'note' }, 'Rebuilt from the tool calls recorded with the response (the native message list was not stored).'));
    }
    if (sources.unversioned) {
      panel.append(h('p', { id: 'unversioned-notice', class: 'notice' },
        'The agent instructions are the current text, not a snapshot: an edit since this turn cannot be detected.'));
    }
    if (!sources.layers.length) panel.append(h('p', { class: 'muted' }, 'This turn has no sources: every claim in it can only come from the model itself.'));
    for (const layer of sources.layers) {
      const id = 'layer-' + layer.layer;
      panel.append(h('h3', { id }, (LAYER_NAMES[layer.layer] || layer.layer) + ' · ' + layer.sources.length));
      const list = h('ul', { class: 'source-list', 'aria-labelledby': id });
      for (const s of layer.sources) {
        list.append(h('li', { dataset: { sourceId: s.id } },
          h('div', { class: 'source-item' }, kindIcon(s.kind),
            h('div', { class: 'source-body' },
              h('button', { type: 'button', class: 'link-like', onclick: (ev) => openSource(s.id, null, null, ev.currentTarget) }, s.label),
              h('span', { class: 'source-meta' }, [s.id, kindName(s.kind), fmtInt(s.tokens) + ' tokens', s.turns_ago ? plural(s.turns_ago, 'turn') + ' ago' : null].filter(Boolean).join(' · ')),
              sourceFlags(s)))));
      }
      panel.append(list);
    }
    if (sources.unscorable.length) {
      panel.append(h('h3', { id: 'unscorable-title' }, 'Attachments that cannot be scored'),
        h('p', { class: 'note' }, 'Their bytes were not kept, so no claim can be traced to them.'),
        h('ul', { class: 'source-list', id: 'unscorable', 'aria-labelledby': 'unscorable-title' }, sources.unscorable.map((u) => h('li', null, u))));
    }
    if (sources.excluded.length) {
      panel.append(h('h3', { id: 'excluded-title' }, 'Tool calls not made sources'),
        h('ul', { class: 'source-list', 'aria-labelledby': 'excluded-title' }, sources.excluded.map((e) => h('li', null, e.label + ' — ' + e.reason))));
    }
    return panel;
  }

  // ---- source viewer

  let viewerReturn = null;

  async function openSource(sourceId, lineStart, lineEnd, returnTo) {
    const dialog = byId('source-viewer');
    viewerReturn = returnTo || document.activeElement;
    const known = state.turn.sourceById[sourceId];
    const title = h('h2', { id: 'source-title', tabindex: '-1' }, known ? known.label : sourceId);
    const body = h('div', null, h('p', { class: 'muted' }, 'Loading the source…'));
    const close = h('button', { type: 'button', class: 'button', id: 'source-close', onclick: () => dialog.close() }, 'Close');
    dialog.replaceChildren(title, body, h('div', { class: 'dialog-actions' }, close));
    if (!dialog.open) dialog.showModal();
    title.focus();
    let src;
    try {
      src = await api('/ui/api/turns/' + enc(state.turn.turn_id) + '/sources/' + enc(sourceId));
    } catch (err) {
      showError(err, body);
      return;
    }
    const meta = [src.id, kindName(src.kind), LAYER_NAMES[src.layer] || src.layer, fmtInt(src.tokens) + ' tokens'].join(' · ');
    const list = h('ol', { class: 'src-lines', id: 'source-lines', 'aria-label': 'Lines of ' + src.label });
    src.lines.forEach((text, k) => {
      const n = k + 1;
      const hl = lineStart !== null && lineStart !== undefined && n >= lineStart && n <= lineEnd;
      list.append(h('li', { class: 'src-line' + (hl ? ' hl' : ''), dataset: { line: String(n) }, 'aria-current': hl ? 'true' : null }, text === '' ? ' ' : text));
    });
    const items = [h('p', { class: 'muted small' }, meta)];
    if (lineStart) items.push(h('p', { id: 'source-range' }, 'The verified quote is on ', h('strong', null, lineSpan(lineStart, lineEnd)), ', highlighted below.'));
    if (src.unversioned) items.push(h('p', { class: 'notice' }, 'This is the current text of the agent instructions, not a snapshot: an edit since this turn cannot be detected.'));
    items.push(list);
    body.replaceChildren(...items);
    const first = list.querySelector('.hl');
    if (first) first.scrollIntoView({ block: 'center' });
  }

  // ------------------------------------------------------------------ cost gate

  let gateReturn = null;
  let gateQuote = null;

  function modelOptions() {
    const seen = new Set();
    const out = [];
    const push = (m) => { if (m && !seen.has(m)) { seen.add(m); out.push(m); } };
    push(state.turn.turn.model);
    push(state.session && state.session.default_model);
    for (const t of state.turn.pastTraces || []) push(t.model);
    return out;
  }

  function openGate(sentence, claimText, returnTo) {
    const dialog = byId('gate');
    gateReturn = returnTo || document.activeElement;
    gateQuote = null;
    const modelInput = h('input', { id: 'gate-model', type: 'text', list: 'gate-models', autocomplete: 'off', spellcheck: 'false', value: state.turn.turn.model || '', 'aria-describedby': 'gate-model-hint' });
    const datalist = h('datalist', { id: 'gate-models' }, modelOptions().map((m) => h('option', { value: m })));
    const reprice = h('button', { type: 'button', class: 'button', id: 'gate-reprice' }, 'Price with this model');
    const figures = h('div', { id: 'gate-figures', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Pricing…'));
    const accept = h('button', { type: 'button', class: 'button primary', id: 'gate-accept', disabled: true }, 'Accept and run');
    const cancel = h('button', { type: 'button', class: 'button', id: 'gate-cancel' }, 'Cancel');
    const errorBox = h('div', { id: 'gate-error', role: 'alert' });
    dialog.replaceChildren(
      h('h2', { id: 'gate-title' }, 'Cost gate: trace this claim?'),
      h('blockquote', { class: 'claim', id: 'gate-claim' }, clip(claimText, 700)),
      h('div', { class: 'field' },
        h('label', { for: 'gate-model' }, 'Judge model'),
        h('span', { id: 'gate-model-hint', class: 'hint' }, 'Defaults to the model that produced this turn, so the result is about that model.'),
        h('div', { class: 'row' }, modelInput, reprice), datalist),
      figures, errorBox,
      h('div', { class: 'dialog-actions' }, cancel, accept));
    const price = async () => {
      accept.disabled = true;
      errorBox.replaceChildren();
      figures.replaceChildren(h('p', { class: 'muted' }, 'Pricing…'));
      const body = { turn_id: state.turn.turn_id, sentence };
      const model = modelInput.value.trim();
      if (model) body.model = model;
      try {
        gateQuote = await api('/v1/quotes', { method: 'POST', body });
      } catch (err) {
        gateQuote = null;
        figures.replaceChildren();
        showError(err, errorBox);
        return;
      }
      if (!modelInput.value.trim()) modelInput.value = gateQuote.model;
      renderQuote(gateQuote, figures);
      accept.disabled = gateQuote.refused !== null;
      announce(gateQuote.refused ? 'The cost gate refuses this trace.' : 'Priced: ' + gateQuote.planned_calls + ' model calls, ' + fmtCost(gateQuote.cost_usd) + '.');
    };
    reprice.addEventListener('click', price);
    modelInput.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); price(); } });
    modelInput.addEventListener('change', price);
    cancel.addEventListener('click', () => dialog.close());
    accept.addEventListener('click', async () => {
      if (!gateQuote || gateQuote.refused) return;
      accept.disabled = true;
      try {
        const job = await api('/v1/traces', { method: 'POST', body: { quote_id: gateQuote.quote_id } });
        const quote = gateQuote;
        dialog.close();
        startRun(job, quote);
      } catch (err) {
        showError(err, errorBox);
        accept.disabled = true;
      }
    });
    dialog.onclose = () => {
      const back = gateReturn;
      gateReturn = null;
      if (back && back.isConnected && !state.run) back.focus();
    };
    dialog.showModal();
    modelInput.focus();
    price();
  }

  function renderQuote(q, target) {
    const items = [];
    if (q.refused) {
      items.push(h('p', { id: 'gate-refused', class: 'notice bad', role: 'alert' }, 'Refused: ' + q.refused));
    }
    const calls = q.calls;
    const breakdown = 'layers ' + calls.round1 + ' · sources ' + calls.round2 + ' · span checks ' + calls.spans + (calls.probe ? ' · probe ' + calls.probe : '');
    items.push(h('dl', { class: 'figures' },
      h('dt', null, 'Sources'), h('dd', { id: 'gate-sources' }, String(q.sources)),
      h('dt', null, 'Model calls (at most)'), h('dd', null, h('span', { id: 'gate-calls' }, String(q.planned_calls)), ' ', h('span', { class: 'breakdown' }, '(' + breakdown + ')')),
      h('dt', null, 'Est. input tokens'), h('dd', { id: 'gate-tokens' }, fmtInt(q.input_tokens)),
      h('dt', null, 'Est. cost'), h('dd', { id: 'gate-cost' }, fmtCost(q.cost_usd)),
      h('dt', null, 'Judge model'), h('dd', { id: 'gate-judge', class: 'mono' }, q.model)));
    if (q.warnings.length) {
      items.push(h('ul', { id: 'gate-warnings', class: 'warnings', 'aria-label': 'Warnings' }, q.warnings.map((w) => h('li', null, '⚠ ' + w))));
    }
    target.replaceChildren(...items);
  }

  // ------------------------------------------------------------------ live run

  const ROUND_NAMES = { round1: 'round 1: layers', round2: 'round 2: sources', spans: 'span checks' };

  function startRun(job, quote) {
    history.pushState(null, '', turnHash(state.turn.turn_id, job.trace_id));
    markCurrentTrace(job.trace_id);
    highlightClaim(job.segment_id);
    byId('result').replaceChildren();
    followRun(job.trace_id, job.claim || (quote && quote.claim), job.calls ? job.calls.planned : quote.planned_calls);
  }

  function followRun(traceId, claim, planned) {
    closeStream();
    const panel = byId('run');
    const bar = h('progress', { id: 'run-progress', max: String(Math.max(1, planned)), value: '0', 'aria-labelledby': 'run-title', 'aria-describedby': 'run-status' });
    const status = h('p', { id: 'run-status', class: 'status', role: 'status', 'aria-live': 'polite' }, 'Starting…');
    const message = h('p', { id: 'run-message', class: 'muted small' });
    panel.hidden = false;
    panel.replaceChildren(h('div', { class: 'panel' },
      h('h2', { id: 'run-title' }, 'Tracing'),
      h('blockquote', { class: 'claim' }, clip(claim, 400)),
      bar, status, message));
    panel.scrollIntoView({ block: 'nearest' });
    const heading = byId('run-title');
    heading.setAttribute('tabindex', '-1');
    heading.focus({ preventScroll: true });
    const run = { traceId, source: null, ended: false };
    state.run = run;
    const update = (p) => {
      if (state.run !== run) return;
      bar.max = Math.max(1, p.calls_planned);
      bar.value = Math.min(p.calls_done, p.calls_planned);
      const round = p.round ? ' · ' + (ROUND_NAMES[p.round] || p.round) : '';
      status.textContent = p.calls_done + ' of ' + p.calls_planned + ' planned calls' + round;
      message.textContent = p.message || '';
    };
    const finish = async (end) => {
      if (run.ended) return;
      run.ended = true;
      if (run.source) run.source.close();
      if (state.run !== run) return;
      const calls = end.calls || {};
      if (end.status === 'succeeded') {
        bar.value = bar.max;
        status.textContent = 'Finished: ' + fmtInt(calls.made) + ' calls made of ' + fmtInt(calls.planned) + ' planned (' + fmtInt(calls.billed) + ' billed).';
        status.dataset.done = 'true';
        announce('The trace finished.');
        await showTrace(traceId, true);
      } else {
        status.textContent = 'The trace ' + end.status + ': ' + (end.reason || 'no reason given') + '. Calls billed: ' + fmtInt(calls.billed) + '. No result is shown for it.';
        status.dataset.done = 'false';
        panel.querySelector('.panel').classList.add('failed');
        announce('The trace ' + end.status + '.');
      }
      state.run = null;
      await loadPastTraces();
    };
    const source = new EventSource('/v1/traces/' + enc(traceId) + '/events');
    run.source = source;
    source.addEventListener('progress', (ev) => update(JSON.parse(ev.data)));
    source.addEventListener('end', (ev) => finish(JSON.parse(ev.data)));
    source.onerror = () => {
      if (run.ended) return;
      source.close();
      pollUntilDone(traceId, run, update, finish);
    };
  }

  async function pollUntilDone(traceId, run, update, finish) {
    while (!run.ended && state.run === run) {
      let t;
      try {
        t = await api('/v1/traces/' + enc(traceId) + '?wait=true&timeout=10');
      } catch (err) {
        return;
      }
      update({ calls_done: t.calls.made, calls_planned: t.calls.planned, round: t.round, message: t.message });
      if (['succeeded', 'failed', 'interrupted'].includes(t.status)) {
        await finish({ status: t.status, reason: t.reason, calls: t.calls });
        return;
      }
    }
  }

  // ------------------------------------------------------------------ result

  async function showTrace(traceId, afterRun) {
    const box = byId('result');
    if (!box) return;
    let t;
    try {
      t = await api('/v1/traces/' + enc(traceId));
    } catch (err) {
      showError(err, box);
      return;
    }
    state.traceShown = traceId;
    if (!afterRun) byId('run').hidden = true;
    if (t.status === 'queued' || t.status === 'running') {
      followRun(t.trace_id, t.claim, t.calls.planned);
      return;
    }
    if (t.status !== 'succeeded') {
      box.replaceChildren(h('div', { class: 'panel' },
        h('h2', { id: 'result-title' }, 'Trace ' + t.status),
        h('blockquote', { class: 'claim' }, t.claim),
        h('p', { class: 'notice bad' }, 'This trace ' + t.status + ': ' + (t.reason || 'no reason given') + '. It made ' + t.calls.made + ' of ' + t.calls.planned + ' planned calls (' + t.calls.billed + ' billed). A trace that did not finish has no result.')));
      return;
    }
    box.replaceChildren(renderResult(t));
    highlightClaim(t.segment_id);
    if (!afterRun) {
      const heading = byId('result-title');
      if (heading) heading.focus();
    }
  }

  function highlightClaim(segmentId) {
    document.querySelectorAll('.seg.selected-claim').forEach((el) => el.classList.remove('selected-claim'));
    if (segmentId) document.querySelectorAll('.seg[data-seg="' + CSS.escape(segmentId) + '"]').forEach((el) => el.classList.add('selected-claim'));
  }

  const VERDICT_TITLES = {
    attributed: 'Attributed',
    redundant: 'Carried by several sources',
    internal_knowledge: "Answered from the model's own knowledge",
    no_information: 'No information',
  };

  function verdictExplanation(r) {
    const layers = r.contributing_layers.map((l) => (LAYER_NAMES[l] || l).toLowerCase());
    if (r.verdict === 'attributed') {
      return 'Removing the ' + (layers.join(' and ') || 'context') + ' layer' + (layers.length === 1 ? '' : 's') + ' lowered the support for this claim: that is where it comes from. The quotes below show the exact text.';
    }
    if (r.verdict === 'redundant') {
      return 'Removing everything changed the answer, but removing any one layer did not — each carries this independently, so no single layer is solely responsible. The layer scores below are real zeros for that reason; the quotes are the answer here.';
    }
    if (r.verdict === 'internal_knowledge') {
      return 'The claim survives the removal of the entire context: no source in this turn carries it. Not necessarily wrong — just outside what this turn can verify.';
    }
    return r.verdict_text;
  }

  const ROLE_WORDS = { grounds: 'grounds the claim', distractor: 'distractor: removing it raised support', irrelevant: 'no effect', redundant: 'redundant: it carries the claim alone, and so do others' };

  function verdictWords(layer, v) {
    if (v.no_information) return 'no information';
    if (v.verdict === 'contradicted') return 'contradicts the claim';
    if (layer === 'instructions') return v.verdict === 'supported' ? 'directs this response' : 'no instruction here bears on this';
    return v.verdict === 'supported' ? 'states the claim' : 'says nothing about this claim';
  }

  function renderResult(t) {
    const r = t.result;
    state.resultTrace = t;
    const wrap = h('div', { class: 'panel', id: 'result-panel' });
    wrap.append(
      h('h2', { id: 'result-title', tabindex: '-1' }, 'Result'),
      h('blockquote', { class: 'claim' }, t.claim),
      h('div', { id: 'verdict', class: 'verdict-box ' + r.verdict, dataset: { verdict: r.verdict } },
        h('p', { class: 'verdict-title' }, VERDICT_TITLES[r.verdict] || r.verdict_text),
        h('p', null, verdictExplanation(r)),
        h('p', { id: 'gamma', class: 'gamma' },
          'Γ = ' + fmtScore(r.gamma) + ' — support with every source s(1) = ' + fmtScore(r.s_all) + ', with none s(0) = ' + fmtScore(r.s_none) + '.'),
        r.diagnosis ? h('p', null, h('span', { id: 'claim-diagnosis', class: 'diag' + (isAlarm(r.diagnosis) ? ' alarm' : ' neutral') }, r.diagnosis)) : null,
        r.round2_skipped_reason ? h('p', { class: 'note' }, 'Per-source round skipped: ' + r.round2_skipped_reason) : null));

    wrap.append(h('h3', { id: 'chart-title' }, 'What removing each part did'));
    wrap.append(renderChart(r));

    wrap.append(h('h3', { id: 'tree-title' }, 'Where it comes from'));
    wrap.append(renderTree(r));

    if (r.omitted.length) wrap.append(h('p', { class: 'note warn' }, '⚠ Not checked (over the source limit): ' + r.omitted.join(', ') + '.'));
    if (r.unscorable.length) wrap.append(h('p', { class: 'note warn' }, '⚠ Attachments that could not be scored: ' + r.unscorable.join(', ') + '.'));
    if (r.warnings.length) wrap.append(h('ul', { class: 'warnings', 'aria-label': 'Warnings' }, r.warnings.map((w) => h('li', null, '⚠ ' + w))));
    for (const note of r.notes || []) wrap.append(h('p', { class: 'note' }, note));
    const c = r.calls;
    wrap.append(h('p', { class: 'calls-line', id: 'result-calls' },
      fmtInt(c.made) + ' model calls made of ' + fmtInt(c.planned) + ' planned' + (c.saved ? ', ' + c.saved + ' answered from the memo' : '') + (c.failed ? ', ' + c.failed + ' failed' : '') +
      ' · cost ' + (r.cost_usd === null ? 'unknown' : '$' + r.cost_usd.toFixed(4)) + ' · judge ' + r.model + ' · ' + fmtDate(t.finished_at)));
    return wrap;
  }

  function renderChart(r) {
    const rows = [];
    rows.push({ group: 'Layers' });
    for (const l of r.layers) rows.push({ label: LAYER_NAMES[l.layer] || l.layer, delta: l.delta, role: l.no_information ? null : l.role });
    const measured = r.sources.filter((s) => s.delta !== null);
    if (measured.length) {
      rows.push({ group: 'Sources' });
      for (const s of measured) rows.push({ label: s.source_id + ' ' + s.label, delta: s.delta, role: s.no_information ? null : s.role });
    }
    const W = 640;
    const labelW = 230;
    const valueW = 70;
    const plotW = W - labelW - valueW;
    const rowH = 24;
    const top = 8;
    const H = top + rows.length * rowH + 22;
    const extent = Math.max(8, ...rows.filter((x) => x.delta !== null && x.delta !== undefined).map((x) => Math.abs(x.delta)));
    const x = (v) => labelW + ((v + extent) / (2 * extent)) * plotW;
    const zero = x(0);
    const desc = rows.filter((row) => !row.group).map((row) => row.label + ': ' + fmtDrop(row.delta) + (row.role ? ' (' + row.role + ')' : '')).join('; ');
    const chart = svg('svg', { id: 'drops-chart', class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-labelledby': 'drops-chart-title drops-chart-desc' },
      svg('title', { id: 'drops-chart-title' }, 'Drop in support when each layer or source is removed'),
      svg('desc', { id: 'drops-chart-desc' }, desc));
    for (const tick of [-extent, -extent / 2, 0, extent / 2, extent]) {
      chart.append(svg('line', { class: tick === 0 ? 'axis' : 'grid', x1: x(tick), x2: x(tick), y1: top, y2: top + rows.length * rowH }));
      chart.append(svg('text', { x: x(tick), y: top + rows.length * rowH + 15, 'text-anchor': 'middle', class: 'value' }, (tick > 0 ? '+' : tick < 0 ? '−' : '') + Math.abs(tick).toFixed(0)));
    }
    rows.forEach((row, k) => {
      const y = top + k * rowH;
      if (row.group) {
        chart.append(svg('text', { x: 0, y: y + 16, class: 'group' }, row.group));
        return;
      }
      chart.append(svg('text', { x: 12, y: y + 16 }, clip(row.label, 32)));
      if (row.delta === null || row.delta === undefined) {
        chart.append(svg('text', { x: zero + 6, y: y + 16, class: 'value' }, 'not measured'));
        return;
      }
      const x0 = Math.min(zero, x(row.delta));
      const width = Math.max(2, Math.abs(x(row.delta) - zero));
      chart.append(svg('rect', { x: x0, y: y + 5, width, height: rowH - 10, rx: 2, class: 'role-' + (row.role || 'none') }));
      chart.append(svg('text', { x: W - valueW + 8, y: y + 16, class: 'value' }, fmtDrop(row.delta)));
    });
    const legend = h('p', { class: 'chart-legend' },
      h('span', null, h('span', { class: 'swatch grounds' }), 'grounds: removing it lowers support'),
      h('span', null, h('span', { class: 'swatch distractor' }), 'distractor: removing it raises support'),
      h('span', null, h('span', { class: 'swatch irrelevant' }), 'no effect'));
    return h('figure', { class: 'chart-figure' }, chart, legend,
      h('figcaption', { class: 'note' }, 'Drop Δ = s(1) − s(without it), on the judge\'s 1–9 scale. Differences this coarse rank sources; they are not precise weights.'));
  }

  function renderTree(r) {
    const tree = h('ul', { class: 'tree', id: 'tree', 'aria-labelledby': 'tree-title' });
    const layerOrder = r.layers.map((l) => l.layer);
    for (const s of r.sources) if (!layerOrder.includes(s.layer)) layerOrder.push(s.layer);
    for (const layerName of layerOrder) {
      const layer = r.layers.find((l) => l.layer === layerName);
      const sources = r.sources.filter((s) => s.layer === layerName);
      const head = h('div', { class: 'layer-head' },
        (LAYER_NAMES[layerName] || layerName) + ' (' + sources.length + ')',
        layer ? h('span', { class: 'role' }, ' · Δ ' + fmtDrop(layer.delta) + ' · ' + (layer.no_information ? 'no information' : ROLE_WORDS[layer.role] || layer.role)) : null);
      const children = h('ul');
      for (const s of sources) children.append(renderSourceNode(s, r.diagnosis));
      tree.append(h('li', { dataset: { layer: layerName } }, head, children));
    }
    return tree;
  }

  function isAlarm(diagnosis) {
    return /misread|overrode/.test(diagnosis);
  }

  function renderSourceNode(s, claimDiagnosis) {
    const known = state.turn.sourceById[s.source_id] || {};
    const head = h('div', { class: 'src-head' }, kindIcon(s.kind),
      h('span', null, s.label,
        h('span', { class: 'role' }, ' · ' + s.source_id + ' · ' + kindName(s.kind) +
          (s.delta !== null ? ' · Δ ' + fmtDrop(s.delta) + (s.role ? ' · ' + (ROLE_WORDS[s.role] || s.role) : '') : ''))));
    const node = h('li', { class: 'src-node', dataset: { sourceId: s.source_id } }, head);
    const v = s.support;
    if (s.role === 'grounds' || (v && v.verdict === 'supported' && v.quote && !v.downgraded)) node.append(probeControl(s));
    const span = h('div', { class: 'span-node' });
    if (!v) {
      span.append(h('p', { class: 'note' }, 'Not span-checked.'));
    } else {
      if (v.quote) {
        const button = h('button', {
          type: 'button', class: 'quote-button ' + v.verdict, dataset: { sourceId: s.source_id, lineStart: String(v.line_start), lineEnd: String(v.line_end) },
          'aria-label': 'Open ' + s.label + ' at ' + lineSpan(v.line_start, v.line_end) + ': ' + clip(v.quote, 200),
        }, h('span', { class: 'quote-text' }, '“' + v.quote + '”'), h('span', { class: 'quote-lines' }, lineSpan(v.line_start, v.line_end) + ' — open the source here'));
        button.addEventListener('click', () => openSource(s.source_id, v.line_start, v.line_end, button));
        span.append(button);
      }
      span.append(h('p', { class: 'verdict-words' },
        h('span', { class: 'words' }, verdictWords(s.layer, v)),
        v.no_information ? '' : ' · confidence ' + (v.confidence === null ? '—' : v.confidence.toFixed(2))));
      if (v.no_information && v.reason) span.append(h('span', { class: 'note' }, v.reason));
      else if (v.reason) span.append(h('span', { class: 'note' }, 'Judge: ' + v.reason));
      if (v.downgraded) span.append(h('span', { class: 'note warn' }, '⚠ Downgraded: the quoted text could not be found in the source, so this verdict was lowered to “silent”.'));
    }
    if (s.diagnosis && s.diagnosis !== claimDiagnosis) {
      const alarm = isAlarm(s.diagnosis);
      span.append(h('span', { class: 'diag' + (alarm ? ' alarm' : '') }, (alarm ? '⚠ ' : '') + s.diagnosis));
    }
    if (known.unversioned || s.kind === 'instructions') {
      if (known.unversioned) span.append(h('span', { class: 'note warn' }, 'current text; an edit since this turn can\'t be detected'));
    }
    if (known.truncated_for_span_check) span.append(h('span', { class: 'note' }, 'Only the first part of this source was checked for a quote.'));
    node.append(span);
    return node;
  }

  // ------------------------------------------------------------------ probe (would it still say this without it?)

  function probeControl(s) {
    const t = state.resultTrace;
    const box = h('div', { class: 'probe', dataset: { probeSource: s.source_id } });
    const ask = h('button', { type: 'button', class: 'probe-button' }, 'Would it still say this without this source?');
    box.append(ask);
    ask.addEventListener('click', async () => {
      ask.disabled = true;
      try {
        const q = await api('/v1/quotes', { method: 'POST', body: { turn_id: t.turn_id, sentence: t.segment_id || t.claim, model: t.model, probe: true } });
        if (q.refused) { box.append(h('p', { class: 'notice bad', role: 'alert' }, 'Refused: ' + q.refused)); return; }
        const run = h('button', { type: 'button', class: 'primary probe-accept' }, 'Run the probe');
        box.append(h('p', { class: 'probe-quote' }, q.calls.probe + ' sampled calls (each up to ' + q.output_tokens / q.calls.probe + ' output tokens), ' + fmtCost(q.cost_usd) + '. '), run);
        run.addEventListener('click', async () => {
          run.disabled = true;
          const status = h('p', { class: 'status', role: 'status', 'aria-live': 'polite' }, 'Regenerating with and without ' + s.source_id + '…');
          box.append(status);
          try {
            const started = await api('/v1/probes', { method: 'POST', body: { quote_id: q.quote_id, source_id: s.source_id } });
            let p = started;
            while (p.status === 'queued' || p.status === 'running') p = await api('/v1/probes/' + enc(p.probe_id) + '?wait=true');
            if (p.status !== 'succeeded') { status.textContent = 'The probe ' + p.status + ': ' + (p.reason || ''); return; }
            const r = p.result;
            const words = { required: 'Required: without it, the claim does not come back', not_required: 'Not required: it says this without the source too', inconclusive: 'Inconclusive' };
            status.replaceChildren(h('span', { class: 'probe-verdict ' + r.verdict, dataset: { verdict: r.verdict } }, words[r.verdict] || r.verdict),
              (r.note ? ' — ' + r.note : '') + (r.baseline !== null ? ' · with it B = ' + r.baseline + '/' + r.k + ', without it W = ' + r.without + '/' + r.k : ''));
          } catch (err) { status.textContent = err.message; }
        });
      } catch (err) { box.append(h('p', { class: 'notice bad', role: 'alert' }, err.message)); }
    });
    return box;
  }

  // ------------------------------------------------------------------ past traces

  async function loadPastTraces() {
    const box = byId('past-traces');
    if (!box || !state.turn) return;
    let data;
    try {
      data = await api('/ui/api/turns/' + enc(state.turn.turn_id) + '/traces');
    } catch (err) {
      showError(err, box);
      return;
    }
    state.turn.pastTraces = data.items;
    if (!data.items.length) {
      box.replaceChildren(h('p', { class: 'muted small' }, 'No traces yet. Click a dotted sentence to price one.'));
      return;
    }
    const current = parseRoute();
    box.replaceChildren(h('ul', { class: 'past-list' }, data.items.map((t) => h('li', null,
      h('a', { href: turnHash(state.turn.turn_id, t.trace_id), 'aria-current': current && current.traceId === t.trace_id ? 'true' : null, dataset: { traceId: t.trace_id } },
        h('span', { class: 'claim' }, clip(t.claim, 110)),
        h('span', { class: 'meta' }, [t.status === 'succeeded' ? (VERDICT_TITLES[t.verdict] || t.verdict_text) : t.status, t.model, fmtDate(t.created_at)].join(' · ')))))));
  }

  function markCurrentTrace(traceId) {
    document.querySelectorAll('#past-traces a').forEach((a) => {
      if (a.dataset.traceId === traceId) a.setAttribute('aria-current', 'true');
      else a.removeAttribute('aria-current');
    });
  }

  // ------------------------------------------------------------------ start

  function wireDialogs() {
    const viewer = byId('source-viewer');
    viewer.addEventListener('close', () => {
      const back = viewerReturn;
      viewerReturn = null;
      if (back && back.isConnected) back.focus();
    });
    for (const dialog of [viewer, byId('gate')]) {
      dialog.addEventListener('click', (ev) => { if (ev.target === dialog) dialog.close(); });
    }
  }

  async function start() {
    byId('sign-out').addEventListener('click', signOut);
    byId('skip-link').addEventListener('click', (ev) => { ev.preventDefault(); byId('main').focus(); });
    document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') hideTip(); });
    wireDialogs();
    window.addEventListener('hashchange', route);
    try {
      const s = await api('/ui/session', { allow401: true });
      state.session = s.signed_in ? s : null;
    } catch (err) {
      state.session = null;
    }
    setWho();
    await route();
  }

  start();
})();
