"""The glossary's words for the states a job, a sentence, a probe and a declared credit are reported in, and for
each of the method's parameters (``estimator.params.Params``).

``glossary.py`` makes them terms: each row of ``STATE_TERMS`` as it is (key, label, short, detail), and each
entry of ``PARAM_WORDS`` (short, detail) as ``params.<name>``, its detail ending with the parameter's default and
allowed range read from ``Params`` itself (``param_bounds``), so a default changed there is changed here.
A parameter the glossary explains under its own name (``tau``, ``tau_gamma``, ``repeats``) is not repeated.
"""

from __future__ import annotations

from collections.abc import Mapping

import annotated_types
from pydantic.fields import FieldInfo

__all__ = ["PARAM_WORDS", "STATE_TERMS", "param_bounds"]

STATE_TERMS: tuple[tuple[str, str, str, str], ...] = (
    # ------------------------------------------------------------------ a job's status (a trace or a probe)
    (
        "job.queued",
        "queued",
        "Accepted and waiting its turn: its budget is reserved and no call has been sent yet.",
        """A started trace or probe is stored with the calls and the cost its quote reserved, then waits for the
        runner (in the service's own process, or a provenance worker when a queue is configured). A job whose
        worker died before anything was billed goes back to queued, once.""",
    ),
    (
        "job.running",
        "running",
        "Sending its calls: progress events report the calls made of the calls planned as it goes.",
        """The trace's rounds run. Each call is recorded before it leaves, so made, cached, billed and failed are
        current while it runs, and the layer drops known so far are shown. GET /v1/traces/{id}?wait=true waits
        for the end.""",
    ),
    (
        "job.succeeded",
        "succeeded",
        "Finished with a result: a verdict, the layers and sources, and the calls it made.",
        """Only a succeeded job has a result. Its verdict may still be no information, when a measurement the
        verdict needs gave none: that is a result, not a failure.""",
    ),
    (
        "job.failed",
        "failed",
        "Finished without a result (e.g. every model call failed); the reason says why.",
        """A failed trace is never shown as a result. Its reason names the cause — every model call failed (with
        the last error), or its turn was deleted while it ran — and its calls, the billed ones included, are kept
        and charged to the budget.""",
    ),
    (
        "job.interrupted",
        "interrupted",
        "Stopped before it finished, by a restart or a worker that died: no result; its billed calls are kept.",
        """The service stopped (or a worker's lease ran out) while the job was queued or running. Its calls are
        settled from its call log: a call in flight is counted as billed at its estimated cost, since the provider
        may have answered it. Start the trace again for a result.""",
    ),
    # ------------------------------------------------------------------ a sentence's status (the free tier)
    (
        "sentence.traceable",
        "traceable",
        "Worth a trace: the sentence says something specific (a name, a number, an id) the context may have supplied.",
        """The free tier found anchors in it — the tokens that make a sentence checkable — and no source that
        states it word for word. Counted as "you can trace" in the gate's summary line. Pricing it (provenance
        quote) costs nothing; tracing it spends model calls.""",
    ),
    (
        "sentence.quoted",
        "quoted",
        "A source states it word for word: the quote and its line span are found for free, with no model call.",
        """The free tier's verbatim match found a passage of a source that is at least quote_min_chars characters
        long and covers at least quote_min_fraction of the sentence. Counted as "quoted directly". A verbatim match
        says where the words are, not that the source caused the sentence: trace it to measure that.""",
    ),
    (
        "sentence.action",
        "action",
        'The sentence reports something the agent did itself ("I have booked …"): see the turn\'s actions.',
        """A report of the agent's own action is checked against the turn's tool calls, not traced to a source:
        the calls it reports are cited with it, and each call can be traced as an action (a0, a1, …). Counted
        as "report of an action".""",
    ),
    (
        "sentence.agent_voice",
        "agent_voice",
        'A question or an offer in the agent\'s own voice ("Would you like …?"): nothing to trace.',
        """Questions, offers and recommendations state no fact drawn from the context, so they are not priced or
        traced. Counted as "questions or offers".""",
    ),
    (
        "sentence.unanchored",
        "unanchored",
        "Nothing specific to check: no name, number or id in it that the context could have supplied.",
        """The free tier found no discriminative anchor in the sentence (generic wording, or only tokens that most
        sources share), so a trace would have nothing to follow. Counted as "nothing specific to check".""",
    ),
    # ------------------------------------------------------------------ the causal probe's verdict
    (
        "probe.required",
        "required",
        "Without the source the claim does not come back: the answer needs this source for it.",
        """The causal probe regenerates the answer k times with every source and k times without this one.
        Required: the claim came back in every run with every source and in none without this one (W = 0 of
        k). A sampled test, not a proof; its calls are never answered from a cache.""",
    ),
    (
        "probe.not_required",
        "not required",
        "The claim comes back without the source too: another source, or the model, supplies it.",
        """Every run without the source still made the claim (W = k of k), so this source is not needed for
        it: another source or the model's own knowledge carries it.""",
    ),
    (
        "probe.inconclusive",
        "inconclusive",
        "The probe could not decide: a mixed result, an unstable baseline, too few anchors or a failed call.",
        """Inconclusive when the claim did not come back in every run with every source (an unstable baseline,
        B < k), when it came back in some runs without the source but not in all, when the claim has fewer than
        min_anchors distinctive anchors to look for, or when a call failed. The reason is given.""",
    ),
    # ------------------------------------------------------------------ declared attribution (the sentence's credit)
    (
        "declared.consistent",
        "consistent",
        'The sentence credits a source ("according to …") and that source does ground the claim.',
        """Declared attribution: a credit in the sentence — a phrase, a marker like [1], a tool name, a path or a
        URL — names a source that is among the ones the trace found grounding the claim.""",
    ),
    (
        "declared.conflated",
        "conflated",
        "The sentence credits one source, but a different source grounds the claim.",
        """The claim is grounded, but by none of the sources the sentence credits: the agent attributed it to the
        wrong place.""",
    ),
    (
        "declared.unsupported_citation",
        "unsupported citation",
        "The sentence credits a source, yet nothing in the context grounds the claim.",
        """A credit is given — possibly to a source the agent never saw — and the trace found no source that
        grounds the claim: the citation does not support it.""",
    ),
    (
        "declared.none_declared",
        "none declared",
        "The sentence credits no source, so there is no credit to check.",
        """No phrase, marker, tool name, path or URL in the sentence names a source; the declared-attribution
        audit has nothing to compare with the trace.""",
    ),
    # ------------------------------------------------------------------ disagreements of the judge's answers
    (
        "disagreement.drop_exceeds_gamma",
        "a part matters more than the whole",
        "Removing one layer or source lowers the score by more than removing the whole context (Δ > Γ + τ).",
        """A part cannot matter more than the whole it belongs to, beyond the smallest change the trace counts
        (τ). The judge answered the masks inconsistently. A "model's own knowledge" verdict contradicted this way
        becomes no information; any other verdict is hedged.""",
    ),
    (
        "disagreement.distractor_carries_alone",
        "a distractor that carries the claim alone",
        "Removing the source raises the score, yet kept alone it carries the claim.",
        """Leave-one-out says the source pulls against the claim (Δ ≤ −τ); keep-alone says it is enough on its
        own (its score alone within τ of s(1)). Both cannot hold: the verdict is hedged and the source keeps the
        role its drop gives it (distractor), never "redundant".""",
    ),
    (
        "disagreement.carrier_silent",
        "a carrier the span check finds silent",
        "The source carries the claim kept alone, yet the span check found nothing in it that states the claim.",
        """The score and the span check disagree about the source. It is disclosed beside the source; the verdict
        is not hedged (it rests on the scores, which agree). Read the source before relying on either.""",
    ),
    (
        "disagreement.context_without_ground",
        "a context that grounds through no layer",
        "The context as a whole carries the claim (Γ ≥ τΓ), yet no layer's removal lowers the score by τ.",
        """Round 2 searched only layers whose removal raises the score (distractors): the whole and its parts
        disagree, and the verdict is hedged.""",
    ),
    # ------------------------------------------------------------------ the fields of an evidence envelope
    (
        "envelope.tool",
        "tool",
        "The tool that produced the source (system_prompt for instructions, role:user … for history).",
        """The name the history gives the call that returned it; MCP server and resource are separate fields,
        given only when the history names them.""",
    ),
    (
        "envelope.server",
        "server",
        "The MCP server (or service) that answered, when the history names it.",
        """Read from an MCP result's _meta, an OpenTelemetry span's mcp.server.name or server.address, an
        mcp_call's server_label; "not recorded" when the format carries none.""",
    ),
    (
        "envelope.resource",
        "resource",
        "The resource the tool read (an MCP resource URI), when the history names it.",
        """Read from an MCP result's _meta or the first resource it embeds or links, or an OpenTelemetry span's
        mcp.resource.uri; "not recorded" otherwise.""",
    ),
    (
        "envelope.observed_at",
        "observed at",
        "When the source's content was observed, as the history recorded it (UTC).",
        """A pydantic-ai part's timestamp, an execute_tool span's end time, an MCP result's own observed_at; the
        source's age is the moment the answer or the action was produced minus this time.""",
    ),
    (
        "envelope.principal",
        "principal",
        "Whom the source was fetched for (a user or a service account), as the history recorded it.",
        """From an MCP result's _meta or an OpenTelemetry span's enduser.id or user.id; a freshness rule with
        same_principal compares it with the action's.""",
    ),
    (
        "envelope.tenant",
        "tenant",
        "The tenant the source was fetched for, as the history recorded it.",
        """From an MCP result's _meta or an OpenTelemetry span's tenant.id; "not recorded" when neither is
        given. It is the history's word, not the tenant the service stores the turn under.""",
    ),
    (
        "envelope.scope",
        "scope",
        "The scope (permissions) the source was fetched under, as the history recorded it.",
        """From an MCP result's _meta or an OpenTelemetry span's enduser.scope; "not recorded" when neither is
        given.""",
    ),
    (
        "envelope.digest",
        "digest",
        "The sha256 of the source's raw content, as the model saw it: the same text has the same digest.",
        """Shown by its first 12 hex digits; the whole digest is one click (or a hover) away. A gateway record
        binds to a tool return whose text has the same digest.""",
    ),
    (
        "envelope.transformations",
        "transformations",
        "Every change made to the source before the model saw it (a header written above it, a cut).",
        """Written by the service as it builds the context, so the list is always known: "none" when the model
        saw the content as recorded. A cut to a token budget is lossy, which a freshness rule can forbid.""",
    ),
    (
        "envelope.derived_from",
        "derived from",
        "What the source was built from: a rule of the system prompt names the whole prompt by its digest.",
        """A rule split off the system prompt is derived from system_prompt:<sha256 of the prompt>; every other
        source is read as it was recorded, so "none".""",
    ),
    (
        "envelope.none",
        "none",
        "An empty list the service knows to be empty: no transformation made, nothing it was derived from.",
        """Said of the lists the service writes itself (transformations, derived from). A field the history
        did not carry reads "not recorded" instead.""",
    ),
    (
        "action.produced_at",
        "made at",
        "When the agent made the call, as the history recorded it; the sources' ages are counted to it.",
        """The tool call's own time (its response message's timestamp, the chat span's end time); "not recorded"
        when the format carries none, and then no freshness rule can be checked for the action.""",
    ),
    (
        "incident.export",
        "export incident",
        "One Markdown file for an incident review: the sentence or action, its sources and their custody.",
        """GET /v1/turns/{id}/incident?target=r3 (a sentence) or a2 (an action): the target, the sources it
        could read with their evidence envelopes, ages and custody, and its freshness findings.""",
    ),
)
"""(key, label, short, detail) of each state a job, a sentence, a probe or a declared credit is reported in."""

PARAM_WORDS: Mapping[str, tuple[str, str]] = {
    "presence_threshold": (
        "θ: the share of a claim's anchors a regenerated answer must contain to count as making the claim again.",
        """The causal probe looks for the claim's distinctive anchors in each regenerated answer; the claim is
        present when at least this share of them is found.""",
    ),
    "min_anchors": (
        "The fewest distinctive anchors a claim needs for the causal probe to look for it; with fewer, inconclusive.",
        """With fewer anchors, finding them in a regenerated answer is close to chance, so the probe stops before it
        sends any call.""",
    ),
    "min_anchor_len": (
        "The shortest token, in characters, that can be an anchor; shorter ones carry no provenance.",
        """Anchors are the tokens that make a sentence checkable (names, numbers, ids); shorter tokens are ignored
        by the free tier and the causal probe.""",
    ),
    "quote_min_chars": (
        "ℓq: the fewest characters a word-for-word match must have for the sentence to count as quoted.",
        """With quote_min_fraction: a passage of a source that matches the sentence word for word is a quote only
        when it is at least this long and covers at least that share of the sentence.""",
    ),
    "quote_min_fraction": (
        "ρ: the share of the sentence a word-for-word match must cover for the sentence to count as quoted.",
        """A match over less of the sentence is a shared phrase rather than a quotation. It applies together with
        quote_min_chars.""",
    ),
    "min_quote_len": (
        "The shortest quote, in characters, a span check may give as evidence; shorter ones match by luck.",
        """A span check's quote shorter than this is not accepted as found in the source, so a supported or
        contradicted answer that rests on it is downgraded to silent.""",
    ),
    "source_token_cap": (
        "The most tokens of one source the judge is shown in a measurement; the rest of the source is cut.",
        """Each source is cut to this many tokens in the leave-one-out rounds, and the cut is a warning naming the
        source: what lies past the cut is invisible to every measurement.""",
    ),
    "support_token_cap": (
        "The most tokens of one source the span check reads; at least source_token_cap, since it reads more.",
        """The span check reads a source up to this many tokens to find the lines that state the claim. A cut is a
        warning naming the source.""",
    ),
    "max_sources": (
        "The most sources removed one by one in a round; the others are named as omitted.",
        """Round 2 removes each source of a contributing layer in turn. Past this many, the sources are chosen
        layer by layer, most recent first (Algorithm 4a), and the rest are listed as omitted. It bounds the cost
        too.""",
    ),
    "history_max_messages": (
        "How many earlier messages of the conversation are sources, newest first; 0: none.",
        """Each earlier message within this count is a source of the history layer; older ones are not part of
        the trace.""",
    ),
    "history_tokens_per_message": (
        "The most tokens of each earlier message kept as a history source; the rest of it is cut.",
        """A longer message is cut to this many tokens, and the cut is reported as a warning.""",
    ),
    "max_calls": (
        "The most model calls one trace may plan; a trace that would need more is refused before anything is spent.",
        """The cost gate counts the worst case; over this ceiling the quote is refused (lower max_sources or
        repeats to fit). Redundancy checks are planned only as far as they fit under it.""",
    ),
    "max_evidence_tokens": (
        "The largest context, in tokens before any cut, a trace accepts; a larger one is refused, not trimmed.",
        """A silently reduced context gives a confidently wrong attribution, so a turn whose sources together
        exceed this is refused by the cost gate.""",
    ),
    "causal_samples": (
        "k: how many answers the causal probe regenerates with every source, and again without the source.",
        """More samples make the probe's verdict steadier; the probe costs 2·k calls.""",
    ),
    "causal_max_output": (
        "The most tokens of each answer the causal probe regenerates.",
        """A cap on the probe's output tokens, and so on its cost; an answer cut short may miss the claim.""",
    ),
    "concurrency": (
        "How many model calls of one trace are in flight at once.",
        """Higher is faster, within the provider's rate limit, which every trace of the service shares.""",
    ),
    "rate_max_calls": (
        "The most model calls one user may make per rate window, over every trace and probe.",
        """A trace reserves its planned calls from this budget when it starts and gives back what it did not
        make; one that does not fit is refused, with the time to wait.""",
    ),
    "rate_window_seconds": (
        "The length, in seconds, of the window over which rate_max_calls is counted.",
        """A sliding window: calls made longer ago than this no longer count.""",
    ),
    "discriminative_df_fraction": (
        "An anchor found in more than this share of the sources is too common to point at any one of them.",
        """Such an anchor (a date every record carries, the user's name) is set aside when the free tier decides
        whether a sentence has anything specific to trace.""",
    ),
    "regex_timeout_seconds": (
        "The time limit of each anchor pattern on a text, so a hostile text cannot stall the free tier.",
        """A pattern that runs past it contributes nothing for that text; the free tier goes on without it.""",
    ),
    "failed_calls_as_sources": (
        "Whether a failed or denied tool call's error text is a source (tool error) a sentence may come from.",
        """True: the error the agent read is a source of the tools layer, and in a later turn a history item.
        False is the seed's Algorithm 1: failed calls are excluded from the context and listed with their
        reason.""",
    ),
    "instructions_as_rules": (
        "Whether the system prompt is split into its rules, each a source with its own lines.",
        """True: the headings, list items and paragraphs of the system prompt are separate instructions sources
        (at most two thirds of max_sources), so a trace can name the rule. False is the seed's Algorithm 1: the
        prompt whole, one source.""",
    ),
}
"""(short, detail) of each parameter of ``Params`` not explained under its own name (``tau``, ``tau_gamma`` and
``repeats`` are), by name."""


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def param_bounds(field: FieldInfo) -> str:
    """The default and the allowed values of a parameter, in words: "Default 12, from 1 to 64"."""
    default = str(field.default).lower() if isinstance(field.default, bool) else _number(field.default)
    if field.annotation is bool or isinstance(field.default, bool):
        return f"Default {default} (true or false)"
    low = high = ""
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            low = f"from {_number(bound.ge)}"
        elif isinstance(bound, annotated_types.Gt):
            low = f"more than {_number(bound.gt)}"
        elif isinstance(bound, annotated_types.Le):
            high = f"at most {_number(bound.le)}"
        elif isinstance(bound, annotated_types.Lt):
            high = f"under {_number(bound.lt)}"
    if low.startswith("from") and high.startswith("at most"):
        return f"Default {default}, {low} to {high.removeprefix('at most ')}"
    return ", ".join([f"Default {default}", *(part for part in (low, high) if part)])
