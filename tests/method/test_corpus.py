"""Algorithm 1 — BuildLayeredCorpus (seed §2.1, §7.1, §7.8, §8.3).

Exercised on three stored-turn fixtures and on small inline turns:

* ``ndvi_parametric_turn.json`` — no tool calls; two layers, eleven sources (§8.3).
* ``fallback_path_turn.json``   — empty ``model_messages``; the flattened payload carries the calls.
* ``failures_turn.json``        — failed, rejected, empty, MCP-error and reused-id calls, an earlier
  turn's tool result in the stored history, and an attachment whose bytes are gone.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimator.corpus.build import (
    INSTRUCTIONS_LABEL,
    build_corpus,
    classify_tool,
    label_for,
)
from estimator.corpus.tool_content import flatten
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer, Unit
from estimator.params import DEFAULT_PARAMS, Params
from estimator.tokens import ApproxTokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
NDVI_FIXTURE = "ndvi_parametric_turn.json"
FALLBACK_FIXTURE = "fallback_path_turn.json"
FAILURES_FIXTURE = "failures_turn.json"
SEED = Params(failed_calls_as_sources=False)
"""The seed's Algorithm 1 for failed calls: excluded and disclosed. Failed calls as sources (the default) are
tests/method/test_failed_call_sources.py."""
WHOLE = Params(instructions_as_rules=False)
"""The seed's Algorithm 1 for the system prompt: one source, kept whole (§8.3's 11 sources are counted so). The
prompt split into its rules (the default) is tests/method/test_instruction_rules.py."""

Json = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


class WordTokenizer:
    """One token per whitespace-separated word: makes budgets exact and easy to reason about."""

    def count(self, text: str) -> int:
        return len(text.split())

    def truncate(self, text: str, max_tokens: int) -> str:
        return " ".join(text.split()[:max_tokens])


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fixture_json(name: str) -> Json:
    data: Json = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


def load_turn(name: str) -> StoredTurn:
    return StoredTurn.model_validate(fixture_json(name))


def make_turn(**fields: Any) -> StoredTurn:
    return StoredTurn.model_validate({"turn_id": "t-inline", "response": "Done.", **fields})


def user_prompt(text: str) -> Json:
    return {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": text}]}


def request(*parts: Json) -> Json:
    return {"kind": "request", "parts": list(parts)}


def response(*parts: Json) -> Json:
    return {"kind": "response", "parts": list(parts)}


def text_part(text: str) -> Json:
    return {"part_kind": "text", "content": text}


def call(name: str, args: Any, call_id: str | None, kind: str = "tool-call") -> Json:
    return {"part_kind": kind, "tool_name": name, "args": args, "tool_call_id": call_id}


def ret(
    call_id: str | None, content: Any, name: str = "tool", outcome: str | None = None, kind: str = "tool-return"
) -> Json:
    part: Json = {"part_kind": kind, "tool_name": name, "content": content, "tool_call_id": call_id}
    if outcome is not None:
        part["outcome"] = outcome
    return part


def retry(call_id: str, name: str = "tool") -> Json:
    return {
        "part_kind": "retry-prompt",
        "tool_name": name,
        "tool_call_id": call_id,
        "content": "validation error: field required",
    }


def one_call_turn(name: str, args: Any, content: Any, outcome: str | None = None) -> StoredTurn:
    """A primary-path turn with a single call and its return."""
    return make_turn(
        model_messages=[
            user_prompt("go"),
            response(call(name, args, "c1")),
            request(ret("c1", content, name, outcome)),
            response(text_part("Done.")),
        ]
    )


def u(text: str) -> Json:
    return {"role": "user", "content": text}


def a(text: str) -> Json:
    return {"role": "assistant", "content": text}


def a_calls(*calls: tuple[str, str, Any]) -> Json:
    """An OpenAI-shaped assistant message carrying tool calls: (id, name, arguments)."""
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for cid, name, args in calls
        ],
    }


def tool_msg(call_id: str, content: Any, name: str | None = None) -> Json:
    msg: Json = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name is not None:
        msg["name"] = name
    return msg


def history_turn(*messages: Json, query: str = "And now?", **fields: Any) -> StoredTurn:
    return make_turn(request_payload={"messages": [*messages, u(query)]}, **fields)


def header_of(unit: Unit) -> str:
    return unit.shown.split("\n", 1)[0]


def header_args(unit: Unit) -> Json:
    """Parse the ``name(json(args))`` header back into the arguments object."""
    header = header_of(unit)
    assert header.startswith(unit.tool + "(") and header.endswith(")"), header
    parsed: Json = json.loads(header[len(unit.tool) + 1 : -1])
    return parsed


def history_body(unit: Unit) -> str:
    """What a history unit shows without its ``[role, N turn(s) ago]`` line."""
    first, _, rest = unit.shown.partition("\n")
    assert first.startswith("[") and first.endswith("]"), unit.shown
    assert first == unit.header.split("\n", 1)[0] and first not in unit.text
    return rest


def split_sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def assert_sequential(corpus: Corpus) -> None:
    for index, unit in enumerate(corpus.units):
        assert unit.id == f"s{index}"
        assert unit.ordinal == index
        assert corpus.by_id(unit.id) is unit
    layers = [unit.layer for unit in corpus.units]
    order = [Layer.TOOLS, Layer.INSTRUCTIONS, Layer.HISTORY]
    assert layers == sorted(layers, key=order.index), "units must run tools -> instructions -> history"


# --------------------------------------------------------------------------------------------------
# fixture (b): parametric answer, no tool calls — two layers, eleven sources (§8.3)
# --------------------------------------------------------------------------------------------------

NDVI_QUERY = (
    "Without calling any tools, answer in exactly one sentence from your own knowledge: "
    "what does the acronym NDVI stand for?"
)
NDVI_EXPANSION = "normalized difference vegetation index"


def test_ndvi_fixture_gives_two_layers_and_eleven_sources() -> None:
    turn = load_turn(NDVI_FIXTURE)
    corpus = build_corpus(turn, WHOLE)

    assert len(corpus) == 11
    assert corpus.layers_present() == (Layer.INSTRUCTIONS, Layer.HISTORY)
    assert len(corpus.in_layer(Layer.INSTRUCTIONS)) == 1
    assert len(corpus.in_layer(Layer.HISTORY)) == 10
    assert corpus.tool_units() == ()
    assert corpus.excluded == ()
    assert corpus.unscorable == ()
    assert corpus.path == "none"
    assert_sequential(corpus)


def test_ndvi_fixture_is_the_recorded_turn() -> None:
    raw = fixture_json(NDVI_FIXTURE)
    turn = load_turn(NDVI_FIXTURE)

    assert turn.model == "openai/gpt-5.2"
    assert turn.system_prompt_versioned is False
    assert turn.response == "NDVI stands for the Normalized Difference Vegetation Index."
    assert turn.model_messages == []
    assert turn.response_payload.tool_calls == []
    assert turn.effective_query() == NDVI_QUERY
    messages = raw["request_payload"]["messages"]
    assert messages[-1] == {"role": "user", "content": NDVI_QUERY}
    prior_roles = [m["role"] for m in messages[:-1]]
    assert prior_roles == ["user", "assistant"] * 5


def test_ndvi_expansion_is_nowhere_in_the_context_but_the_acronym_is() -> None:
    turn = load_turn(NDVI_FIXTURE)
    corpus = build_corpus(turn)
    context = "\n".join(unit.text for unit in corpus.units)

    assert turn.system_prompt is not None
    assert NDVI_EXPANSION not in turn.system_prompt.lower()
    for message in turn.request_payload.messages:
        assert NDVI_EXPANSION not in str(message.content).lower()
    assert NDVI_EXPANSION not in context.lower()
    assert "normalised difference" not in context.lower()
    assert "normalized difference" not in context.lower()
    assert "NDVI" not in turn.system_prompt
    assert context.count("NDVI") >= 4, "the subject recurs in the conversation; only its expansion is absent"
    assert NDVI_EXPANSION in turn.response.lower()


def test_ndvi_history_excludes_the_current_query_and_counts_back_from_the_present() -> None:
    corpus = build_corpus(load_turn(NDVI_FIXTURE))
    history = corpus.in_layer(Layer.HISTORY)

    assert all(NDVI_QUERY not in unit.text for unit in corpus.units)
    assert [unit.turns_ago for unit in history] == list(range(10, 0, -1))
    assert [unit.tool for unit in history] == ["user", "assistant"] * 5
    assert history[-1].label == "agent replied · 1 turn(s) ago"
    assert history[0].label == "user said · 10 turn(s) ago"
    instructions = corpus.in_layer(Layer.INSTRUCTIONS)  # the prompt's five sections, each its current text
    assert len(instructions) == 5 and all(unit.unversioned for unit in instructions)
    assert corpus.unversioned is True


# --------------------------------------------------------------------------------------------------
# fixture (c): the fallback path (flattened response payload)
# --------------------------------------------------------------------------------------------------


def test_fallback_fixture_uses_the_fallback_path() -> None:
    turn = load_turn(FALLBACK_FIXTURE)
    corpus = build_corpus(turn)

    assert turn.model_messages == []
    assert corpus.path == "fallback"
    assert [unit.tool for unit in corpus.tool_units()] == ["lookup_order", "search_help_center", "create_return_label"]
    assert corpus.layers_present() == (Layer.TOOLS, Layer.INSTRUCTIONS, Layer.HISTORY)
    assert len(corpus.in_layer(Layer.HISTORY)) == 2
    assert [u.label for u in corpus.in_layer(Layer.HISTORY)] == [
        "user said · 2 turn(s) ago",
        "agent replied · 1 turn(s) ago",
    ]
    assert corpus.excluded == ()
    assert_sequential(corpus)


def test_fallback_fixture_arguments_as_json_string_and_as_object_give_the_same_header_shape() -> None:
    raw_calls = fixture_json(FALLBACK_FIXTURE)["response_payload"]["tool_calls"]
    assert isinstance(raw_calls[0]["arguments"], str)
    assert isinstance(raw_calls[1]["arguments"], dict)

    corpus = build_corpus(load_turn(FALLBACK_FIXTURE))
    units = corpus.tool_units()
    assert header_args(units[0]) == {"order_id": "A-10482"}
    assert header_of(units[0]) == 'lookup_order({"order_id": "A-10482"})'
    assert header_args(units[1]) == raw_calls[1]["arguments"]
    assert units[0].label == "lookup_order(order_id=A-10482)"
    assert units[1].label == "search_help_center: refund for item damaged on arrival"
    # an object response is flattened to readable JSON, not Python repr
    assert '"delivered_on": "2025-03-03"' in units[0].text
    assert "'delivered_on'" not in units[0].text


def test_fallback_fixture_response_quotes_a_tool_return_verbatim() -> None:
    turn = load_turn(FALLBACK_FIXTURE)
    corpus = build_corpus(turn)
    sentences = split_sentences(turn.response)
    assert 4 <= len(sentences) <= 6

    def quotes_verbatim(sentence: str, source: str) -> bool:
        matcher = difflib.SequenceMatcher(None, sentence, source, autojunk=False)
        block = matcher.find_longest_match(0, len(sentence), 0, len(source))
        return block.size >= DEFAULT_PARAMS.quote_min_chars and (
            block.size / len(sentence) >= DEFAULT_PARAMS.quote_min_fraction
        )

    quoted = [s for s in sentences if any(quotes_verbatim(s, unit.text) for unit in corpus.tool_units())]
    assert quoted, "at least one sentence must quote a tool return verbatim"


# --------------------------------------------------------------------------------------------------
# fixture (d): failures, reused ids, MCP, earlier-turn tool results, attachments
# --------------------------------------------------------------------------------------------------


def test_failures_fixture_keeps_only_successful_non_empty_calls() -> None:
    corpus = build_corpus(load_turn(FAILURES_FIXTURE), SEED)

    assert corpus.path == "primary"
    assert [(u.id, u.tool, u.kind) for u in corpus.tool_units()] == [
        ("s0", "read_file", "artifact_read"),
        ("s1", "species_profile", "user_tool"),
        ("s2", "species_profile", "user_tool"),
        ("s3", "nbn.occurrence_summary", "mcp_tool"),
    ]
    assert_sequential(corpus)


def test_failures_fixture_discloses_every_excluded_call_with_its_reason() -> None:
    corpus = build_corpus(load_turn(FAILURES_FIXTURE), SEED)
    reasons = {e.tool: e.reason for e in corpus.excluded}

    assert [e.tool for e in corpus.excluded] == ["query_warehouse", "summarise_column", "grep", "nbn.record_density"]
    assert "outcome=failed" in reasons["query_warehouse"]
    assert "retry-prompt" in reasons["summarise_column"]
    assert "empty return" in reasons["grep"]
    assert "MCP isError" in reasons["nbn.record_density"]
    labels = {e.tool: e.label for e in corpus.excluded}
    assert labels["grep"] == "grep: surveys/2024"
    assert labels["nbn.record_density"] == "nbn.record_density(taxon=Betula pendula)"
    text = "\n".join(u.text for u in corpus.units)
    for failure_text in ("statement timeout", "HTTP 503", "Field required"):
        assert failure_text not in text, "failure is not evidence"


def test_failures_fixture_reused_id_yields_two_units_with_their_own_text() -> None:
    corpus = build_corpus(load_turn(FAILURES_FIXTURE))
    oak, spruce = (u for u in corpus.tool_units() if u.tool == "species_profile")

    assert header_args(oak) == {"name": "Quercus petraea"}
    assert "sessile oak" in oak.text and "Sitka spruce" not in oak.text
    assert header_args(spruce) == {"name": "Picea sitchensis"}
    assert "Sitka spruce" in spruce.text and "sessile oak" not in spruce.text


def test_failures_fixture_mcp_return_is_flattened_with_the_image_named_not_inlined() -> None:
    turn = load_turn(FAILURES_FIXTURE)
    corpus = build_corpus(turn)
    (mcp,) = (u for u in corpus.tool_units() if u.kind == "mcp_tool")

    assert mcp.text.split("\n") == [
        "312 verified records of Quercus petraea in Cumbria since 2000.",
        "[image (image/png) not inlined]",
    ]
    assert "iVBORw0KGgo" not in mcp.text
    assert '"isError"' not in mcp.text
    assert mcp.label == "nbn.occurrence_summary: Quercus petraea"


def test_failures_fixture_earlier_turn_tool_result_is_a_history_unit() -> None:
    corpus = build_corpus(load_turn(FAILURES_FIXTURE))
    history = corpus.in_layer(Layer.HISTORY)

    assert [u.label for u in history] == [
        "user said · 3 turn(s) ago",
        "tool result · read_file · 2 turn(s) ago",
        "agent replied · 1 turn(s) ago",
    ]
    earlier = history[1]
    assert earlier.tool == "tool"
    assert earlier.kind == "history"
    assert earlier.turns_ago == 2
    assert history_body(earlier).startswith('read_file({"path": "surveys/2023/summary.md"})\n# 2023 survey')
    assert "call header shown above the text" in earlier.evidence.transformations
    # it is history, not this turn's tool layer
    assert all("summary.md" not in u.text for u in corpus.tool_units())


def test_failures_fixture_attachment_is_unscorable_not_a_unit() -> None:
    turn = load_turn(FAILURES_FIXTURE)
    corpus = build_corpus(turn)

    assert turn.attachments == ["survey_2024.xlsx"]
    # the attachment, then the image the MCP tool returned (named in its text, never inlined)
    assert corpus.unscorable == ("survey_2024.xlsx", "image (image/png) returned by tool nbn.occurrence_summary")
    assert all("survey_2024.xlsx" not in u.label for u in corpus.units)
    assert all(not u.evidence.source.endswith("survey_2024.xlsx") for u in corpus.units)


def test_failures_fixture_current_query_is_not_history() -> None:
    turn = load_turn(FAILURES_FIXTURE)
    corpus = build_corpus(turn)
    query = turn.effective_query()

    assert query.startswith("How many plots did the 2024 survey cover")
    assert all(query not in u.text for u in corpus.units)


# --------------------------------------------------------------------------------------------------
# evidence records, on every fixture
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [NDVI_FIXTURE, FALLBACK_FIXTURE, FAILURES_FIXTURE])
def test_evidence_digest_is_sha256_of_the_full_text_and_tokens_are_untruncated(name: str) -> None:
    turn = load_turn(name)
    tokenizer = ApproxTokenizer()
    corpus = build_corpus(turn, tokenizer=tokenizer)
    prior_texts = {str(m.content).strip() for m in turn.request_payload.messages if m.content}

    for unit in corpus.units:
        ev = unit.evidence
        assert re.fullmatch(r"[0-9a-f]{64}", ev.digest)
        if unit.layer is Layer.HISTORY:
            assert ev.source == f"role:{unit.tool}"
            body = history_body(unit)
            full = body.split("\n", 1)[1] if unit.tool == "tool" else body
            assert full in prior_texts
        else:
            full = unit.shown
            expected_source = "system_prompt" if unit.layer is Layer.INSTRUCTIONS else f"tool:{unit.tool}"
            assert ev.source == expected_source
        assert ev.digest == sha256(full)
        assert ev.tokens == tokenizer.count(full)


# --------------------------------------------------------------------------------------------------
# input paths
# --------------------------------------------------------------------------------------------------


def test_primary_path_wins_over_the_flattened_payload() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("q"),
            response(call("read_file", {"path": "a.md"}, "c1")),
            request(ret("c1", "native text", "read_file")),
        ],
        response_payload={"tool_calls": [{"name": "lookup", "arguments": {}, "response": "flat text"}]},
    )
    corpus = build_corpus(turn)

    assert corpus.path == "primary"
    assert [u.tool for u in corpus.tool_units()] == ["read_file"]
    assert all("flat text" not in u.text for u in corpus.units)


def test_fallback_is_used_when_the_native_messages_carry_no_call() -> None:
    turn = make_turn(
        model_messages=[user_prompt("q"), response(text_part("answer"))],
        response_payload={"tool_calls": [{"name": "lookup", "arguments": '{"id": 7}', "response": "flat"}]},
    )
    corpus = build_corpus(turn)

    assert corpus.path == "fallback"
    (unit,) = corpus.tool_units()
    assert unit.shown == 'lookup({"id": 7})\nflat'
    assert unit.label == "lookup(id=7)"


def test_no_calls_anywhere_is_path_none() -> None:
    corpus = build_corpus(history_turn(u("hi"), a("hello"), system_prompt="Be terse."))

    assert corpus.path == "none"
    assert corpus.tool_units() == ()
    assert corpus.layers_present() == (Layer.INSTRUCTIONS, Layer.HISTORY)


def test_fallback_excludes_mcp_errors_and_missing_or_empty_responses() -> None:
    turn = make_turn(
        response_payload={
            "tool_calls": [
                {"name": "ok", "arguments": {"q": "x"}, "response": "fine"},
                {
                    "name": "mcp.broken",
                    "arguments": {},
                    "response": {"content": [{"type": "text", "text": "boom"}], "isError": True},
                },
                {"name": "blank", "arguments": {}, "response": "   \n"},
                {"name": "lost", "arguments": {}, "response": None},
            ]
        }
    )
    corpus = build_corpus(turn, SEED)

    assert corpus.path == "fallback"
    assert [u.tool for u in corpus.tool_units()] == ["ok"]
    reasons = {e.tool: e.reason for e in corpus.excluded}
    assert "MCP isError" in reasons["mcp.broken"]
    assert "empty return" in reasons["blank"]
    assert "no return recorded" in reasons["lost"]


# --------------------------------------------------------------------------------------------------
# the tools layer: exclusion, headers, pairing
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["failed", "denied", "interrupted"])
def test_a_return_whose_outcome_is_not_success_is_excluded(outcome: str) -> None:
    corpus = build_corpus(one_call_turn("lookup", {"q": "x"}, "partial output", outcome=outcome), SEED)

    assert corpus.tool_units() == ()
    (excluded,) = corpus.excluded
    assert excluded.tool == "lookup"
    assert excluded.label == "lookup: x"
    assert f"outcome={outcome}" in excluded.reason


@pytest.mark.parametrize("outcome", [None, "success"])
def test_a_successful_or_unmarked_return_is_kept(outcome: str | None) -> None:
    corpus = build_corpus(one_call_turn("lookup", {"q": "x"}, "result", outcome=outcome))

    assert [u.shown for u in corpus.tool_units()] == ['lookup({"q": "x"})\nresult']
    assert corpus.excluded == ()


def test_retry_prompt_excludes_the_rejected_call_but_not_its_reissue() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("q"),
            response(call("lookup", {"qq": "x"}, "c1")),
            request(retry("c1", "lookup")),
            response(call("lookup", {"q": "x"}, "c2")),
            request(ret("c2", "found it", "lookup")),
        ]
    )
    corpus = build_corpus(turn, SEED)

    (unit,) = corpus.tool_units()
    assert unit.shown == 'lookup({"q": "x"})\nfound it'
    (excluded,) = corpus.excluded
    assert excluded.label == "lookup(qq=x)"
    assert "retry-prompt" in excluded.reason


def test_mcp_is_error_return_is_excluded() -> None:
    content = {"content": [{"type": "text", "text": "rate limited"}], "isError": True}
    corpus = build_corpus(one_call_turn("gh.search_issues", {"q": "bug"}, content), SEED)

    assert corpus.tool_units() == ()
    (excluded,) = corpus.excluded
    assert "MCP isError" in excluded.reason


@pytest.mark.parametrize("content", ["", "   ", "\n\t\n", None])
def test_an_empty_return_is_excluded(content: str | None) -> None:
    corpus = build_corpus(one_call_turn("grep", {"pattern": "x"}, content))

    assert corpus.tool_units() == ()
    (excluded,) = corpus.excluded
    assert excluded.tool == "grep"
    assert "empty return" in excluded.reason


def test_an_unanswered_call_is_excluded_as_having_no_return() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("q"),
            response(call("read_file", {"path": "a.md"}, "c1"), call("ls", {"path": "."}, None)),
            request(ret("c1", "alpha", "read_file")),
        ]
    )
    corpus = build_corpus(turn)

    assert [u.tool for u in corpus.tool_units()] == ["read_file"]
    (excluded,) = corpus.excluded
    assert excluded.tool == "ls"
    assert "no return recorded" in excluded.reason


def test_header_name_json_args_is_the_first_line_of_the_scorable_text() -> None:
    args = {"query": "Ångström units", "filters": {"year": [2023, 2024]}, "limit": 5}
    corpus = build_corpus(one_call_turn("search_docs", args, "line one\nline two"))
    (unit,) = corpus.tool_units()

    assert unit.header == "search_docs(" + json.dumps(args, ensure_ascii=False) + ")"
    assert unit.lines == ["line one", "line two"]
    assert unit.text == "line one\nline two" and unit.shown == unit.header + "\n" + unit.text
    assert "call header name(json(args)) shown above the text" in unit.evidence.transformations


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ('{"path": "notes.md"}', {"path": "notes.md"}),
        ("  ", {}),
        (None, {}),
        ("not json at all", {"input": "not json at all"}),
        ("[1, 2]", {"input": [1, 2]}),
    ],
)
def test_arguments_are_read_as_an_object(args: Any, expected: Json) -> None:
    corpus = build_corpus(one_call_turn("tool_x", args, "out"))
    (unit,) = corpus.tool_units()

    assert header_args(unit) == expected


def test_builtin_tool_calls_are_paired_like_ordinary_ones() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("q"),
            response(call("web_search", {"query": "sahel rainfall"}, "b1", kind="builtin-tool-call")),
            response(ret("b1", "result page", "web_search", kind="builtin-tool-return")),
        ]
    )
    corpus = build_corpus(turn)

    (unit,) = corpus.tool_units()
    assert unit.kind == "web_search"
    assert unit.label == "web_search: sahel rainfall"
    assert unit.shown.endswith("\nresult page") and unit.text == "result page"


def test_only_the_current_turns_calls_are_tool_units() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("earlier question"),
            response(call("read_file", {"path": "old.md"}, "c1")),
            request(ret("c1", "old content", "read_file")),
            response(text_part("earlier answer")),
            user_prompt("current question"),
            response(call("read_file", {"path": "new.md"}, "c2")),
            request(ret("c2", "new content", "read_file")),
            response(text_part("current answer")),
        ]
    )
    corpus = build_corpus(turn)

    (unit,) = corpus.tool_units()
    assert unit.label == "read_file: new.md"


def test_regression_reused_id_overwrote_the_earlier_call() -> None:
    """A reused tool_call_id once replaced the earlier call: one unit, with the second call's header,
    and the first return lost. Each return must pair with its own call."""
    turn = make_turn(
        model_messages=[
            user_prompt("compare the two files"),
            response(call("read_file", {"path": "a.md"}, "call_0")),
            request(ret("call_0", "contents of A", "read_file")),
            response(call("read_file", {"path": "b.md"}, "call_0")),
            request(ret("call_0", "contents of B", "read_file")),
        ]
    )
    corpus = build_corpus(turn)

    assert [u.shown for u in corpus.tool_units()] == [
        'read_file({"path": "a.md"})\ncontents of A',
        'read_file({"path": "b.md"})\ncontents of B',
    ]
    assert [u.label for u in corpus.tool_units()] == ["read_file: a.md", "read_file: b.md"]
    assert corpus.excluded == ()


def test_reused_id_return_pairs_with_the_most_recent_unanswered_call() -> None:
    """The first call was never answered (interrupted); the re-issued call owns the return."""
    turn = make_turn(
        model_messages=[
            user_prompt("q"),
            response(call("fetch_url", {"url": "https://a.example/v1"}, "dup")),
            response(call("fetch_url", {"url": "https://a.example/v2"}, "dup")),
            request(ret("dup", "version two", "fetch_url")),
        ]
    )
    corpus = build_corpus(turn)

    (unit,) = corpus.tool_units()
    assert unit.label == "fetch_url: https://a.example/v2"
    assert unit.shown.endswith("\nversion two") and unit.text == "version two"
    (excluded,) = corpus.excluded
    assert excluded.label == "fetch_url: https://a.example/v1"
    assert "no return recorded" in excluded.reason


def test_reused_id_failure_is_charged_to_the_right_call() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("q"),
            response(call("lookup", {"q": "first"}, "k")),
            request(ret("k", "first answer", "lookup")),
            response(call("lookup", {"q": "second"}, "k")),
            request(ret("k", "boom", "lookup", outcome="failed")),
        ]
    )
    corpus = build_corpus(turn, SEED)

    assert [u.label for u in corpus.tool_units()] == ["lookup: first"]
    assert [e.label for e in corpus.excluded] == ["lookup: second"]
    assert [(u.label, u.text) for u in build_corpus(turn).tool_units()] == [
        ("lookup: first", "first answer"),
        ("lookup: second — failed", "boom"),
    ]


# --------------------------------------------------------------------------------------------------
# ClassifyTool and Label
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("read_file", "artifact_read"),
        ("ls", "artifact_read"),
        ("glob", "artifact_read"),
        ("grep", "artifact_read"),
        ("web_fetch", "web_fetch"),
        ("fetch_url", "web_fetch"),
        ("web_search", "web_search"),
        ("brave_web_search", "web_search"),
        ("github.create_issue", "mcp_tool"),
        ("nbn.occurrence_summary", "mcp_tool"),
        ("lookup_order", "user_tool"),
        ("search_worldview_layers", "user_tool"),
        ("worldview_permalink_tool", "user_tool"),
        ("read_file_summary", "user_tool"),
        ("fs.read_file", "mcp_tool"),
        ("browser.fetch_page", "web_fetch"),
        ("exa.web_search", "web_search"),
    ],
)
def test_classify_tool(name: str, kind: str) -> None:
    assert classify_tool(name) == kind


def test_classify_tool_kind_reaches_the_unit() -> None:
    corpus = build_corpus(one_call_turn("glob", {"pattern": "**/*.csv"}, "a.csv\nb.csv"))
    (unit,) = corpus.tool_units()

    assert unit.kind == "artifact_read"
    assert unit.layer is Layer.TOOLS


def test_label_shows_the_informative_scalar_not_a_json_dump() -> None:
    args = {"layers": [{"id": "MODIS_Combined_L3_IGBP_Land_Cover_Type_Annual"}], "t": "2015-01-01"}
    label = label_for("worldview_permalink_tool", args)

    assert "t=2015-01-01" in label
    assert "MODIS_Combined" not in label
    assert "{" not in label and "[" not in label
    assert label.count("worldview_permalink_tool") == 1
    assert label == "worldview_permalink_tool(t=2015-01-01)"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"q": "oak", "path": "surveys/a.csv"}, "t: surveys/a.csv"),
        ({"query": "oak", "url": "https://x.example/a"}, "t: https://x.example/a"),
        ({"file_path": "b.txt", "url": "https://x.example/b"}, "t: b.txt"),
        ({"limit": 5, "q": "oak"}, "t: oak"),
        ({"path": "", "q": "oak"}, "t: oak"),
        ({"path": ["a", "b"], "region": "Cumbria"}, "t(region=Cumbria)"),
        ({"region": "Cumbria", "year": 2024, "exact": True}, "t(region=Cumbria, year=2024, exact=true)"),
        ({"layers": [{"id": "X"}], "bbox": [1, 2, 3, 4]}, "t(layers, bbox)"),
        ({}, "t()"),
    ],
)
def test_label_preference_order(args: Json, expected: str) -> None:
    assert label_for("t", args) == expected


def test_label_shortens_long_values() -> None:
    label = label_for("read_file", {"path": "d/" * 100 + "x.md"})

    assert label.startswith("read_file: d/d/")
    assert label.endswith("…")
    assert len(label) <= len("read_file: ") + 80


_nested = st.recursive(
    st.integers(min_value=-9, max_value=9),
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, min_size=1, max_size=2)
    ),
    max_leaves=6,
).filter(lambda v: isinstance(v, (list, dict)))


@settings(max_examples=60, deadline=None)
@given(
    nested=st.dictionaries(st.from_regex(r"[a-z]{2,6}", fullmatch=True), _nested, min_size=1, max_size=4),
    scalars=st.dictionaries(
        st.from_regex(r"[a-z]{2,6}", fullmatch=True), st.from_regex(r"[a-z0-9-]{1,12}", fullmatch=True), max_size=2
    ),
)
def test_label_never_dumps_structured_arguments(nested: Json, scalars: Json) -> None:
    args = {**nested, **{k: v for k, v in scalars.items() if k not in nested}}
    label = label_for("tool", args)

    assert label.count("tool") >= 1
    assert "{" not in label and "[" not in label
    for value in nested.values():
        assert json.dumps(value) not in label


# --------------------------------------------------------------------------------------------------
# the instructions layer
# --------------------------------------------------------------------------------------------------

MANY_HEADINGS = "\n\n".join(
    f"# Section {i}\nRule {i}: follow instruction number {i} exactly.\n## Sub {i}\nDetail {i}." for i in range(8)
)


def test_the_seed_keeps_the_instructions_one_indivisible_unit_even_with_many_headings() -> None:
    corpus = build_corpus(history_turn(u("hi"), a("hello"), system_prompt=MANY_HEADINGS), WHOLE)
    (unit,) = corpus.in_layer(Layer.INSTRUCTIONS)

    assert unit.text == MANY_HEADINGS
    assert unit.kind == "instructions"
    assert unit.tool == "system_prompt"
    assert unit.label == INSTRUCTIONS_LABEL
    assert unit.text.count("# Section") == 8
    assert_sequential(corpus)


def test_instructions_follow_the_tools_with_the_next_id() -> None:
    turn = make_turn(
        system_prompt="Answer briefly.",
        model_messages=[
            user_prompt("q"),
            response(call("ls", {"path": "."}, "c1"), call("grep", {}, "c2")),
            request(ret("c1", "a\nb", "ls"), ret("c2", "hit", "grep")),
        ],
    )
    corpus = build_corpus(turn)

    assert [(u.id, u.layer) for u in corpus.units] == [
        ("s0", Layer.TOOLS),
        ("s1", Layer.TOOLS),
        ("s2", Layer.INSTRUCTIONS),
    ]


def test_instructions_are_stored_in_full_with_the_tier_truncations_disclosed() -> None:
    prompt = " ".join(f"w{i}" for i in range(2500))
    corpus = build_corpus(make_turn(system_prompt=prompt, system_prompt_versioned=True), tokenizer=WordTokenizer())
    (unit,) = corpus.in_layer(Layer.INSTRUCTIONS)

    assert unit.text == prompt
    assert unit.evidence.tokens == 2500
    notes = unit.evidence.transformations
    assert any("700 tokens" in n for n in notes)
    assert any("2200 tokens" in n for n in notes)


def test_a_tool_return_is_stored_in_full_with_the_tier_truncations_disclosed() -> None:
    body = " ".join(f"row{i}" for i in range(900))
    corpus = build_corpus(one_call_turn("read_file", {"path": "big.csv"}, body), tokenizer=WordTokenizer())
    (unit,) = corpus.tool_units()

    assert unit.text.endswith(body)
    assert unit.evidence.tokens == WordTokenizer().count(unit.shown)
    assert any("700 tokens" in n for n in unit.evidence.transformations)
    assert not any("2200 tokens" in n for n in unit.evidence.transformations)


@pytest.mark.parametrize("versioned", [False, True])
def test_unversioned_flag_follows_the_snapshot_flag(versioned: bool) -> None:
    corpus = build_corpus(make_turn(system_prompt="Be terse.", system_prompt_versioned=versioned))
    (unit,) = corpus.in_layer(Layer.INSTRUCTIONS)

    assert unit.unversioned is (not versioned)
    assert corpus.unversioned is (not versioned)
    disclosed = any("not a snapshot" in n for n in unit.evidence.transformations)
    assert disclosed is (not versioned)


def test_system_prompt_carried_in_native_messages_is_a_snapshot() -> None:
    turn = make_turn(
        model_messages=[
            request(
                {"part_kind": "system-prompt", "content": "You are a careful analyst."},
                {"part_kind": "user-prompt", "content": "q"},
            ),
            response(text_part("a")),
        ]
    )
    corpus = build_corpus(turn)
    (unit,) = corpus.in_layer(Layer.INSTRUCTIONS)

    assert unit.text == "You are a careful analyst."
    assert unit.unversioned is False


def test_a_blank_system_prompt_adds_no_instructions_layer() -> None:
    corpus = build_corpus(history_turn(u("hi"), a("hello"), system_prompt="  \n\t "))

    assert corpus.in_layer(Layer.INSTRUCTIONS) == ()


def test_system_message_in_the_request_payload_is_the_instructions_layer() -> None:
    """BUG: with no ``system_prompt`` field, the system message the model was sent (carried in the
    stored request payload) is ignored, so the instructions layer silently disappears — whereas a
    system prompt carried in ``model_messages`` is recovered as a snapshot."""
    turn = make_turn(
        request_payload={
            "messages": [
                {"role": "system", "content": "Never certify data for legal use."},
                u("hi"),
                a("hello"),
                u("Can you certify this layer?"),
            ]
        }
    )
    corpus = build_corpus(turn)

    (unit,) = corpus.in_layer(Layer.INSTRUCTIONS)
    assert unit.text == "Never certify data for legal use."


# --------------------------------------------------------------------------------------------------
# the history layer
# --------------------------------------------------------------------------------------------------


def test_history_excludes_the_current_query_and_labels_turns_back_from_the_present() -> None:
    corpus = build_corpus(history_turn(u("first"), a("second"), u("third"), a("fourth"), query="NOW?"))
    history = corpus.in_layer(Layer.HISTORY)

    assert [history_body(h) for h in history] == ["first", "second", "third", "fourth"]
    assert [h.turns_ago for h in history] == [4, 3, 2, 1]
    assert [h.label for h in history] == [
        "user said · 4 turn(s) ago",
        "agent replied · 3 turn(s) ago",
        "user said · 2 turn(s) ago",
        "agent replied · 1 turn(s) ago",
    ]
    assert history[-1].shown == "[agent replied, 1 turn(s) ago]\nfourth" and history[-1].text == "fourth"
    assert all("NOW?" not in h.text for h in corpus.units)


def test_history_skips_blank_messages_and_ignores_system_messages() -> None:
    corpus = build_corpus(
        history_turn(
            {"role": "system", "content": "sys"},
            u("first"),
            a("   "),
            {"role": "assistant", "content": None},
            a("reply"),
        )
    )
    history = corpus.in_layer(Layer.HISTORY)

    assert [history_body(h) for h in history] == ["first", "reply"]
    assert [h.turns_ago for h in history] == [2, 1]


def test_history_only_the_query_gives_no_history_layer() -> None:
    corpus = build_corpus(make_turn(request_payload={"messages": [u("just the question")]}))

    assert corpus.in_layer(Layer.HISTORY) == ()
    assert len(corpus) == 0


def test_history_keeps_the_newest_messages_up_to_the_cap() -> None:
    messages = [u(f"m{i}") if i % 2 == 0 else a(f"m{i}") for i in range(20)]
    corpus = build_corpus(history_turn(*messages))
    history = corpus.in_layer(Layer.HISTORY)

    assert DEFAULT_PARAMS.history_max_messages == 12
    assert [history_body(h) for h in history] == [f"m{i}" for i in range(8, 20)]
    assert [h.turns_ago for h in history] == list(range(12, 0, -1))
    assert_sequential(corpus)


def test_history_cap_counts_earlier_tool_results() -> None:
    turn = history_turn(
        u("oldest"),
        a_calls(("p1", "read_file", {"path": "prev.md"})),
        tool_msg("p1", "previous file text", "read_file"),
        a("earlier answer"),
        u("follow-up"),
        a("latest answer"),
    )
    four = build_corpus(turn, params=DEFAULT_PARAMS.override({"history_max_messages": 4}))
    three = build_corpus(turn, params=DEFAULT_PARAMS.override({"history_max_messages": 3}))
    none = build_corpus(turn, params=DEFAULT_PARAMS.override({"history_max_messages": 0}))

    assert [h.label for h in four.in_layer(Layer.HISTORY)] == [
        "tool result · read_file · 4 turn(s) ago",
        "agent replied · 3 turn(s) ago",
        "user said · 2 turn(s) ago",
        "agent replied · 1 turn(s) ago",
    ]
    assert [h.tool for h in three.in_layer(Layer.HISTORY)] == ["assistant", "user", "assistant"]
    assert none.in_layer(Layer.HISTORY) == ()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=0, max_value=30), cap=st.integers(min_value=0, max_value=15))
def test_history_cap_property(n: int, cap: int) -> None:
    messages = [u(f"msg {i}") if i % 2 == 0 else a(f"msg {i}") for i in range(n)]
    corpus = build_corpus(
        history_turn(*messages, system_prompt="S."), params=DEFAULT_PARAMS.override({"history_max_messages": cap})
    )
    history = corpus.in_layer(Layer.HISTORY)

    kept = min(n, cap)
    assert len(history) == kept
    assert [history_body(h) for h in history] == [f"msg {i}" for i in range(n - kept, n)]
    assert [h.turns_ago for h in history] == list(range(kept, 0, -1))
    assert_sequential(corpus)


def test_history_truncation_is_recorded_and_the_evidence_stays_untruncated() -> None:
    long_text = " ".join(f"word{i}" for i in range(400))
    tokenizer = WordTokenizer()
    corpus = build_corpus(history_turn(u(long_text), a("short reply")), tokenizer=tokenizer)
    long_unit, short_unit = corpus.in_layer(Layer.HISTORY)

    assert DEFAULT_PARAMS.history_tokens_per_message == 300
    assert history_body(long_unit) == " ".join(f"word{i}" for i in range(300))
    assert long_unit.evidence.tokens == 400
    assert long_unit.evidence.digest == sha256(long_text)
    assert any("truncated to 300 tokens" in n for n in long_unit.evidence.transformations)
    assert not any("truncated" in n for n in short_unit.evidence.transformations)


def test_history_truncation_budget_is_a_parameter() -> None:
    text = "one two three four five six seven eight nine ten eleven twelve"
    params = DEFAULT_PARAMS.override({"history_tokens_per_message": 8})
    corpus = build_corpus(history_turn(a(text)), params=params, tokenizer=WordTokenizer())
    (unit,) = corpus.in_layer(Layer.HISTORY)

    assert history_body(unit) == "one two three four five six seven eight"
    assert unit.evidence.tokens == 12
    assert any("truncated to 8 tokens" in n for n in unit.evidence.transformations)


def test_history_truncation_with_the_default_tokenizer() -> None:
    text = "The Sahel greens up in August. " * 200
    tokenizer = ApproxTokenizer()
    corpus = build_corpus(history_turn(a(text)))
    (unit,) = corpus.in_layer(Layer.HISTORY)

    assert tokenizer.count(history_body(unit)) <= 300
    assert unit.evidence.tokens == tokenizer.count(text.strip()) > 300
    assert unit.evidence.digest == sha256(text.strip())


def test_earlier_tool_result_truncation_keeps_the_call_header() -> None:
    long_result = " ".join(f"v{i}" for i in range(50))
    turn = history_turn(a_calls(("p1", "read_file", '{"path": "x.csv"}')), tool_msg("p1", long_result))
    params = DEFAULT_PARAMS.override({"history_tokens_per_message": 10})
    (unit,) = build_corpus(turn, params=params, tokenizer=WordTokenizer()).in_layer(Layer.HISTORY)

    assert history_body(unit) == 'read_file({"path": "x.csv"})\n' + " ".join(f"v{i}" for i in range(10))
    assert unit.evidence.tokens == 50
    assert unit.evidence.digest == sha256(long_result)


def test_earlier_tool_results_are_history_units_native_messages() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("what is in old.md?"),
            response(call("read_file", {"path": "old.md"}, "c1")),
            request(ret("c1", "old content", "read_file")),
            response(text_part("old.md says old content")),
            user_prompt("and now new.md?"),
            response(call("read_file", {"path": "new.md"}, "c2")),
            request(ret("c2", "new content", "read_file")),
            response(text_part("new.md says new content")),
        ]
    )
    corpus = build_corpus(turn)

    assert [u.label for u in corpus.tool_units()] == ["read_file: new.md"]
    assert [h.label for h in corpus.in_layer(Layer.HISTORY)] == [
        "user said · 3 turn(s) ago",
        "tool result · read_file · 2 turn(s) ago",
        "agent replied · 1 turn(s) ago",
    ]
    tool_history = corpus.in_layer(Layer.HISTORY)[1]
    assert history_body(tool_history) == 'read_file({"path": "old.md"})\nold content'
    assert all("and now new.md?" not in u.text for u in corpus.units)
    assert all("new.md says new content" not in u.text for u in corpus.units)


def test_earlier_tool_results_pair_reused_ids_in_order() -> None:
    turn = history_turn(
        a_calls(("call_0", "read_file", {"path": "a.md"})),
        tool_msg("call_0", "text of a"),
        a_calls(("call_0", "read_file", {"path": "b.md"})),
        tool_msg("call_0", "text of b"),
    )
    history = build_corpus(turn).in_layer(Layer.HISTORY)

    assert [history_body(h) for h in history] == [
        'read_file({"path": "a.md"})\ntext of a',
        'read_file({"path": "b.md"})\ntext of b',
    ]
    assert [h.turns_ago for h in history] == [2, 1]


def test_earlier_tool_result_without_its_call_is_named_after_the_message() -> None:
    (unit,) = build_corpus(history_turn(tool_msg("orphan", "data", "lookup"))).in_layer(Layer.HISTORY)

    assert unit.label == "tool result · lookup · 1 turn(s) ago"
    assert history_body(unit) == "lookup\ndata"


def test_under_the_seed_an_earlier_failed_tool_result_is_not_history_native_messages() -> None:
    turn = make_turn(
        model_messages=[
            user_prompt("earlier"),
            response(call("lookup", {"q": "a"}, "c1"), call("mcp.find", {"q": "b"}, "c2")),
            request(
                ret("c1", "timeout", "lookup", outcome="failed"),
                ret("c2", {"content": [{"type": "text", "text": "HTTP 500"}], "isError": True}, "mcp.find"),
            ),
            response(text_part("both tools failed")),
            user_prompt("now"),
        ]
    )
    history = build_corpus(turn, SEED).in_layer(Layer.HISTORY)

    assert [h.tool for h in history] == ["user", "assistant"]


def test_under_the_seed_an_earlier_mcp_error_tool_result_is_not_history_request_payload() -> None:
    """BUG: an earlier turn's MCP ``isError`` result in the request payload becomes a history unit;
    the same result in native messages is excluded (the seed: failure is not evidence)."""
    turn = history_turn(
        u("earlier"),
        a_calls(("c1", "mcp.find", {"q": "b"})),
        tool_msg("c1", {"content": [{"type": "text", "text": "HTTP 500"}], "isError": True}),
        a("the tool failed"),
    )
    history = build_corpus(turn, SEED).in_layer(Layer.HISTORY)

    assert all("HTTP 500" not in h.text for h in history)
    assert [h.tool for h in history] == ["user", "assistant"]


def test_earlier_tool_result_with_text_parts_is_its_text_not_a_json_dump() -> None:
    """BUG: an OpenAI tool message whose content is a list of text parts (allowed by the chat API)
    is dumped as JSON instead of read as its text, as user and assistant messages are."""
    turn = history_turn(
        a_calls(("c1", "lookup", {"q": "oak"})),
        tool_msg("c1", [{"type": "text", "text": "Quercus petraea: sessile oak"}]),
    )
    (unit,) = build_corpus(turn).in_layer(Layer.HISTORY)

    assert history_body(unit) == 'lookup({"q": "oak"})\nQuercus petraea: sessile oak'
    assert '"type"' not in unit.text


def test_history_reads_list_content_of_user_and_assistant_messages() -> None:
    turn = history_turn(
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "two"}]},
        a("ok"),
    )
    history = build_corpus(turn).in_layer(Layer.HISTORY)

    assert [history_body(h) for h in history] == ["part one\ntwo", "ok"]


# --------------------------------------------------------------------------------------------------
# attachments, ids across layers, MCP flattening
# --------------------------------------------------------------------------------------------------


def test_attachments_are_returned_separately_as_unscorable() -> None:
    corpus = build_corpus(history_turn(u("see attached"), a("ok"), attachments=["a.pdf", "b.xlsx"]))

    assert corpus.unscorable == ("a.pdf", "b.xlsx")
    assert len(corpus) == 2
    assert all(u.layer is Layer.HISTORY for u in corpus.units)


def test_ids_are_globally_sequential_across_all_three_layers() -> None:
    turn = make_turn(
        system_prompt="Rules.",
        model_messages=[
            user_prompt("q"),
            response(
                call("read_file", {"path": "a"}, "c1"),
                call("lookup", {"q": "x"}, "c2"),
                call("web_fetch", {"url": "https://e.example"}, "c3"),
            ),
            request(ret("c1", "A", "read_file"), ret("c2", "", "lookup"), ret("c3", "page", "web_fetch")),
        ],
        request_payload={"messages": [u("before"), a("reply"), u("q")]},
    )
    corpus = build_corpus(turn)

    assert [(u.id, u.ordinal, u.layer, u.tool) for u in corpus.units] == [
        ("s0", 0, Layer.TOOLS, "read_file"),
        ("s1", 1, Layer.TOOLS, "web_fetch"),
        ("s2", 2, Layer.INSTRUCTIONS, "system_prompt"),
        ("s3", 3, Layer.HISTORY, "user"),
        ("s4", 4, Layer.HISTORY, "assistant"),
    ]
    assert [e.tool for e in corpus.excluded] == ["lookup"]


def test_mcp_blocks_are_flattened_and_binary_is_named_not_inlined() -> None:
    result = {
        "content": [
            {"type": "text", "text": "first"},
            {"type": "image", "data": "QUJDREVGRw==", "mimeType": "image/jpeg"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "resource text"}},
            {
                "type": "resource",
                "resource": {"uri": "file:///b.bin", "blob": "AAEC", "mimeType": "application/octet-stream"},
            },
            {"type": "resource_link", "uri": "file:///c.md", "name": "c"},
        ],
        "isError": False,
    }
    flat = flatten(result)

    assert flat.split("\n") == [
        "first",
        "[image (image/jpeg) not inlined]",
        "[audio (audio/wav) not inlined]",
        "resource text",
        "[resource file:///b.bin (application/octet-stream) not inlined]",
        "[resource link file:///c.md]",
    ]
    for blob in ("QUJDREVGRw==", "UklGRg==", "AAEC"):
        assert blob not in flat


def test_non_mcp_objects_flatten_to_json() -> None:
    assert flatten({"a": 1, "b": ["x"]}) == json.dumps({"a": 1, "b": ["x"]}, indent=2)
    assert flatten("plain") == "plain"
    assert flatten(None) == ""


def test_corpus_of_an_inline_turn_has_consistent_evidence() -> None:
    turn = make_turn(
        system_prompt="Rules.",
        model_messages=[
            user_prompt("q"),
            response(call("read_file", {"path": "a"}, "c1")),
            request(ret("c1", "alpha beta", "read_file")),
        ],
        request_payload={"messages": [u("  padded message  "), u("q")]},
    )
    tokenizer = WordTokenizer()
    corpus = build_corpus(turn, tokenizer=tokenizer)
    tool, instr, hist = corpus.units

    assert tool.evidence.digest == sha256(tool.shown)
    assert tool.evidence.tokens == tokenizer.count(tool.shown)
    assert instr.evidence.digest == sha256("Rules.")
    assert hist.evidence.digest == sha256("padded message")
    assert hist.evidence.tokens == 2
