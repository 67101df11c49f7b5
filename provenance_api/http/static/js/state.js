/* The page's shared state: who is signed in, the turn on screen, the selection, the live run. */

export const state = {
  session: null,      // {signed_in, tenant, user, admin, default_model}
  turn: null,         // {turn_id, turn, segments, sources, sourceById, pastTraces}
  selection: null,    // {sentence, text, start, end} of a selection in the response
  run: null,          // {traceId, source: EventSource|null, ended}
  traceShown: null,   // id of the trace whose result is on screen
  resultTrace: null,  // the TraceOut on screen
  sourceOrder: 'effect', // a result's sources: by 'effect' or by 'layers' (the address's ?order=)
};

export function closeStream() {
  if (state.run && state.run.source) state.run.source.close();
  state.run = null;
}
