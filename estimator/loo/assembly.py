"""The result of one traced claim, assembled once for every scalar: verdict, per-source scores with
their §9 diagnosis, the redundancy explanation, the call account and every warning."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from estimator.corpus.units import PROVENANCE_LAYER_ORDER, Corpus, Layer, Unit
from estimator.judge import Mask
from estimator.loo.caveats import caveats
from estimator.loo.coherence import disagreements, downgrade, grounding_layers, hedged
from estimator.loo.diagnosis import attribution_level, claim_diagnosis, diagnose
from estimator.loo.labels import VERDICT_TEXT
from estimator.loo.redundancy import explain
from estimator.loo.rounds import Ablation, LooRun, drop, layer_mask
from estimator.results.models import SourceScoreModel, SupportVerdictModel, TraceResultModel
from estimator.results.trace import Role, Verdict, decide_verdict
from estimator.tokens import Tokenizer
from prompts import versions

__all__ = ["PROMPT_NAMES", "UNVERSIONED_WARNING", "assemble", "decide_verdict", "describe_mask", "score_sources"]

PROMPT_NAMES = (
    "judge_system",
    "judge_user",
    "support_evidence",
    "support_directive",
    "support_retry_nudge",
    "data_only_rule",
)
UNVERSIONED_WARNING = "current text; an edit since this turn can't be detected"


def describe_mask(mask: Mask, corpus: Corpus, layers: tuple[Layer, ...] = PROVENANCE_LAYER_ORDER) -> str:
    if not mask:
        return "with every source present"
    everything = frozenset(u.id for u in corpus.units)
    if mask == everything:
        return "with no sources"
    for layer in layers:
        if mask == layer_mask(corpus, layer):
            return f"without the {layer.value} layer"
        if mask == everything - layer_mask(corpus, layer):
            return f"with only the {layer.value} layer"
    if len(mask) == 1:
        unit = corpus.by_id(next(iter(mask)))
        return f"without {unit.id} ({unit.label})"
    kept = everything - mask
    if len(kept) == 1:
        return f"with only {next(iter(kept))}"
    for layer in layers:
        whole = layer_mask(corpus, layer)
        if mask < whole and len(whole - mask) == 1:
            return f"with only {next(iter(whole - mask))} of the {layer.value} layer"
    return f"without the {len(mask)} round-2 candidates"


def _skipped_reason(
    verdict: Verdict, gamma: float, tau: float, tau_gamma: float, unit: str, *, downgraded: bool = False
) -> str:
    head = f"Round 2 skipped: no layer's removal moved the score by τ = {tau:.2f}{unit} or more. "
    if downgraded:
        return head + (
            f"Γ = {gamma:.2f}{unit} < τ_Γ = {tau_gamma:.2f}{unit} would make this the model's own knowledge, but "
            "the judge's answers disagree with each other (see the disagreements): no verdict is stated."
        )
    if verdict == "redundant":
        return head + (
            f"Removing everything changed the answer (Γ = {gamma:.2f}{unit}) but removing any one "
            "layer did not: more than one layer carries this claim independently, so no single layer "
            "is solely responsible. Which layers and sources carry it alone was measured instead (see "
            "redundancy); the quotes are the answer here."
        )
    if verdict == "internal_knowledge":
        return head + (
            f"With Γ = {gamma:.2f}{unit} < τ_Γ = {tau_gamma:.2f}{unit} the claim survives the removal "
            "of the whole context: there is no layer to search within."
        )
    if not math.isnan(gamma):
        return head + (
            f"Removing everything changed the answer (Γ = {gamma:.2f}{unit}), but the removal of a "
            "layer could not be measured, so whether one layer or several carry the claim is unknown."
        )
    return head + "No drop could be measured (no information with every source present or with none)."


def score_sources(
    corpus: Corpus,
    verdict: Verdict,
    ab: Ablation,
    supports: Mapping[str, SupportVerdictModel],
) -> tuple[SourceScoreModel, ...]:
    """Every measured source, in ordinal order: its round-2 drop, its role (round 2, or ``redundant``
    from redundancy resolution), ``alone``, its span verdict and its §9 diagnosis."""
    tested = {u.id for u in ab.tested}
    layer_role: dict[Layer, Role] = {x.layer: x.role for x in ab.layers}
    overall = claim_diagnosis(verdict, [supports.get(u.id) for u in corpus.units if u.id in supports])
    out: list[SourceScoreModel] = []
    for unit in sorted(corpus.units, key=lambda u: u.ordinal):
        if unit.id not in tested and unit.id not in supports and unit.id not in ab.alone:
            continue
        delta: float | None = None
        without: float | None = None
        missing = False
        if unit.id in tested:
            without = ab.s2[f"1-{unit.id}"]
            delta = drop(ab.s2["1"], without)
            missing = math.isnan(without) or math.isnan(ab.s2["1"])
        role = ab.roles.get(unit.id)
        support = supports.get(unit.id)
        # measured alone without carrying the claim: its part is not established, as for "irrelevant"
        standing = role if role is not None or unit.id not in ab.alone else "irrelevant"
        level = attribution_level(verdict=verdict, role=standing, layer_role=layer_role.get(unit.layer))
        diagnosis = None if level is None else diagnose(level, support)
        if overall is not None and support is not None and support.verdict == "silent":
            diagnosis = overall
        out.append(
            SourceScoreModel(
                source_id=unit.id,
                layer=unit.layer,
                label=unit.label,
                kind=unit.kind,
                delta=delta,
                role=role,
                support=support,
                diagnosis=diagnosis,
                s_without=without,
                no_information=missing,
                alone=ab.alone.get(unit.id),
                envelope=unit.envelope,
            )
        )
    return tuple(out)


def _named(warnings: list[str], name: str, cap: int) -> set[str]:
    """Ids of the sources a corpus warning already names as over ``name`` at this value of the cap."""
    value = re.compile(rf"(?<![\d,]){re.escape(f'{cap:,}')}(?![\d]|,\d)")
    return {w.split(" ", 1)[0] for w in warnings if name in w and value.search(w)}


def _warnings(
    run: LooRun,
    ab: Ablation,
    tok: Tokenizer,
    cut_for_spans: tuple[str, ...],
    omitted: tuple[str, ...],
    verdict: Verdict,
    truncated: tuple[str, ...],
    spans_made: bool,
    downgraded: bool = False,
) -> list[str]:
    corpus, params = run.corpus, run.params
    out = list(corpus.warnings)  # every cut and cap made while building the corpus, each naming its source
    # the corpus already named a source over a cap when it was built with this trace's caps
    over_scoring = _named(corpus.warnings, "SOURCE_TOKEN_CAP", params.source_token_cap)
    over_support = _named(corpus.warnings, "SUPPORT_TOKEN_CAP", params.support_token_cap)
    unversioned = [u for u in corpus.units if u.unversioned]
    if len(unversioned) == 1:
        out.append(f"{unversioned[0].id} ({unversioned[0].label}): {UNVERSIONED_WARNING}")
    elif unversioned:  # the rules of one system prompt: one warning, not one per rule
        ids = ", ".join(u.id for u in unversioned)
        out.append(f"{ids} ({len(unversioned)} parts of the agent instructions): {UNVERSIONED_WARNING}")
    for unit in (corpus.by_id(unit_id) for unit_id in truncated if unit_id not in over_scoring):
        out.append(
            f"{unit.id} ({unit.label}) is {tok.count(unit.text):,} tokens, larger than the "
            f"{params.source_token_cap}-token scoring window: only its first part is scored, so a "
            "claim grounded later in it will read as ungrounded."
        )
    for unit in (corpus.by_id(unit_id) for unit_id in cut_for_spans if unit_id not in over_support):
        out.append(
            f"{unit.id} ({unit.label}) is cut to {params.support_token_cap} tokens for the span "
            "check: a span later in it cannot be quoted."
        )
    out += corpus.unscorable_warnings()
    out += [f"Tool call {x.label} is not a source: {x.reason}." for x in corpus.excluded]
    if omitted:
        out.append(
            f"More sources than MAX_SOURCES={params.max_sources}: not tested individually: " + "; ".join(omitted) + "."
        )
    layers = corpus.layers_present()
    for failure in run.failures:
        out.append(
            f"No information {describe_mask(failure.mask, corpus, layers)}: {failure.reason}. It is "
            "not a score: a drop involving it reads 0 (disclosed, not measured)."
        )
    if verdict == "no_information" and math.isnan(ab.s1 - ab.s0):
        out.append("Γ is unknown, so whether the claim is internal knowledge cannot be decided.")
    elif verdict == "no_information" and downgraded:
        out.append(
            "No verdict is stated: Γ alone would make this the model's own knowledge, but removing part of "
            "the context lowers the score by more than removing all of it (see the disagreements)."
        )
    elif verdict == "no_information":
        out.append(
            "No layer's removal moved the score, but a layer's removal gave no information: whether one "
            "layer or several carry the claim cannot be decided."
        )
    for unit_id, support in run.supports.items():
        if support.no_information:
            out.append(
                f"No information from the span check of {unit_id} "
                f"({corpus.by_id(unit_id).label}): {support.reason.removeprefix('no information: ')}."
            )
    if not spans_made:
        out.append("No span checks were made (no chat model was given).")
    if run.ledger.refused:
        out.append(f"{run.ledger.refused} call(s) refused: the plan of {run.ledger.planned} calls was reached.")
    tested: dict[str, list[str]] = {}
    for unit in ab.tested:
        tested.setdefault(unit.layer.value, []).append(unit.id)
    found = caveats(
        verdict=verdict,
        gamma=ab.s1 - ab.s0,
        tau=ab.tau,
        tau_gamma=ab.tau_gamma,
        unit=run.scalar.unit,
        layer_drops={x.layer.value: x.delta for x in ab.layers},
        contributing=[x.value for x in ab.contributing],
        tested_by_layer=tested,
        roles=ab.roles,
        warnings=out,
    )
    return out + [c.text for c in found]


def assemble(
    run: LooRun,
    ab: Ablation,
    *,
    claim: str,
    model: str,
    tokenizer: Tokenizer,
    span_omitted: tuple[Unit, ...],
    cut_for_spans: tuple[str, ...],
    truncated: tuple[str, ...],
    spans_made: bool,
    prompt_names: tuple[str, ...] = PROMPT_NAMES,
) -> TraceResultModel:
    corpus, params, scalar = run.corpus, run.params, run.scalar
    gamma = ab.s1 - ab.s0
    stated = decide_verdict(gamma, ab.contributing, ab.tau_gamma, unmeasured=any(x.no_information for x in ab.layers))
    disagreeing = disagreements(ab, run.supports, unit=scalar.unit)
    verdict = downgrade(stated, disagreeing)  # a verdict its own measurements contradict is not stated cleanly
    sources = score_sources(corpus, verdict, ab, run.supports)
    overall = claim_diagnosis(verdict, [run.supports.get(u.id) for u in corpus.units if u.id in run.supports])
    left_out = {u.id for u in (*ab.omitted, *span_omitted)}  # union by id: two sources may share a label
    omitted = tuple(u.label for u in corpus.units if u.id in left_out)
    notes = scalar.describe(ab.tau, ab.tau_gamma)
    if ab.tested:
        notes.append(
            f"round 2: s(1 ⊖ candidates) = {ab.s2['1-candidates']:.2f}{scalar.unit} over "
            f"{len(ab.tested)} candidate(s) in {', '.join(x.value for x in ab.contributing)}"
        )
    ledger = run.ledger
    result = TraceResultModel(
        gamma=gamma,
        s_all=ab.s1,
        s_none=ab.s0,
        verdict=verdict,
        verdict_text=hedged(VERDICT_TEXT[verdict], disagreeing),
        layers=ab.layers,
        sources=sources,
        omitted=omitted,
        unscorable=corpus.unscorable,
        round2_skipped_reason=None
        if ab.contributing
        else _skipped_reason(verdict, gamma, ab.tau, ab.tau_gamma, scalar.unit, downgraded=stated != verdict),
        warnings=tuple(
            _warnings(
                run, ab, tokenizer, cut_for_spans, omitted, verdict, truncated, spans_made, downgraded=stated != verdict
            )
        ),
        calls=ledger.account(),
        usage=ledger.usage,
        cost_usd=ledger.cost_usd,
        prompt_versions=versions(*prompt_names),
        params={**params.model_dump(), **scalar.extra_params()},
        model=model,
        corpus_digest=corpus.digest,
        diagnosis=overall,
        contributing_layers=grounding_layers(ab.contributing, {x.layer: x.role for x in ab.layers}),
        searched_layers=ab.contributing,
        tau=ab.tau,
        tau_gamma=ab.tau_gamma,
        disagreements=disagreeing,
        claim=claim,
        notes=tuple(notes),
        estimator=scalar.name,
        redundancy=explain(ab, corpus),
    )
    return scalar.finish(result)
