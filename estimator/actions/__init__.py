"""Action provenance: what the agent *did* — each tool call of a turn — and where it came from.

Beyond the paper, which attributes answer sentences only. Every tool call of the current turn is an action
``a0, a1, …`` in the order made; its context is what the agent had seen when it made the call (the system prompt,
the history, the query, and only the tool returns that came back before it). The free tier calls no model:

- ``targets`` — the actions of a turn and the sources each could read;
- ``arguments`` — argument provenance: where each argument value first appears in that context (source, line
  span, quote), or nowhere;
- ``origin`` — one word per action: ``user``, ``instructions``, ``data`` or ``invented``;
- ``injection`` — the steered-by-data screen: an action that uses what a tool return told the agent to do,
  which the user's request does not ask for (``suspect_injection``), with the instruction quoted;
- ``report`` — all of it for every action of a turn, with the answer's sentences that report each;
- ``trace`` — the metered trace of one action (model calls, after the cost gate): the leave-one-out driver over
  the action's context with the action's questions, its result carrying the call, the argument provenance and
  the injection finding read from the measurements.
"""
