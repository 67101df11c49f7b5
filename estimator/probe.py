"""Algorithm 6 — ProbeSource (seed §6.7, §7.6): would the agent still say this without that source?

The one intervention a hosted API permits: remove the source, regenerate the answer from the query
alone, and test whether the claim reappears. Presence is anchor coverage of the claim's
discriminative anchors, ``cov(A, x) >= θ``. The verdict is a direction, never a weight:

* ``|A| < MIN_ANCHORS`` — inconclusive before any call is sent (presence would be a coin flip);
* ``B < k`` — inconclusive: the baseline is unstable (the mandatory guard, §6.7);
* ``W = 0`` — required; ``W = k`` — not required; otherwise inconclusive (mixed).

No response prefix is ever supplied (it leaks the evidence, §5.1). Regenerations are sampled
(temperature None) and capped at ``CAUSAL_MAX_OUTPUT`` tokens. A failed regeneration carries no
information: if any call fails the verdict is inconclusive with the reason, never a verdict on
partial data, and the calls not yet sent are not sent.
"""

from __future__ import annotations

import anyio

from estimator.corpus.units import Corpus
from estimator.fence import Fence, data_only_rule_version
from estimator.free_tier.anchors import anchors, cov, discriminative
from estimator.judge import NO_QUERY, NO_SOURCES, CallLedger, cut_to_budget
from estimator.ledger import CallAbandoned
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import ProbeCallsModel, ProbeResultModel, ProbeVerdict, UsageModel
from estimator.seams.llm import LLM, LLMError, LLMRequest, Message
from estimator.tokens import ApproxTokenizer, Tokenizer
from prompts import render, template

__all__ = ["ProbeResultModel", "ProbeVerdict", "build_regenerate_request", "present", "probe_source"]

PROMPT = "probe_regenerate"


def _cost(ledger: CallLedger | None) -> float | None:
    """The probe's cost to the microdollar: 0 when nothing was sent, None when a call's price is unknown."""
    if ledger is None:
        return 0.0
    return None if ledger.cost_usd is None else round(ledger.cost_usd, 6)


def build_regenerate_request(query: str, sources: list[tuple[str, str, str]], params: Params) -> LLMRequest:
    """One regeneration: the query and the present sources as fenced [id] label blocks — no response
    prefix, no claim. Sampled (temperature None), capped at CAUSAL_MAX_OUTPUT tokens. The query travels
    in a data region of its own, under one marker (derived from the query) for every regeneration."""
    fenced = Fence.for_inputs(query)
    blocks = [fenced.block(source_id, label, text) for source_id, label, text in sources]
    prompt = render(
        PROMPT,
        data_only_rule=fenced.rule(),
        query=fenced.wrap(query.strip()) if query.strip() else NO_QUERY,
        sources="\n\n".join(blocks) if blocks else NO_SOURCES,
    ).text
    return LLMRequest(
        messages=(Message("user", prompt),), purpose="probe", temperature=None, max_tokens=params.causal_max_output
    )


def present(found: tuple[str, ...], text: str, params: Params) -> bool:
    """Present(x): cov(A, x) >= PRESENCE_THRESHOLD."""
    return cov(found, text) >= params.presence_threshold


def _verdict(baseline: int, without: int, k: int) -> tuple[ProbeVerdict, str | None]:
    if baseline < k:
        return "inconclusive", f"baseline unstable: {baseline}/{k} full-context runs"
    if without == 0:
        return "required", None
    if without == k:
        return "not_required", None
    return "inconclusive", "mixed result without the source"


async def probe_source(
    llm: LLM,
    claim: str,
    query: str,
    corpus: Corpus,
    target_id: str,
    *,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    ledger: CallLedger | None = None,
) -> ProbeResultModel:
    """Algorithm 6: k regenerations with every source present and k without ``target_id``.

    Raises KeyError when ``target_id`` is not a source of ``corpus`` (before any call)."""
    corpus.by_id(target_id)
    tok = tokenizer or ApproxTokenizer()
    k = params.causal_samples
    version = template(PROMPT)[1] + "+" + data_only_rule_version()
    found = discriminative(anchors(claim, params), corpus.units, params)

    def result(
        verdict: ProbeVerdict,
        note: str | None,
        ledger: CallLedger | None,
        baseline: int | None = None,
        without: int | None = None,
    ) -> ProbeResultModel:
        return ProbeResultModel(
            verdict=verdict,
            note=note,
            target_id=target_id,
            anchors=found,
            baseline=baseline,
            without=without,
            k=k,
            calls=ProbeCallsModel(
                planned=2 * k, made=ledger.made if ledger else 0, failed=ledger.failed if ledger else 0
            ),
            usage=ledger.usage if ledger else UsageModel(),
            cost_usd=_cost(ledger),
            prompt_version=version,
            model=llm.model,
        )

    if len(found) < params.min_anchors:
        return result("inconclusive", f"claim carries only {len(found)} distinctive anchor(s)", None)

    ordered = sorted(corpus.units, key=lambda u: u.ordinal)
    texts = [(u.id, u.label, cut_to_budget(u.shown, params.source_token_cap, tok)[0]) for u in ordered]
    full = build_regenerate_request(query, texts, params)
    ablated = build_regenerate_request(query, [t for t in texts if t[0] != target_id], params)
    requests = [full] * k + [ablated] * k
    masks = ["all sources"] * k + [f"without {target_id}"] * k  # each regeneration's record names its mask

    # The ledger is the one meter: the 2k ceiling, the concurrency cap and the account. A call still
    # waiting for a slot when another one has failed is abandoned unsent (the verdict is then
    # inconclusive, so nothing more is worth spending).
    ledger = ledger or CallLedger(planned=2 * k, concurrency=params.concurrency)  # the caller's meter, when given
    outcomes: list[bool | None] = [None] * len(requests)
    errors: list[str] = []

    async def run(index: int) -> None:
        try:
            response = await ledger.call(
                llm,
                requests[index],
                wanted=lambda: not errors,
                stage="probe",
                mask=masks[index],
                parse=lambda answer: cov(found, answer.text),
            )
        except CallAbandoned:
            return
        except LLMError as exc:
            errors.append(f"{exc}{' (billed)' if exc.billed else ''}")
            return
        outcomes[index] = present(found, response.text, params)

    async with anyio.create_task_group() as group:
        for index in range(len(requests)):
            group.start_soon(run, index)

    if errors:
        failed = (
            f"{len(errors)} of {ledger.made} regeneration(s) failed, and a failed regeneration carries "
            f"no information: {errors[0]}"
        )
        return result("inconclusive", failed, ledger)
    baseline = sum(1 for hit in outcomes[:k] if hit)
    without = sum(1 for hit in outcomes[k:] if hit)
    verdict, note = _verdict(baseline, without, k)
    return result(verdict, note, ledger, baseline, without)
