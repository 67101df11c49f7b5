"""The streamable-HTTP relay in process, against a scripted server on a loopback socket: bytes go through as they
come (an event reaches the agent before the server has sent the next), only ``Host`` is the server's, and the
copies read off the side pair each response with its request whatever the chunking."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from collections.abc import Sequence

import pytest

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.gateway.http_proxy import HttpGateway, run_http
from provenance_api.gateway.http_wire import Body, Head, SseSplitter, parse_head
from provenance_api.gateway.observe import Identity, Observer
from provenance_api.gateway.recorder import Recorder

ME = Identity(tenant="t1", principal="ops@host", server="files", transport="http")
CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "a"}}}
).encode()


def _event(message_id: int, text: str) -> bytes:
    data = json.dumps({"jsonrpc": "2.0", "id": message_id, "result": {"content": [{"type": "text", "text": text}]}})
    event = f"event: message\r\ndata: {data}\r\n\r\n".encode()
    return f"{len(event):x}\r\n".encode() + event + b"\r\n"


def test_a_chunked_body_is_read_whole_from_any_split_and_the_next_message_is_left() -> None:
    wire = b"4\r\nWiki\r\n6;ext=1\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT"
    for step in (1, 2, 3, 7, len(wire)):
        body, payload, rest = Body("chunked"), b"", b""
        for at in range(0, len(wire), step):
            piece = wire[at : at + step]
            taken, data = body.feed(piece)
            payload += data
            rest += piece[taken:]
        assert body.done and payload == b"Wikipedia in \r\n\r\nchunks." and rest == b"NEXT", step


def test_an_event_split_between_cr_and_lf_stays_one_event() -> None:
    events = SseSplitter()
    assert events.feed(b"data: x\r") == []
    assert events.feed(b"\ndata: y\r\n\r") == []
    assert events.feed(b"\n") == [b"x\ny"]


def test_only_host_is_changed_in_a_request_head() -> None:
    head = parse_head(b"POST /mcp?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9\r\nmcp-session-id: s1\r\nContent-Length: 3\r\n\r\n")
    assert head.encode(b"mcp.example:8443") == (
        b"POST /mcp?x=1 HTTP/1.1\r\nHost: mcp.example:8443\r\nmcp-session-id: s1\r\nContent-Length: 3\r\n\r\n"
    )
    assert Head(b"GET / HTTP/1.0", ()).encode(b"h") == b"GET / HTTP/1.0\r\nHost: h\r\n\r\n"


def test_an_event_reaches_the_agent_before_the_server_sends_the_next_and_the_result_is_recorded() -> None:
    stored: list[EvidenceRecord] = []

    async def store(records: Sequence[EvidenceRecord]) -> None:
        stored.extend(records)

    async def main() -> tuple[bytes, bytes, bytes]:
        seen_by_server = bytearray()
        first_arrived = asyncio.Event()

        async def server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            seen_by_server.extend(head + await reader.readexactly(len(CALL)))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            writer.write(_event(1, "a notification-like event with no pending call"))
            writer.write(_event(7, "line one"))
            await writer.drain()
            await first_arrived.wait()  # the agent has the first answer before the rest is even sent
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            writer.close()

        upstream = await asyncio.start_server(server, "127.0.0.1", 0)
        port = upstream.sockets[0].getsockname()[1]
        recorder = Recorder(Observer(ME), store, err=io.StringIO(), batch_seconds=0)
        recorder.start()
        gateway = HttpGateway(f"http://127.0.0.1:{port}/mcp", recorder)
        listening = await asyncio.get_running_loop().create_server(gateway.protocol, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", listening.sockets[0].getsockname()[1])
        request = b"POST /mcp HTTP/1.1\r\nHost: gateway:1\r\ncontent-length: %d\r\n\r\n" % len(CALL) + CALL
        for at in range(0, len(request), 50):  # the head and body in pieces
            writer.write(request[at : at + 50])
            await writer.drain()
        received = bytearray()

        async def until_first_answer() -> None:
            while b"line one" not in received:
                received.extend(await reader.read(65536))

        await asyncio.wait_for(until_first_answer(), 60)  # a relay that held the body back would never get here
        first_arrived.set()
        before_end = bytes(received)
        while not received.endswith(b"0\r\n\r\n"):
            received += await reader.read(65536)
        writer.close()
        listening.close()
        upstream.close()
        await recorder.stop()
        return bytes(seen_by_server), before_end, bytes(received)

    seen, before_end, received = asyncio.run(main())
    assert seen.startswith(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:") and seen.endswith(CALL)
    assert b"gateway:1" not in seen
    assert before_end.endswith(_event(7, "line one"))  # what had come when the server was still sending
    assert received.endswith(_event(7, "line one") + b"0\r\n\r\n")  # the server's bytes, chunk sizes and all
    assert [(r.tool, r.request_id, r.digest) for r in stored] == [
        ("read", "7", hashlib.sha256(b"line one").hexdigest())
    ]


def test_an_upstream_that_is_not_an_http_url_is_refused_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder(Observer(ME), None, err=io.StringIO())
    assert asyncio.run(run_http("ftp://files.example/mcp", "127.0.0.1", 0, recorder)) == 2
    assert "provenance gateway: cannot relay: not an http(s) URL: ftp://files.example/mcp" in capsys.readouterr().err


def test_a_server_that_closes_without_answering_closes_the_agents_connection_and_one_not_there_gets_a_502() -> None:
    async def exchange(port: int) -> bytes:
        recorder = Recorder(Observer(ME), None, err=io.StringIO())
        gateway = HttpGateway(f"http://127.0.0.1:{port}/mcp", recorder)
        listening = await asyncio.get_running_loop().create_server(gateway.protocol, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", listening.sockets[0].getsockname()[1])
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: g\r\ncontent-length: %d\r\n\r\n" % len(CALL) + CALL)
        answer = await asyncio.wait_for(reader.read(), 60)  # to the end of the connection
        writer.close()
        listening.close()
        return answer

    async def main() -> tuple[bytes, bytes]:
        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.close()

        upstream = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        closed = await exchange(upstream.sockets[0].getsockname()[1])
        port = upstream.sockets[0].getsockname()[1]
        upstream.close()
        await upstream.wait_closed()
        return closed, await exchange(port)

    closed, refused = asyncio.run(main())
    assert closed == b""  # as the agent would have had it directly: the connection ends, no answer
    assert refused.startswith(b"HTTP/1.1 502 Bad Gateway\r\n")
    assert refused.endswith(b"the MCP server did not answer the gateway: ConnectionRefusedError\n")
