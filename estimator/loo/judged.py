"""Algorithm 4 — TraceClaim with the judged digit (§6.2): the leave-one-out driver (``loo.py``) over
``measure.JudgedDigit`` (or ``measure.ExpectedDigit``), with span localisation (Algorithm 5) running
unconditionally and concurrently with the ablation rounds.

Every call goes through one per-trace ledger: at most ``params.concurrency`` in flight and never more
than the cost gate's plan. Repeated masks are answered from the driver's memo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from estimator.corpus.units import Corpus, Unit
from estimator.cost import plan_calls
from estimator.ledger import CallLedger
from estimator.loo.assembly import PROMPT_NAMES, UNVERSIONED_WARNING, decide_verdict, describe_mask, score_sources
from estimator.loo.driver import run_loo
from estimator.loo.measure import ExpectedDigit, JudgedDigit
from estimator.loo.rounds import drop, layer_mask, plan_redundancy, role_of, select_units, windowed_texts
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import TraceResultModel
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM
from estimator.target import SENTENCE, Wording
from estimator.tokens import ApproxTokenizer, Tokenizer

__all__ = [
    "PROMPT_NAMES",
    "UNVERSIONED_WARNING",
    "ProgressEvent",
    "decide_verdict",
    "describe_mask",
    "drop",
    "layer_mask",
    "role_of",
    "score_sources",
    "select_sources",
    "trace_claim",
]


def select_sources(units: Sequence[Unit], max_sources: int) -> tuple[tuple[Unit, ...], tuple[str, ...]]:
    """Algorithm 4a: layer-balanced round-robin by recency, capped; every omitted source named."""
    kept, omitted = select_units(units, max_sources)
    return kept, tuple(u.label for u in omitted)


async def trace_claim(
    llm: LLM,
    claim: str,
    query: str,
    corpus: Corpus,
    *,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    dedupe: bool = True,
    expected: bool = False,
    ledger: CallLedger | None = None,
    resolve_redundancy: bool | None = None,
    wording: Wording = SENTENCE,
) -> TraceResultModel:
    """Algorithm 4 for one claim with the judge's digit (``expected``: its expected digit). ``ledger``
    is the trace's meter (a fresh one capped at this estimator's plan when None). ``dedupe=False``
    disables the per-trace memo and ``resolve_redundancy=False`` redundancy resolution, ``True`` lifts
    its cap (both for measurement only; by default it spends what the plan reserved for it). ``wording``: the
    questions of a sentence (the default) or of an action, whose ``claim`` is the call's text."""
    if not corpus.units:
        raise ValueError("the corpus has no sources: nothing in this turn's context can be traced")
    tok = tokenizer or ApproxTokenizer()
    plan = plan_calls(corpus, params)
    ledger = ledger or CallLedger(planned=plan.total, concurrency=params.concurrency)
    texts, truncated = windowed_texts(corpus, params, tok)
    kind = ExpectedDigit if expected else JudgedDigit
    scalar = kind(llm, ledger, claim, query, corpus, texts, wording=wording)
    return await run_loo(
        scalar,
        claim,
        corpus,
        llm=llm,
        ledger=ledger,
        params=params,
        tokenizer=tok,
        model=llm.model,
        truncated=truncated,
        on_progress=on_progress,
        dedupe=dedupe,
        redundancy=plan_redundancy(plan, resolve_redundancy),
        wording=wording,
    )
