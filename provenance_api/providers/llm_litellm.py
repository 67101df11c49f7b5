"""The estimator's LLM protocol over litellm: OpenAI, Anthropic and any OpenAI-compatible server.

``LiteLLMClient.complete`` sends one chat request through ``litellm.acompletion`` and returns an
``LLMResponse`` with the provider's usage and, when the model's price is known, its cost. Every
failure is a ``ProviderError`` (an ``LLMError``: "no information" to the estimator).

Behaviour:

* **Retries** (tenacity): 429, 5xx, timeouts and connection errors, up to ``max_attempts`` HTTP
  attempts, exponential backoff with jitter (``backoff_base`` · 2^(n-1), capped at ``backoff_max``),
  never shorter than the provider's ``Retry-After`` (capped at ``backoff_max`` too). 4xx other
  than 429 and unusable 2xx answers are not retried. litellm's and the OpenAI SDK's own retries
  are switched off, so one attempt is one HTTP request.
* **Errors** are mapped by exception type (and, where litellm's types are ambiguous, by the
  exception's cause chain): see ``_classify``. Messages never contain the api key or header values.
* **Structured output**: a request with ``json_schema`` is sent with
  ``response_format={"type": "json_schema", ...}``. If the server rejects that, the same call falls
  back to ``{"type": "json_object", "schema": ...}`` and then to no ``response_format`` (llama.cpp's
  server answers 500 to ``json_schema``). A 400/422/500 whose message names response_format /
  schema / grammar falls back at once and for good; a bare 500 is first retried like any 5xx (it
  may be transient), and falls back only when the retries are spent. The mode that worked is
  remembered for later calls of this client. JSON answers are stripped of markdown code fences.
* **Top log-probabilities**: a request with ``top_logprobs=k`` is sent with ``logprobs=True,
  top_logprobs=min(k, 20)`` (20 is OpenAI's limit) and the answer's
  ``choices[0].logprobs.content[i].top_logprobs`` (the shape of OpenAI/Azure chat, vLLM and the
  llama.cpp server) become ``LLMResponse.top_logprobs``: one dict per output token, token text →
  log-probability, the chosen token included. A server that rejects the parameter (a 400/422 naming
  logprobs) is asked again without it, for this call and every later call of this client, and
  ``logprobs_unavailable`` says why; a provider that ignores it (litellm drops it for providers that do
  not offer it) answers without. Either way the response's ``top_logprobs`` is None: never a made-up
  distribution.
* **Every attempt is a made call**: before each repeated request of one call (a retry, a structured-output
  or logprobs fallback) the client awaits ``estimator.ledger.another_attempt()``, so the trace's ledger
  counts it in ``made``, persists it before it leaves, and refuses it (``AttemptRefused``, unsent) over
  the plan's ceiling.
* **Usage not reported**: a 2xx answer without usage (or with zero tokens) is still billed: its tokens are
  counted — the request's messages as sent (cl100k_base, ``estimator.cost.request_tokens``) and the answer's
  text — and the usage says ``estimated``; its cost is those tokens at the model's price (``prices``, the
  operator's, else litellm's map; unknown without one).
* **Accounting**: ``calls_attempted`` counts HTTP attempts (``retries`` of them repeats, after
  ``retry_wait_seconds`` of backoff in all); ``calls_answered`` attempts that got a
  2xx answer, usable or not; ``calls_billed`` answers that reported token usage. The billing rule:
  *an attempt is billed when the provider answered a readable 2xx*, at the usage it reported or, without
  one, at the counted tokens. So a 2xx whose choices are empty raises ``ProviderResponseInvalid`` with
  ``billed=True``; an empty or malformed 2xx body is answered but not billed (unreadable, nothing
  to count); HTTP errors, timeouts and resets are neither.
* **Offline**: litellm is imported lazily (it takes seconds), with the bundled price map, and with
  every logging callback cleared.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import os
import random
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Literal, cast

import anyio
import anyio.to_thread
import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from estimator.cost import MESSAGE_OVERHEAD_TOKENS
from estimator.ledger import AttemptRefused, another_attempt
from estimator.seams.llm import LLMError, LLMRequest, LLMResponse, Usage
from provenance_api.core.errors import (
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseInvalid,
    ProviderTimeout,
    ProviderUnavailable,
    scrub_secrets,
)
from provenance_api.providers.endpoint_scrub import environment_endpoints, scrub_endpoint
from provenance_api.providers.price_map import LiteLLMPricing  # here too: its older home

__all__ = [
    "LiteLLMClient",
    "LiteLLMPricing",
    "StructuredMode",
    "aclose_litellm",
    "load_litellm",
    "parse_top_logprobs",
    "strip_code_fences",
]

log = logging.getLogger(__name__)

StructuredMode = Literal["json_schema", "json_object", "none"]
_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "none")

# --------------------------------------------------------------------------- litellm, lazily

_LITELLM: Any = None
_LITELLM_LOCK = threading.Lock()
_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "service_callback",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


def load_litellm() -> Any:
    """Import and configure litellm once (offline price map, no callbacks, no debug chatter)."""
    global _LITELLM
    if _LITELLM is not None:
        return _LITELLM
    with _LITELLM_LOCK:
        if _LITELLM is None:
            import litellm  # the package __init__ already pinned the offline environment

            litellm.suppress_debug_info = True
            litellm.disable_hf_tokenizer_download = True
            if isinstance(getattr(litellm, "telemetry", None), bool):  # older releases had this flag
                litellm.telemetry = False
            for name in _CALLBACK_LISTS:
                if isinstance(getattr(litellm, name, None), list):
                    setattr(litellm, name, [])
            if not os.environ.get("LITELLM_LOG"):
                # litellm logs every call (with request details) at INFO through its own handler
                for logger_name in ("LiteLLM", "LiteLLM Router"):
                    logging.getLogger(logger_name).setLevel(logging.WARNING)
            _LITELLM = litellm
    return _LITELLM


async def _aload_litellm() -> Any:
    if _LITELLM is not None:
        return _LITELLM
    return await anyio.to_thread.run_sync(load_litellm)


async def aclose_litellm(*, close_http_clients: bool = False, timeout: float = 5.0) -> None:
    """End litellm's background work bound to the running event loop.

    litellm 1.110 queues a logging coroutine per call on a process-wide worker task (even with no
    callbacks), bound to the loop of the call. Await this before that loop closes (service
    shutdown, end of a test) so the worker does not die with "Event loop is closed".
    ``close_http_clients`` also closes litellm's cached async HTTP clients (process shutdown only).
    """
    if _LITELLM is None:
        return
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    with anyio.move_on_after(timeout):
        await GLOBAL_LOGGING_WORKER.flush()
    await GLOBAL_LOGGING_WORKER.stop(discard_pending=True, timeout=timeout)
    if close_http_clients:
        from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

        await cast(Callable[[], Awaitable[None]], close_litellm_async_clients)()


# --------------------------------------------------------------------------- small helpers

_FULL_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)\r?\n?[ \t]*```$", re.DOTALL)
_ANY_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.DOTALL)
_SCHEMA_WORDS = re.compile(
    r"response[_ ]?format|json[_ ]?schema|json[_ ]?object|schema|grammar|structured", re.IGNORECASE
)
_LITELLM_PREFIX = re.compile(r"^(?:litellm\.\w+:\s*)?(?:\w+Error:\s*)?(?:\w+Exception\s*-\s*)?")
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")
_LOGPROB_WORDS = re.compile(r"logprob", re.IGNORECASE)
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for top_logprobs


def strip_code_fences(text: str) -> str:
    """The JSON inside a markdown code fence: the whole answer's fence, or else the first fenced
    block that parses as JSON. Text without fences is returned unchanged."""
    stripped = text.strip()
    whole = _FULL_FENCE.match(stripped)
    if whole:
        return whole.group(1).strip()
    for block in _ANY_FENCE.finditer(stripped):
        inner = block.group(1).strip()
        try:
            json.loads(inner)
        except ValueError:
            continue
        return inner
    return text


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _class_names(exc: BaseException) -> set[str]:
    return {k.__name__ for k in type(exc).__mro__}


def _parse_retry_after(headers: Any) -> float | None:
    if not headers:
        return None
    try:
        items = {str(k).lower(): str(v) for k, v in headers.items()}
    except (AttributeError, TypeError):
        return None
    if "retry-after-ms" in items:
        try:
            return max(0.0, float(items["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = items.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _retry_after(exc: BaseException) -> float | None:
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
        getattr(exc, "headers", None),
    ):
        value = _parse_retry_after(headers)
        if value is not None:
            return value
    attr = getattr(exc, "retry_after", None)
    if isinstance(attr, int | float) and not isinstance(attr, bool) and attr >= 0:
        return float(attr)
    return None


# --------------------------------------------------------------------------- the client


class _LogprobsRejected(Exception):
    """Internal: the server rejected ``logprobs``/``top_logprobs`` of this attempt, naming them."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


class _StructuredOutputRejected(Exception):
    """Internal: the server rejected the response_format of this attempt, naming it."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _CallState:
    attempts: int = 0
    billed: bool = False
    last_error: LLMError | None = None  # the failure of the latest attempt, the cause of a refused repeat


@dataclass(frozen=True)
class _Answer:
    text: str
    usage: Usage
    cached: bool
    top_logprobs: list[dict[str, float]] | None = None


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    high, low = (a, b) if a >= b else (b, a)
    return high + math.log1p(math.exp(low - high))


def _float(value: Any) -> float | None:
    """A real number (numpy's included: llama-cpp-python reports float32) as a float; else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def parse_top_logprobs(choice: Any) -> list[dict[str, float]] | None:
    """``choice.logprobs.content[i].top_logprobs`` as one dict per output token (token text → logprob,
    the chosen token included; alternatives with the same text are merged, their probabilities added).
    None when the answer carries no per-token log-probabilities."""
    content = _get(_get(choice, "logprobs"), "content")
    if not isinstance(content, list) or not content:
        return None
    positions: list[dict[str, float]] = []
    for item in content:
        alternatives: dict[str, float] = {}
        for alt in _get(item, "top_logprobs") or []:
            token, logprob = _get(alt, "token"), _float(_get(alt, "logprob"))
            if isinstance(token, str) and logprob is not None:
                alternatives[token] = _logaddexp(alternatives.get(token, -math.inf), logprob)
        token, logprob = _get(item, "token"), _float(_get(item, "logprob"))
        if isinstance(token, str) and logprob is not None:
            alternatives.setdefault(token, logprob)
        positions.append(alternatives)
    return positions


class LiteLLMClient:
    """``estimator.seams.llm.LLM`` through ``litellm.acompletion``; see the module docstring."""

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_attempts: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        extra_headers: Mapping[str, str] | None = None,
        structured_output: StructuredMode = "json_schema",
        disclose_endpoint: bool = True,
        prices: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._model = model
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = float(timeout)
        self.max_attempts = max_attempts
        self.backoff_base = max(0.0, float(backoff_base))
        self.backoff_max = max(0.0, float(backoff_max))
        self._extra_headers = dict(extra_headers or {})
        self._mode_index = _MODES.index(structured_output)
        # the service's clients answer tenants, who must not learn where the operator's provider lives: their
        # errors say "the provider" and never the base URL or its host (the CLI, the user's own, discloses it)
        self.disclose_endpoint = disclose_endpoint
        self._pricing = LiteLLMPricing(prices)  # the operator's prices first, then litellm's map
        self._tokenizer: Any = None  # loaded on the first answer without usage
        self.calls_attempted = 0
        self.calls_answered = 0
        self.calls_billed = 0
        self.retries = 0  # attempts repeated after a retryable failure
        self.retry_wait_seconds = 0.0  # total backoff slept before those repeats
        self.logprobs_unavailable: str | None = None  # why top log-probabilities are no longer asked for

    def __repr__(self) -> str:  # no key, no headers
        base = self._scrub(self.api_base) if self.api_base else None
        return f"LiteLLMClient(model={self._model!r}, api_base={base!r})"

    @property
    def model(self) -> str:
        return self._model

    @property
    def structured_mode(self) -> StructuredMode:
        """How the next schema request will ask for structured output."""
        return _MODES[self._mode_index]

    def counters(self) -> dict[str, int]:
        return {
            "attempted": self.calls_attempted,
            "answered": self.calls_answered,
            "billed": self.calls_billed,
            "retries": self.retries,
        }

    # ------------------------------------------------------------------ public

    async def complete(self, request: LLMRequest) -> LLMResponse:
        litellm = await _aload_litellm()
        state = _CallState()
        ask = request.top_logprobs is not None and self.logprobs_unavailable is None
        try:
            try:
                return await self._complete(litellm, request, state, logprobs=ask)
            except _LogprobsRejected as rejected:
                self.logprobs_unavailable = (
                    f"the provider rejected top log-probabilities: {rejected.error.provider_message or rejected.error}"
                )
                log.warning("%s: %s; asking without them from now on", self._model, self.logprobs_unavailable)
                return await self._complete(litellm, request, state, logprobs=False)
        except LLMError as err:  # a ProviderError, or a repeat the ledger refused (AttemptRefused)
            err.billed = err.billed or state.billed
            raise

    async def _complete(self, litellm: Any, request: LLMRequest, state: _CallState, *, logprobs: bool) -> LLMResponse:
        base = self._base_kwargs(request, logprobs=logprobs)
        if request.json_schema is None:
            answer = await self._with_retries(litellm, base, state, structured=False)
            return self._response(answer, json_answer=False)
        index = self._mode_index
        while True:
            mode = _MODES[index]
            kwargs = {**base, **self._response_format(mode, request)}
            try:
                answer = await self._with_retries(litellm, kwargs, state, structured=mode != "none")
            except _StructuredOutputRejected as rejected:
                # the server named the schema / response_format: this mode will never work here
                log.info(
                    "%s: the server rejected response_format %s (%s); falling back",
                    self._model,
                    mode,
                    rejected.error.detail,
                )
                index += 1
                self._remember_mode(index)
                continue
            except ProviderUnavailable as err:
                if mode == "none" or err.provider_status != 500:
                    raise
                # a bare 500 to a schema request, even after retries: try the next mode for this
                # call, and keep it only if it works
                log.info("%s: HTTP 500 to response_format %s (%s); falling back", self._model, mode, err.detail)
                index += 1
                continue
            self._remember_mode(index)
            return self._response(answer, json_answer=True)

    # ------------------------------------------------------------------ request building

    def _base_kwargs(self, request: LLMRequest, *, logprobs: bool = False) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "timeout": self.timeout,
            "drop_params": True,  # models that reject e.g. temperature still answer
            "max_retries": 0,  # the OpenAI SDK's retries: ours are the only ones
            "num_retries": 0,  # litellm's
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        if self._extra_headers:
            kwargs["extra_headers"] = dict(self._extra_headers)
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if logprobs and request.top_logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = max(0, min(request.top_logprobs, MAX_TOP_LOGPROBS))
        return kwargs

    @staticmethod
    def _response_format(mode: StructuredMode, request: LLMRequest) -> dict[str, Any]:
        schema = request.json_schema or {}
        if mode == "json_schema":
            spec: dict[str, Any] = {
                "name": _SCHEMA_NAME.sub("_", request.schema_name)[:64] or "output",
                "schema": schema,
            }
            if schema.get("additionalProperties") is False:
                spec["strict"] = True
            return {"response_format": {"type": "json_schema", "json_schema": spec}}
        if mode == "json_object":
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {}

    def _remember_mode(self, index: int) -> None:
        if index > self._mode_index:
            log.warning("%s: structured output falls back to %s for this client", self._model, _MODES[index])
            self._mode_index = index

    # ------------------------------------------------------------------ calling

    async def _with_retries(
        self, litellm: Any, kwargs: dict[str, Any], state: _CallState, *, structured: bool
    ) -> _Answer:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            sleep=anyio.sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        answer: _Answer = await retrying(self._attempt, litellm, kwargs, state, structured)
        return answer

    def _wait(self, retry_state: RetryCallState) -> float:
        exp = min(self.backoff_max, self.backoff_base * 2 ** (retry_state.attempt_number - 1))
        delay = exp / 2 + random.uniform(0.0, exp / 2)  # "equal jitter"
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after > 0:
            delay = max(delay, float(retry_after))
        return float(min(delay, self.backoff_max))

    def _log_retry(self, retry_state: RetryCallState) -> None:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        delay = retry_state.next_action.sleep if retry_state.next_action is not None else 0.0
        self.retries += 1
        self.retry_wait_seconds += delay
        log.info("%s: attempt %d failed (%s); retrying in %.2fs", self._model, retry_state.attempt_number, exc, delay)

    @property
    def _guard_seconds(self) -> float:
        # litellm enforces ``timeout`` itself; this outer bound only catches a call it fails to end
        return self.timeout * 1.5 + 5.0

    async def _attempt(self, litellm: Any, kwargs: dict[str, Any], state: _CallState, structured: bool) -> _Answer:
        if state.attempts:  # a repeat of this call's request: a made call, or refused over the plan (unsent)
            try:
                await another_attempt()
            except AttemptRefused as refused:
                if state.last_error is None:
                    raise
                raise refused.with_cause(state.last_error) from None
        self.calls_attempted += 1
        state.attempts += 1
        try:
            with anyio.fail_after(self._guard_seconds):
                response = await litellm.acompletion(**kwargs)
        except TimeoutError:
            state.last_error = ProviderTimeout(f"{self._model}: no answer within {self.timeout:g}s")
            raise state.last_error from None
        except Exception as exc:
            error, answered = self._classify(litellm, exc)
            error.provider_message = self._provider_message(exc)
            state.last_error = error
            if answered:
                self.calls_answered += 1
            if kwargs.get("logprobs") and self._names_logprobs(error):
                raise _LogprobsRejected(error) from None
            if structured and self._names_the_schema(error):
                raise _StructuredOutputRejected(error) from None
            raise error from None  # the provider exception may quote secrets: not chained
        self.calls_answered += 1
        return self._read(litellm, response, state, kwargs)

    @staticmethod
    def _names_logprobs(error: ProviderError) -> bool:
        """A 400/422 whose message names logprobs / top_logprobs."""
        return (
            error.provider_status in (400, 422)
            and isinstance(error, ProviderBadRequest)
            and bool(_LOGPROB_WORDS.search(error.provider_message))
        )

    @staticmethod
    def _names_the_schema(error: ProviderError) -> bool:
        """A 400/422/500 whose message names response_format / schema / grammar."""
        return (
            error.provider_status in (400, 422, 500)
            and isinstance(error, ProviderBadRequest | ProviderUnavailable)
            and bool(_SCHEMA_WORDS.search(error.provider_message))
        )

    def _count(self, text: str) -> int:
        if self._tokenizer is None:
            from provenance_api.providers.tokenizer import TiktokenTokenizer

            self._tokenizer = TiktokenTokenizer()
        return int(self._tokenizer.count(text))

    def counted_usage(self, messages: Any, answer: str) -> Usage:
        """The usage of a request the provider did not report: its messages as sent (each with its overhead)
        and the answer's text, counted (cl100k_base), priced at the model's price when known; ``estimated``."""
        input_tokens = sum(self._count(str(_get(m, "content") or "")) + MESSAGE_OVERHEAD_TOKENS for m in messages or [])
        output_tokens = self._count(answer)
        price = self._pricing.price(self._model)
        cost = None if price is None else input_tokens * price[0] + output_tokens * price[1]
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost, estimated=True)

    def _read(self, litellm: Any, response: Any, state: _CallState, kwargs: Mapping[str, Any]) -> _Answer:
        usage_obj = _get(response, "usage")
        input_tokens = _int(_get(usage_obj, "prompt_tokens"))
        output_tokens = _int(_get(usage_obj, "completion_tokens"))
        cached_tokens = _int(_get(_get(usage_obj, "prompt_tokens_details"), "cached_tokens"))
        choices = _get(response, "choices") or []
        content = _get(_get(choices[0], "message"), "content") if choices else None
        # a readable 2xx is billed: at the usage reported, else at the tokens counted from what was sent
        self.calls_billed += 1
        state.billed = True
        if input_tokens + output_tokens > 0:
            usage = Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cached_input_tokens=cached_tokens,
                cost_usd=self._reported_cost(litellm, response, input_tokens, output_tokens),
            )
        else:
            usage = self.counted_usage(kwargs.get("messages"), content if isinstance(content, str) else "")
        if not choices or not isinstance(content, str) or not content.strip():
            finish = _get(choices[0], "finish_reason") if choices else None
            error = ProviderResponseInvalid(
                f"{self._model}: the provider's answer has no choices"
                if not choices
                else f"{self._model}: the provider's answer has no text (finish_reason={finish})",
                billed=True,
            )
            error.usage = usage
            raise error
        hidden = getattr(response, "_hidden_params", None)
        cache_hit = bool(hidden.get("cache_hit")) if isinstance(hidden, dict) else False
        return _Answer(text=content, usage=usage, cached=cache_hit, top_logprobs=parse_top_logprobs(choices[0]))

    def _reported_cost(self, litellm: Any, response: Any, input_tokens: int, output_tokens: int) -> float | None:
        """The reported tokens at the operator's price when it has one for this model, else litellm's cost of the
        response (its map, cached-token rates included); None when the model is unpriced."""
        if self._pricing.overridden(self._model):
            price = self._pricing.price(self._model)
            assert price is not None
            return input_tokens * price[0] + output_tokens * price[1]
        try:
            value = litellm.completion_cost(completion_response=response)
            return float(value) if value is not None else None
        except Exception:  # unpriced model: litellm raises; the cost is unknown, not zero
            return None

    def _response(self, answer: _Answer, *, json_answer: bool) -> LLMResponse:
        text = strip_code_fences(answer.text) if json_answer else answer.text
        return LLMResponse(
            text=text, usage=answer.usage, model=self._model, cached=answer.cached, top_logprobs=answer.top_logprobs
        )

    # ------------------------------------------------------------------ error mapping

    def _scrub(self, text: str) -> str:
        text = scrub_secrets(text, [self._api_key, *self._extra_headers.values()])
        if not self.disclose_endpoint:  # its URL, host, path and credentials (or litellm's from the environment)
            for base in (self.api_base, *environment_endpoints()):
                text = scrub_endpoint(text, base)
        return text

    def _provider_message(self, exc: BaseException) -> str:
        raw = str(getattr(exc, "message", None) or exc or type(exc).__name__)
        text = _LITELLM_PREFIX.sub("", raw.strip()) or type(exc).__name__
        text = self._scrub(text)
        return text if len(text) <= 500 else text[:497] + "..."

    def _classify(self, litellm: Any, exc: Exception) -> tuple[ProviderError, bool]:
        """(the ProviderError for a litellm exception, whether a 2xx answer had been received).

        litellm 1.110 wraps transport failures (reset, refused) and undecodable 2xx bodies as
        ``InternalServerError`` with status 500, so the cause chain is consulted before the type."""
        ex = litellm.exceptions
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) else None
        chain = list(_causes(exc))
        names = set().union(*(_class_names(c) for c in chain))
        got_response = getattr(exc, "litellm_response_headers", None) is not None
        retry_after = _retry_after(exc)
        message = self._provider_message(exc)
        model = self._model

        if (
            isinstance(exc, ex.Timeout)
            or "APITimeoutError" in names
            or any(isinstance(c, TimeoutError | httpx.TimeoutException) for c in chain)
        ):
            return ProviderTimeout(
                f"{model}: the provider did not answer within {self.timeout:g}s", provider_status=None
            ), False
        if isinstance(exc, ex.APIResponseValidationError) or (
            not got_response and any(isinstance(c, json.JSONDecodeError) for c in chain)
        ):
            return ProviderResponseInvalid(
                f"{model}: the provider's 2xx answer could not be read: {message}", billed=False
            ), True
        if isinstance(exc, ex.APIConnectionError) or (
            not got_response
            and (
                "APIConnectionError" in names
                or "ClientConnectionError" in names
                or any(isinstance(c, ConnectionError | httpx.TransportError) for c in chain)
            )
        ):
            where = f" at {self._scrub(self.api_base)}" if self.api_base and self.disclose_endpoint else ""
            return ProviderUnavailable(
                f"{model}: could not reach the provider{where}: {message}", provider_status=None
            ), False
        if isinstance(exc, ex.RateLimitError) or status == 429:
            return ProviderRateLimited(
                f"{model}: the provider is rate limiting (HTTP 429): {message}",
                provider_status=status or 429,
                retry_after=retry_after,
            ), False
        if isinstance(exc, ex.ContextWindowExceededError):
            return ProviderBadRequest(
                f"{model}: the request exceeds the model's context window: {message}",
                provider_status=status,
                fix="shorten the sources or use a model with a larger context",
            ), False
        if isinstance(exc, ex.AuthenticationError | ex.PermissionDeniedError) or status in (401, 403):
            return ProviderAuthError(
                f"{model}: the provider refused the credentials (HTTP {status}): {message}",
                provider_status=status,
                fix="check the provider api key and its access to this model",
            ), False
        if isinstance(exc, ex.BadRequestError | ex.NotFoundError | ex.UnprocessableEntityError) or (
            status is not None and 400 <= status < 500 and status != 408
        ):
            return ProviderBadRequest(
                f"{model}: the provider rejected the request (HTTP {status}): {message}", provider_status=status
            ), False
        if status == 408:
            return ProviderTimeout(
                f"{model}: the provider timed out (HTTP 408): {message}", provider_status=status
            ), False
        if isinstance(exc, ex.ServiceUnavailableError | ex.InternalServerError | ex.APIError) or (
            status is not None and status >= 500
        ):
            return ProviderUnavailable(
                f"{model}: the provider failed (HTTP {status}): {message}",
                provider_status=status,
                retry_after=retry_after,
            ), False
        log.warning("%s: unexpected %s from litellm", model, type(exc).__name__)
        return ProviderError(f"{model}: the provider call failed ({type(exc).__name__}): {message}"), False
