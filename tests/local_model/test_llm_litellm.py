"""LiteLLMClient over real HTTP against the fake OpenAI-compatible server (litellm is never patched)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.fake_openai import FakeOpenAI, FakeReply

from estimator.cost import Pricing
from estimator.loo.expected_digit import expected_digit
from estimator.seams.llm import LLM, LLMError, LLMRequest, Message
from estimator.tokens import ApproxTokenizer, Tokenizer
from provenance_api.core.errors import (
    InvalidInput,
    ProvenanceError,
    ProviderAuthError,
    ProviderBadRequest,
    ProviderError,
    ProviderRateLimited,
    ProviderResponseInvalid,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from provenance_api.providers import tokenizer as tokenizer_module
from provenance_api.providers.capabilities import top_logprobs_capability
from provenance_api.providers.llm_litellm import (
    LiteLLMClient,
    LiteLLMPricing,
    aclose_litellm,
    load_litellm,
    parse_top_logprobs,
    strip_code_fences,
)
from provenance_api.providers.tokenizer import TiktokenTokenizer

KEY = "test-key"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["supported", "silent"]},
        "confidence": {"type": "number"},
    },
    "required": ["verdict", "confidence"],
    "additionalProperties": False,
}
ANSWER = '{"verdict": "supported", "confidence": 0.9}'


@pytest.fixture(scope="session", autouse=True)
def _litellm_loaded() -> None:
    load_litellm()  # the slow import, once per session


@pytest.fixture(autouse=True)
async def _litellm_background_stopped() -> AsyncIterator[None]:
    yield
    await aclose_litellm()  # before this test's event loop closes


def ask(text: str = "Say hi.", **kw: Any) -> LLMRequest:
    return LLMRequest(messages=(Message("system", "You are terse."), Message("user", text)), **kw)


def schema_request(**kw: Any) -> LLMRequest:
    return ask("Judge it.", json_schema=SCHEMA, schema_name="support verdict", **kw)


def client(srv: FakeOpenAI, model: str = "openai/fake", **kw: Any) -> LiteLLMClient:
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("timeout", 10.0)
    return LiteLLMClient(model, api_base=srv.base_url, api_key=KEY, **kw)


def rf_type(body: dict[str, Any]) -> str | None:
    rf = body.get("response_format")
    return rf.get("type") if isinstance(rf, dict) else None


@pytest.fixture
def hello() -> Iterator[FakeOpenAI]:
    reply = FakeReply(text="hello", prompt_tokens=12, completion_tokens=3, cached_tokens=4)
    with FakeOpenAI(lambda req: reply) as srv:
        yield srv


# --------------------------------------------------------------------------- happy path


async def test_plain_completion_reports_provider_usage(hello: FakeOpenAI) -> None:
    llm = client(hello)
    assert isinstance(llm, LLM)
    response = await llm.complete(ask())

    assert response.text == "hello"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (12, 3, 4)
    assert response.usage.cost_usd is None  # "fake" has no price
    assert response.model == "openai/fake"
    assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (1, 1, 1)
    assert hello.answered == 1
    body = hello.requests[0]
    assert body["model"] == "fake"
    assert body["messages"] == [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi."}]
    assert "response_format" not in body
    assert hello.records[0].headers["authorization"] == f"Bearer {KEY}"


async def test_temperature_zero_is_sent_and_none_is_omitted(hello: FakeOpenAI) -> None:
    llm = client(hello)
    await llm.complete(ask(temperature=0.0, max_tokens=7))
    await llm.complete(ask(temperature=None))
    await llm.complete(ask(temperature=0.7))
    first, second, third = hello.requests
    assert first["temperature"] == 0 and first["max_tokens"] == 7
    assert "temperature" not in second and "max_tokens" not in second
    assert third["temperature"] == 0.7


async def test_extra_headers_are_sent(hello: FakeOpenAI) -> None:
    llm = client(hello, extra_headers={"X-Tenant": "t-1"})
    await llm.complete(ask())
    assert hello.records[0].headers["x-tenant"] == "t-1"


async def test_concurrent_calls_are_not_serialised() -> None:
    with FakeOpenAI(lambda req: FakeReply(text="ok", delay=0.3)) as srv:
        llm = client(srv)
        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(llm.complete, ask())
        assert srv.max_in_flight >= 2
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (4, 4, 4) and srv.answered == 4


# --------------------------------------------------------------------------- structured output


async def test_json_schema_request_uses_response_format_json_schema() -> None:
    with FakeOpenAI(lambda req: ANSWER) as srv:
        llm = client(srv)
        response = await llm.complete(schema_request())
        assert json.loads(response.text) == {"verdict": "supported", "confidence": 0.9}
        rf = srv.requests[0]["response_format"]
        assert rf["type"] == "json_schema"
        assert rf["json_schema"]["name"] == "support_verdict"
        assert rf["json_schema"]["schema"] == SCHEMA
        assert rf["json_schema"]["strict"] is True
        assert llm.structured_mode == "json_schema"


async def test_bare_500_to_a_schema_is_retried_then_falls_back_to_json_object_and_remembers() -> None:
    with FakeOpenAI(lambda req: ANSWER, reject_json_schema=True) as srv:  # like llama.cpp: 500
        llm = client(srv, max_attempts=2)
        first = await llm.complete(schema_request())
        assert json.loads(first.text)["verdict"] == "supported"
        assert [rf_type(b) for b in srv.requests] == ["json_schema", "json_schema", "json_object"]
        assert srv.requests[2]["response_format"]["schema"] == SCHEMA
        assert llm.structured_mode == "json_object"

        await llm.complete(schema_request())
        assert [rf_type(b) for b in srv.requests][3:] == ["json_object"]
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (4, 2, 2)


async def test_a_500_naming_the_schema_falls_back_at_once() -> None:
    message = "1 validation error: response_format.type: Input should be 'text' or 'json_object'"
    with FakeOpenAI(lambda req: ANSWER, reject_json_schema=message) as srv:
        llm = client(srv, max_attempts=3)
        await llm.complete(schema_request())
        assert [rf_type(b) for b in srv.requests] == ["json_schema", "json_object"]
        assert llm.structured_mode == "json_object"


async def test_a_transient_500_to_a_schema_request_keeps_json_schema() -> None:
    with FakeOpenAI(lambda req: ANSWER, faults=[FakeReply.error(500)]) as srv:
        llm = client(srv)
        await llm.complete(schema_request())
        assert [rf_type(b) for b in srv.requests] == ["json_schema", "json_schema"]
        assert llm.structured_mode == "json_schema"


async def test_schema_and_json_object_rejected_fall_back_to_plain_and_remember() -> None:
    with FakeOpenAI(
        lambda req: "```json\n" + ANSWER + "\n```", reject_json_schema=True, reject_json_object=True
    ) as srv:
        llm = client(srv, max_attempts=1)
        first = await llm.complete(schema_request())
        assert json.loads(first.text)["confidence"] == 0.9  # fences stripped in plain mode
        assert [rf_type(b) for b in srv.requests] == ["json_schema", "json_object", None]
        assert llm.structured_mode == "none"

        await llm.complete(schema_request())
        assert [rf_type(b) for b in srv.requests] == ["json_schema", "json_object", None, None]
        # a request without a schema never carries response_format
        await llm.complete(ask())
        assert rf_type(srv.requests[-1]) is None


async def test_a_bad_request_unrelated_to_the_schema_does_not_fall_back() -> None:
    with FakeOpenAI(faults=lambda i, req: FakeReply.error(400, "messages must not be empty")) as srv:
        llm = client(srv)
        with pytest.raises(ProviderBadRequest):
            await llm.complete(schema_request())
        assert len(srv.requests) == 1
        assert llm.structured_mode == "json_schema"


async def test_code_fenced_json_is_stripped_for_json_answers_only() -> None:
    fenced = "```json\n" + ANSWER + "\n```"
    with FakeOpenAI(lambda req: fenced) as srv:
        llm = client(srv)
        assert (await llm.complete(schema_request())).text == ANSWER
        assert (await llm.complete(ask())).text == fenced  # free text is returned untouched


def test_strip_code_fences() -> None:
    assert strip_code_fences('```\n{"a": 1}\n```') == '{"a": 1}'
    assert strip_code_fences('  ```JSON\n{"a": 1}\n```  ') == '{"a": 1}'
    assert strip_code_fences('Here it is:\n```json\n{"a": 1}\n```\nDone.') == '{"a": 1}'
    assert strip_code_fences('{"a": "```"}') == '{"a": "```"}'
    assert strip_code_fences("no fences") == "no fences"


# --------------------------------------------------------------------------- retries


async def test_429_is_retried_after_retry_after() -> None:
    with FakeOpenAI(lambda req: "ok", faults=[FakeReply.rate_limited(retry_after=0.2)]) as srv:
        llm = client(srv)
        response = await llm.complete(ask())
        assert response.text == "ok"
        first, second = srv.chat_arrivals
        assert second - first >= 0.2
        assert llm.retries == 1 and llm.retry_wait_seconds >= 0.2  # not just litellm's own latency
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (2, 1, 1)
        assert srv.answered == 1


async def test_5xx_and_connection_reset_are_retried_until_success() -> None:
    faults = [FakeReply.error(500), FakeReply.error(503), FakeReply.connection_reset()]
    with FakeOpenAI(lambda req: "finally", faults=faults) as srv:
        llm = client(srv, max_attempts=4)
        response = await llm.complete(ask())
        assert response.text == "finally"
        assert len(srv.requests) == 4
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (4, 1, 1)


async def test_rate_limit_exhaustion_raises_provider_rate_limited() -> None:
    with FakeOpenAI(faults=lambda i, req: FakeReply.rate_limited(retry_after=0.01)) as srv:
        llm = client(srv, max_attempts=3)
        with pytest.raises(ProviderRateLimited) as info:
            await llm.complete(ask())
        assert len(srv.requests) == 3
        err = info.value
        assert isinstance(err, LLMError) and not err.billed
        assert err.provider_status == 429 and err.retry_after == pytest.approx(0.01)
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (3, 0, 0)


@pytest.mark.parametrize(
    "fault", [FakeReply.error(503), FakeReply.error(500), FakeReply.connection_reset()], ids=["503", "500", "reset"]
)
async def test_unavailable_exhaustion_raises_provider_unavailable(fault: FakeReply) -> None:
    with FakeOpenAI(faults=lambda i, req: fault) as srv:
        llm = client(srv, max_attempts=3)
        with pytest.raises(ProviderUnavailable) as info:
            await llm.complete(ask())
        assert len(srv.requests) == 3
        assert isinstance(info.value, LLMError) and not info.value.billed
        assert info.value.provider_status == (None if fault.reset else fault.status)
        assert srv.answered == 0 and llm.calls_answered == 0


async def test_unreachable_server_raises_provider_unavailable() -> None:
    with FakeOpenAI() as srv:
        base = srv.base_url
    llm = LiteLLMClient("openai/fake", api_base=base, api_key=KEY, backoff_base=0.01, max_attempts=2)
    with pytest.raises(ProviderUnavailable, match="could not reach"):
        await llm.complete(ask())
    assert llm.calls_attempted == 2


async def test_timeout_raises_provider_timeout_after_bounded_attempts() -> None:
    with FakeOpenAI(faults=lambda i, req: FakeReply.slow(5.0, text="late")) as srv:
        llm = client(srv, timeout=0.3, max_attempts=2)
        with pytest.raises(ProviderTimeout) as info:
            await llm.complete(ask())
        assert isinstance(info.value, LLMError)
        assert len(srv.requests) == 2
        assert (llm.calls_attempted, llm.calls_answered) == (2, 0)


# --------------------------------------------------------------------------- client errors


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_client_errors_are_not_retried(status: int) -> None:
    with FakeOpenAI(faults=lambda i, req: FakeReply.error(status, "nope")) as srv:
        llm = client(srv)
        with pytest.raises(ProviderBadRequest) as info:
            await llm.complete(ask())
        assert len(srv.requests) == 1
        assert info.value.provider_status == status and not info.value.retryable


async def test_context_window_error_is_a_bad_request_with_a_fix() -> None:
    message = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."
    with FakeOpenAI(faults=lambda i, req: FakeReply.error(400, message)) as srv:
        with pytest.raises(ProviderBadRequest) as info:
            await client(srv).complete(ask())
        assert len(srv.requests) == 1
        assert info.value.fix


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_never_repeat_the_key(status: int) -> None:
    # the server answers 401 quoting the key it was sent, as some providers do
    script_key = "wrong-key-1234567"
    with (
        FakeOpenAI(api_key="the-real-key")
        if status == 401
        else FakeOpenAI(faults=lambda i, req: FakeReply.error(403, f"key {script_key} may not use this model")) as srv
    ):
        llm = LiteLLMClient("openai/fake", api_base=srv.base_url, api_key=script_key, backoff_base=0.01)
        with pytest.raises(ProviderAuthError) as info:
            await llm.complete(ask())
        assert len(srv.requests) == 1
        err = info.value
        assert isinstance(err, LLMError)
        rendered = [str(err), repr(err), err.detail, json.dumps(err.to_problem("/x")), str(err.args)]
        assert all(script_key not in text for text in rendered), rendered
        assert "[redacted]" in err.detail
        assert err.__cause__ is None and err.__suppress_context__


async def test_empty_body_is_invalid_and_not_billed() -> None:
    with FakeOpenAI(faults=lambda i, req: FakeReply(empty_body=True)) as srv:
        llm = client(srv)
        with pytest.raises(ProviderResponseInvalid) as info:
            await llm.complete(ask())
        assert not info.value.billed  # usage unknowable: answered, not billed
        assert len(srv.requests) == 1  # not retried
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (1, 1, 0)


async def test_malformed_body_is_invalid_and_not_billed() -> None:
    with FakeOpenAI(faults=lambda i, req: FakeReply(malformed=True)) as srv:
        llm = client(srv)
        with pytest.raises(ProviderResponseInvalid) as info:
            await llm.complete(ask())
        assert isinstance(info.value, LLMError) and not info.value.billed
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (1, 1, 0)


async def test_answer_without_choices_but_with_usage_is_invalid_and_billed() -> None:
    fault = FakeReply(no_choices=True, prompt_tokens=20, completion_tokens=0)
    with FakeOpenAI(faults=lambda i, req: fault) as srv:
        llm = client(srv)
        with pytest.raises(ProviderResponseInvalid) as info:
            await llm.complete(ask())
        assert info.value.billed
        assert (llm.calls_attempted, llm.calls_answered, llm.calls_billed) == (1, 1, 1)
        assert srv.answered == 1


async def test_answer_with_empty_text_is_invalid_and_billed() -> None:
    with FakeOpenAI(lambda req: FakeReply(text="", finish_reason="length")) as srv:
        with pytest.raises(ProviderResponseInvalid, match="finish_reason=length") as info:
            await client(srv).complete(ask())
        assert info.value.billed


async def test_answer_without_usage_is_billed_at_the_counted_tokens() -> None:
    with FakeOpenAI(lambda req: FakeReply(text="hi", include_usage=False)) as srv:
        llm = client(srv)
        response = await llm.complete(ask())
        counted = llm.counted_usage([{"role": m.role, "content": m.content} for m in ask().messages], "hi")
        assert response.text == "hi" and response.usage == counted
        assert counted.estimated and counted.input_tokens > 0 and counted.output_tokens == 1
        assert (llm.calls_answered, llm.calls_billed) == (1, 1)


# --------------------------------------------------------------------------- cost and pricing


async def test_cost_is_computed_for_a_priced_model_and_none_otherwise(hello: FakeOpenAI) -> None:
    priced = await client(hello, model="openai/gpt-4o").complete(ask())
    assert hello.requests[0]["model"] == "gpt-4o"
    price = LiteLLMPricing().price("gpt-4o")
    assert price is not None
    cost = priced.usage.cost_usd
    assert isinstance(cost, float) and cost > 0
    # 12 prompt tokens (4 of them cached, which cost less) and 3 completion tokens
    assert 8 * price[0] + 3 * price[1] < cost <= 12 * price[0] + 3 * price[1] + 1e-12
    unpriced = await client(hello).complete(ask())
    assert unpriced.usage.cost_usd is None


def test_pricing_from_the_bundled_price_map() -> None:
    pricing: Pricing = LiteLLMPricing()
    gpt4o = pricing.price("gpt-4o")
    assert gpt4o is not None and 0 < gpt4o[0] < gpt4o[1] < 1e-3
    assert pricing.price("openai/gpt-4o") == gpt4o
    assert pricing.price("openai/local") is None
    assert pricing.price("no-such-model-2099") is None
    assert LiteLLMPricing({"local": (0.0, 0.0)}).price("openai/local") == (0.0, 0.0)


# --------------------------------------------------------------------------- tokenizer


def test_tiktoken_tokenizer_offline() -> None:
    tok: Tokenizer = TiktokenTokenizer()
    assert isinstance(tok, TiktokenTokenizer) and tok.exact and tok.fallback_reason is None
    assert tok.count("hello world") == 2
    text = "The quick brown fox jumps over the lazy dog. " * 5
    cut = tok.truncate(text, 7)
    assert text.startswith(cut) and 0 < len(cut) < len(text)
    assert tok.count(cut) <= 7
    assert tok.truncate("hello world", 50) == "hello world"
    assert tok.truncate("hello world", 0) == ""
    assert tok.count("<|endoftext|>") > 1  # special tokens are plain text here
    multibyte = "日本語のテキストです"
    assert multibyte.startswith(tok.truncate(multibyte, 3))


def test_tokenizer_falls_back_without_touching_a_bad_bpe_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bogus = tmp_path / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"  # tiktoken's cache name for cl100k
    bogus.write_bytes(b"not a bpe file")
    monkeypatch.setattr(tokenizer_module, "_ENCODING_CACHE", {})
    monkeypatch.setattr(tokenizer_module, "bundled_tiktoken_dir", lambda: tmp_path)
    tok = TiktokenTokenizer()
    assert not tok.exact and tok.fallback_reason and "digest" in tok.fallback_reason
    assert tok.count("hello world") == ApproxTokenizer().count("hello world")
    assert tok.truncate("hello world", 2) == ApproxTokenizer().truncate("hello world", 2)
    assert bogus.read_bytes() == b"not a bpe file"  # tiktoken would have deleted it and downloaded


# --------------------------------------------------------------------------- errors and litellm setup


def test_provider_errors_are_problems_and_llm_errors() -> None:
    err = ProviderRateLimited("slow down", retry_after=1.2, provider_status=429)
    assert isinstance(err, ProvenanceError) and isinstance(err, LLMError) and isinstance(err, ProviderError)
    problem = err.to_problem("/v1/traces/t1")
    assert problem["type"].endswith(":provider-rate-limited") and problem["status"] == err.status
    assert problem["detail"] == "slow down" and problem["instance"] == "/v1/traces/t1"
    assert problem["retry_after"] == 1.2 and problem["provider_status"] == 429
    assert err.headers() == {"Retry-After": "2"}
    assert ProviderResponseInvalid("x", billed=True).billed and not ProviderTimeout("x").billed
    assert ProviderTimeout("x").status == 504

    invalid = InvalidInput(
        "bad sentence", field="sentence", fix="quote a sentence of the answer", extra={"status": 200, "candidates": 3}
    )
    problem = invalid.to_problem()
    assert problem == {
        "type": "urn:provenance:problem:invalid-input",
        "title": "Invalid input",
        "status": 422,
        "detail": "bad sentence",
        "field": "sentence",
        "fix": "quote a sentence of the answer",
        "candidates": 3,
    }
    assert RateLimited("too many", retry_after=3).headers() == {"Retry-After": "3"}


def test_litellm_is_configured_quietly_and_offline() -> None:
    litellm = load_litellm()
    assert litellm.suppress_debug_info is True
    assert litellm.callbacks == [] and litellm.success_callback == [] and litellm.failure_callback == []
    assert "gpt-4o" in litellm.model_cost


def test_fake_server_lists_models_and_reports_script_errors() -> None:
    import httpx

    def broken(req: dict[str, Any]) -> str:
        raise KeyError("oops")

    with FakeOpenAI(broken, model_ids=("fake", "local")) as srv:
        started = time.monotonic()
        data = httpx.get(srv.base_url + "/models", timeout=5).json()
        assert [m["id"] for m in data["data"]] == ["fake", "local"]
        assert srv.records[0].path == "/v1/models" and srv.records[0].arrived >= started
        assert srv.requests == []  # only chat completions count as requests

        answer = httpx.post(srv.base_url + "/chat/completions", json={"model": "fake", "messages": []}, timeout=5)
        assert answer.status_code == 500 and "KeyError" in answer.json()["error"]["message"]
        assert [type(e) for e in srv.script_errors] == [KeyError]
        assert srv.answered == 0 and len(srv.requests) == 1


# --------------------------------------------------------------------------- top log-probabilities


DIGIT_ALTERNATIVES = ({"7": math.log(0.6), "6": math.log(0.3), "Yes": math.log(0.1)},)


async def test_top_logprobs_are_asked_for_and_parsed() -> None:
    with FakeOpenAI(lambda req: FakeReply(text="7", top_logprobs=DIGIT_ALTERNATIVES)) as srv:
        llm = client(srv)
        response = await llm.complete(ask("Rate it 1-9.", max_tokens=4, top_logprobs=5))
        body = srv.requests[0]
        assert body["logprobs"] is True and body["top_logprobs"] == 5
        assert response.text == "7"
        assert response.top_logprobs is not None and len(response.top_logprobs) == 1
        assert response.top_logprobs[0] == pytest.approx(DIGIT_ALTERNATIVES[0])
        assert expected_digit(response.top_logprobs) == pytest.approx((0.6 * 7 + 0.3 * 6) / 0.9)
        assert llm.logprobs_unavailable is None
        assert (llm.calls_attempted, llm.calls_billed) == (1, 1)


async def test_top_logprobs_are_capped_at_k_and_at_twenty() -> None:
    many = ({str(d): -float(d) for d in range(1, 10)},)
    with FakeOpenAI(lambda req: FakeReply(text="1", top_logprobs=many)) as srv:
        llm = client(srv)
        two = await llm.complete(ask(top_logprobs=2))
        assert two.top_logprobs is not None and set(two.top_logprobs[0]) == {"1", "2"}
        await llm.complete(ask(top_logprobs=50))
        assert srv.requests[1]["top_logprobs"] == 20  # OpenAI's limit; a larger k would be refused


async def test_every_output_position_is_kept_in_order() -> None:
    positions = ({" ": -0.1, "\n": -2.5}, {"8": -0.2, "9": -1.8})
    with FakeOpenAI(lambda req: FakeReply(text=" 8", top_logprobs=positions)) as srv:
        response = await client(srv).complete(ask(top_logprobs=3))
        assert response.top_logprobs is not None
        assert [set(p) for p in response.top_logprobs] == [{" ", "\n"}, {"8", "9"}]
        assert expected_digit(response.top_logprobs) == pytest.approx(
            (8 * math.exp(-0.2) + 9 * math.exp(-1.8)) / (math.exp(-0.2) + math.exp(-1.8))
        )


async def test_no_logprobs_are_asked_for_unless_requested(hello: FakeOpenAI) -> None:
    response = await client(hello).complete(ask())
    assert "logprobs" not in hello.requests[0] and "top_logprobs" not in hello.requests[0]
    assert response.top_logprobs is None


async def test_a_provider_rejecting_logprobs_is_asked_again_without_and_says_so() -> None:
    with FakeOpenAI(lambda req: "7", reject_logprobs=True) as srv:
        llm = client(srv)
        response = await llm.complete(ask(top_logprobs=5))
        assert response.text == "7"
        assert response.top_logprobs is None  # never a made-up distribution
        assert llm.logprobs_unavailable is not None and "logprobs" in llm.logprobs_unavailable
        assert [("logprobs" in b) for b in srv.requests] == [True, False]
        assert (llm.calls_attempted, llm.calls_billed) == (2, 1)  # the 400 was not billed
        again = await llm.complete(ask(top_logprobs=5))
        assert again.top_logprobs is None and "logprobs" not in srv.requests[2]  # remembered
        assert len(srv.requests) == 3


async def test_a_provider_ignoring_logprobs_answers_without_them() -> None:
    with FakeOpenAI(lambda req: "7", ignore_logprobs=True) as srv:
        llm = client(srv)
        response = await llm.complete(ask(top_logprobs=5))
        assert srv.requests[0]["logprobs"] is True
        assert response.text == "7" and response.top_logprobs is None
        assert expected_digit(response.top_logprobs) is None


async def test_an_unrelated_bad_request_is_not_read_as_a_logprobs_rejection() -> None:
    with FakeOpenAI(lambda req: FakeReply.error(400, "max_tokens is too large")) as srv:
        llm = client(srv)
        with pytest.raises(ProviderBadRequest):
            await llm.complete(ask(top_logprobs=5))
        assert llm.logprobs_unavailable is None and len(srv.requests) == 1


async def test_logprobs_with_a_schema_request_survive_the_structured_fallback() -> None:
    alternatives = tuple({ch: 0.0} for ch in ANSWER)
    with FakeOpenAI(lambda req: FakeReply(text=ANSWER, top_logprobs=alternatives), reject_json_schema=True) as srv:
        llm = client(srv, max_attempts=1)
        response = await llm.complete(schema_request(top_logprobs=1))
        assert json.loads(response.text)["verdict"] == "supported"
        assert all(b["logprobs"] is True for b in srv.requests)
        assert response.top_logprobs is not None and len(response.top_logprobs) == len(ANSWER)


def test_parse_top_logprobs_merges_duplicate_texts_and_keeps_the_chosen_token() -> None:
    choice = {
        "logprobs": {
            "content": [
                {
                    "token": "7",
                    "logprob": -0.5,
                    "top_logprobs": [
                        {"token": "7", "logprob": -0.5},
                        {"token": "3", "logprob": math.log(0.1)},
                        {"token": "3", "logprob": math.log(0.1)},
                    ],
                },
                {"token": "!", "logprob": -0.1, "top_logprobs": []},  # k=0: the chosen token alone
            ]
        }
    }
    parsed = parse_top_logprobs(choice)
    assert parsed is not None
    assert parsed[0]["7"] == pytest.approx(-0.5) and parsed[0]["3"] == pytest.approx(math.log(0.2))
    assert parsed[1] == {"!": -0.1}
    assert parse_top_logprobs({"logprobs": None}) is None
    assert parse_top_logprobs({"logprobs": {"content": []}}) is None


# --------------------------------------------------------------------------- capability: top log-probabilities


@pytest.mark.parametrize(
    ("model", "api_base", "offered", "how"),
    [
        ("gpt-4o", None, True, "chat-logprobs"),
        ("openai/gpt-4o-mini", "https://api.openai.com/v1", True, "chat-logprobs"),
        ("azure/gpt-4o", "https://example.openai.azure.com", True, "chat-logprobs"),
        ("openai/qwen2.5-7b-instruct", "http://127.0.0.1:8080/v1", True, "chat-logprobs"),  # vLLM / llama.cpp
        ("hosted_vllm/qwen", "http://10.0.0.5:8000/v1", True, "chat-logprobs"),
        ("my-finetune", "http://127.0.0.1:8080/v1", True, "chat-logprobs"),
        ("anthropic/claude-3-5-sonnet-20241022", None, False, "none"),
        ("claude-3-5-haiku-20241022", None, False, "none"),
        ("anthropic/claude-3-5-sonnet-20241022", "https://proxy.example/v1", False, "none"),
        ("bedrock/anthropic.claude-3-sonnet", None, False, "none"),
        ("o1", None, False, "none"),  # OpenAI reasoning models refuse logprobs
        ("openai/o3-mini", None, False, "none"),
        ("azure/o1", "https://example.openai.azure.com", False, "none"),
        ("some-unknown-model", None, False, "none"),
    ],
)
def test_top_logprobs_capability(model: str, api_base: str | None, offered: bool, how: str) -> None:
    capability = top_logprobs_capability(model, api_base=api_base)
    assert (capability.offered, capability.how) == (offered, how), capability.reason
    assert model in capability.reason
    if not offered:
        assert "judged" in capability.reason  # the reason names the way out


def test_the_local_model_always_offers_top_logprobs() -> None:
    capability = top_logprobs_capability("anthropic/claude-3-5-sonnet-20241022", local_model=True)
    assert capability.offered and capability.how == "in-process"


@pytest.mark.parametrize(
    "model",
    [
        "gpt-4o",
        "azure/gpt-4o",
        "hosted_vllm/qwen",
        "anthropic/claude-3-5-sonnet-20241022",
        "bedrock/anthropic.claude-3-sonnet",
        "mistral/mistral-large-latest",
        "cohere/command-r",
        "ollama/llama3",
        "o1",
        "openai/o3-mini",
    ],
)
def test_capability_agrees_with_what_litellm_sends(model: str) -> None:
    """Where we say no, litellm drops the parameter (or the API refuses it); where we say yes, it is sent."""
    litellm = load_litellm()
    name, provider, _, _ = litellm.get_llm_provider(model)
    supported = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider) or []
    sent = "logprobs" in supported and "top_logprobs" in supported
    assert top_logprobs_capability(model).offered == sent
