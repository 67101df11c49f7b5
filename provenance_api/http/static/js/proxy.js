/* A proxy-first trace (estimator "proxy"): a local scoring model ranked the sources (log-probability, nats)
 * and the hosted judge checked that ranking in a few calls (digits 1–9). This block says which way it went —
 * confirmed, or the judge disagreed and the full judged search ran — with a mark and words, never colour
 * alone; the proxy's model; hosted calls made beside local scoring passes ($0); the proxy's seconds and
 * evaluated tokens; what the judge measured; the sources with both sides' drops; and why the judge
 * disagreed. Every number has its explanation beside it (glossary). */

import { h } from './dom.js';
import { fmtDrop, fmtInt, fmtScore, fmtSeconds } from './format.js';
import { explain, labelNode, termHelp } from './glossary.js';
import { LAYER_NAMES } from './icons.js';
import { proxyKey } from './words.js';

function figure(name, label, value, key) {
  return h('div', { class: 'calls-figure', dataset: { proxy: name } },
    h('dt', null, label),
    h('dd', null, h('span', { class: 'count', dataset: { value: String(value) } }, value), explain(key)));
}

function figures(r, t) {
  const p = r.proxy;
  const made = t.calls && typeof t.calls.made === 'number' ? t.calls.made : r.calls.made;
  const scored = typeof r.calls.scored === 'number' ? r.calls.scored : 0;
  return h('dl', { class: 'calls-figures', id: 'proxy-figures' },
    h('div', { class: 'calls-figure', dataset: { proxy: 'model' } },
      h('dt', null, 'Proxy model (ranked the sources)'),
      h('dd', null, h('span', { class: 'count mono', id: 'proxy-model' }, r.proxy_model), explain('estimator.proxy'))),
    figure('made', 'Hosted calls made (the judge)', fmtInt(made), 'calls.made'),
    figure('scored', 'Local scoring passes ($0, not in made)', fmtInt(scored), 'calls.scored'),
    figure('seconds', 'Proxy ranking time', fmtSeconds(p.proxy_seconds), 'proxy.seconds'),
    figure('tokens', 'Prompt tokens evaluated (local)',
      p.evaluated_tokens === null || p.evaluated_tokens === undefined ? 'not reported by the scorer' : fmtInt(p.evaluated_tokens),
      'proxy.evaluated_tokens'),
    figure('margin', 'Share margin (of Γ)', String(p.share_margin), 'proxy.share_margin'));
}

/** What the hosted judge measured to check the proxy, in digits. */
function hostedChecks(p) {
  const c = p.hosted;
  const items = [
    h('li', null, termHelp('s_all', 's(1) = ' + fmtScore(c.s_all))),
    h('li', null, termHelp('s_none', 's(0) = ' + fmtScore(c.s_none))),
    h('li', null, termHelp('gamma', 'Γ = ' + fmtScore(c.gamma))),
  ];
  if (c.top_layer) {
    items.push(h('li', null, termHelp('delta', 'without the ' + (LAYER_NAMES[c.top_layer] || c.top_layer).toLowerCase()
      + ' layer (the proxy’s top layer): Δ ' + fmtDrop(c.top_layer_drop))));
  }
  if (c.top_source) {
    items.push(h('li', null, termHelp('delta', 'without ' + c.top_source + ' (the proxy’s top source): Δ ' + fmtDrop(c.top_source_drop))));
  }
  if (c.span_checked.length) items.push(h('li', null, 'span-checked: ' + c.span_checked.join(', ')));
  return h('ul', { class: 'proxy-checks', id: 'proxy-hosted', 'aria-label': 'What the hosted judge measured (digits 1–9)' }, items);
}

function roleCell(role) {
  return role ? termHelp('role.' + role, labelNode('role.' + role)) : '—';
}

/** One row per source either side measured: the proxy's order first, then the judge's. */
function rankingRows(r) {
  const p = r.proxy;
  const proxy = new Map(p.proxy_ranking.map((x) => [x.id, x]));
  const judged = new Map((p.judged_ranking || []).map((x) => [x.id, x]));
  const ids = [...proxy.keys(), ...judged.keys()];
  if (p.hosted.top_source) ids.push(p.hosted.top_source);
  const labels = new Map(r.sources.map((s) => [s.source_id, s.label]));
  return [...new Set(ids)].map((id) => ({
    id,
    label: labels.get(id) || '',
    proxy: proxy.get(id) || null,
    hosted: id === p.hosted.top_source ? p.hosted.top_source_drop : null,
    judged: judged.get(id) || null,
  }));
}

function rankingTable(r) {
  const fallback = r.proxy.judged_ranking !== null && r.proxy.judged_ranking !== undefined;
  const head = ['Source', 'Proxy Δ (nats)', 'Proxy role', 'Hosted judge Δ (digits 1–9)'];
  if (fallback) head.push('Judged search Δ (digits 1–9)', 'Judged role');
  // Explicit roles: on a narrow screen the rows are laid out as cards (CSS), and the roles keep them a table.
  const cell = (k, cls, content) => h('td', { role: 'cell', class: cls, dataset: { label: head[k] } }, content);
  const rows = rankingRows(r).map((row) => h('tr', { role: 'row', dataset: { sourceId: row.id } },
    h('th', { role: 'rowheader', scope: 'row' }, h('span', { class: 'mono' }, row.id), row.label ? ' ' + row.label : ''),
    cell(1, 'num', fmtDrop(row.proxy ? row.proxy.drop : null)),
    cell(2, null, row.proxy ? roleCell(row.proxy.role) : '—'),
    cell(3, 'num', fmtDrop(row.hosted)),
    fallback ? cell(4, 'num', fmtDrop(row.judged ? row.judged.drop : null)) : null,
    fallback ? cell(5, null, row.judged ? roleCell(row.judged.role) : '—') : null));
  const table = h('table', { role: 'table', class: 'proxy-table', id: 'proxy-ranking' },
    h('caption', null, fallback ? 'The sources as the proxy ranked them, beside the full judged search'
      : 'The sources as the proxy ranked them, beside the hosted judge’s check of its top source'),
    h('thead', { role: 'rowgroup' }, h('tr', { role: 'row' }, head.map((x) => h('th', { role: 'columnheader', scope: 'col' }, x)))),
    h('tbody', { role: 'rowgroup' }, rows));
  return h('div', { class: 'table-scroll', role: 'region', 'aria-labelledby': 'proxy-ranking-title', tabindex: '0' }, table);
}

function disagreementList(p) {
  if (!p.disagreements.length) {
    return h('p', { id: 'proxy-agreement' }, 'None: each of the hosted judge’s checks agrees with the proxy’s ranking.');
  }
  const said = p.disagreements.join(' ');
  return [
    h('ul', { class: 'warnings', id: 'proxy-disagreements', 'aria-label': 'Why the hosted judge disagreed' },
      p.disagreements.map((d) => h('li', null, h('span', { class: 'warning-text' }, '⚠ ' + d)))),
    h('div', { class: 'explains' }, said.includes('τ_Γ') ? explain('tau_gamma') : null, said.includes('τ =') ? explain('tau') : null),
  ];
}

/** The proxy's block of a trace result (call only for estimator "proxy"). */
export function renderProxy(r, t) {
  const p = r.proxy;
  const confirmed = r.confirmed === true;
  return h('section', { class: 'proxy-block ' + (confirmed ? 'confirmed' : 'fallback'), id: 'proxy-panel', 'aria-labelledby': 'proxy-title', dataset: { confirmed: String(confirmed) } },
    h('h3', { id: 'proxy-title' }, 'Proxy ranking and the hosted judge’s check'),
    h('p', { class: 'proxy-status', id: 'proxy-confirmation' },
      h('span', { class: 'proxy-mark', 'aria-hidden': 'true' }, confirmed ? '✓' : '⚠'), ' ',
      h('strong', null, labelNode(proxyKey(confirmed), { capital: true }), ': '), termHelp(proxyKey(confirmed), r.confirmation)),
    figures(r, t),
    h('h4', { id: 'proxy-hosted-title' }, 'What the hosted judge measured (digits 1–9)'),
    hostedChecks(p),
    h('h4', { id: 'proxy-ranking-title' }, 'Sources: the proxy’s drop beside the judge’s'),
    rankingTable(r),
    explain('proxy.drops'),
    h('h4', { id: 'proxy-disagreements-title' }, 'Disagreements'),
    disagreementList(p));
}
