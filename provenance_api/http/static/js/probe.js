/* The probe beside a grounding source: "would it still say this without this source?" — priced, accepted,
 * run as sampled regenerations with and without the source, and its verdict shown. */

import { api } from './api.js';
import { h } from './dom.js';
import { enc, fmtCost } from './format.js';
import { state } from './state.js';

export function probeControl(s) {
  const t = state.resultTrace;
  const box = h('div', { class: 'probe', dataset: { probeSource: s.source_id } });
  const ask = h('button', { type: 'button', class: 'button probe-button' }, 'Would it still say this without this source?');
  box.append(ask);
  ask.addEventListener('click', async () => {
    ask.disabled = true;
    try {
      const q = await api('/v1/quotes', { method: 'POST', body: { turn_id: t.turn_id, sentence: t.segment_id || t.claim, model: t.model, probe: true } });
      if (q.refused) { box.append(h('p', { class: 'notice bad', role: 'alert' }, 'Refused: ' + q.refused)); return; }
      const run = h('button', { type: 'button', class: 'button primary probe-accept' }, 'Run the probe');
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
