"""The probability-based estimator: Algorithm 4 with s(v) = log p(claim | query, ABLATE(C, v)) in nats.

Same corpus, same hierarchical search (round 1 over layers, round 2 over the sources of contributing
layers, both capped by Algorithm 4a), same Γ / role / verdict logic and the same unconditional span
localisation as the judged estimator (``attribution.trace_claim``). Only the scalar differs: instead of a
forced-choice judge's digit, a scoring-capable model's teacher-forced log-probability of the claim as the
assistant's answer, given the query and the sources a mask leaves present.

Thresholds are relative to the total context effect, not absolute. Nats have no fixed scale across
claims: a twelve-word near-copy of a tool return moves by 30–50 nats when its source goes, while a
claim the model knows anyway moves by one or two nats in total, and a fixed 1-nat τ then marks noise in
such a claim as "grounds". So, with n the claim's token count:

* τ_Γ = max(gamma_floor, gamma_per_token · n): Γ below it is internal knowledge. The context must raise
  the claim's probability by more than a per-token amount (default e^0.25 ≈ 1.28× per token), with a
  floor for very short claims (default 2 nats, a factor of e² ≈ 7.4 on the whole claim).
* τ = max(tau_floor, tau_rel · |Γ|): a layer or source whose removal moves the claim by at least this
  fraction of the whole context's effect (default 20 %) grounds (or, negative, distracts from) it; the
  floor (default 1 nat: a factor of e) keeps numerical noise of a small Γ from counting.

The log-probability is deterministic for a given model build, so the floor is a meaning floor (an
e-fold change in probability), not a quantisation floor as for the judge's digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from prompts import versions

from .attribution import (
    PROMPT_NAMES,
    UNVERSIONED_WARNING,
    decide_verdict,
    describe_mask,
    drop,
    layer_mask,
    role_of,
    score_sources,
    select_sources,
)
from .cost import plan_calls
from .diagnosis import claim_diagnosis
from .judge import CallLedger, Mask, cut_to_budget
from .llm import LLM, Message, Usage
from .params import DEFAULT_PARAMS, Params
from .result import (
    VERDICT_TEXT,
    CallAccount,
    LayerScore,
    ProgressEvent,
    Round,
    SupportVerdict,
    TraceResult,
    Verdict,
    json_number,
)
from .scorer import ScoredTarget, Scorer, ScorerError
from .support import check_support, support_body
from .tokens import ApproxTokenizer, Tokenizer
from .units import Corpus, Layer, Unit

__all__ = ["LogprobParams", "LogprobTraceResult", "Thresholds", "build_messages", "thresholds", "trace_logprob"]

CONTEXT_HEADING = "Context:"
QUESTION_HEADING = "Question:"


class LogprobParams(BaseModel):
    """The probability-based estimator's thresholds, in nats (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tau_rel: float = Field(0.2, gt=0, lt=1, description="τ as a fraction of |Γ|.")
    tau_floor: float = Field(1.0, ge=0, le=100, description="Smallest τ, nats.")
    gamma_per_token: float = Field(0.25, ge=0, le=10, description="τ_Γ per claim token, nats.")
    gamma_floor: float = Field(2.0, ge=0, le=100, description="Smallest τ_Γ, nats.")


DEFAULT_LOGPROB_PARAMS = LogprobParams()


@dataclass(frozen=True)
class Thresholds:
    tau: float
    tau_gamma: float


def thresholds(gamma: float, n_tokens: int, lp: LogprobParams = DEFAULT_LOGPROB_PARAMS) -> Thresholds:
    """τ and τ_Γ for one claim, from its total context effect Γ and its length in tokens."""
    tau_gamma = max(lp.gamma_floor, lp.gamma_per_token * max(n_tokens, 1))
    tau = lp.tau_floor if math.isnan(gamma) else max(lp.tau_floor, lp.tau_rel * abs(gamma))
    return Thresholds(tau=tau, tau_gamma=tau_gamma)


def build_messages(corpus: Corpus, query: str, mask: Mask, texts: Mapping[str, str]) -> tuple[Message, ...]:
    """The chat the claim is scored against, for the sources ``mask`` leaves present.

    The instructions layer is the system message (absent: the model's own default system prompt);
    every other present source is a labelled block of one user message, in ordinal order, followed
    by the query. Masks of one trace therefore share the longest possible prefix."""
    ordered = sorted(corpus.units, key=lambda u: u.ordinal)
    present = [u for u in ordered if u.id not in mask]
    system = [texts[u.id] for u in present if u.layer == Layer.INSTRUCTIONS]
    blocks = [f"[{u.id}] {u.label}\n{texts[u.id]}" for u in present if u.layer != Layer.INSTRUCTIONS]
    parts: list[str] = []
    if blocks:
        parts.append(CONTEXT_HEADING + "\n\n" + "\n\n".join(blocks))
    if query.strip():
        parts.append(f"{QUESTION_HEADING} {query.strip()}" if blocks else query.strip())
    messages: list[Message] = []
    if system:
        messages.append(Message("system", "\n\n".join(system)))
    messages.append(Message("user", "\n\n".join(parts)))
    return tuple(messages)


@dataclass(frozen=True)
class LogprobTraceResult(TraceResult):
    """A TraceResult whose scores are log-probabilities in nats (``estimator == "logprob"``)."""

    tau_nats: float = math.nan
    tau_gamma_nats: float = math.nan
    claim_tokens: int = 0
    claim_token_logprobs: tuple[float, ...] = ()
    scorer_model: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["units"] = "nats"
        out["thresholds"] = {"tau_nats": json_number(self.tau_nats),
                             "tau_gamma_nats": json_number(self.tau_gamma_nats)}
        out["claim_tokens"] = self.claim_tokens
        out["claim_token_logprobs"] = [json_number(x) for x in self.claim_token_logprobs]
        out["scorer_model"] = self.scorer_model
        return out


@dataclass(frozen=True)
class _Failure:
    mask: Mask
    reason: str


@dataclass
class _Entry:
    done: anyio.Event
    value: ScoredTarget | None = None


@dataclass
class _LogprobRun:
    scorer: Scorer
    llm: LLM | None
    claim: str
    query: str
    corpus: Corpus
    ledger: CallLedger
    texts: dict[str, str]
    on_progress: Callable[[ProgressEvent], None] | None
    memo: dict[Mask, _Entry] = field(default_factory=dict)
    scores: dict[Mask, float] = field(default_factory=dict)
    failures: list[_Failure] = field(default_factory=list)
    supports: dict[str, SupportVerdict] = field(default_factory=dict)
    full: ScoredTarget | None = None

    def emit(self, stage: Round, message: str) -> None:
        if self.on_progress is None:
            return
        full = self.scores.get(frozenset())
        layer_drops: dict[str, float] = {}
        if full is not None:
            for layer in self.corpus.layers_present():
                m = frozenset(u.id for u in self.corpus.in_layer(layer))
                if m in self.scores:
                    layer_drops[layer.value] = drop(full, self.scores[m])
        planned = self.ledger.planned if self.ledger.planned is not None else 0
        self.on_progress(ProgressEvent(self.ledger.made, planned, stage, message, layer_drops))

    async def score(self, mask: Mask) -> float:
        entry = self.memo.get(mask)
        if entry is not None:
            self.ledger.saved += 1
            await entry.done.wait()
            return math.nan if entry.value is None else entry.value.logprob_total
        entry = _Entry(anyio.Event())
        self.memo[mask] = entry
        try:
            entry.value = await self._measure(mask)
        finally:
            entry.done.set()
        value = math.nan if entry.value is None else entry.value.logprob_total
        self.scores[mask] = value
        if not mask and entry.value is not None:
            self.full = entry.value
        return value

    async def _measure(self, mask: Mask) -> ScoredTarget | None:
        messages = build_messages(self.corpus, self.query, mask, self.texts)
        borrower = object()
        await self.ledger.limiter.acquire_on_behalf_of(borrower)
        try:
            if self.ledger.planned is not None and self.ledger.made >= self.ledger.planned:
                self.ledger.refused += 1
                self.failures.append(_Failure(mask, f"refused: the plan allows {self.ledger.planned} calls"))
                return None
            self.ledger.made += 1
            try:
                scored = await self.scorer.score(messages, self.claim)
            except ScorerError as exc:
                self.ledger.failed += 1
                if exc.billed:
                    self.ledger.failed_billed += 1
                self.failures.append(_Failure(mask, f"the scoring call failed: {exc}"))
                return None
        finally:
            self.ledger.limiter.release_on_behalf_of(borrower)
        self.ledger.usage = self.ledger.usage + Usage(input_tokens=scored.prompt_tokens + scored.n_tokens,
                                                      cost_usd=0.0)
        if math.isnan(scored.logprob_total) or math.isinf(scored.logprob_total):
            self.failures.append(_Failure(mask, "the scorer returned no finite log-probability"))
            return None
        return scored

    async def measure(self, masks: Mapping[str, Mask], stage: Round) -> dict[str, float]:
        out: dict[str, float] = {}

        async def one(name: str, mask: Mask) -> None:
            out[name] = await self.score(mask)
            shown = "no information" if math.isnan(out[name]) else f"{out[name]:.2f} nats"
            self.emit(stage, f"log p(claim | {name}) = {shown}")

        async with anyio.create_task_group() as tg:
            for name, mask in masks.items():
                tg.start_soon(one, name, mask)
        return out



async def trace_logprob(scorer: Scorer, llm: LLM | None, claim: str, query: str, corpus: Corpus, *,
                        params: Params = DEFAULT_PARAMS, lp: LogprobParams = DEFAULT_LOGPROB_PARAMS,
                        tokenizer: Tokenizer | None = None,
                        on_progress: Callable[[ProgressEvent], None] | None = None,
                        supports: Mapping[str, SupportVerdict] | None = None) -> LogprobTraceResult:
    """Algorithm 4 with the log-probability scalar.

    ``llm`` runs the span checks (Algorithm 5, unconditional as in the judged estimator); pass
    ``supports`` to reuse span checks already made for this claim (``--estimator both``), or
    ``llm=None`` with ``supports`` to skip them. Scoring calls and span-check calls share one ledger
    whose ceiling is the cost gate's plan."""
    if not corpus.units:
        raise ValueError("the corpus has no sources: nothing in this turn's context can be traced")
    tok = tokenizer or ApproxTokenizer()
    ledger = CallLedger(planned=plan_calls(corpus, params).total, concurrency=params.concurrency)
    texts: dict[str, str] = {}
    truncated: list[str] = []
    for unit in corpus.units:
        texts[unit.id], cut = cut_to_budget(unit.text, params.source_token_cap, tok)
        if cut:
            truncated.append(unit.id)
    run = _LogprobRun(scorer, llm, claim, query, corpus, ledger, texts, on_progress)
    targets, span_omitted = select_sources(corpus.units, params.max_sources)
    bodies = {u.id: support_body(u, params=params, tokenizer=tok) for u in targets}
    rounds: list[_Rounds] = []

    async def spans() -> None:
        if supports is not None:
            run.supports.update({k: v for k, v in supports.items() if k in bodies})
            return
        if llm is None:
            return

        async def one(unit: Unit) -> None:
            run.supports[unit.id] = await check_support(llm, claim, unit, params=params, tokenizer=tok,
                                                        ledger=ledger, body=bodies[unit.id][0])
            run.emit("spans", f"span check of {unit.id}: {run.supports[unit.id].verdict}")

        async with anyio.create_task_group() as tg:
            for unit in targets:
                tg.start_soon(one, unit)

    async def ablation() -> None:
        rounds.append(await _rounds(run, corpus, params, lp))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ablation)
        tg.start_soon(spans)
    cut_for_spans = tuple(unit_id for unit_id, (_, cut) in bodies.items() if cut)
    return _assemble(run, params, lp, tok, rounds[0], span_omitted, cut_for_spans, tuple(truncated))


@dataclass(frozen=True)
class _Rounds:
    s1: float
    s0: float
    th: Thresholds
    layers: tuple[LayerScore, ...]
    contributing: tuple[Layer, ...]
    tested: tuple[Unit, ...] = ()
    omitted: tuple[str, ...] = ()
    s2: Mapping[str, float] = field(default_factory=dict)


async def _rounds(run: _LogprobRun, corpus: Corpus, params: Params, lp: LogprobParams) -> _Rounds:
    layers = corpus.layers_present()
    masks1: dict[str, Mask] = {"1": frozenset(), "0": frozenset(u.id for u in corpus.units)}
    masks1.update({f"1-{layer.value}": layer_mask(corpus, layer) for layer in layers})
    s = await run.measure(masks1, "round1")
    s1, s0 = s["1"], s["0"]
    n_tokens = run.full.n_tokens if run.full is not None else len(run.claim.split())
    th = thresholds(s1 - s0, n_tokens, lp)
    layer_scores = []
    for layer in layers:
        without = s[f"1-{layer.value}"]
        delta = drop(s1, without)
        layer_scores.append(LayerScore(layer, delta, role_of(delta, th.tau), without,
                                       math.isnan(s1) or math.isnan(without)))
    ranked = sorted((x for x in layer_scores if x.role in ("grounds", "distractor")), key=lambda x: -abs(x.delta))
    contributing = tuple(x.layer for x in ranked)
    if not contributing:
        return _Rounds(s1, s0, th, tuple(layer_scores), contributing)
    candidates = [u for u in corpus.units if u.layer in contributing] or list(corpus.units)
    tested, omitted = select_sources(candidates, params.max_sources)
    masks2: dict[str, Mask] = {"1": frozenset(), "1-candidates": frozenset(u.id for u in tested)}
    masks2.update({f"1-{u.id}": frozenset({u.id}) for u in tested})
    s2 = await run.measure(masks2, "round2")
    return _Rounds(s1, s0, th, tuple(layer_scores), contributing, tested, omitted, s2)


def _skipped_reason(verdict: Verdict, gamma: float, th: Thresholds) -> str:
    head = f"Round 2 skipped: no layer's removal moved log p(claim) by τ = {th.tau:.2f} nats or more. "
    if verdict == "redundant":
        return head + (f"Removing everything changed it (Γ = {gamma:.2f} nats) but removing any one layer did "
                       "not: each layer carries this claim independently. The quotes are the answer here.")
    if verdict == "internal_knowledge":
        return head + (f"With Γ = {gamma:.2f} nats < τ_Γ = {th.tau_gamma:.2f} the claim is about as likely "
                       "without any of the context: there is no layer to search within.")
    return head + "No log-probability could be measured with every source present or with none."


def _assemble(run: _LogprobRun, params: Params, lp: LogprobParams, tok: Tokenizer, ab: _Rounds,
              span_omitted: tuple[str, ...], cut_for_spans: tuple[str, ...],
              truncated: tuple[str, ...]) -> LogprobTraceResult:
    corpus = run.corpus
    gamma = ab.s1 - ab.s0
    verdict = decide_verdict(gamma, ab.contributing, ab.th.tau_gamma,
                             unmeasured=any(x.no_information for x in ab.layers))
    sources = score_sources(corpus, verdict, ab.contributing, tuple(u.id for u in ab.tested), ab.s2,
                            run.supports, ab.th.tau)
    overall = claim_diagnosis(verdict, [run.supports.get(u.id) for u in corpus.units if u.id in run.supports])
    omitted = tuple(dict.fromkeys((*ab.omitted, *span_omitted)))
    warnings = [f"{u.id} ({u.label}): {UNVERSIONED_WARNING}" for u in corpus.units if u.unversioned]
    for unit_id in truncated:
        unit = corpus.by_id(unit_id)
        warnings.append(f"{unit.id} ({unit.label}) is {tok.count(unit.text):,} tokens, larger than the "
                        f"{params.source_token_cap}-token scoring window: only its first part is scored.")
    for unit_id in cut_for_spans:
        unit = corpus.by_id(unit_id)
        warnings.append(f"{unit.id} ({unit.label}) is cut to {params.support_token_cap} tokens for the span "
                        "check: a span later in it cannot be quoted.")
    warnings += [f"Attachment {name!r} was not kept, so it cannot be scored." for name in corpus.unscorable]
    if ab.omitted:
        warnings.append(f"More sources than MAX_SOURCES={params.max_sources}: not tested individually: "
                        + "; ".join(ab.omitted) + ".")
    for failure in run.failures:
        warnings.append(f"No information {describe_mask(failure.mask, corpus)}: {failure.reason}. A drop involving "
                        "it reads 0 (disclosed, not measured).")
    if verdict == "no_information":
        warnings.append("Γ is unknown, so whether the claim is internal knowledge cannot be decided.")
    for unit_id, support in run.supports.items():
        if support.no_information:
            warnings.append(f"No information from the span check of {unit_id}: "
                            f"{support.reason.removeprefix('no information: ')}.")
    if run.llm is None and not run.supports:
        warnings.append("No span checks were made (no chat model was given).")
    notes = [f"scalar: log p(claim | query, ABLATE(C, v)) in nats by {run.scorer.model}; "
             f"τ = {ab.th.tau:.2f} nats (max({lp.tau_floor:g}, {lp.tau_rel:g}·|Γ|)), "
             f"τ_Γ = {ab.th.tau_gamma:.2f} nats (max({lp.gamma_floor:g}, {lp.gamma_per_token:g}·n_tokens))"]
    if ab.tested:
        notes.append(f"round 2: s(1 ⊖ candidates) = {ab.s2['1-candidates']:.2f} nats over "
                     f"{len(ab.tested)} candidate(s) in {', '.join(x.value for x in ab.contributing)}")
    ledger = run.ledger
    full = run.full
    return LogprobTraceResult(
        gamma=gamma, s_all=ab.s1, s_none=ab.s0, verdict=verdict, verdict_text=VERDICT_TEXT[verdict],
        layers=ab.layers, sources=tuple(sources), omitted=omitted, unscorable=corpus.unscorable,
        round2_skipped_reason=None if ab.contributing else _skipped_reason(verdict, gamma, ab.th),
        warnings=tuple(warnings),
        calls=CallAccount(planned=ledger.planned or 0, made=ledger.made, saved=ledger.saved,
                          cached=ledger.cached, failed=ledger.failed, failed_billed=ledger.failed_billed),
        usage=ledger.usage, cost_usd=ledger.cost_usd, prompt_versions=versions(*PROMPT_NAMES),
        params={**params.model_dump(), "logprob": lp.model_dump()},
        model=run.llm.model if run.llm is not None else run.scorer.model,
        corpus_digest=corpus.digest, diagnosis=overall, contributing_layers=ab.contributing, claim=run.claim,
        notes=tuple(notes), estimator="logprob",
        tau_nats=ab.th.tau, tau_gamma_nats=ab.th.tau_gamma,
        claim_tokens=full.n_tokens if full is not None else 0,
        claim_token_logprobs=full.token_logprobs if full is not None else (),
        scorer_model=run.scorer.model,
    )


def ranked_sources(result: TraceResult) -> list[tuple[str, float]]:
    """(source id, drop) for every tested source, largest drop first (ties by ordinal order)."""
    tested = [(s.source_id, s.delta) for s in result.sources if s.delta is not None]
    return sorted(((sid, d) for sid, d in tested if not math.isnan(d)), key=lambda x: -x[1])

