"""Importers on history other projects wrote (``tests/data/real``, see its SOURCES.md).

Each expected summary below was written by reading the original file — its queries, the tools called
for each reply and what they returned, the instructions, and how many earlier messages of each role the
turn's history holds — not by running the importer. History counts follow the documented mapping: a
system message is instructions, not history; a call made by the provider's server (web search, MCP,
code interpreter) is one assistant message plus one tool message for its result.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from provenance_api.importers import detect_format, import_conversation

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


@dataclass(frozen=True)
class Turn:
    query: str
    response_starts: str
    tools: list[str] = field(default_factory=list)
    returns: dict[str, str] = field(default_factory=dict)  # tool → a text its return must contain
    instructions: list[str] = field(default_factory=list)  # texts the instructions layer must contain
    history: dict[str, int] = field(default_factory=lambda: {"user": 1})
    attachments: int = 0


EXPECTED: dict[str, list[Turn]] = {
    "openai_chat/instructions_with_tool_calls.json": [
        Turn(
            "What is the temperature in Tokyo?",
            "The temperature in Tokyo is currently 20.0 degrees Celsius.",
            ["get_temperature"],
            {"get_temperature": "20.0"},
            ["You are a helpful assistant."],
        ),
    ],
    "openai_chat/image_url_tool_response.json": [  # the "This is file bd38f5:" image message is the tool's
        Turn(
            "What food is in the image you can get from the get_image tool?",
            "The image shows a potato.",
            ["get_image"],
            {"get_image": "See file bd38f5"},
        ),
    ],
    "openai_chat/document_input_with_tool.json": [
        Turn(
            "What is the main content on this document? Use the get_upper_case tool to get the upper case of the text.",
            'The main content of the document is "DUMMY PDF FILE" in uppercase.',
            ["get_upper_case"],
            {"get_upper_case": "DUMMY PDF FILE"},
            attachments=1,
        ),
    ],
    "anthropic/parallel_tool_calls.json": [
        Turn(
            "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?",
            "Based on the retrieved information, we can see the family relationships",
            ["retrieve_entity_info"] * 4,
            {"retrieve_entity_info": "daisy is bob's daughter"},
            ["Use the `retrieve_entity_info` tool to get information about a specific person."],
        ),
    ],
    "anthropic/tool_with_thinking.json": [  # the thinking block is not context; the text beside the call is
        Turn(
            "What is the largest city in the user country?",  # no reply (its call is not answered yet)
            "Based on the information that you're from Mexico, the largest city",
            ["get_user_country"],
            {"get_user_country": "Mexico"},
        ),
    ],
    "anthropic/web_search_tool.json": [
        Turn(
            "What is the weather in San Francisco today?",
            "Based on the search results, here's the weather information for San Francisco today",
            ["web_search"],
            {"web_search": "San Francisco"},
        ),
        Turn(
            "how about Mexico City?",
            "Based on the search results, here's the weather information for Mexico City today",
            ["web_search"],
            {"web_search": "Mexico"},
            history={"user": 2, "assistant": 1, "tool": 1},
        ),
    ],
    "openai_responses/thinking_with_tool_calls.json": [
        Turn(
            'Compose a 12-line poem where the first letters of the odd-numbered lines form the name "SAMIRA"',
            "Softly old fountains illumine alleys",
            ["update_plan"],
            {"update_plan": "plan updated"},
            ["You are a helpful assistant that uses planning."],
        ),
    ],
    "openai_responses/mcp_server_tool.json": [  # the MCP call's output is null: kept, as the return null
        Turn(
            "Can you tell me more about the pydantic/pydantic-ai repo? Keep your answer short",
            "Pydantic AI is a Python agent framework",
            ["deepwiki.ask_question"],
            {"deepwiki.ask_question": "null"},
            ["You are a helpful assistant."],
        ),
        Turn(
            "What packages does the repo contain?",
            "The monorepo is organized into these main packages",
            [],
            {},
            ["You are a helpful assistant."],
            {"user": 2, "assistant": 1, "tool": 1},
        ),
    ],
    "openai_responses/web_search_tool.json": [  # web_search_call items carry the query, not the results
        Turn(
            "What is the weather in San Francisco today?",
            "Today (Tuesday, September 16, 2025) in San Francisco",
            ["web_search"],
            {},
            ["You are a helpful assistant."],
        ),
        Turn(
            "how about Mexico City?",
            "Today (Tuesday, September 16, 2025) in Mexico City",
            ["web_search"],
            {},
            ["You are a helpful assistant."],
            {"user": 2, "assistant": 1, "tool": 1},
        ),
    ],
    "langchain/langgraph_interrupted.json": [  # stopped for approval on its delete_file call: no reply yet, so
        Turn("Delete the file report.pdf", "", ["delete_file"]),  # an unfinished turn: the call, no answer
    ],
    "langchain/langgraph_resumed.json": [
        Turn(
            "Delete the file report.pdf",
            'The file "report.pdf" has been queued for deletion.',
            ["delete_file"],
            {"delete_file": 'File "report.pdf" has been deleted successfully'},
        ),
    ],
    "langchain/react_agent_parallel_tools.json": [
        Turn(
            "What's the weather in Tokyo and what time is it there?",
            "Here’s the latest for Tokyo:",
            ["get_weather", "get_datetime"],
            {
                "get_weather": "Weather in Tokyo: 20°C, Clear skies",
                "get_datetime": "Wednesday, December 17, 2025 at 04:00:28 AM",
            },
        ),
    ],
    "otel/tool_call_span_2.json": [
        Turn(
            "Weather in Paris?",
            "The weather in Paris is currently rainy with a temperature of 57°F.",
            ["get_weather"],
            {"get_weather": "rainy, 57°F"},
        ),
    ],
    "otel/system_instructions.json": [  # both the instructions attribute and the system message
        Turn(
            "Tell me a joke about OpenTelemetry",
            "I'm sorry, but I can't assist with that",
            [],
            {},
            ["You must never tell jokes", "You are a helpful bot"],
        ),
    ],
    "otel/built_in_tools.json": [
        Turn(
            "Write Python code that generates a random number, executes it, and returns the result.",
            "The generated random number is **89**",
            ["code_interpreter"],
            {"code_interpreter": "(10, 20)"},
            ["You are a helpful bot"],
        ),
    ],
    "otel/older_events_tools.json": [  # two spans; the second saw the whole conversation
        Turn(
            "What's the weather in Paris?",
            "The weather in Paris is rainy and overcast, with temperatures around 57°F",
            ["get_weather"],
            {"get_weather": "rainy, 57°F"},
        ),
    ],
    "otel/reasoning.json": [  # the reasoning part is not the reply
        Turn(
            "Tell me a joke about OpenTelemetry",
            " Why did the developer bring OpenTelemetry to the party? Because it always knows how to trace the fun!",
            [],
            {},
            ["You are a helpful bot"],
        ),
    ],
    "pydantic_ai/dice_game.json": [  # both calls carry the id pyd_ai_tool_call_id, one after the other
        Turn(
            "My guess is 4",
            "Congratulations Anne, you guessed correctly! You're a winner!",
            ["roll_dice", "get_player_name"],
            {"roll_dice": "4", "get_player_name": "Anne"},
            [
                "You're a dice game, you should roll the die and see if the number you get back matches the "
                "user's guess. If so, tell them they're a winner. Use the player's name in the response."
            ],
        ),
    ],
    "pydantic_ai/joke_follow_up_other_model.json": [  # second run given the first's messages as history
        Turn(
            "Tell me a joke.",
            "Did you hear about the toothpaste scandal? They called it Colgate.",
            [],
            {},
            ["Be a helpful assistant."],
        ),
        Turn(
            "Explain?",
            "This is an excellent joke invented by Samuel Colvin, it needs no explanation.",
            [],
            {},
            ["Be a helpful assistant."],
            {"user": 2, "assistant": 1},
        ),
    ],
    "pydantic_ai/tool_approval_denied.json": [  # run 1 ends on three calls awaiting approval; run 2 sends
        # their returns (delete_file's denied: a failure, in the history marked is_error) with a new prompt
        Turn(
            "Now create a backup of README.md",
            "Here's what I've done:\n- Attempted to delete __init__.py",
            ["update_file"],
            {"update_file": "File 'README.md.bak' updated: 'Hello, world!'"},
            [],
            {"user": 2, "assistant": 1, "tool": 3},
        ),
    ],
    "pydantic_ai/external_tool_result.json": [  # the deferred call's result (the integer 42) sent in run 2
        Turn(
            "Calculate the answer to the ultimate question of life, the universe, and everything",
            "The answer to the ultimate question of life, the universe, and everything is 42.",
            ["calculate_answer"],
            {"calculate_answer": "42"},
        ),
    ],
    "pydantic_ai/tool_retries_exhausted.json": [  # calc_volume retried once, then the run gave up: no reply, so
        # an unfinished turn; the first call (answered by a retry prompt) is a failure, not a flat call
        Turn("Please get me the volume of a box with size 6.", "", ["calc_volume"]),
    ],
}


NOTED: dict[str, str] = {}  # a sample whose conversation gives no turn: none (one ending in calls is unfinished)


def test_every_sample_has_an_expected_summary_and_a_source_line() -> None:
    files = {p.relative_to(REAL).as_posix() for p in REAL.glob("*/*.json")}
    assert files == set(EXPECTED)
    sources = (REAL / "SOURCES.md").read_text(encoding="utf-8")
    assert all(f"| {name} |" in sources for name in files)
    formats = Counter(name.split("/")[0] for name in files)
    assert all(n >= 3 for n in formats.values()), formats


def history_roles(turn: StoredTurn) -> dict[str, int]:
    return dict(Counter(m.role for m in turn.request_payload.messages))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_sample_imports_as_read(name: str) -> None:
    data = json.loads((REAL / name).read_text(encoding="utf-8"))
    assert detect_format(data) == name.split("/")[0]
    result = import_conversation(data, conversation_id="real")
    assert result.errors == []
    expected = EXPECTED[name]
    assert len(result.turns) == len(expected)
    assert [n.reason for n in result.notes if NOTED.get(name, "\0") in n.reason] == [n.reason for n in result.notes]
    assert len(result.notes) == (1 if name in NOTED else 0)
    for turn, want in zip(result.turns, expected, strict=True):
        assert turn.query is not None and turn.query.startswith(want.query)
        assert turn.response.startswith(want.response_starts)
        calls = turn.response_payload.tool_calls
        assert [c.name for c in calls] == want.tools
        for tool, text in want.returns.items():
            assert any(c.name == tool and c.response is not None and text in str(c.response) for c in calls), tool
        for text in want.instructions:
            assert turn.system_prompt is not None and text in turn.system_prompt
        if not want.instructions:
            assert turn.system_prompt is None
        assert history_roles(turn) == want.history
        assert len(turn.attachments) == want.attachments
        corpus = build_corpus(turn)
        for tool, text in want.returns.items():  # every kept return is a visible source
            assert any(u.tool == tool and text in u.text for u in corpus.units), tool


def test_pydantic_ai_turns_keep_the_model_of_each_reply() -> None:
    """The follow-up run of the joke sample was answered by another model (each response's model_name)."""
    data = json.loads((REAL / "pydantic_ai/joke_follow_up_other_model.json").read_text(encoding="utf-8"))
    result = import_conversation(data, conversation_id="real")
    assert [t.model for t in result.turns] == ["gpt-5.2", "gemini-3-pro-preview"]
