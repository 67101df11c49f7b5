"""CompletionsScorer against an in-test /v1/completions endpoint that echoes like llama.cpp's server:
aligned when the prompt starts with the BOS text (which it drops from the echo), one token late otherwise.
The real-server tests are in test_local_model.py."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TypedDict, Unpack

import httpx
import pytest

from estimator.seams.llm import Message
from estimator.seams.scorer import QWEN_TEMPLATE, ScorerError
from provenance_api.providers.scorer_completions import BosMode, CompletionsScorer, check_alignment

BOS = "<|endoftext|>"
TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|\s|[^\w\s]")
MESSAGES = (Message("system", "Answer briefly."), Message("user", "Which layer is annual?"))
TARGET = "The annual layer is MODIS."


def true_logprob(tok: str) -> float:
    """The 'model': the turn marker is certain where it appears, words cost a length-dependent amount."""
    return -0.01 if tok == "<|im_start|>" else -0.05 if tok == "\n" else -1.0 - (len(tok) % 3)


def shifted_logprob(tok: str) -> float:
    """What a one-token-late echo reports: the token under the NEXT position's distribution."""
    return -21.0 if tok == "<|im_start|>" else -4.5 if tok == "\n" else -2.5


class EchoServer:
    """An httpx transport answering /v1/completions with llama.cpp-style echo; faults by request index."""

    def __init__(
        self, *, faults: dict[int, httpx.Response] | None = None, tamper: Callable[[list[str]], list[str]] | None = None
    ) -> None:
        self.bodies: list[dict[str, object]] = []
        self.faults = faults or {}
        self.tamper = tamper

    def __call__(self, request: httpx.Request) -> httpx.Response:
        index = len(self.bodies)
        body = json.loads(request.content)
        self.bodies.append(body)
        if index in self.faults:
            return self.faults[index]
        assert request.url.path == "/v1/completions" and body["echo"] is True
        prompt = str(body["prompt"])
        aligned = prompt.startswith(BOS)
        tokens = TOKEN.findall(prompt[len(BOS) :] if aligned else prompt)
        values: list[float | None] = [(true_logprob if aligned else shifted_logprob)(t) for t in tokens]
        values[0] = None
        if self.tamper is not None:
            tokens = self.tamper(tokens)
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        return httpx.Response(
            200,
            json={
                "object": "text_completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "text": prompt,
                        "finish_reason": "length",
                        "logprobs": {
                            "tokens": tokens,
                            "token_logprobs": values,
                            "text_offset": offsets,
                            "top_logprobs": [None] * len(tokens),
                        },
                    }
                ],
                "usage": {"prompt_tokens": len(tokens), "completion_tokens": 0, "total_tokens": len(tokens)},
            },
        )


class ScorerOptions(TypedDict, total=False):
    """The constructor options the tests vary."""

    bos: BosMode
    max_attempts: int


def scorer(server: EchoServer, **kwargs: Unpack[ScorerOptions]) -> CompletionsScorer:
    return CompletionsScorer(
        "local", "http://scorer.test/v1", transport=httpx.MockTransport(server), backoff_base=0.0, **kwargs
    )


EXPECTED = math.fsum(true_logprob(t) for t in TOKEN.findall(TARGET))


async def test_a_shifted_echo_is_caught_and_corrected_by_prepending_the_bos() -> None:
    server = EchoServer()
    s = scorer(server)
    scored = await s.score(MESSAGES, TARGET)
    assert scored.logprob_total == pytest.approx(EXPECTED)
    assert "".join(scored.tokens) == TARGET and scored.n_tokens == len(TOKEN.findall(TARGET))
    assert s.corrections == 1 and s.prepends_bos
    assert [str(b["prompt"]).startswith(BOS) for b in server.bodies] == [False, True]
    again = await s.score(MESSAGES, TARGET)  # remembered: one request, BOS prepended directly
    assert again.logprob_total == pytest.approx(EXPECTED)
    assert len(server.bodies) == 3 and str(server.bodies[2]["prompt"]).startswith(BOS)


async def test_without_the_correction_a_shifted_echo_is_an_error_not_a_score() -> None:
    s = scorer(EchoServer(), bos="never")
    with pytest.raises(ScorerError, match="shifted by one token"):
        await s.score(MESSAGES, TARGET)
    assert s.last_alignment is not None and not s.last_alignment.aligned


async def test_always_prepends_from_the_first_call() -> None:
    server = EchoServer()
    scored = await scorer(server, bos="always").score(MESSAGES, TARGET)
    assert scored.logprob_total == pytest.approx(EXPECTED) and len(server.bodies) == 1


async def test_the_prompt_is_the_chat_template_then_the_target() -> None:
    server = EchoServer()
    await scorer(server, bos="always").score(MESSAGES, TARGET)
    body = server.bodies[0]
    assert body["prompt"] == BOS + QWEN_TEMPLATE.render_prefix(MESSAGES) + TARGET
    assert body["logprobs"] == 1 and body["temperature"] == 0.0


async def test_an_echo_that_does_not_reproduce_the_prompt_is_rejected() -> None:
    server = EchoServer(tamper=lambda toks: [t.replace("annual", "yearly") for t in toks])
    with pytest.raises(ScorerError, match="do not reproduce the prompt"):
        await scorer(server, bos="always").score(MESSAGES, TARGET)


async def test_server_errors_are_retried_and_bad_requests_are_not() -> None:
    server = EchoServer(faults={0: httpx.Response(503, text="busy"), 1: httpx.Response(429, text="slow down")})
    s = scorer(server, bos="always")
    assert (await s.score(MESSAGES, TARGET)).logprob_total == pytest.approx(EXPECTED)
    assert s.calls_attempted == 3
    bad = EchoServer(faults={0: httpx.Response(400, text="no echo here")})
    s2 = scorer(bad, bos="always")
    with pytest.raises(ScorerError, match="HTTP 400"):
        await s2.score(MESSAGES, TARGET)
    assert s2.calls_attempted == 1


async def test_retries_give_up_as_no_information() -> None:
    server = EchoServer(faults={i: httpx.Response(500, text="down") for i in range(5)})
    s = scorer(server, bos="always", max_attempts=2)
    with pytest.raises(ScorerError, match="after 2 attempt"):
        await s.score(MESSAGES, TARGET)


def test_check_alignment_reads_the_turn_boundaries() -> None:
    toks = ["<|im_start|>", "user", "\n", "hi", "<|im_end|>", "\n", "<|im_start|>", "assistant"]
    # the newline after the end marker decides; the start marker may be implausible even when aligned
    assert check_alignment(toks, [None, -1, -1, -1, -1, -0.01, -16.6, -1], QWEN_TEMPLATE).aligned
    assert not check_alignment(toks, [None, -1, -1, -1, -1, -4.5, -0.01, -1], QWEN_TEMPLATE).aligned
    # llama.cpp echoes special tokens as empty strings (measured on its server)
    blank = ["" if t.startswith("<|") else t for t in toks]
    assert check_alignment(blank, [None, -1, -1, -1, -1, -0.01, -0.02, -1], QWEN_TEMPLATE).markers == 1
    assert not check_alignment(blank, [None, -1, -1, -1, -1, -4.5, -11.0, -1], QWEN_TEMPLATE).aligned
    assert check_alignment(["a"], [None], QWEN_TEMPLATE).markers == 0
