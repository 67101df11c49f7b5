"""The stdio gateway: the agent launches ``provenance gateway --stdio --name NAME -- CMD ARG…`` as if it were the
MCP server; the gateway starts the real server and relays bytes both ways, unchanged.

The relay copies each chunk read from one side to the other as it arrives — never re-serialised, never held back
for a whole line — and only then hands a copy to the recorder, which splits lines and parses them on its own
time. The server's stderr is the gateway's (inherited). When the agent closes the gateway's stdin the server's
stdin is closed; when the server exits, its output is flushed to the agent and the gateway exits with the
server's status, so an agent sees a server that dies mid-call exactly as it would without the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import BinaryIO, Protocol

from provenance_api.gateway.recorder import Recorder

__all__ = ["LineSplitter", "run_stdio"]

CHUNK = 1 << 16
MAX_LINE = 64 << 20
"""A line longer than this is not looked at (it is still forwarded whole): no result recorded for it."""


class LineSplitter:
    """Whole lines out of a byte stream's chunks, for the recorder's copies (the relay forwards the chunks)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.overlong = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buffer += chunk
        if b"\n" not in chunk:
            if len(self._buffer) > MAX_LINE:
                self._buffer.clear()
                self.overlong += 1
            return []
        *lines, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        return [line for line in lines if line.strip()]


class _Source(Protocol):
    async def read(self, n: int) -> bytes: ...


class _Sink(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class _FileSource:
    """A regular file as the agent's side (no pipe to watch): read in a thread."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    async def read(self, n: int) -> bytes:
        return await asyncio.to_thread(self.stream.read1, n)  # type: ignore[attr-defined]


class _FileSink:
    """A regular file as the agent's side: written at once (a file never blocks for long)."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        self.stream.write(data)

    async def drain(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


async def _stdin_reader() -> _Source:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    except ValueError:  # not a pipe, socket or character device
        return _FileSource(sys.stdin.buffer)
    return reader


async def _stdout_writer() -> _Sink:
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    except ValueError:
        return _FileSink(sys.stdout.buffer)
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _agent_to_server(agent: _Source, server: asyncio.StreamWriter, recorder: Recorder) -> None:
    lines = LineSplitter()
    try:
        while chunk := await agent.read(CHUNK):
            server.write(chunk)
            await server.drain()
            for line in lines.feed(chunk):
                recorder.offer("request", line)
    except (ConnectionError, BrokenPipeError):
        pass  # the server is gone; its exit ends the gateway
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            server.close()


async def _server_to_agent(server: asyncio.StreamReader, agent: _Sink, recorder: Recorder) -> None:
    lines = LineSplitter()
    try:
        while chunk := await server.read(CHUNK):
            agent.write(chunk)
            await agent.drain()
            for line in lines.feed(chunk):
                recorder.offer("response", line)
    except (ConnectionError, BrokenPipeError):
        pass  # the agent is gone


async def run_stdio(command: Sequence[str], recorder: Recorder) -> int:
    """Relay between this process's stdin/stdout and ``command``'s until the server exits; its exit status."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None
        )
    except OSError as exc:
        sys.stderr.write(f"provenance gateway: cannot start the server {command[0]!r}: {exc.strerror or exc}\n")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    assert proc.stdin is not None and proc.stdout is not None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):  # the agent stopping the gateway stops the server
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, _forward_signal, proc, signum)
    recorder.start()
    agent_out = await _stdout_writer()
    upstream = asyncio.create_task(_agent_to_server(await _stdin_reader(), proc.stdin, recorder))
    await _server_to_agent(proc.stdout, agent_out, recorder)
    code = await proc.wait()
    upstream.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await upstream
    with contextlib.suppress(OSError, RuntimeError):
        agent_out.close()
    await recorder.stop()
    return code if code >= 0 else 128 - code


def _forward_signal(proc: asyncio.subprocess.Process, signum: int) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)
