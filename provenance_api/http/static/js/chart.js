/* What removing each part did: one bar per layer and per tested source, its drop Δ in support around a
 * zero line (right: removing it lowered support, so it grounds the claim; left: it distracted). Plain
 * HTML rows whose bars are placed in percent of their track, so the chart fits any width: on a narrow
 * screen each label goes above its bar and both halves stay visible.
 *
 * A part that carries the claim alone (redundant) reads Δ ≈ 0 — another part still says the same — so its
 * row shows what was measured instead, on the same axis: its zero line is s(0), its bar runs to the score
 * with only that part kept, and a line marks s(1); its value reads "alone" and that score. The sources come
 * in the order chosen (order.js). */

import { h } from './dom.js';
import { clip, fmtDrop, fmtScore } from './format.js';
import { explain, label, labelNode, termHelp } from './glossary.js';
import { LAYER_NAMES } from './icons.js';
import { byEffect, carriesAlone } from './order.js';
import { ROLES } from './words.js';

const num = (x) => typeof x === 'number' && Number.isFinite(x);

function rowsOf(r, order) {
  const rows = [{ group: 'Layers' }];
  for (const l of r.layers) rows.push({ label: LAYER_NAMES[l.layer] || l.layer, delta: l.delta, alone: carriesAlone(l) ? l.alone : null, role: l.no_information ? null : l.role, key: 'layer-' + l.layer });
  const measured = r.sources.filter((s) => s.delta !== null || carriesAlone(s));
  if (measured.length) {
    rows.push({ group: 'Sources' });
    for (const s of order === 'layers' ? measured : byEffect(measured, r)) {
      rows.push({ label: s.source_id + ' ' + s.label, delta: s.delta, alone: carriesAlone(s) ? s.alone : null, role: s.no_information ? null : s.role, key: s.source_id });
    }
  }
  return rows;
}

function thresholds(r) {
  if (r.thresholds && typeof r.thresholds.tau_nats === 'number') return r.thresholds.tau_nats;
  const tau = (r.params || {}).tau;
  return typeof tau === 'number' ? tau : null;
}

/** A part's keep-alone row on the same axis as the drops: its zero line is s(0), the bar runs to the score
 * with only this part kept (what it carries alone) and a line marks s(1) (what the whole context carries). */
function aloneTrack(r, alone, pos) {
  const track = h('span', { class: 'chart-track', 'aria-hidden': 'true' }, h('span', { class: 'chart-zero' }));
  if (!num(r.s_none)) return track;
  const bar = h('span', { class: 'bar alone role-redundant' });
  const lift = alone - r.s_none;
  bar.style.left = Math.min(pos(0), pos(lift)) + '%';
  bar.style.width = Math.abs(pos(lift) - pos(0)) + '%';
  track.append(bar);
  if (num(r.s_all)) {
    const mark = h('span', { class: 'chart-s1' });
    mark.style.left = 'calc(' + pos(r.s_all - r.s_none) + '% - 1px)';
    track.append(mark);
  }
  return track;
}

function aloneValue(r, alone, role) {
  return h('span', { class: 'chart-value alone-value', dataset: { alone: String(alone) } },
    labelNode('alone'), ' ' + fmtScore(alone),
    h('span', { class: 'visually-hidden' }, ' (s(1) = ' + fmtScore(r.s_all) + '; ', labelNode('role.' + role), ')'));
}

export function renderChart(r, order) {
  const rows = rowsOf(r, order);
  const deltas = rows.filter((x) => num(x.delta) && !num(x.alone)).map((x) => Math.abs(x.delta));
  const alones = rows.filter((x) => num(x.alone));
  const lifts = alones.length && num(r.s_none)
    ? [...alones.map((x) => Math.abs(x.alone - r.s_none)), num(r.s_all) ? Math.abs(r.s_all - r.s_none) : 0]
    : [];
  const extent = Math.max(8, ...deltas, ...lifts);
  const pos = (v) => ((v + extent) / (2 * extent)) * 100; // percent of the track
  const chart = h('ul', { id: 'drops-chart', class: 'chart', 'aria-labelledby': 'chart-title', dataset: { extent: String(extent) } });
  const ticks = [-extent, -extent / 2, 0, extent / 2, extent];
  chart.append(h('li', { class: 'chart-row chart-scale', 'aria-hidden': 'true' },
    h('span', { class: 'chart-label' }),
    h('span', { class: 'chart-ticks' }, ticks.map((t, k) => h('span', { class: 'tick tick-' + k }, (t > 0 ? '+' : t < 0 ? '−' : '') + Math.abs(t).toFixed(0)))),
    h('span', { class: 'chart-value' })));
  let anyAlone = false;
  for (const row of rows) {
    if (row.group) {
      chart.append(h('li', { class: 'chart-group' }, row.group));
      continue;
    }
    const name = h('span', { class: 'chart-label', title: row.label.length > 44 ? row.label : null }, clip(row.label, 44));
    const dataset = { key: row.key, role: row.role || 'none', delta: String(row.delta) };
    if (row.alone !== null) {
      anyAlone = true;
      chart.append(h('li', { class: 'chart-row alone-row', dataset: Object.assign(dataset, { alone: String(row.alone) }) },
        name, aloneTrack(r, row.alone, pos), aloneValue(r, row.alone, row.role)));
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
    chart.append(h('li', { class: 'chart-row', dataset },
      name,
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
      ' Differences this coarse rank sources; they are not precise weights.',
      anyAlone ? h('span', { class: 'alone-caption', id: 'alone-caption' },
        ' A part that carries the claim alone changes nothing when removed (another still says it), so its row, marked alone, shows its score kept alone instead: its bar runs from s(0) = ' + fmtScore(r.s_none) + ' at the zero line to that score, and the line across it marks s(1) = ' + fmtScore(r.s_all) + ', the score with every source.') : null),
    h('div', { class: 'explains' }, explain('delta', 'Δ'), tau !== null ? explain('tau', 'τ = ' + tau.toFixed(2)) : null,
      anyAlone ? explain('alone', label('alone')) : null));
}
