/* The turn's sources: the side panel listing them, and the source viewer (a dialog with the source's
 * full text at its line numbers, the verified quote's lines highlighted and its exact span marked). */

import { api } from './api.js';
import { byId, h, showError } from './dom.js';
import { turnEnvelope } from './envelope.js';
import { locate, prettyJson } from './evidence.js';
import { enc, fmtInt, lineSpan, plural } from './format.js';
import { kindIcon, kindName, LAYER_NAMES } from './icons.js';
import { state } from './state.js';

/** A source's full view ({id, label, lines, …}), fetched once per turn on screen. */
export function loadSource(sourceId) {
  const turn = state.turn;
  if (!turn.sourceViews) turn.sourceViews = new Map();
  if (!turn.sourceViews.has(sourceId)) {
    const pending = api('/ui/api/turns/' + enc(turn.turn_id) + '/sources/' + enc(sourceId));
    pending.catch(() => turn.sourceViews.delete(sourceId));
    turn.sourceViews.set(sourceId, pending);
  }
  return turn.sourceViews.get(sourceId);
}

function sourceFlags(s) {
  const flags = [];
  if (s.truncated_for_ablation) flags.push(h('span', { class: 'trunc' }, '⚠ larger than the scoring window: only its first part is scored'));
  else if (s.truncated_for_span_check) flags.push(h('span', { class: 'trunc' }, '⚠ only its first part is checked for a quote'));
  return flags;
}

export function renderSourcesPanel(sources) {
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
            sourceFlags(s), turnEnvelope(s.id)))));
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

// ---- the source viewer

let viewerReturn = null;

/** Where focus goes back to when the viewer closes. */
export function viewerReturnTarget() {
  const back = viewerReturn;
  viewerReturn = null;
  return back;
}

/** The lines as a numbered list, lines lineStart..lineEnd highlighted and the quote's span in <mark>. */
function numberedLines(src, lineStart, lineEnd, quote) {
  const list = h('ol', { class: 'src-lines', id: 'source-lines', 'aria-label': 'Lines of ' + src.label, tabindex: '0' });
  let span = null;
  const offsets = [];
  let at = 0;
  for (const text of src.lines) { offsets.push(at); at += text.length + 1; }
  if (quote && lineStart) {
    const raw = src.lines.join('\n');
    span = locate(raw, quote, offsets[lineStart - 1]) || locate(raw, quote);
  }
  src.lines.forEach((text, k) => {
    const n = k + 1;
    const hl = lineStart !== null && lineStart !== undefined && n >= lineStart && n <= lineEnd;
    const item = h('li', { class: 'src-line' + (hl ? ' hl' : ''), dataset: { line: String(n) }, 'aria-current': hl ? 'true' : null });
    const a = span ? Math.max(span[0] - offsets[k], 0) : 0;
    const b = span ? Math.min(span[1] - offsets[k], text.length) : 0;
    if (span && b > a) item.append(text.slice(0, a), h('mark', { class: 'quote-span' }, text.slice(a, b)), text.slice(b));
    else item.append(text === '' ? ' ' : text);
    list.append(item);
  });
  return list;
}

/** The JSON source pretty-printed (nested JSON opened), the quote marked; null when not JSON. */
function formattedView(src, quote) {
  const pretty = prettyJson(src.lines.join('\n'));
  if (pretty === null) return null;
  const span = quote ? locate(pretty, quote) : null;
  const pre = h('pre', { class: 'src-formatted', id: 'source-formatted', tabindex: '0', 'aria-label': 'Formatted ' + src.label });
  if (span) pre.append(pretty.slice(0, span[0]), h('mark', { class: 'quote-span' }, pretty.slice(span[0], span[1])), pretty.slice(span[1]));
  else pre.append(pretty);
  return pre;
}

function scrollToMark(container) {
  const target = container.querySelector('mark') || container.querySelector('.hl');
  if (target) target.scrollIntoView({ block: 'center', inline: 'nearest' });
}

export async function openSource(sourceId, lineStart, lineEnd, returnTo, quote) {
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
    src = await loadSource(sourceId);
  } catch (err) {
    showError(err, body);
    return;
  }
  const meta = [src.id, kindName(src.kind), LAYER_NAMES[src.layer] || src.layer, fmtInt(src.tokens) + ' tokens'].join(' · ');
  const lines = numberedLines(src, lineStart, lineEnd, quote);
  const items = [h('p', { class: 'muted small' }, meta)];
  if (lineStart) {
    items.push(h('p', { id: 'source-range' }, 'The verified quote is on ', h('strong', null, lineSpan(lineStart, lineEnd)),
      lines.querySelector('mark') ? ', highlighted below with the quoted words marked.' : ', highlighted below.'));
  }
  if (src.unversioned) items.push(h('p', { class: 'notice' }, 'This is the current text of the agent instructions, not a snapshot: an edit since this turn cannot be detected.'));
  if (src.header) items.push(h('p', { class: 'src-header mono small' }, src.header));
  const formatted = formattedView(src, quote);
  if (formatted) {
    formatted.hidden = true;
    const toggle = h('button', { type: 'button', class: 'button', id: 'source-format', 'aria-pressed': 'false' }, 'Show as formatted JSON');
    toggle.addEventListener('click', () => {
      const on = toggle.getAttribute('aria-pressed') !== 'true';
      toggle.setAttribute('aria-pressed', String(on));
      toggle.textContent = on ? 'Show the lines as stored' : 'Show as formatted JSON';
      formatted.hidden = !on;
      lines.hidden = on;
      scrollToMark(on ? formatted : lines);
    });
    items.push(h('div', { class: 'row' }, toggle));
  }
  items.push(lines);
  if (formatted) items.push(formatted);
  body.replaceChildren(...items);
  scrollToMark(lines);
}
