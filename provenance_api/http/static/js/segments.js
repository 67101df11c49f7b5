/* The response's sentences laid onto the rendered markdown: traceable ones underlined (click or Enter
 * opens the cost gate), quoted ones marked (hover or focus tells where from; Enter opens the source).
 * Each text node remembers its offset into the raw response, so a selection maps back onto it. */

import { h, hideTip, showTip } from './dom.js';
import { lineSpan } from './format.js';
import { openGate } from './gate.js';
import { openSource } from './sources.js';
import { state } from './state.js';

const textOffsets = new WeakMap();

export function selectionInResponse(root) {
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

export function decorateSegments(root, runs, segments) {
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
  openSource(c.source_id, c.line_start, c.line_end, returnTo, c.quote || null);
}
