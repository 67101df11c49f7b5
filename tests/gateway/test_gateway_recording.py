"""What the gateway makes of the messages it forwards, in process: pairing ``tools/call`` requests with their
responses, the digests, the stream splitters, and a store that fails (counted, reported, written as a gap once it
takes writes again) — with a plain function as the store."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from provenance_api.core.evidence import EvidenceRecord, result_digest
from provenance_api.gateway.http_wire import SseSplitter
from provenance_api.gateway.observe import Identity, Observer
from provenance_api.gateway.recorder import Recorder, read_gaps_file
from provenance_api.gateway.stdio_proxy import LineSplitter

ME = Identity(tenant="t1", principal="ops@host", server="files", transport="stdio")
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _call(rid: object, tool: str, args: object) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": args}}
    ).encode()


def _answer(rid: object, result: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def test_a_result_is_recorded_with_the_gateways_identity_and_its_digests() -> None:
    observer = Observer(ME)
    assert observer.request(_call(7, "read", {"path": "a.txt", "lines": [1, 2]})) == 1
    result = {"content": [{"type": "text", "text": "line one"}, {"type": "text", "text": "line two"}], "isError": False}
    [record] = observer.response(_answer(7, result), NOW)
    assert (record.tool, record.server, record.principal, record.tenant, record.request_id) == (
        "read",
        "files",
        "ops@host",
        "t1",
        "7",
    )
    assert record.digest == hashlib.sha256(b"line one\nline two").hexdigest()
    assert record.arguments_digest == hashlib.sha256(b'{"lines":[1,2],"path":"a.txt"}').hexdigest()
    assert record.observed_at == NOW and not record.is_error
    assert observer.pending == {}


def test_only_answers_to_tool_calls_are_recorded_and_ids_are_kept_apart_by_type_and_connection() -> None:
    observer = Observer(ME)
    observer.request(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    observer.request(_call("1", "read", {}), connection="a")
    observer.request(_call(1, "write", {}), connection="a")
    ok = {"content": [{"type": "text", "text": "x"}]}
    assert observer.response(_answer(1, ok), NOW) == []  # another connection's id 1
    assert observer.response(b"not json at all", NOW, connection="a") == []
    err = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}'
    assert observer.response(err, NOW, connection="a") == []  # refused: no tool result reached the agent
    [record] = observer.response(_answer("1", ok), NOW, connection="a")
    assert record.tool == "read" and record.request_id == '"1"'


def test_a_batch_and_an_error_result_are_read_and_media_are_named_not_inlined() -> None:
    observer = Observer(ME)
    observer.request(b"[" + _call(1, "shot", {}) + b"," + _call(2, "fail", {}) + b"]")
    image = {"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}
    failed = {"content": [{"type": "text", "text": "no such file"}], "isError": True}
    records = observer.response(b"[" + _answer(1, image) + b"," + _answer(2, failed) + b"]", NOW)
    assert [(r.tool, r.is_error) for r in records] == [("shot", False), ("fail", True)]
    assert records[0].digest == hashlib.sha256(b"[image (image/png) not inlined]").hexdigest()


def test_structured_content_alone_digests_as_its_json() -> None:
    result = {"content": [], "structuredContent": {"b": 1, "a": "é"}}
    assert result_digest(result) == hashlib.sha256('{\n  "b": 1,\n  "a": "é"\n}'.encode()).hexdigest()


def test_the_splitters_cut_whole_lines_and_whole_events_out_of_any_chunking() -> None:
    lines = LineSplitter()
    assert lines.feed(b'{"a":') == []
    assert lines.feed(b'1}\n\n{"b"') == [b'{"a":1}']
    assert lines.feed(b":2}\n") == [b'{"b":2}']
    events = SseSplitter()
    assert events.feed(b'event: message\r\ndata: {"x"') == []
    assert events.feed(b":1}\r\n\r\nid: 4\ndata: one\ndata: two\n\n") == [b'{"x":1}', b"one\ntwo"]


def _copies(recorder: Recorder, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        recorder.offer("request", _call(i, "read", {"i": i}))
        recorder.offer("response", _answer(i, {"content": [{"type": "text", "text": f"r{i}"}]}))


def test_a_failing_store_never_raises_into_the_relay_and_its_gap_is_recorded_once_it_recovers(tmp_path: Path) -> None:
    stored: list[EvidenceRecord] = []
    failing = True

    async def store(records: Sequence[EvidenceRecord]) -> None:
        if failing:
            raise OSError(28, "No space left on device")
        stored.extend(records)

    async def run() -> Recorder:
        nonlocal failing
        err = io.StringIO()
        recorder = Recorder(Observer(ME), store, gaps_file=tmp_path / "gaps.jsonl", err=err, retry_seconds=0.0)
        recorder.start()
        _copies(recorder, 3)
        while recorder.missed < 3:
            await asyncio.sleep(0.01)
        failing = False
        _copies(recorder, 2, start=3)
        await recorder.stop()
        said = err.getvalue()
        assert "results not recorded (forwarding goes on): OSError: [Errno 28] No space left on device" in said
        assert "provenance gateway: 3 results not recorded: OSError" in said
        return recorder

    recorder = asyncio.run(run())
    assert (recorder.recorded, recorder.missed) == (2, 3)
    assert [r.kind for r in stored] == ["result", "result", "gap"]
    assert [r.request_id for r in stored[:2]] == ["3", "4"]
    assert (stored[2].missed, stored[2].server) == (3, "files") and "No space left" in stored[2].cause
    assert not (tmp_path / "gaps.jsonl").exists()  # the store took the gap


def test_a_store_that_never_recovers_leaves_the_gap_in_the_data_directory(tmp_path: Path) -> None:
    async def store(records: Sequence[EvidenceRecord]) -> None:
        raise PermissionError(13, "read-only file system")

    async def run() -> None:
        recorder = Recorder(Observer(ME), store, gaps_file=tmp_path / "gaps.jsonl", err=io.StringIO())
        recorder.start()
        _copies(recorder, 4)
        await recorder.stop()

    asyncio.run(run())
    [gap] = read_gaps_file(tmp_path / "gaps.jsonl", "t1")
    assert (gap.kind, gap.missed, gap.tenant) == ("gap", 4, "t1") and "read-only" in gap.cause
    assert read_gaps_file(tmp_path / "gaps.jsonl", "another-tenant") == []


def test_an_answer_that_arrives_while_its_request_waits_in_a_batch_is_still_recorded() -> None:
    """The relay skips copying a server message only when no call can await it: a request copy already taken into
    the batch being gathered, not yet parsed, still counts."""
    stored: list[EvidenceRecord] = []

    async def store(records: Sequence[EvidenceRecord]) -> None:
        stored.extend(records)

    async def run() -> None:
        recorder = Recorder(Observer(ME), store, err=io.StringIO(), batch_seconds=0.5)
        recorder.start()
        recorder.offer("request", _call(2, "read", {}))
        await asyncio.sleep(0.05)  # the task has taken the request and is gathering its batch
        recorder.offer("response", _answer(2, {"content": [{"type": "text", "text": "first"}]}))
        await recorder.stop()

    asyncio.run(run())
    assert [(r.request_id, r.tool) for r in stored] == [("2", "read")]
