"""The estimator's LLM protocol over a local GGUF model in-process (``LocalModel``): judge, span checks and
probe regenerations with nothing leaving the machine.

Structured output asks llama.cpp for ``{"type": "json_object", "schema": ...}`` (a grammar); if the
grammar cannot be built the call falls back to plain JSON mode, then to no constraint, and the mode that
worked is kept. JSON answers are stripped of markdown code fences. Sampled calls (temperature not 0)
get a fresh seed each, so regenerations differ. Usage is the model's token counts; cost is 0.
A request with ``top_logprobs=k`` asks llama.cpp for ``logprobs=True, top_logprobs=k`` (the model is
loaded with ``logits_all``) and returns the alternatives of every output token, in the OpenAI chat shape
llama-cpp-python answers with.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio.to_thread

from estimator.seams.llm import LLMError, LLMRequest, LLMResponse, Usage
from provenance_api.providers.llm_litellm import parse_top_logprobs, strip_code_fences
from provenance_api.providers.scorer_llamacpp import LocalModel

__all__ = ["LlamaCppLLM"]

_MODES = ("schema", "json", "none")
DEFAULT_SAMPLING_TEMPERATURE = 0.8
DEFAULT_MAX_TOKENS = 512


class LlamaCppLLM:
    """``estimator.seams.llm.LLM`` over ``LocalModel.llama.create_chat_completion``."""

    def __init__(self, model: LocalModel, *, base_seed: int = 1234) -> None:
        self.local = model
        self._mode = 0
        self._seeds = itertools.count(base_seed)
        self.calls = 0

    @property
    def model(self) -> str:
        return self.local.name

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await anyio.to_thread.run_sync(self._complete_sync, request)

    def _kwargs(self, request: LLMRequest, mode: str) -> dict[str, Any]:
        temperature = DEFAULT_SAMPLING_TEMPERATURE if request.temperature is None else request.temperature
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        kwargs: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": temperature,
            "max_tokens": min(max_tokens, self.local.n_ctx // 2),
            "seed": 0 if request.deterministic else next(self._seeds),
        }
        if request.top_logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = max(0, request.top_logprobs)
        if request.json_schema is not None and mode == "schema":
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        elif request.json_schema is not None and mode == "json":
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _complete_sync(self, request: LLMRequest) -> LLMResponse:
        self.calls += 1
        mode_index = self._mode if request.json_schema is not None else len(_MODES) - 1
        while True:
            mode = _MODES[mode_index]
            try:
                with self.local.lock:
                    out = self.local.llama.create_chat_completion(**self._kwargs(request, mode))
            except ValueError as exc:
                if "exceed context window" in str(exc):
                    raise LLMError(f"the prompt does not fit the local context of {self.local.n_ctx} tokens") from exc
                if request.json_schema is not None and mode_index < len(_MODES) - 1:
                    mode_index += 1  # the grammar could not be built from this schema
                    self._mode = max(self._mode, mode_index)
                    continue
                raise LLMError(f"the local model failed: {exc}") from exc
            except RuntimeError as exc:
                raise LLMError(f"the local model failed: {exc}") from exc
            break
        try:
            choice = out["choices"][0]
            text = choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError("the local model's answer has no message") from exc
        top = parse_top_logprobs(choice) if request.top_logprobs is not None else None
        usage_in = out.get("usage") or {}
        usage = Usage(
            input_tokens=int(usage_in.get("prompt_tokens", 0)),
            output_tokens=int(usage_in.get("completion_tokens", 0)),
            cost_usd=0.0,
        )
        if request.json_schema is not None:
            text = strip_code_fences(text)
        return LLMResponse(text=text, usage=usage, model=self.local.name, top_logprobs=top)
