/* What removing each part did: one bar per layer and per tested source, its drop Δ in support around a
 * zero line (right: removing it lowered support, so it grounds the claim; left: it distracted). Plain
 * HTML rows whose bars are placed in percent of their track, so the chart fits any width: on a narrow
 * screen each label goes above its bar and both halves stay visible. */

import { h } from './dom.js';
import { clip, fmtDrop } from './format.js';
import { explain, labelNode, termHelp } from './glossary.js';
import { LAYER_NAMES } from './icons.js';
import { ROLES } from './words.js';

function rowsOf(r) {
  const rows = [{ group: 'Layers' }];
  for (const l of r.layers) rows.push({ label: LAYER_NAMES[l.layer] || l.layer, delta: l.delta, role: l.no_information ? null : l.role, key: 'layer-' + l.layer });
  const measured = r.sources.filter((s) => s.delta !== null);
  if (measured.length) {
    rows.push({ group: 'Sources' });
    for (const s of measured) rows.push({ label: s.source_id + ' ' + s.label, delta: s.delta, role: s.no_information ? null : s.role, key: s.source_id });
  }
  return rows;
}

function thresholds(r) {
  if (r.thresholds && typeof r.thresholds.tau_nats === 'number') return r.thresholds.tau_nats;
  const tau = (r.params || {}).tau;
  return typeof tau === 'number' ? tau : null;
}

export function renderChart(r) {
  const rows = rowsOf(r);
  const deltas = rows.filter((x) => typeof x.delta === 'number').map((x) => Math.abs(x.delta));
  const extent = Math.max(8, ...deltas);
  const pos = (v) => ((v + extent) / (2 * extent)) * 100; // percent of the track
  const chart = h('ul', { id: 'drops-chart', class: 'chart', 'aria-labelledby': 'chart-title', dataset: { extent: String(extent) } });
  const ticks = [-extent, -extent / 2, 0, extent / 2, extent];
  chart.append(h('li', { class: 'chart-row chart-scale', 'aria-hidden': 'true' },
    h('span', { class: 'chart-label' }),
    h('span', { class: 'chart-ticks' }, ticks.map((t, k) => h('span', { class: 'tick tick-' + k }, (t > 0 ? '+' : t < 0 ? '−' : '') + Math.abs(t).toFixed(0)))),
    h('span', { class: 'chart-value' })));
  for (const row of rows) {
    if (row.group) {
      chart.append(h('li', { class: 'chart-group' }, row.group));
      continue;
    }
    const track = h('span', { class: 'chart-track', 'aria-hidden': 'true' }, h('span', { class: 'chart-zero' }));
    if (typeof row.delta === 'number') {
      const bar = h('span', { class: 'bar role-' + (row.role || 'none') });
      const a = Math.min(pos(0), pos(row.delta));
      bar.style.left = a + '%';
      bar.style.width = Math.abs(pos(row.delta) - pos(0)) + '%';
      track.append(bar);
    }
    chart.append(h('li', { class: 'chart-row', dataset: { key: row.key, role: row.role || 'none', delta: String(row.delta) } },
      h('span', { class: 'chart-label', title: row.label.length > 44 ? row.label : null }, clip(row.label, 44)),
      track,
      h('span', { class: 'chart-value' }, fmtDrop(row.delta),
        row.role ? h('span', { class: 'visually-hidden' }, ' (', labelNode('role.' + row.role), ')') : null)));
  }
  const legend = h('p', { class: 'chart-legend' },
    ROLES.map((role) => h('span', { class: 'legend-item' }, h('span', { class: 'swatch ' + role, 'aria-hidden': 'true' }), termHelp('role.' + role, labelNode('role.' + role)))));
  const tau = thresholds(r);
  const unit = r.units === 'nats' ? 'in nats of log-probability' : "on the judge's 1–9 scale";
  return h('figure', { class: 'chart-figure' }, chart, legend,
    h('figcaption', { class: 'note' },
      'Drop Δ = s(1) − s(without it), ' + unit + '.' + (tau !== null ? ' A drop counts when it is at least τ = ' + tau.toFixed(2) + '.' : '') +
      ' Differences this coarse rank sources; they are not precise weights.'),
    h('div', { class: 'explains' }, explain('delta', 'Δ'), tau !== null ? explain('tau', 'τ = ' + tau.toFixed(2)) : null));
}
