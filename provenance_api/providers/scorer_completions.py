"""A ``Scorer`` over an OpenAI-compatible ``/v1/completions`` endpoint with ``echo`` (vLLM, llama.cpp).

The chat is rendered with the model's chat template (``ChatTemplate``; Qwen's ChatML by default), the
target text appended right after the assistant header, and the whole string sent as a plain completion
prompt with ``echo: true, logprobs: 1`` and ``max_tokens`` as small as the server allows, so the answer
carries the log-probability of every prompt token. The adapter then

* **verifies the echo**: the echoed tokens must concatenate to the prompt that was sent, with token
  boundaries exactly where the target starts and ends; anything else is a ``ScorerError``, never a score;
* **checks the alignment**: llama.cpp's server aligns echoed log-probabilities one token late for models
  without a BOS token (Qwen): each token is reported with the probability the model gave it at the
  *next* position. The chat template's turn-start marker is certain wherever it appears after the first
  turn (log p ≈ 0) when aligned, and very unlikely (log p ≪ 0) when shifted, so its mean log-probability
  tells the two apart. ``bos="auto"`` sends the prompt as is; when the check finds the shift it prepends
  the template's BOS text (``<|endoftext|>`` for Qwen, which the server then treats as the BOS and drops
  from the echo, realigning it), re-scores, and keeps prepending for later calls. ``bos="always"``
  prepends from the start, ``bos="never"`` never does (and a shifted echo is then an error).

httpx directly (litellm has no echo path); retries with backoff on 429, 5xx, timeouts and connection
errors, like the chat adapter; 4xx other than 429 is not retried.

Error text is scrubbed of the key and, with ``disclose_endpoint=False`` (how the service builds it), of the
scoring server's URL, origin, host, path and the user and password in it, wherever they appear (``[provider]``,
``endpoint_scrub``): a failed score reaches a tenant as the trace's reason, and where the operator's scoring
server lives, or how to sign in to it, is not the tenant's to know — not even when the server's own error text
repeats the path it was asked for.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import httpx

from estimator.seams.llm import Message, Usage
from estimator.seams.scorer import QWEN_TEMPLATE, ChatTemplate, ScoredTarget, ScorerError
from provenance_api.core.errors import scrub_secrets
from provenance_api.providers.endpoint_scrub import scrub_endpoint

__all__ = [
    "ALIGNED_MIN_MEAN_LOGPROB",
    "NO_LOGPROBS",
    "CompletionsScorer",
    "EchoAlignment",
    "UnusableScore",
    "check_alignment",
]

BosMode = Literal["auto", "always", "never"]
ALIGNED_MIN_MEAN_LOGPROB = -2.0
"""The median log-probability of the newline after each turn's end marker above which the echo is aligned."""


@dataclass(frozen=True)
class EchoAlignment:
    aligned: bool
    marker_mean_logprob: float
    markers: int


def check_alignment(tokens: Sequence[str], logprobs: Sequence[float | None], template: ChatTemplate) -> EchoAlignment:
    """Whether echoed log-probabilities belong to the tokens they are reported with (see the module doc).

    Reads the template's certain position: each turn after the first opens with ``end`` ``\n`` ``start``,
    and given the end marker the newline is certain (log p ≈ 0) when aligned; one token late it is read
    under the distribution of the following position, where it is unlikely (measured: ≈ −4.5 nats). The
    start marker and role names are not used: chat fine-tuning masks them, so even an aligned echo can give
    them −15 to −30 nats. The median over the turns decides. Special tokens may be echoed as their text or
    as empty strings; both are recognised."""
    start_texts = {template.turn_start, ""}
    end_texts = {template.turn_end, ""}
    values: list[float] = []
    for i in range(2, len(tokens)):
        if tokens[i] in start_texts and tokens[i - 1] == "\n" and tokens[i - 2] in end_texts:
            value = logprobs[i - 1]
            if value is not None:
                values.append(value)
    if not values:
        return EchoAlignment(True, math.nan, 0)  # nothing to check against: no evidence of a shift
    middle = statistics.median(values)
    return EchoAlignment(middle > ALIGNED_MIN_MEAN_LOGPROB, middle, len(values))


NO_LOGPROBS = (
    "the scoring server answered without echoed log-probabilities (no logprobs in its completion): it cannot score "
    "a supplied text. Point the scorer at a server whose /v1/completions echoes them (llama.cpp's server, vLLM) — "
    "--scorer-api-base, or PROVENANCE_SCORER_API_BASE on the service — or use the judged estimator"
)
NO_CHOICES = "the scoring server's answer has no completion (no choices): nothing was scored"


class UnusableScore(ScorerError):
    """The scoring server answered, but with nothing that can be read as a score: a failed call, never a score.
    It was answered (``billed``), at $0 like every scoring call (``usage``: its prompt tokens, when reported)."""

    def __init__(self, message: str, usage: Usage) -> None:
        super().__init__(message, billed=True)
        self.usage = usage


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class CompletionsScorer:
    """``estimator.seams.scorer.Scorer`` over ``POST {api_base}/completions`` with echo; see the module doc."""

    def __init__(
        self,
        model: str,
        api_base: str,
        api_key: str | None = None,
        *,
        template: ChatTemplate = QWEN_TEMPLATE,
        bos: BosMode = "auto",
        timeout: float = 600.0,
        max_attempts: int = 3,
        backoff_base: float = 0.5,
        backoff_max: float = 10.0,
        max_tokens: int = 1,
        transport: httpx.AsyncBaseTransport | None = None,
        disclose_endpoint: bool = True,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._model = model
        self.api_base = api_base.rstrip("/")
        self._api_key = api_key
        self.template = template
        self.bos = bos
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_tokens = max_tokens
        self._transport = transport
        self.disclose_endpoint = disclose_endpoint
        self._prepend = bos == "always"
        self.corrections = 0  # echoes found shifted and re-scored with the BOS prepended
        self.calls_attempted = 0
        self.last_alignment: EchoAlignment | None = None

    def __repr__(self) -> str:
        return f"CompletionsScorer(model={self._model!r}, api_base={self._scrub(self.api_base)!r})"

    @property
    def model(self) -> str:
        return self._model

    def _scrub(self, text: str) -> str:
        """``text`` without the key and, unless the endpoint may be disclosed, without its URL, host, path or
        credentials."""
        text = scrub_secrets(text, [self._api_key])
        return text if self.disclose_endpoint else scrub_endpoint(text, self.api_base)

    @property
    def prepends_bos(self) -> bool:
        return self._prepend

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        if not target:
            raise ScorerError("nothing to score: the target is empty")
        prefix = self.template.render_prefix(messages)
        scored, alignment = await self._score(prefix, target, prepend=self._prepend)
        if alignment.aligned:
            self.last_alignment = alignment
            return scored
        if self.bos == "auto" and not self._prepend and self.template.bos_text:
            scored, alignment = await self._score(prefix, target, prepend=True)
            if alignment.aligned:
                self._prepend = True
                self.corrections += 1
                self.last_alignment = alignment
                return scored
        self.last_alignment = alignment
        raise ScorerError(
            f"the server's echoed log-probabilities are shifted by one token (the template's turn "
            f"boundaries, certain when aligned, read {alignment.marker_mean_logprob:.1f} nats); prepend the BOS "
            "text (bos='auto' or 'always') or use a server that aligns echo"
        )

    async def _score(self, prefix: str, target: str, *, prepend: bool) -> tuple[ScoredTarget, EchoAlignment]:
        bos = self.template.bos_text if prepend and self.template.bos_text else ""
        prompt = bos + prefix + target
        body: dict[str, Any] = {
            "model": self._model,
            "prompt": prompt,
            "echo": True,
            "logprobs": 1,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
        }
        data = await self._post(body)
        usage = data.get("usage") or {}
        spent = Usage(input_tokens=_int(usage.get("prompt_tokens")), cost_usd=0.0)  # a scoring call is never priced
        choices = data.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        lp = choice.get("logprobs") if isinstance(choice, dict) else None
        if not isinstance(lp, dict) or lp.get("tokens") is None or lp.get("token_logprobs") is None:
            raise UnusableScore(NO_LOGPROBS if isinstance(choice, dict) else NO_CHOICES, spent)
        try:
            tokens: list[str] = [str(t) for t in lp["tokens"]]
            values: list[float | None] = [None if v is None else float(v) for v in lp["token_logprobs"]]
        except (TypeError, ValueError) as exc:
            raise UnusableScore(f"the echoed log-probabilities are not numbers ({type(exc).__name__})", spent) from exc
        if len(tokens) != len(values):
            raise UnusableScore("the echo's tokens and log-probabilities differ in length", spent)
        # Servers differ in what they echo: the BOS they were sent (llama.cpp drops it) and special tokens as
        # their text or as "" (llama.cpp detokenizes them to nothing). Verify against each reading.
        joined = "".join(tokens)
        readings = [bos + prefix, prefix] if bos else [prefix]
        visible = [self._visible(r) for r in readings]
        for text_prefix in (*readings, *visible):
            full = text_prefix + (target if text_prefix in readings else self._visible(target))
            if joined.startswith(full):
                start, end = len(text_prefix), len(full)
                break
        else:
            expected = visible[-1] + self._visible(target)
            raise UnusableScore(
                "the echoed tokens do not reproduce the prompt that was sent "
                f"(first difference at character {_first_difference(joined, expected)})",
                spent,
            )
        offsets: list[int] = []
        position = 0
        for tok in tokens:
            offsets.append(position)
            position += len(tok)
        if start not in offsets or (end not in offsets and end != position):
            raise UnusableScore(
                "no token boundary where the target starts or ends: the tokenizer merged the "
                "target with its surroundings",
                spent,
            )
        picked = [i for i, off in enumerate(offsets) if start <= off < end]
        target_values = [values[i] for i in picked]
        if not picked or any(v is None for v in target_values):
            raise UnusableScore("the echo has no log-probability for part of the target", spent)
        prompt_tokens = spent.input_tokens or len(offsets)
        alignment = check_alignment(tokens, values, self.template)
        scored = ScoredTarget.of(
            [v for v in target_values if v is not None], [tokens[i] for i in picked], prompt_tokens=prompt_tokens
        )
        return scored, alignment

    def _visible(self, text: str) -> str:
        """``text`` as a server that echoes special tokens as empty strings shows it."""
        for special in (self.template.turn_start, self.template.turn_end, self.template.bos_text):
            if special:
                text = text.replace(special, "")
        return text

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = f"{self.api_base}/completions"
        last: Exception | None = None
        async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as client:
            for attempt in range(1, self.max_attempts + 1):
                self.calls_attempted += 1
                try:
                    return await self._attempt(client, url, body, headers)
                except _Retryable as exc:
                    last = exc
                    if attempt == self.max_attempts:
                        break
                    wait = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
                    if exc.retry_after is not None:
                        wait = max(wait, min(exc.retry_after, self.backoff_max))
                    await anyio.sleep(wait)
        raise ScorerError(self._scrub(f"scoring failed after {self.max_attempts} attempt(s): {last}"))

    async def _attempt(
        self, client: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        try:
            response = await client.post(url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out after {self.timeout:g} s") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"connection failed: {self._scrub(str(exc)) or type(exc).__name__}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            retry_after = _retry_after(response.headers.get("retry-after"))
            raise _Retryable(f"HTTP {response.status_code}: {self._scrub(response.text[:200])}", retry_after)
        if response.status_code >= 400:
            raise ScorerError(f"HTTP {response.status_code}: {self._scrub(response.text[:300])}")
        try:
            data = response.json()
        except ValueError as exc:
            raise ScorerError("the server's answer is not JSON") from exc
        if not isinstance(data, dict):
            raise ScorerError("the server's answer is not a JSON object")
        return data


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _first_difference(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
