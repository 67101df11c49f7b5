"""Algorithm 4 — the one hierarchical leave-one-out driver (``run_loo``), over any scalar (``measure.Scalar``).

Round 1 removes each layer, round 2 each source of the contributing layers (``rounds``); redundancy
resolution (``redundancy``) asks the complementary question where leave-one-out reads zero; span
localisation (Algorithm 5) runs concurrently; ``assembly`` turns the measurements into the result.

With ``params.repeats`` = k > 1 every mask is measured k times (``LooRun``) and the result carries each
sample and their spread beside the median it used: for s(1), s(0), every layer's and every tested source's
removal (``with_samples``). ``repeats`` is in every result, so a reader of a single-sample trace is told that
its spread is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import anyio

from estimator.corpus.units import Corpus, Unit
from estimator.judge import Mask
from estimator.ledger import CallLedger
from estimator.loo.assembly import assemble
from estimator.loo.measure import Scalar
from estimator.loo.redundancy import across_layers, within_layers
from estimator.loo.rounds import Ablation, LooRun, Redundancy, layer_mask, round1, round2, select_units
from estimator.params import Params
from estimator.results.models import SpreadModel, SupportVerdictModel, TraceResultModel, sampling_note
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM
from estimator.spans.support import check_support, support_body
from estimator.target import SENTENCE, Wording
from estimator.tokens import Tokenizer

__all__ = ["run_loo", "spread_of", "with_samples"]


def spread_of(samples: tuple[float, ...] | None) -> SpreadModel | None:
    """The samples of one mask with their lowest and highest (NaN when none gave information); None for one."""
    if not samples:
        return None
    known = [x for x in samples if not math.isnan(x)]
    return SpreadModel(samples=samples, low=min(known) if known else math.nan, high=max(known) if known else math.nan)


def with_samples(result: TraceResultModel, run: LooRun) -> TraceResultModel:
    """``result`` with ``repeats`` and, when each mask was measured more than once, the spread of s(1), s(0),
    each layer's removal and each tested source's removal (the masks its scores were read from)."""
    said = {"repeats": run.params.repeats, "sampling": sampling_note(run.params.repeats)}
    if run.params.repeats <= 1:
        return result.model_copy(update=said)
    corpus = run.corpus

    def of(mask: Mask) -> SpreadModel | None:
        return spread_of(run.samples.get(mask))

    layers = tuple(x.model_copy(update={"spread": of(layer_mask(corpus, x.layer))}) for x in result.layers)
    sources = tuple(
        s.model_copy(update={"spread": of(frozenset({s.source_id}))}) if s.s_without is not None else s
        for s in result.sources
    )
    return result.model_copy(
        update={
            **said,
            "s_all_spread": of(frozenset()),
            "s_none_spread": of(frozenset(u.id for u in corpus.units)),
            "layers": layers,
            "sources": sources,
        }
    )


async def _ablate(run: LooRun, redundancy: Redundancy) -> Ablation:
    ab = await round1(run)
    if ab.contributing:
        ab = await round2(run, ab)
        off = redundancy.within == 0 and not redundancy.across  # the seed's algorithm, for measurement
        return ab if off else await within_layers(run, ab, redundancy.within)
    return await across_layers(run, ab) if redundancy.across else ab


async def run_loo(
    scalar: Scalar,
    claim: str,
    corpus: Corpus,
    *,
    llm: LLM | None,
    ledger: CallLedger,
    params: Params,
    tokenizer: Tokenizer,
    model: str,
    truncated: tuple[str, ...],
    on_progress: Callable[[ProgressEvent], None] | None = None,
    dedupe: bool = True,
    supports: Mapping[str, SupportVerdictModel] | None = None,
    redundancy: Redundancy | None = None,
    wording: Wording = SENTENCE,
) -> TraceResultModel:
    """Algorithm 4 for one claim with ``scalar``. ``llm`` runs the span checks (unconditional); pass
    ``supports`` to reuse span checks already made for this claim, or ``llm=None`` to skip them.
    ``truncated``: ids of the sources the scalar sees cut to the scoring window; ``redundancy``: what
    redundancy resolution may spend (``plan_redundancy`` of the cost gate's plan); ``wording``: the span checks'
    questions, a sentence's or an action's (the scalar carries its own)."""
    if not corpus.units:
        raise ValueError("the corpus has no sources: nothing in this turn's context can be traced")
    run = LooRun(scalar, ledger, corpus, params, on_progress, dedupe)
    targets, span_omitted = select_units(corpus.units, params.max_sources)
    bodies = {u.id: support_body(u, params=params, tokenizer=tokenizer) for u in targets}  # cut once
    ablation: list[Ablation] = []

    async def spans() -> None:
        if supports is not None:
            run.supports.update({k: v for k, v in supports.items() if k in bodies})
            return
        if llm is None:
            return

        async def one(unit: Unit) -> None:
            run.supports[unit.id] = await check_support(
                llm,
                claim,
                unit,
                params=params,
                tokenizer=tokenizer,
                ledger=ledger,
                body=bodies[unit.id][0],
                wording=wording,
            )
            run.emit("spans", f"span check of {unit.id}: {run.supports[unit.id].verdict}")

        async with anyio.create_task_group() as tg:
            for unit in targets:
                tg.start_soon(one, unit)

    async def rounds() -> None:
        ablation.append(await _ablate(run, redundancy or Redundancy()))

    async with anyio.create_task_group() as tg:  # both start at t=0; spans never wait for ablation
        tg.start_soon(rounds)
        tg.start_soon(spans)
    cut_for_spans = tuple(unit_id for unit_id, (_, cut) in bodies.items() if cut)
    result = assemble(
        run,
        ablation[0],
        claim=claim,
        model=model,
        tokenizer=tokenizer,
        span_omitted=span_omitted,
        cut_for_spans=cut_for_spans,
        truncated=truncated,
        spans_made=llm is not None or bool(supports),
        prompt_names=wording.prompt_names,
    )
    return with_samples(result, run)
