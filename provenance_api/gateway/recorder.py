"""Recording behind the relay: the forwarded messages' copies are parsed and written here, never in the relay's path.

The relay hands each copy over with ``offer`` (no await, no parsing) after it has forwarded the message. One task
parses the copies in order (``Observer``) and appends the records in batches (``storage.evidence_records``). A
store that cannot take them — full, read-only, missing, locked — never stops or slows forwarding: the results are
counted as not recorded with the cause, said on stderr once per cause, and written as a gap record as soon as the
store takes writes again. A gap still open when the gateway stops is appended to ``evidence-gaps.jsonl`` in the
data directory (when even that fails, stderr is the only report), and ``provenance evidence list`` reports both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TextIO

from provenance_api.core.evidence import EvidenceRecord
from provenance_api.gateway.observe import Observer

__all__ = ["GAPS_FILE", "Recorder", "Store", "cause_of", "read_gaps_file"]

GAPS_FILE = "evidence-gaps.jsonl"
MAX_QUEUE = 100_000
"""Copies waiting to be parsed; past it a copy is dropped and its result (if any) counted as not recorded."""
MAX_BATCH = 256
BATCH_SECONDS = 0.2
STOP = "\0stop"
RETRY_SECONDS = 2.0

Store = Callable[[Sequence[EvidenceRecord]], Awaitable[None]]
"""Appends records (all or none); raises when the store cannot take them."""


def cause_of(exc: BaseException) -> str:
    """A short cause for a store failure: storage's own cause and detail, else the error's type and first line."""
    cause = getattr(exc, "cause", None)
    detail = getattr(exc, "detail", None)
    if isinstance(cause, str) and isinstance(detail, str):
        return f"{cause}: {detail}"
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@dataclass
class _Copy:
    direction: Literal["request", "response"]
    payload: bytes
    connection: str
    observed_at: datetime


@dataclass
class Recorder:
    """Parses forwarded copies and records the results; counts what it could not record."""

    observer: Observer
    store: Store | None
    gaps_file: Path | None = None
    prepare: Callable[[], Awaitable[None]] | None = None
    """Opens the store while the first messages are relayed (a failure here is met again at the first write)."""
    err: TextIO = field(default_factory=lambda: sys.stderr)
    batch_seconds: float = BATCH_SECONDS
    """How long copies gather before they are parsed and written together (recording only; forwarding never waits)."""
    retry_seconds: float = RETRY_SECONDS
    """After a failed write, results are counted as not recorded for this long before the store is tried again."""
    recorded: int = 0
    missed: int = 0
    cause: str = ""
    _unreported_gap: int = 0
    _said: set[str] = field(default_factory=set)
    _unparsed_requests: int = 0  # request copies queued or in the batch being gathered, not yet parsed
    _queue: asyncio.Queue[_Copy] = field(default_factory=lambda: asyncio.Queue(MAX_QUEUE))
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _retry_after: float = 0.0

    def offer(self, direction: Literal["request", "response"], payload: bytes, connection: str = "") -> None:
        """A forwarded message's copy, to be looked at later. Never blocks, never raises."""
        if direction == "response" and not self.observer.pending and not self._unparsed_requests:
            return  # no call awaits an answer, none is still to be parsed: this message holds no tool result
        try:
            self._queue.put_nowait(_Copy(direction, payload, connection, datetime.now(UTC)))
        except asyncio.QueueFull:
            if direction == "response":
                self.miss(1, "the gateway's queue of unrecorded results is full")
            return
        if direction == "request":
            self._unparsed_requests += 1

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, timeout: float = 10.0) -> None:
        """Record what is queued (waiting at most ``timeout`` seconds), then report any gap."""
        if self._task is not None:
            self._stopping.set()  # what is queued is written now, not at the end of the batch's moment
            self._queue.put_nowait(_Copy("request", b"", STOP, datetime.now(UTC)))
            try:
                await asyncio.wait_for(self._task, timeout)
            except (TimeoutError, asyncio.CancelledError):
                self.miss(self._queue.qsize(), "the gateway stopped before its queue was recorded")
            self._task = None
        if self._unreported_gap:
            await self._write_gap()
        if self._unreported_gap:
            self._gap_to_file()
        if self.missed:
            self._say(f"{self.missed} results not recorded: {self.cause}", always=True)

    async def _run(self) -> None:
        if self.prepare is not None:
            with contextlib.suppress(Exception):
                await self.prepare()
        while True:
            batch = [await self._queue.get()]
            if self.batch_seconds > 0 and batch[0].connection != STOP and not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):  # one transaction for the calls of a moment, not one each
                    await asyncio.wait_for(self._stopping.wait(), self.batch_seconds)
            while not self._queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self._queue.get_nowait())
            records: list[EvidenceRecord] = []
            stop = False
            for copy in batch:
                if copy.connection == STOP:
                    stop = True
                elif copy.direction == "request":
                    self._unparsed_requests -= 1
                    self.observer.request(copy.payload, copy.connection)
                else:
                    records.extend(self.observer.response(copy.payload, copy.observed_at, copy.connection))
            if records:
                await self._write(records)
            if stop:
                return

    async def _write(self, records: list[EvidenceRecord]) -> None:
        if self.store is None:
            self.miss(len(records), "no store is configured")
            return
        loop = asyncio.get_running_loop()
        if self._unreported_gap and loop.time() < self._retry_after:
            self.miss(len(records), self.cause)
            return
        try:
            await self.store(records)
        except Exception as exc:  # the store's failure is reported, never raised into the relay
            self._retry_after = loop.time() + self.retry_seconds
            self.miss(len(records), cause_of(exc))
            return
        self.recorded += len(records)
        if self._unreported_gap:
            await self._write_gap()

    def miss(self, count: int, cause: str) -> None:
        if count <= 0:
            return
        self.missed += count
        self._unreported_gap += count
        self.cause = cause
        self._say(f"results not recorded (forwarding goes on): {cause}")

    def _gap(self) -> EvidenceRecord:
        ident = self.observer.identity
        return EvidenceRecord(
            kind="gap",
            tenant=ident.tenant,
            principal=ident.principal,
            server=ident.server,
            transport=ident.transport,
            observed_at=datetime.now(UTC),
            missed=self._unreported_gap,
            cause=self.cause,
        )

    async def _write_gap(self) -> None:
        if self.store is None:
            return
        try:
            await self.store([self._gap()])
        except Exception:  # still failing: the gap stays open, and goes to the file at the end
            return
        self._unreported_gap = 0

    def _gap_to_file(self) -> None:
        if self.gaps_file is None:
            return
        try:
            self.gaps_file.parent.mkdir(parents=True, exist_ok=True)
            with self.gaps_file.open("a", encoding="utf-8") as out:
                out.write(json.dumps(self._gap().model_dump(mode="json"), ensure_ascii=False) + "\n")
        except OSError as exc:
            self._say(f"the gap could not be written to {self.gaps_file.name} either: {exc.strerror or exc}")
            return
        self._unreported_gap = 0

    def _say(self, text: str, *, always: bool = False) -> None:
        if not always and text in self._said:
            return
        self._said.add(text)
        try:
            self.err.write(f"provenance gateway: {text}\n")
            self.err.flush()
        except (OSError, ValueError):
            pass


def read_gaps_file(path: Path, tenant: str) -> list[EvidenceRecord]:
    """The gaps a gateway could write only to ``GAPS_FILE`` (its store failing to the end), of one tenant."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    gaps: list[EvidenceRecord] = []
    for line in lines:
        try:
            gap = EvidenceRecord.model_validate_json(line)
        except ValueError:
            continue
        if gap.tenant == tenant:
            gaps.append(gap)
    return gaps
