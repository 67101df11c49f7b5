"""The zero-cost operations on a stored turn, shared by the CLI and the HTTP routes:
corpus, segments and gating, the selected-sentence rule, and the cost gate."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

import regex

from estimator.actions.report import screen_actions
from estimator.actions.targets import Action, action_context
from estimator.actions.trace import ActionNotFound, action_corpus, find_action
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.cost import CostQuote, Pricing, quote_cost
from estimator.custody.ages import SourceAge, answer_time, source_ages
from estimator.custody.freshness import FreshnessFinding, FreshnessPolicy, check_freshness
from estimator.free_tier.gating import GateReport, gate_turn
from estimator.free_tier.segment import Segment, client_segments, segment_response
from estimator.free_tier.selection import Selection, select_claim
from estimator.params import DEFAULT_PARAMS, Params
from estimator.tokens import Tokenizer
from estimator.trace import TraceOutcome
from provenance_api.core.errors import InvalidInput
from provenance_api.core.schemas_actions import (
    ActionOut,
    ActionSourceOut,
    ActionsOut,
    ArgumentSourceOut,
    EnvelopeOut,
    FreshnessOut,
    InjectionOut,
    SourceAgeOut,
)

FALLBACK_MODEL = "openai/gpt-4o-mini"


@dataclass(frozen=True)
class GateView:
    corpus: Corpus
    segments: tuple[Segment, ...]
    report: GateReport


@cache
def tokenizer() -> Tokenizer:
    from provenance_api.providers.tokenizer import TiktokenTokenizer

    return TiktokenTokenizer()


def corpus_for(turn: StoredTurn, params: Params = DEFAULT_PARAMS) -> Corpus:
    return build_corpus(turn, params, tokenizer())


def gate_view(
    turn: StoredTurn, params: Params = DEFAULT_PARAMS, segments: Sequence[tuple[str | None, str]] | None = None
) -> GateView:
    corpus = corpus_for(turn, params)
    segs = client_segments(turn.response, segments) if segments else segment_response(turn.response)
    return GateView(corpus=corpus, segments=segs, report=gate_turn(corpus, segs, params))


def actions_out(turn_id: str, turn: StoredTurn, view: GateView, freshness: FreshnessPolicy | None = None) -> ActionsOut:
    """The turn's actions, screened (argument provenance, origin, injection) and linked to the sentences of
    ``view`` that report them: what ``provenance gate --json`` prints and ``GET /v1/turns/{id}/actions`` returns.
    Each source carries its evidence envelope and its age when the answer was produced; each action, the ages of
    what it could read when it was made and the ``freshness`` rules of its tool checked (none given: none)."""
    report = screen_actions(turn, view.corpus, view.report)
    policy = freshness or FreshnessPolicy()
    custody = {f.action.id: action_custody(turn, view.corpus, f.action, policy) for f in report.findings}
    return ActionsOut(
        turn_id=turn_id,
        corpus_digest=view.corpus.digest,
        summary=report.summary(),
        steered=report.steered,
        sources=source_outs(turn, view.corpus),
        actions=[
            ActionOut(
                id=f.action.id,
                tool=f.action.tool,
                call_id=f.action.call_id,
                arguments=f.action.arguments,
                origin=f.origin.value,
                suspect_injection=f.injection.suspected,
                argument_sources=[
                    ArgumentSourceOut(
                        path=a.path,
                        value=a.value,
                        decisive=a.decisive,
                        source_id=a.first.source_id if a.first else None,
                        layer=a.first.layer if a.first else None,
                        lines=a.first.lines if a.first else None,
                        quote=a.first.quote if a.first else None,
                        also_in=[h.source_id for h in a.holders[1:]],
                    )
                    for a in f.arguments
                ],
                injection=InjectionOut(
                    suspected=f.injection.suspected,
                    source_id=f.injection.source_id,
                    lines=f.injection.lines,
                    quote=f.injection.quote,
                    cues=list(f.injection.cues),
                    because=f.injection.because,
                ),
                reported_by=list(f.reported_by),
                produced_at=f.action.produced_at,
                source_ages=[SourceAgeOut.of(a) for a in custody[f.action.id][0]],
                freshness=[FreshnessOut.of(x) for x in custody[f.action.id][1]],
            )
            for f in report.findings
        ],
        answered_at=answer_time(turn),
        freshness_rules=len(policy.rules),
    )


def source_outs(turn: StoredTurn, corpus: Corpus) -> list[ActionSourceOut]:
    """Each source of the turn's context with its evidence envelope and its age when the answer was produced (the
    gate's ``sources``, the actions' and the segments' responses)."""
    answered = {a.source_id: a for a in source_ages(corpus.units, answer_time(turn))}
    return [
        ActionSourceOut(
            id=u.id,
            layer=u.layer.value,
            label=u.label,
            tool=u.tool,
            call_id=u.call_id,
            envelope=EnvelopeOut.of(u.envelope),
            age_seconds=answered[u.id].age_seconds,
            age=answered[u.id].shown,
        )
        for u in corpus.units
    ]


def with_freshness(
    outcome: TraceOutcome, turn: StoredTurn, corpus: Corpus, action_id: str, policy: FreshnessPolicy
) -> TraceOutcome:
    """An action's trace with its tool's freshness rules checked over what the agent had read when it made the
    call (``freshness`` in the result; left out when no rule names its tool)."""
    _, findings = action_custody(turn, corpus, find_action(turn, action_id), policy)
    if not findings:
        return outcome
    return replace(outcome, result=outcome.result.model_copy(update={"freshness": findings}))


def action_custody(
    turn: StoredTurn, corpus: Corpus, action: Action, policy: FreshnessPolicy
) -> tuple[tuple[SourceAge, ...], tuple[FreshnessFinding, ...]]:
    """The ages of the sources ``action`` could read when it was made, and its tool's freshness rules checked
    over them (the gate's and an action trace's)."""
    context = action_context(turn, corpus, action, history=())
    findings = check_freshness(action.tool, action.produced_at, action.principal, context.units, policy)
    return source_ages(context.units, action.produced_at), findings


# --------------------------------------------------------------------------- what quotes of one turn share


class MemoTokenizer:
    """A tokenizer that remembers its answers: quotes of one turn count and cut the same source texts
    (every claim, every model), and a long tool return is the most expensive text to tokenize. Shared by the
    quotes of one turn through ``QuoteView``; at most ``max_entries`` answers are kept."""

    def __init__(self, inner: Tokenizer, max_entries: int = 4096) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self._counts: dict[str, int] = {}
        self._cuts: dict[tuple[str, int], str] = {}

    def count(self, text: str) -> int:
        found = self._counts.get(text)
        if found is None:
            found = self.inner.count(text)
            if len(self._counts) < self.max_entries:
                self._counts[text] = found
        return found

    def truncate(self, text: str, max_tokens: int) -> str:
        key = (text, max_tokens)
        found = self._cuts.get(key)
        if found is None:
            found = self.inner.truncate(text, max_tokens)
            if len(self._cuts) < self.max_entries:
                self._cuts[key] = found
        return found


@dataclass(frozen=True)
class QuoteView:
    """What pricing a sentence of a turn needs: its corpus and segments (no gating: a quote never reads the
    report), and a tokenizer that remembers the turn's source texts."""

    corpus: Corpus
    segments: tuple[Segment, ...]
    tokenizer: MemoTokenizer = field(compare=False)


def build_quote_view(turn: StoredTurn, params: Params = DEFAULT_PARAMS) -> QuoteView:
    memo = MemoTokenizer(tokenizer())
    corpus = build_corpus(turn, params, memo)
    return QuoteView(corpus=corpus, segments=segment_response(turn.response), tokenizer=memo)


class ViewCache:
    """The last ``size`` QuoteViews, each built once however many quotes ask for it at the same time (the
    others wait for it): N concurrent quotes of one large turn tokenize and segment it once, not N times.
    Keys name the tenant, so one tenant's timing never tells it what another has quoted."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.builds = 0
        self.hits = 0
        self._lock = threading.Lock()
        self._views: OrderedDict[Hashable, QuoteView] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}

    def _cached(self, key: Hashable) -> QuoteView | None:
        with self._lock:
            view = self._views.get(key)
            if view is not None:
                self._views.move_to_end(key)
                self.hits += 1
            return view

    def get(self, key: Hashable, build: Callable[[], QuoteView]) -> QuoteView:
        view = self._cached(key)
        if view is not None:
            return view
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:
            view = self._cached(key)
            if view is not None:
                return view
            try:
                view = build()
            finally:
                with self._lock:
                    self._building.pop(key, None)
            with self._lock:
                self.builds += 1
                self._views[key] = view
                while len(self._views) > self.size:
                    self._views.popitem(last=False)
        return view

    def clear(self) -> None:
        with self._lock:
            self._views.clear()
            self.builds = self.hits = 0


QUOTE_VIEWS = ViewCache(size=4)
"""The quote views of this process (``quote_view``)."""


def quote_view(turn: StoredTurn, params: Params, *, tenant: str, digest: str) -> QuoteView:
    """The turn's QuoteView under ``params``, shared by the tenant's quotes of the same stored content
    (``digest``: the stored turn's content digest)."""
    key = (tenant, digest, params.model_dump_json())
    return QUOTE_VIEWS.get(key, lambda: build_quote_view(turn, params))


def resolve_model(turn: StoredTurn, explicit: str | None) -> str:
    """The judge model: explicit, else the turn's own model (§10), else the configured default."""
    return explicit or turn.model or os.environ.get("PROVENANCE_DEFAULT_MODEL") or FALLBACK_MODEL


ACTION_ID = regex.compile(r"a\d{1,6}")
"""An action's id (a0, a1, … in the order the calls were made), where a sentence or its id (r3) is expected."""


def action_target(turn: StoredTurn, corpus: Corpus, wanted: str) -> tuple[Selection, Corpus] | None:
    """The action ``wanted`` names as a trace target — its call's text, its id, and the corpus of what the agent
    had seen when it made it — or None when ``wanted`` is no action id (a sentence). An action id the turn does
    not have is a 422 naming the ids it has."""
    if not ACTION_ID.fullmatch(wanted.strip()):
        return None
    try:
        action = find_action(turn, wanted.strip())
    except ActionNotFound as exc:
        raise InvalidInput(
            str(exc), field="target", fix="list the turn's actions with GET /v1/turns/{id}/actions or provenance gate"
        ) from exc
    kept, _ = action_corpus(turn, corpus, action)
    if not kept.units:
        raise InvalidInput(
            f"nothing the agent had read when it made {action.id} can be traced: no instructions, history or "
            "earlier tool return",
            field="target",
            fix="trace a later action, or a sentence of the answer",
        )
    return Selection(action.text, action.id), kept


def require_selection(turn: StoredTurn, view: GateView | QuoteView, sentence: str) -> Selection:
    if not turn.response.strip():  # an unfinished turn: it ended after its tool calls, with no answer
        raise InvalidInput(
            "the answer is empty: trace an action — the turn ended after its tool calls without a reply, so it has "
            "no sentence to trace",
            field="sentence",
            fix="pass an action id such as a0 (list them with GET /v1/turns/{id}/actions or provenance gate)",
        )
    selection = select_claim(turn.response, view.segments, sentence)
    if selection is None:
        raise InvalidInput(
            "the selected sentence does not occur in the turn's response (after normalisation) and is not "
            "one of its segments",
            field="sentence",
            fix="select text from the response as shown, or pass a segment id such as r3 (an action: its id, "
            "such as a3)",
        )
    return selection


def cost_quote(
    turn: StoredTurn,
    corpus: Corpus,
    claim: str,
    *,
    model: str,
    params: Params = DEFAULT_PARAMS,
    probe: bool = False,
    trace: bool = True,
    pricing: Pricing | None = None,
    tokens: Tokenizer | None = None,
) -> CostQuote:
    """``pricing``: the operator's prices (``operations.model_policy``); default litellm's bundled map.
    ``tokens``: the tokenizer to count with (a QuoteView's, shared by the quotes of one turn); default the
    service's."""
    from provenance_api.providers.price_map import LiteLLMPricing  # the price map, without litellm

    return quote_cost(
        corpus,
        claim,
        model=model,
        params=params,
        tokenizer=tokens or tokenizer(),
        pricing=pricing or LiteLLMPricing(),
        query=turn.effective_query(),
        probe=probe,
        trace=trace,
    )
