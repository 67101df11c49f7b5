"""An OpenAI-compatible server that can also score: ``FakeOpenAI`` (chat completions, the models listing) with a
``POST /v1/completions`` beside it that echoes the prompt's log-probabilities as llama.cpp's server does.

``Scoring(echoed=None)`` answers every completion with echoed log-probabilities, aligned as llama.cpp's server
answers with a BOS, each word likelier when ``SMALL_KEY`` (the small turn's planted cause) is in the prompt;
``echoed=n`` does so for the first ``n`` requests only and answers every later one with a completion and usage but
no ``logprobs`` (a server that does not echo them); ``scorer_error`` answers every completion with that HTTP status
and an error body repeating the URL it was asked for (as some servers and proxies do). ``judge_error`` answers every
chat completion with a 400 carrying that message. ``completions`` keeps the completion requests' bodies.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from support.api_server import SMALL_KEY, KeyedJudge
from support.fake_openai import FakeOpenAI, FakeReply

__all__ = ["ECHO_TOKEN", "Scoring"]

ECHO_TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|\s|[^\w\s]")
"""How the server splits an echoed prompt into tokens (the adapter needs token boundaries at the claim's ends)."""


class Scoring(FakeOpenAI):
    """See the module docstring."""

    def __init__(
        self, *, echoed: int | None = None, judge_error: str | None = None, scorer_error: int | None = None
    ) -> None:
        judge = KeyedJudge()

        def fails(index: int, request: dict[str, Any]) -> FakeReply | None:
            return FakeReply.error(400, judge_error) if judge_error is not None else None

        super().__init__(judge.openai, faults=fails, model_ids=("fake", "fake-judge", "qwen"))
        self.echoed = echoed
        self.scorer_error = scorer_error
        self.completions: list[dict[str, Any]] = []

    def __enter__(self) -> Scoring:
        self.start()
        return self

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = str(body.get("prompt", ""))
        self.completions.append(body)
        tokens = ECHO_TOKEN.findall(prompt)
        usage = {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1}
        choice: dict[str, Any] = {"index": 0, "text": prompt + " x", "finish_reason": "length"}
        if self.echoed is None or len(self.completions) <= self.echoed:
            word = -0.2 if SMALL_KEY in prompt else -2.0
            values: list[float | None] = [-0.01 if t == "\n" else word for t in tokens]
            values[0] = None
            offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
            choice["logprobs"] = {
                "tokens": tokens,
                "token_logprobs": values,
                "text_offset": offsets,
                "top_logprobs": [None] * len(tokens),
            }
        return {"object": "text_completion", "model": body.get("model"), "choices": [choice], "usage": usage}

    async def _dispatch(
        self, request: Any, writer: asyncio.StreamWriter, reader: asyncio.StreamReader | None = None
    ) -> bool:
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/completions") and not path.endswith("/chat/completions"):
            self._record(request, None, chat=False)
            if self.scorer_error is not None:
                here = f"http://{self.host}:{self.port}{request.path}"
                await self._error(writer, self.scorer_error, f"scoring backend {here} failed for POST {request.path}")
                return True
            await self._write(writer, 200, json.dumps(self.answer(json.loads(request.body))).encode())
            return True
        return await super()._dispatch(request, writer, reader)
