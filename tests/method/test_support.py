"""Algorithm 5 — CheckSupport with VerifyQuote: the one hard guarantee (§6.6, §7.5)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from estimator.corpus.units import Evidence, Layer, Unit, sha256_hex
from estimator.fence import Fence
from estimator.params import DEFAULT_PARAMS
from estimator.seams.llm import LLMError, LLMRequest, ScriptedLLM
from estimator.spans.support import (
    DIRECTIVE_HEADING,
    EVIDENCE_HEADING,
    SUPPORT_SCHEMA,
    build_support_request,
    check_support,
    parse_support_answer,
)

CLAIM = "The Aerosol Albedo layer belongs to the Aerosol Albedo layer group."
SEARCH_HEADER = 'search_worldview_layers({"query": "aerosol"})'
ESCAPED_TOOL_RETURN = (  # one physical line: its newlines are JSON escapes
    '{"result": "[{\\"layer_id\\": \\"OMI_Aerosol_Albedo\\",\\n'
    '  \\"layergroup\\": \\"Aerosol Albedo\\",\\n'
    '  \\"period\\": \\"daily\\"}]"}'
)
RULES = "\n".join(
    [
        "# Role",
        "You are an Earth-observation assistant.",
        "",
        "## Non-authoritative communication",
        "- Use neutral language; avoid authoritative framing.",
        "- Always include a non-authoritative disclaimer in the user-facing narrative.",
    ]
)


def unit(text: str, layer: Layer = Layer.TOOLS, uid: str = "s0") -> Unit:
    """A source; a tool's call header is shown above its content, as the corpus builds it."""
    header = SEARCH_HEADER if layer == Layer.TOOLS else ""
    return Unit(
        id=uid,
        kind="instructions" if layer == Layer.INSTRUCTIONS else "user_tool",
        tool="t",
        label=f"label of {uid}",
        text=text,
        ordinal=int(uid[1:]),
        layer=layer,
        header=header,
        evidence=Evidence(sha256_hex(text), "test", len(text) // 4),
    )


def answer(verdict: str, quote: str = "", confidence: float = 0.9, reason: str = "because") -> str:
    return json.dumps({"verdict": verdict, "evidence_quote": quote, "confidence": confidence, "reason": reason})


def by_attempt(*answers: str) -> Callable[[LLMRequest], str]:
    """Answer the first call with answers[0], the retry (recognised by its nudge) with answers[1]."""

    def script(request: LLMRequest) -> str:
        retry = "does not occur in the text between the fence lines" in request.messages[-1].content
        return answers[1] if retry else answers[0]

    return script


async def test_a_fabricated_quote_is_downgraded_to_silent_after_exactly_one_retry() -> None:
    fabricated = answer("supported", "the layer group is definitely Aerosol Albedo", 0.95)
    llm = ScriptedLLM(by_attempt(fabricated, fabricated))
    verdict = await check_support(llm, CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert verdict.verdict == "silent" and verdict.downgraded and verdict.confidence <= 0.3
    assert verdict.quote is None and verdict.line_start is None and verdict.calls == 2 == len(llm.calls)
    assert "downgraded from supported" in verdict.reason and not verdict.no_information


async def test_a_retry_that_verifies_is_kept() -> None:
    llm = ScriptedLLM(
        by_attempt(
            answer("supported", "layergroup is Aerosol Albedo"),
            answer("supported", '"layergroup": "Aerosol Albedo"', 0.86),
        )
    )
    verdict = await check_support(llm, CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert (verdict.verdict, verdict.calls, len(llm.calls), verdict.downgraded) == ("supported", 2, 2, False)
    assert verdict.quote == '"layergroup": "Aerosol Albedo"' and verdict.confidence == 0.86
    assert (verdict.line_start, verdict.line_end) == (1, 1)  # the return's own line, not the header's next


async def test_a_retry_that_does_not_verify_does_not_replace_the_answer() -> None:
    llm = ScriptedLLM(
        by_attempt(
            answer("contradicted", "layer group is Aerosol Index", 0.7),
            answer("silent", "nothing here verifies at all", 0.9),
        )
    )
    verdict = await check_support(llm, CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert verdict.verdict == "silent" and verdict.downgraded and verdict.confidence <= 0.3
    assert "downgraded from contradicted" in verdict.reason


async def test_an_escaped_json_quote_verifies_against_the_stored_text() -> None:
    assert '\\"layergroup\\": \\"Aerosol Albedo\\"' in ESCAPED_TOOL_RETURN
    llm = ScriptedLLM(lambda r: answer("supported", '"layergroup": "Aerosol Albedo"', 0.99))
    verdict = await check_support(llm, CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert verdict.verdict == "supported" and verdict.calls == 1 and verdict.line_start == 1
    assert verdict.quote == '"layergroup": "Aerosol Albedo"'


async def test_contradicted_is_first_class() -> None:
    llm = ScriptedLLM(lambda r: answer("contradicted", '"period": "daily"', 0.8, "it is daily, not yearly"))
    verdict = await check_support(llm, "The layer is updated yearly.", unit(ESCAPED_TOOL_RETURN))
    assert (verdict.verdict, verdict.downgraded, verdict.calls) == ("contradicted", False, 1)
    assert verdict.quote == '"period": "daily"' and verdict.line_start == verdict.line_end == 1


async def test_silent_is_not_retried() -> None:
    llm = ScriptedLLM(lambda r: answer("silent", "", 0.77, "no instruction here bears on this"))
    verdict = await check_support(llm, CLAIM, unit(RULES, Layer.INSTRUCTIONS))
    assert (verdict.verdict, verdict.calls, verdict.downgraded, verdict.quote) == ("silent", 1, False, None)


async def test_instructions_get_the_directive_question_and_other_sources_the_evidence_question() -> None:
    directive = build_support_request(CLAIM, unit(RULES, Layer.INSTRUCTIONS))
    evidence = build_support_request(CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert "direct this response" in directive.messages[0].content
    assert "state the claim" in evidence.messages[0].content
    fence = Fence.for_inputs(CLAIM)
    m = fence.marker
    shown = SEARCH_HEADER + "\n" + ESCAPED_TOOL_RETURN  # the header is shown to the model, inside the fence
    for request, heading, body in ((directive, DIRECTIVE_HEADING, RULES), (evidence, EVIDENCE_HEADING, shown)):
        assert request.messages[-1].content == f"CLAIM:\n{m}\n{CLAIM}\n{m}\n\n{heading}:\n{m}\n{body}\n{m}"
        assert fence.rule().strip() in request.messages[0].content
        assert request.purpose == "support" and request.json_schema == SUPPORT_SCHEMA
    assert SUPPORT_SCHEMA["properties"]["verdict"]["enum"] == ["supported", "contradicted", "silent"]


async def test_the_directive_variant_resolves_a_hedge_to_its_governing_rule() -> None:
    rule = (
        "## Non-authoritative communication\n- Use neutral language; avoid authoritative framing.\n"
        "- Always include a non-authoritative disclaimer in the user-facing narrative."
    )
    llm = ScriptedLLM(
        lambda r: answer("supported", rule, 0.72) if "direct this response" in r.prompt_text else answer("silent")
    )
    verdict = await check_support(
        llm, "Non-authoritative note: treat this as exploratory.", unit(RULES, Layer.INSTRUCTIONS)
    )
    assert verdict.verdict == "supported" and (verdict.line_start, verdict.line_end) == (4, 6)


async def test_the_body_is_truncated_but_the_quote_is_verified_against_the_full_text() -> None:
    head = " ".join(f"filler{i}" for i in range(400))
    text = head + "\nThe annual product is released every year in June."
    params = DEFAULT_PARAMS.override({"source_token_cap": 16, "support_token_cap": 40})
    request = build_support_request(CLAIM, unit(text), params=params)
    assert "released every year" not in request.messages[-1].content
    assert "cut at 40 tokens" in request.prompt_text
    llm = ScriptedLLM(lambda r: answer("supported", "released every year in June", 0.6))
    verdict = await check_support(llm, CLAIM, unit(text), params=params)
    assert verdict.verdict == "supported" and verdict.line_start == 2


@pytest.mark.parametrize("reply", ["I am not sure.", "", '{"verdict": "maybe"}', "[1, 2]", '{"quote": "x"}'])
async def test_an_unreadable_answer_is_no_information_not_a_verdict(reply: str) -> None:
    llm = ScriptedLLM(lambda r: reply)
    verdict = await check_support(llm, CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert verdict.verdict == "silent" and verdict.no_information and verdict.confidence == 0.0
    assert verdict.reason.startswith("no information:") and verdict.calls == 1


async def test_a_failed_call_is_no_information() -> None:
    def script(request: LLMRequest) -> str:
        raise LLMError("timeout", billed=True)

    verdict = await check_support(ScriptedLLM(script), CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert verdict.no_information and verdict.verdict == "silent" and "(billed)" in verdict.reason


async def test_a_failed_retry_leaves_the_unverified_verdict_downgraded() -> None:
    def script(request: LLMRequest) -> str:
        if "does not occur" in request.messages[-1].content:
            raise LLMError("overloaded")
        return answer("supported", "a paraphrase that is not in the source", 0.9)

    verdict = await check_support(ScriptedLLM(script), CLAIM, unit(ESCAPED_TOOL_RETURN))
    assert verdict.downgraded and verdict.calls == 2 and "retry gave no information" in verdict.reason


def test_tolerant_parse_of_providers_without_schema_support() -> None:
    fenced = '```json\n{"verdict": "Supported", "quote": "layergroup", "confidence": "0.8", "reason": "r"}\n```'
    parsed = parse_support_answer(fenced)
    assert parsed is not None and (parsed.verdict, parsed.quote, parsed.confidence) == ("supported", "layergroup", 0.8)
    chatty = 'Sure! {"note": 1} then {"verdict": "silent", "evidence_quote": null, "confidence": 2}'
    parsed = parse_support_answer(chatty)
    assert parsed is None  # the first object has no verdict: not guessed from a later one
    parsed = parse_support_answer('Here: {"verdict": "silent", "evidence_quote": null, "confidence": 2} ok')
    assert parsed is not None and parsed.quote is None and parsed.confidence == 1.0


@pytest.mark.parametrize(("raw", "clamped"), [(1.7, 1.0), (-0.2, 0.0), (0.42, 0.42)])
async def test_confidence_is_clamped(raw: float, clamped: float) -> None:
    llm = ScriptedLLM(lambda r: answer("supported", '"layergroup": "Aerosol Albedo"', raw))
    assert (await check_support(llm, CLAIM, unit(ESCAPED_TOOL_RETURN))).confidence == clamped


@given(st.text(max_size=200))
def test_parse_never_raises(text: str) -> None:
    parsed = parse_support_answer(text)
    assert parsed is None or 0.0 <= parsed.confidence <= 1.0
