"""The caveats a result carries for the kinds of claim the hard validity study found the method gets wrong.

Through the real driver with plain-function judges (the redundant-sources fixture: three tool returns state the
claim's layer id, a geocoder does not), and on the caveat rule itself at its boundaries.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_redundancy import judged, load, scored

from estimator.loo.caveats import REWORDED_FRACTION, caveats
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import TraceResultModel
from estimator.seams.llm import ScriptedLLM
from estimator.seams.scorer import ScriptedScorer
from estimator.trace import EstimatorChoice, run_trace
from provenance_api.providers.free_tier import tokenizer


def trace(choice: EstimatorChoice, params: Params = DEFAULT_PARAMS) -> TraceResultModel:
    claim, query, corpus = load()
    outcome = anyio.run(
        lambda: run_trace(
            choice,
            claim,
            query,
            corpus,
            llm=ScriptedLLM(judged),
            scorer=ScriptedScorer(scored),
            tokenizer=tokenizer(),
            params=params,
        )
    )
    return outcome.result


def kinds(result: TraceResultModel) -> list[str]:
    heads = {
        "No single source of": "shared_carriers",
        "Part of this context was cut": "cut_context",
        "Reported as the model's own knowledge, but narrowly": "reworded_source",
    }
    return [kind for w in result.warnings for head, kind in heads.items() if w.startswith(head)]


@pytest.mark.parametrize("choice", ["judged", "logprob"])
def test_a_layer_carried_by_several_sources_tells_the_user_which_ones_to_compare(choice: EstimatorChoice) -> None:
    result = trace(choice)
    assert result.verdict == "attributed"
    assert kinds(result) == ["shared_carriers"]
    caveat = next(w for w in result.warnings if w.startswith("No single source of"))
    # the carriers redundancy resolution found, not the geocoder that does not carry it
    assert "cannot tell which of s0, s1, s3 the answer followed" in caveat
    assert "the tools layer" in caveat


def test_a_cut_source_says_the_sentence_may_come_from_the_part_that_was_cut() -> None:
    corpus = load()[2]
    biggest = max(tokenizer().count(u.text) for u in corpus.units)
    cut = DEFAULT_PARAMS.model_copy(update={"source_token_cap": max(8, biggest // 4)})
    result = trace("judged", cut)
    assert any("scoring window" in w for w in result.warnings)
    assert "cut_context" in kinds(result)
    assert "cut_context" not in kinds(trace("judged"))  # nothing cut: no caveat


def _figures(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "verdict": "attributed",
        "gamma": 40.0,
        "tau": 8.0,
        "tau_gamma": 5.0,
        "unit": " nats",
        "layer_drops": {"tools": 30.0, "instructions": 1.0},
        "contributing": ["tools"],
        "tested_by_layer": {"tools": ["s0", "s1"]},
        "roles": {"s0": "irrelevant", "s1": "irrelevant"},
        "warnings": [],
    }
    return {**base, **over}


def test_shared_carriers_only_when_the_layer_grounds_and_no_source_does_alone() -> None:
    assert [c.kind for c in caveats(**_figures())] == ["shared_carriers"]
    one_grounds = _figures(roles={"s0": "grounds", "s1": "irrelevant"})
    assert caveats(**one_grounds) == []
    weak_layer = _figures(layer_drops={"tools": 7.9, "instructions": 1.0})
    assert caveats(**weak_layer) == []
    single = _figures(tested_by_layer={"tools": ["s0"]})
    assert caveats(**single) == []


def test_cut_context_is_said_unless_nothing_was_measured() -> None:
    cut = ["s2 (search) is 2,400 tokens, larger than the 700-token scoring window: …"]
    assert "cut_context" in [c.kind for c in caveats(**_figures(warnings=cut))]
    nothing = _figures(warnings=cut, verdict="no_information")
    assert "cut_context" not in [c.kind for c in caveats(**nothing)]


def test_reworded_source_only_for_a_narrow_internal_knowledge_verdict() -> None:
    tau_gamma = 6.0
    narrow = REWORDED_FRACTION * tau_gamma + 0.01
    for gamma, expected in ((narrow, ["reworded_source"]), (REWORDED_FRACTION * tau_gamma - 0.01, []), (-3.0, [])):
        figures = _figures(
            verdict="internal_knowledge",
            gamma=gamma,
            tau_gamma=tau_gamma,
            contributing=[],
            tested_by_layer={},
            roles={},
        )
        assert [c.kind for c in caveats(**figures)] == expected
    attributed = _figures(gamma=narrow, tau_gamma=tau_gamma, contributing=[], tested_by_layer={}, roles={})
    assert caveats(**attributed) == []
