/* Markdown blocks, parsed with their offsets into the source: every line keeps where it starts, so the
 * rendered text can be laid back onto the raw response (the server's segments are character offsets). */

const RE = {
  blank: /^[ \t]*$/,
  fence: /^( {0,3})(`{3,}|~{3,})(.*)$/,
  heading: /^ {0,3}(#{1,6})(?:[ \t]+|$)/,
  hr: /^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$/,
  quote: /^ {0,3}> ?/,
  item: /^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)/,
  tableSep: /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/,
};

export function splitLines(src) {
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

export function trimLine(line) {
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

export function parseBlocks(lines) {
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

