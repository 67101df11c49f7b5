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
  floor for very short claims (default 3 nats, a factor of e³ ≈ 20 on the whole claim).
* τ = max(tau_floor, tau_rel · |Γ|): a layer or source whose removal moves the claim by at least this
  fraction of the whole context's effect (default 20 %) grounds (or, negative, distracts from) it; the
  floor (default 2 nats: a factor of e² ≈ 7.4) keeps numerical noise of a small Γ from counting.

For an action (a tool call scored as ``name({canonical JSON})``), n counts only the tokens that carry the
call's content — its name and argument values (``call_tokens``) — not the braces, quotes and keys the model
predicts from the tool's schema whatever the context shows (``LogprobParams.action_tokens``; beyond the seed,
set on the planted-injection set's development split, ``bench/action_thresholds.py``). The score is still the
whole call's log-probability, and sentences keep every token.

The two floors were chosen on the tuning split of the hard validity set (``bench/validity/``, rule and
held-out figures in its README): with τ's floor at 1 nat, a source moving a general-knowledge claim by
1–2 nats was named as its top source beside an *internal knowledge* verdict.

The log-probability is deterministic for a given model build, so the floor is a meaning floor (an
e-fold change in probability), not a quantisation floor as for the judge's digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from estimator.corpus.units import Corpus, Layer
from estimator.cost import plan_calls
from estimator.fence import Fence, neutralise
from estimator.judge import NO_QUERY, Mask
from estimator.ledger import CallLedger
from estimator.loo.call_tokens import content_token_count
from estimator.loo.driver import run_loo
from estimator.loo.measure import Measured
from estimator.loo.rounds import plan_redundancy, windowed_texts
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import (
    LogprobThresholdsModel,
    LogprobTraceResultModel,
    SupportVerdictModel,
    TraceResultModel,
)
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM, Message
from estimator.seams.scorer import ScoredTarget, Scorer, ScorerError
from estimator.target import SENTENCE, Wording
from estimator.tokens import ApproxTokenizer, Tokenizer
from prompts import render, versions

__all__ = [
    "LogprobParams",
    "LogprobScalar",
    "Thresholds",
    "build_messages",
    "scored_claim",
    "thresholds",
    "trace_logprob",
]

INSTRUCTIONS_HEADING = "AGENT INSTRUCTIONS:"
CONTEXT_HEADING = "CONTEXT:"
QUESTION_HEADING = "QUESTION:"
SYSTEM_PROMPT = "logprob_system"
"""The scoring chat's system message (``prompts/logprob_system.txt``); its version is in every logprob result."""


class LogprobParams(BaseModel):
    """The probability-based estimator's thresholds, in nats (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tau_rel: float = Field(0.2, gt=0, lt=1, description="τ as a fraction of |Γ|.")
    tau_floor: float = Field(
        2.0, ge=0, le=100, description="Smallest τ, nats (calibrated on the hard validity set's tuning split; was 1.0)."
    )
    gamma_per_token: float = Field(0.25, ge=0, le=10, description="τ_Γ per claim token, nats.")
    gamma_floor: float = Field(
        3.0,
        ge=0,
        le=100,
        description="Smallest τ_Γ, nats (calibrated on the hard validity set's tuning split; was 2.0).",
    )
    action_tokens: Literal["content", "all"] = Field(
        "content",
        description="What n_tokens counts when the target is a tool call: the tokens of its name and argument "
        "values (content; set on the planted set's development split) or every token of its JSON (all: the "
        "sentence rule). Sentences always count every token.",
    )


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


def build_messages(
    corpus: Corpus,
    query: str,
    mask: Mask,
    texts: Mapping[str, str],
    order: Sequence[str] | None = None,
    wording: Wording = SENTENCE,
) -> tuple[Message, ...]:
    """The chat the claim is scored against, for the sources ``mask`` leaves present.

    The system message is this project's own (``prompts/logprob_system.txt`` with the data-only rule): no
    tenant text ever stands in the system role. The user message holds every present source as a fenced
    ``[id] label`` block — the instructions layer under its own heading first, then the other sources, each
    group in ordinal order (or ``order``) — followed by the fenced query. The marker derives from the query,
    so masks of one trace share the longest possible prefix. ``wording``: the system prompt that asks for an
    answer (a sentence) or for the next tool call (an action)."""
    if order is None:  # ``order``: source ids in the order to show them (the proxy's shared-prefix order)
        ordered = sorted(corpus.units, key=lambda u: u.ordinal)
    else:
        by_id = {u.id: u for u in corpus.units}
        ordered = [by_id[uid] for uid in order]
    present = [u for u in ordered if u.id not in mask]
    fenced = Fence.for_inputs(query)
    rules = [fenced.block(u.id, u.label, texts[u.id]) for u in present if u.layer == Layer.INSTRUCTIONS]
    blocks = [fenced.block(u.id, u.label, texts[u.id]) for u in present if u.layer != Layer.INSTRUCTIONS]
    parts: list[str] = []
    if rules:
        parts.append(INSTRUCTIONS_HEADING + "\n\n" + "\n\n".join(rules))
    if blocks:
        parts.append(CONTEXT_HEADING + "\n\n" + "\n\n".join(blocks))
    parts.append(QUESTION_HEADING + "\n" + (fenced.wrap(query.strip()) if query.strip() else NO_QUERY))
    system = render(wording.logprob_system, data_only_rule=fenced.rule().strip()).text.strip()
    return (Message("system", system), Message("user", "\n\n".join(parts)))


def scored_claim(claim: str) -> str:
    """The claim as scored (the assistant's answer): fence-like markers neutralised, like every input."""
    return neutralise(claim)


@dataclass
class LogprobScalar:
    """The scalar protocol (``measure.Scalar``) for log p(claim | query, ABLATE(C, v)) in nats."""

    scorer: Scorer
    ledger: CallLedger
    claim: str
    query: str
    corpus: Corpus
    texts: Mapping[str, str]
    lp: LogprobParams = DEFAULT_LOGPROB_PARAMS
    name: str = "logprob"
    unit: str = " nats"
    full: ScoredTarget | None = None
    wording: Wording = SENTENCE

    def sent(self, mask: Mask) -> tuple[Message, ...]:
        return build_messages(self.corpus, self.query, mask, self.texts, wording=self.wording)

    async def measure(self, mask: Mask) -> Measured:
        try:
            scored = await self.ledger.score(self.scorer, self.sent(mask), scored_claim(self.claim))
        except ScorerError as exc:
            return Measured(math.nan, f"the scoring call failed: {exc}")
        if math.isnan(scored.logprob_total) or math.isinf(scored.logprob_total):
            return Measured(math.nan, "the scorer returned no finite log-probability")
        if not mask:
            self.full = scored
        return Measured(scored.logprob_total)

    def n_tokens(self) -> int:
        """The tokens τ_Γ scales with: every token of a sentence; of a tool call, those carrying its name and
        argument values (``call_tokens``) unless ``LogprobParams.action_tokens`` is ``all``."""
        full = self.full
        n_all = full.n_tokens if full is not None else len(self.claim.split())
        if self.wording.kind != "action" or self.lp.action_tokens == "all":
            return n_all
        return content_token_count(scored_claim(self.claim), full.tokens if full is not None else (), n_all)

    def thresholds(self, gamma: float, params: Params) -> tuple[float, float]:
        th = thresholds(gamma, self.n_tokens(), self.lp)
        return th.tau, th.tau_gamma

    def describe(self, tau: float, tau_gamma: float) -> list[str]:
        lp = self.lp
        counted = "n_tokens"
        if self.wording.kind == "action" and lp.action_tokens == "content":
            counted = f"n = {self.n_tokens()} tokens of the call's name and argument values, beyond the seed"
        return [
            f"scalar: log p(claim | query, ABLATE(C, v)) in nats by {self.scorer.model}; "
            f"τ = {tau:.2f} nats (max({lp.tau_floor:g}, {lp.tau_rel:g}·|Γ|)), "
            f"τ_Γ = {tau_gamma:.2f} nats (max({lp.gamma_floor:g}, {lp.gamma_per_token:g}·{counted}))"
        ]

    def extra_params(self) -> dict[str, Any]:
        return {"logprob": self.lp.model_dump()}

    def finish(self, result: TraceResultModel) -> TraceResultModel:
        tau, tau_gamma = self.thresholds(result.gamma, DEFAULT_PARAMS)
        full = self.full
        return LogprobTraceResultModel(
            **{**dict(result), "prompt_versions": {**result.prompt_versions, **versions(self.wording.logprob_system)}},
            thresholds=LogprobThresholdsModel(tau_nats=tau, tau_gamma_nats=tau_gamma),
            claim_tokens=full.n_tokens if full is not None else 0,
            claim_token_logprobs=full.token_logprobs if full is not None else (),
            scorer_model=self.scorer.model,
        )


async def trace_logprob(
    scorer: Scorer,
    llm: LLM | None,
    claim: str,
    query: str,
    corpus: Corpus,
    *,
    params: Params = DEFAULT_PARAMS,
    lp: LogprobParams = DEFAULT_LOGPROB_PARAMS,
    tokenizer: Tokenizer | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    supports: Mapping[str, SupportVerdictModel] | None = None,
    ledger: CallLedger | None = None,
    wording: Wording = SENTENCE,
) -> LogprobTraceResultModel:
    """Algorithm 4 with the log-probability scalar: the same driver as the judged digit.

    ``llm`` runs the span checks (unconditional as in the judged estimator); pass ``supports`` to reuse
    span checks already made for this claim (``--estimator both``), or ``llm=None`` with ``supports`` to
    skip them. Scoring calls and span-check calls share one ledger (``ledger``, or a fresh one capped at
    the cost gate's plan)."""
    if not corpus.units:
        raise ValueError("the corpus has no sources: nothing in this turn's context can be traced")
    tok = tokenizer or ApproxTokenizer()
    plan = plan_calls(corpus, params)
    ledger = ledger or CallLedger(planned=plan.total, concurrency=params.concurrency)
    texts, truncated = windowed_texts(corpus, params, tok)
    scalar = LogprobScalar(scorer, ledger, claim, query, corpus, texts, lp, wording=wording)
    result = await run_loo(
        scalar,
        claim,
        corpus,
        llm=llm,
        ledger=ledger,
        params=params,
        tokenizer=tok,
        model=llm.model if llm is not None else scorer.model,
        truncated=truncated,
        on_progress=on_progress,
        supports=supports,
        redundancy=plan_redundancy(plan),
        wording=wording,
    )
    assert isinstance(result, LogprobTraceResultModel)
    return result


def ranked_sources(result: TraceResultModel) -> list[tuple[str, float]]:
    """(source id, drop) for every tested source, largest drop first (ties by ordinal order)."""
    tested = [(s.source_id, s.delta) for s in result.sources if s.delta is not None]
    return sorted(((sid, d) for sid, d in tested if not math.isnan(d)), key=lambda x: -x[1])
