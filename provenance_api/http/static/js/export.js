/* A result's exports: the trace as JSON, a Markdown citation block (GET /v1/traces/{id}/export), and the
 * citation copied to the clipboard. */

import { api } from './api.js';
import { announce, h } from './dom.js';
import { enc } from './format.js';

function exportUrl(traceId, format) {
  return '/v1/traces/' + enc(traceId) + '/export?format=' + format;
}

async function copyCitation(trace, status) {
  status.textContent = 'Copying…';
  let text;
  try {
    text = await api(exportUrl(trace.trace_id, 'markdown'), { accept: 'text/markdown' });
  } catch (err) {
    status.textContent = err.message;
    return;
  }
  try {
    await navigator.clipboard.writeText(text);
    status.textContent = 'Citation copied.';
  } catch (err) {
    // no clipboard (permission or an insecure context): show it, selected, to copy by hand
    const area = h('textarea', { class: 'citation-text', rows: '8', readonly: true, 'aria-label': 'Citation to copy' });
    area.value = text;
    status.replaceChildren('Copy the citation below (the clipboard is not available here).', area);
    area.select();
  }
  announce(status.textContent);
}

export function exportActions(trace) {
  const status = h('span', { class: 'muted small', id: 'export-status', role: 'status' });
  const copy = h('button', { type: 'button', class: 'button', id: 'copy-citation' }, 'Copy citation');
  copy.addEventListener('click', () => copyCitation(trace, status));
  return h('span', { class: 'export-actions' },
    h('a', { class: 'button', id: 'export-json', href: exportUrl(trace.trace_id, 'json'), download: trace.trace_id + '.json' }, 'Download JSON'),
    h('a', { class: 'button', id: 'export-markdown', href: exportUrl(trace.trace_id, 'markdown'), download: trace.trace_id + '.md' }, 'Download citation (Markdown)'),
    copy, status);
}
