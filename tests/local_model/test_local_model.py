"""Against a REAL model: the llama.cpp server's echo (BOS off-by-one caught and corrected), the in-process
scorer agreeing with it, the logprob estimator on planted turns, and a two-turn smoke of the local mode.

The model and llama-cpp-python come from scripts/local-model.sh (built once, cached outside the work tree);
these tests never skip. Prompts are kept small: the server's echo sorts the full vocabulary per token.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.local_model import ROOT, llama_server, model_path

from estimator.audit.agreement import top_source
from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from estimator.loo.expected_digit import expected_digit
from estimator.loo.logprob import trace_logprob
from estimator.params import DEFAULT_PARAMS
from estimator.seams.llm import LLMRequest, Message
from estimator.seams.scorer import ScorerError
from provenance_api.providers.scorer_completions import CompletionsScorer

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(900)]

sys.path.insert(0, str(ROOT / "bench" / "validity"))
from turns import SUITE, Planted  # noqa: E402

MESSAGES = (
    Message("system", "Answer briefly."),
    Message("user", "Context:\n\n[s0] lookup\nexporter.yaml: metrics port 9464\n\nQuestion: Which port?"),
)
TARGET = "The metrics exporter listens on port 9464."
# In-process vs server, same model file and token sequence: per-token and total |difference| in nats.
TOKEN_TOLERANCE = 0.05
TOTAL_TOLERANCE = 0.2


@pytest.fixture(scope="module")
def small_model() -> str:
    return model_path(small=True)


@pytest.fixture(scope="module")
def server(small_model: str) -> Iterator[str]:
    with llama_server(small=True) as base:
        yield base


@pytest.fixture(scope="module")
def small_local(small_model: str) -> Iterator[Any]:
    from provenance_api.providers.scorer_llamacpp import LocalModel

    local = LocalModel(small_model, n_ctx=1024)
    yield local
    local.close()


async def test_the_servers_bos_off_by_one_is_caught_and_corrected(server: str) -> None:
    raw = CompletionsScorer("local", server, bos="never")
    with pytest.raises(ScorerError, match="shifted by one token"):
        await raw.score(MESSAGES, TARGET)
    assert raw.last_alignment is not None and raw.last_alignment.marker_mean_logprob < -2.0

    auto = CompletionsScorer("local", server)
    scored = await auto.score(MESSAGES, TARGET)
    assert auto.corrections == 1 and auto.prepends_bos
    assert auto.last_alignment is not None and auto.last_alignment.aligned
    assert "".join(scored.tokens) == TARGET
    assert all(v <= 0.0 for v in scored.token_logprobs) and math.isfinite(scored.logprob_total)
    # The claim stated in the context is far more likely than a contradicting one.
    wrong = await auto.score(MESSAGES, "The metrics exporter listens on port 8080.")
    assert scored.logprob_total > wrong.logprob_total + 2.0


async def test_in_process_and_server_scorers_agree(server: str, small_local: Any) -> None:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer

    remote = await CompletionsScorer("local", server, bos="always").score(MESSAGES, TARGET)
    local = await LlamaCppScorer(small_local).score(MESSAGES, TARGET)
    assert local.tokens == remote.tokens
    diffs = [abs(a - b) for a, b in zip(local.token_logprobs, remote.token_logprobs, strict=True)]
    assert max(diffs) <= TOKEN_TOLERANCE, diffs
    assert abs(local.logprob_total - remote.logprob_total) <= TOTAL_TOLERANCE


async def test_prefix_reuse_does_not_change_the_score(small_local: Any) -> None:
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer

    scorer = LlamaCppScorer(small_local)
    first = await scorer.score(MESSAGES, TARGET)
    other = await scorer.score((*MESSAGES[:1], Message("user", "Which port?")), TARGET)
    again = await scorer.score(MESSAGES, TARGET)
    assert again.logprob_total == pytest.approx(first.logprob_total, abs=1e-3)
    assert other.logprob_total < first.logprob_total  # without the source the claim is less likely


DIGIT_REQUEST = (
    Message("system", "Answer with exactly one digit from 1 to 9 and nothing else."),
    Message("user", "How sure are you that Paris is the capital of France? 1 = not at all, 9 = certain."),
)


def _check_digit_alternatives(text: str, top: list[dict[str, float]] | None) -> None:
    assert top, "no top log-probabilities came back"
    first = top[0]
    assert len(first) >= 5  # k alternatives, not just the chosen token
    assert all(type(v) is float and v <= 0.0 for v in first.values())  # plain floats, numpy's converted
    assert max(first, key=lambda t: first[t]).strip() == text.strip()[:1]  # temperature 0 writes the argmax
    value = expected_digit(top)
    assert value is not None and 1.0 <= value <= 9.0


async def test_the_in_process_judge_returns_top_logprobs(small_local: Any) -> None:
    from provenance_api.providers.llm_llamacpp import LlamaCppLLM

    response = await LlamaCppLLM(small_local).complete(
        LLMRequest(messages=DIGIT_REQUEST, max_tokens=4, temperature=0.0, top_logprobs=10)
    )
    _check_digit_alternatives(response.text, response.top_logprobs)


async def test_a_llamacpp_server_returns_top_logprobs_through_litellm(server: str) -> None:
    from provenance_api.providers.llm_litellm import LiteLLMClient, aclose_litellm

    client = LiteLLMClient("openai/local", api_base=server, api_key="none", timeout=120)
    try:
        response = await client.complete(
            LLMRequest(messages=DIGIT_REQUEST, max_tokens=4, temperature=0.0, top_logprobs=10)
        )
    finally:
        await aclose_litellm()
    assert client.logprobs_unavailable is None
    _check_digit_alternatives(response.text, response.top_logprobs)


PLANTED = [p for p in SUITE if p.turn_id in ("tool-03", "rule-01", "history-01")]


@pytest.fixture(scope="module")
def real_local() -> Iterator[Any]:
    from provenance_api.providers.scorer_llamacpp import LocalModel

    local = LocalModel(model_path(small=False), n_ctx=2048)
    yield local
    local.close()


@pytest.mark.parametrize("planted", PLANTED, ids=[p.turn_id for p in PLANTED])
async def test_the_logprob_estimator_finds_the_planted_cause(planted: Planted, real_local: Any) -> None:
    """The pilot's outcome class on the 1.5B model: the cause's drop dominates every other source's."""
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer

    corpus = build_corpus(StoredTurn.model_validate(planted.stored_turn()), DEFAULT_PARAMS)
    result = await trace_logprob(LlamaCppScorer(real_local), None, planted.claim, planted.query, corpus, supports={})
    cause = {u.id for u in corpus.units if any(c in u.text for c in planted.cause)}
    assert result.verdict == "attributed", result.to_dict()
    assert top_source(result) in cause
    drops = {s.source_id: s.delta for s in result.sources if s.delta is not None}
    cause_drop = max(drops[c] for c in cause if c in drops)
    others = [abs(d) for k, d in drops.items() if k not in cause]
    assert cause_drop > 2 * max(others, default=0.0), drops


def _turn_file(tmp: Path, planted: Planted) -> Path:
    path = tmp / f"{planted.turn_id}.json"
    path.write_text(json.dumps(planted.stored_turn()), encoding="utf-8")
    return path


def test_local_mode_end_to_end_on_two_turns(small_model: str, tmp_path: Path) -> None:
    """`provenance trace --local-model … --estimator both`: judge, span checks and scoring all in-process,
    with outbound network refused (nothing leaves the machine)."""
    for planted in [p for p in SUITE if p.turn_id in ("tool-02", "knowledge-01")]:
        turn = _turn_file(tmp_path, planted)
        code = (
            "import socket, sys\n"
            "def refuse(*a, **k):\n"
            "    raise OSError('network refused in the local-mode smoke')\n"
            "socket.socket.connect = refuse\n"
            "socket.create_connection = refuse\n"
            "from provenance_api.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                "trace",
                str(turn),
                planted.claim,
                "--local-model",
                small_model,
                "--estimator",
                "both",
                "--yes",
                "--json",
                "--n-ctx",
                "2048",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
            check=False,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        assert doc["judged"]["estimator"] == "judged" and doc["logprob"]["estimator"] == "logprob"
        assert doc["logprob"]["units"] == "nats" and doc["logprob"]["s_all"] is not None
        assert doc["judged"]["calls"]["made"] > 0 and doc["logprob"]["calls"]["made"] > 0
        assert set(doc["agreement"]) >= {"same_verdict", "same_top_layer", "same_top_source", "spearman"}
        sources = {s["source_id"] for s in doc["logprob"]["sources"]}
        assert all(s["support"] is not None for s in doc["logprob"]["sources"]) and sources
        assert "Can score         yes (a local model in this process" in proc.stderr
