"""Proxy-first tracing against a REAL local model in-process (the small Qwen2.5-Coder GGUF, plumbing only; built
once by scripts/local-model.sh, never skipped): prefix reuse evaluates fewer tokens and changes no score, and a
proxy trace of a small turn keeps its numbers — with a scripted hosted judge that knows the planted cause, a
confirmed result names that cause (the judge would not confirm another)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.api_server import SMALL_CLAIM, SMALL_KEY, small_turn
from support.fake_openai import FakeOpenAI
from support.local_model import model_path

from estimator.audit.agreement import top_source
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.fence import split_fenced
from estimator.judge import Mask
from estimator.ledger import CallLedger
from estimator.loo.rounds import windowed_texts
from estimator.params import DEFAULT_PARAMS
from estimator.proxy.driver import planned_proxy_calls, trace_proxy
from estimator.proxy.prefix import OrderedLogprobScalar, block_order
from estimator.seams.llm import LLMRequest, ScriptedLLM
from estimator.tokens import ApproxTokenizer
from provenance_api.cli.main import main

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]

TOTAL_TOLERANCE = 0.2  # nats: the same tokens evaluated in other batches round differently


@pytest.fixture(scope="module")
def local() -> Iterator[Any]:
    from provenance_api.providers.scorer_llamacpp import LocalModel

    model = LocalModel(model_path(small=True), n_ctx=2048)
    yield model
    model.close()


def corpus_and_texts() -> tuple[Any, dict[str, str]]:
    corpus = build_corpus(StoredTurn.model_validate(small_turn()), DEFAULT_PARAMS)
    texts, _ = windowed_texts(corpus, DEFAULT_PARAMS, ApproxTokenizer())
    return corpus, texts


async def test_prefix_reuse_evaluates_fewer_tokens_and_changes_no_score(local: Any) -> None:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer

    corpus, texts = corpus_and_texts()
    order = block_order(corpus, texts, ApproxTokenizer())
    masks: list[Mask] = [frozenset(), *(frozenset({u.id}) for u in corpus.units), frozenset(texts)]
    totals: dict[bool, list[float]] = {}
    evaluated: dict[bool, tuple[int, int]] = {}
    for reuse in (True, False):
        local.llama.reset()
        scorer = LlamaCppScorer(local, reuse_prefix=reuse)
        scalar = OrderedLogprobScalar(
            scorer,
            CallLedger(planned=None, concurrency=1),
            SMALL_CLAIM,
            "Where is my order A-1?",
            corpus,
            texts,
            order=order,
        )
        totals[reuse] = [(await scorer.score(scalar.sent(m), SMALL_CLAIM)).logprob_total for m in masks]
        evaluated[reuse] = (scorer.evaluated_tokens, scorer.scored_tokens)
    assert evaluated[True][1] == evaluated[False][1] == evaluated[False][0] > evaluated[True][0]
    for with_reuse, without in zip(totals[True], totals[False], strict=True):
        assert abs(with_reuse - without) < TOTAL_TOLERANCE


def knowing_judge() -> ScriptedLLM:
    """Knows the claim: 9 while the tool return is shown, else 2; its span check quotes the tool return."""

    def script(request: LLMRequest) -> str:
        data = "\n".join(split_fenced(request.messages[-1].content)[0][1:])
        if request.purpose == "judge":
            return "9" if SMALL_KEY in data else "2"
        if SMALL_KEY in data:
            return json.dumps(
                {
                    "verdict": "supported",
                    "evidence_quote": "shipped 2025-03-03 with carrier DHL",
                    "confidence": 0.9,
                    "reason": "-",
                }
            )
        return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})

    return ScriptedLLM(script)


async def test_a_proxy_trace_on_the_real_model_keeps_its_numbers(local: Any) -> None:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer

    corpus, _ = corpus_and_texts()
    local.llama.reset()
    scorer = LlamaCppScorer(local)
    llm = knowing_judge()
    result = await trace_proxy(scorer, llm, SMALL_CLAIM, "Where is my order A-1?", corpus)
    assert result.estimator == "proxy" and result.proxy_model == scorer.model
    assert result.calls.made == len(llm.calls) <= planned_proxy_calls(corpus) == result.calls.planned
    assert result.calls.scored is not None  # trace_proxy's account carries the scoring passes
    assert result.proxy is not None and result.calls.scored > 0
    assert result.proxy.evaluated_tokens == scorer.evaluated_tokens < scorer.scored_tokens
    cause = next(u.id for u in corpus.units if SMALL_KEY in u.text)
    if result.confirmed:  # the judge knows the cause: it confirms no other top source
        assert top_source(result) == cause and result.calls.made <= 6
    else:  # the full judged search ran with the knowing judge: it finds the cause
        assert top_source(result) == cause and result.proxy.disagreements


def _hosted(request: dict[str, Any]) -> str:
    """The hosted judge behind an OpenAI-compatible server: knows the tool return carries the claim."""
    data = "\n".join(split_fenced(request["messages"][-1]["content"])[0][1:])
    if request.get("max_tokens", 0) <= 8:
        return "9" if SMALL_KEY in data else "2"
    if SMALL_KEY in data:
        return json.dumps(
            {
                "verdict": "supported",
                "evidence_quote": "shipped 2025-03-03 with carrier DHL",
                "confidence": 0.9,
                "reason": "-",
            }
        )
    return json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})


def test_the_cli_ranks_on_the_local_model_and_confirms_with_the_hosted_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(small_turn()), encoding="utf-8")
    with FakeOpenAI(_hosted) as srv:
        code = main(
            [
                "trace",
                str(turn),
                SMALL_CLAIM,
                "--model",
                "openai/fake",
                "--api-base",
                srv.base_url,
                "--api-key",
                "test-key",
                "--estimator",
                "proxy",
                "--local-model",
                model_path(small=True),
                "--n-ctx",
                "2048",
                "--yes",
                "--json",
                "--no-cache",
            ]
        )
        answered = srv.answered
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["estimator"] == "proxy" and isinstance(result["confirmed"], bool)
    assert result["proxy_model"].startswith("local/qwen2.5-coder-0.5b")
    assert result["calls"]["made"] == answered <= result["calls"]["planned"] and result["calls"]["scored"] > 0
    assert "Proxy ranking" in err and "Fallback worst" in err  # both sides of the gate, before consent
