/* Markdown to DOM, recording each text node's offset into the source (``runs``), so the server's
 * segments can be laid onto the rendered text and a selection mapped back onto the source. */

import { h } from './dom.js';
import { parseBlocks, splitLines } from './md-blocks.js';
import { joinLines, parseInline, safeHref } from './md-inline.js';

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

export function renderMarkdown(src) {
  const runs = [];
  const root = h('div', { class: 'md' });
  renderBlocks(parseBlocks(splitLines(src)), root, runs, false);
  return { root, runs };
}
