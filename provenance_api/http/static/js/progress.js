/* A running trace: its progress from the server-sent events (polling when the stream breaks), in the
 * same five numbers the result uses (planned, made, cached, billed, failed), then its end. */

import { api } from './api.js';
import { announce, byId, h } from './dom.js';
import { clip, enc } from './format.js';
import { callsSentence } from './numbers.js';
import { closeStream, state } from './state.js';

const ROUND_NAMES = { round1: 'round 1: layers', round2: 'round 2: sources', redundancy: 'redundancy checks', spans: 'span checks' };
const TERMINAL = ['succeeded', 'failed', 'interrupted'];

/** A progress message in words: "s(1-s4) = 9.00" is the score without s4, 9.00. */
export function progressWords(message) {
  const span = /^span check of (\S+): (\w+)$/.exec(message || '');
  if (span) return 'Just checked ' + span[1] + ' for a quote of the claim: ' + span[2];
  const m = /^s\((.+)\) = (.+)$/.exec(message || '');
  if (!m) return message || '';
  const [, name, value] = m;
  let what;
  if (name === '1') what = 'score with every source';
  else if (name === '0') what = 'score with no source';
  else if (name === '1-candidates') what = 'score without every tested source';
  else if (name.startsWith('1-')) what = 'score without ' + (/^s\d+$/.test(name.slice(2)) ? name.slice(2) : 'the ' + name.slice(2) + ' layer');
  else if (name.startsWith('only ')) what = 'score with ' + name + ' kept';
  else what = 'score (' + name + ')';
  return 'Just measured: ' + what + ' = ' + value;
}

/**
 * The five counts of a progress event: its `calls`, in the words the result uses. An event in the older
 * shape (flat `calls_done`, the calls made, and `calls_planned`, …) is read into the same words.
 */
export function eventCalls(p) {
  if (p.calls) return p.calls;
  return { planned: p.calls_planned, made: p.calls_done, cached: p.calls_cached, billed: p.calls_billed, failed: p.calls_failed };
}

/**
 * Show a trace's progress until it ends; then `onEnd(trace)` with the service's TraceOut, whose
 * calls the finished line states (the very numbers the result shows).
 */
export function followRun(traceId, claim, planned, onEnd) {
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
    const calls = eventCalls(p);
    bar.max = Math.max(1, calls.planned);
    bar.value = Math.min((calls.made || 0) + (calls.cached || 0), calls.planned);
    const round = p.round ? ' · ' + (ROUND_NAMES[p.round] || p.round) : '';
    status.textContent = callsSentence(calls) + round;
    message.textContent = progressWords(p.message);
  };
  const finish = async (end) => {
    if (run.ended) return;
    run.ended = true;
    if (run.source) run.source.close();
    if (state.run !== run) return;
    let t = null;
    try {
      t = await api('/v1/traces/' + enc(traceId));
    } catch (err) {
      t = null;
    }
    const calls = t ? t.calls : end.calls || {};
    const ended = t ? t.status : end.status;
    status.dataset.calls = JSON.stringify(calls);
    if (ended === 'succeeded') {
      bar.value = bar.max;
      status.textContent = 'Finished: ' + callsSentence(calls) + '.';
      status.dataset.done = 'true';
      announce('The trace finished.');
    } else {
      status.textContent = 'The trace ' + ended + ': ' + ((t ? t.reason : end.reason) || 'no reason given') + '. ' + callsSentence(calls) + '. No result is shown for it.';
      status.dataset.done = 'false';
      panel.querySelector('.panel').classList.add('failed');
      announce('The trace ' + ended + '.');
    }
    state.run = null;
    await onEnd(t, ended);
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
    update({ calls: t.calls, round: t.round, message: t.message });
    if (TERMINAL.includes(t.status)) {
      await finish({ status: t.status, reason: t.reason, calls: t.calls });
      return;
    }
  }
}
