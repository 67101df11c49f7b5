"""Bulk import of chat history into stored turns, and the free-tier report over a tenant's turns.

Shared by ``provenance import`` / ``POST /v1/imports`` and ``provenance gate --all`` /
``GET /v1/reports/gating``. Nothing is dropped silently: every file, line or conversation that cannot be
read, every importer error and every conflicting turn is counted and reported with where it was, and
each is isolated — whatever goes wrong with one (a ``RecursionError`` included) rejects that one alone.
Conversations read but yielding no turn are reported as notes; what an importer read only in part (an image
named instead of inlined, a part of unknown kind passed over) as warnings, which, like notes, fail nothing.

The limits are the API's, on every way in: a JSONL line or a conversation of a JSON file over
``max_body_bytes`` (``PROVENANCE_MAX_BODY_BYTES``, the request body limit) is rejected before it is parsed, and a
turn whose stored form is over it is rejected alone (``ImportCounts.max_turn_bytes``); the nesting limit is the
stored turn's own (``estimator.corpus.turn.MAX_NESTING``). Each reason names the setting to change.

Conversation ids: ``<name>#<id field>`` (``conversation_id`` / ``id`` / ``task_id``-``trial``), else
``<name>`` for a file holding one conversation, else ``<name>#<content hash>``; ``<name>`` is the file's
path relative to the directory given, that directory named as it is on disk (the path resolved: ``./a/../a``,
``/abs/a`` and a symlink to ``a`` are the same ``a``), ``/`` written ``~`` so ids stay one URL path segment,
or the upload's name. So ``s1/history.jsonl`` and ``s2/history.jsonl`` never collide, and re-importing the
same content gives the same ids.

Turn ids are ``<conversation id>:<content key>`` (``importers.common.turn_key``), never list positions. A
conversation's turns are matched against what the tenant holds under its id (and under the ids earlier
versions gave it, ``Item.aliases``) by that key: a turn already stored — under its content id, or under the
positional id ``<conversation id>:<n>`` of an earlier version — is ``unchanged`` even when the history
before it was trimmed or summarised since (the stored turn, with the history it had, is kept); only turns
whose content is not there yet are stored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import quote

from pydantic import ValidationError

from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Layer, Unit
from provenance_api.core.errors import InvalidInput
from provenance_api.core.redaction import Redactor
from provenance_api.importers import (
    MAX_CONVERSATION_ID,
    detect_format,
    import_conversation,
    normalize_format,
    turn_key,
)
from provenance_api.operations.redaction import redact_turn
from provenance_api.providers import free_tier
from provenance_api.storage import crud_turns
from provenance_api.storage.errors import RecordConflict, RecordInvalid, RecordUnreadable, StorageError
from provenance_api.storage.session import Database

SUMMARY_KEYS: tuple[str, ...] = ("traceable", "quoted", "agent_voice", "action", "unanchored")
TOP_SOURCES = 20
BOM = b"\xef\xbb\xbf"
TOO_DEEP = "nested too deeply to read (RecursionError): flatten the data or split it"
SIZE_SETTING = "PROVENANCE_MAX_BODY_BYTES"
"""The setting whose value caps a request body on the API and, on every way in, one conversation and one turn."""
FLUSH_TURNS = 200  # turns stored per transaction by ``TurnWriter``
FLUSH_BYTES = 4_000_000  # or fewer, once the conversations they come from add up to this much input


def too_large(what: str, size: int, limit: int) -> str:
    """Why ``what`` (a line, a conversation) is not read: it is over the API's request body limit."""
    return (
        f"{what} is {size:,} bytes, over the limit of {limit:,} bytes per conversation ({SIZE_SETTING}, the "
        f"API's request body limit): split or trim it, or raise {SIZE_SETTING}"
    )


def turn_too_large(detail: str) -> str:
    """Why a turn over ``max_turn_bytes`` is not stored, with the setting that sets the limit."""
    return f"{detail} ({SIZE_SETTING}): trim the conversation's tool results or history, or raise {SIZE_SETTING}"


def new_batch_id() -> str:
    """The id of one import (``ib_`` + 20 hex digits): stored on every turn it creates, so
    ``DELETE /v1/imports/{batch_id}`` can remove them."""
    return f"ib_{secrets.token_hex(10)}"


@dataclass
class ImportCounts:
    """The summary of one import, and what every turn it stores carries: its ``batch_id`` and the size limit
    of one stored turn (``max_turn_bytes``, None for no limit)."""

    batch_id: str = field(default_factory=new_batch_id)
    max_turn_bytes: int | None = None
    redactor: Redactor | None = None  # PROVENANCE_REDACT_PATTERNS: applied to every turn before it is stored
    imported: int = 0
    unchanged: int = 0
    conflicting: int = 0
    rejected: int = 0
    conversations: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)
    read_bytes: int = 0  # of the input, as far as it has been read (``Item.size``)

    def reject(self, where: str, reason: str) -> None:
        self.rejected += 1
        self.errors.append({"where": where, "reason": reason})

    def warn(self, where: str, reason: str) -> None:
        """Read, but not in full or not as written: the turns are stored and nothing failed."""
        self.warnings.append({"where": where, "reason": reason})

    def note(self, where: str, reason: str) -> None:
        self.notes.append({"where": where, "reason": reason})

    @property
    def failed(self) -> bool:
        """Anything rejected or conflicting (the command's exit status 1); warnings and notes are not."""
        return bool(self.rejected or self.conflicting)

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "imported": self.imported,
            "unchanged": self.unchanged,
            "conflicting": self.conflicting,
            "rejected": self.rejected,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }

    def line(self) -> str:
        warned = len(self.warnings)
        return (
            f"{self.conversations} conversation{'' if self.conversations == 1 else 's'}: {self.imported} imported, "
            f"{self.unchanged} unchanged, {self.conflicting} conflicting, {self.rejected} rejected, "
            f"{warned} warning{'' if warned == 1 else 's'}, {len(self.notes)} noted"
        )


@dataclass(frozen=True)
class Item:
    """One conversation to import (``obj``), or one that could not be read (``problem``). ``name`` prefixes
    its conversation id; ``single``: the only conversation of its file, so ``name`` alone identifies it;
    ``aliases``: names earlier versions gave its source (their stored turns are matched by content too)."""

    where: str
    name: str
    index: int
    obj: Any = None
    problem: str | None = None
    single: bool = False
    aliases: tuple[str, ...] = ()
    size: int = 0  # bytes of the input it was read from (progress)


def check_format(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return normalize_format(name)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="format", fix="leave it out to detect the format") from None


def content_hash(obj: Any) -> str:
    """12 hex digits of the SHA-256 of the conversation's canonical JSON."""
    body = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _id_field(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    for key in ("conversation_id", "id"):
        value = obj.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    if "task_id" in obj and "trial" in obj:
        return f"{obj['task_id']}-{obj['trial']}"
    return None


def conversation_id(item: Item) -> str:
    """The id of ``item``'s conversation (see the module docstring); stable across re-imports."""
    ident = _id_field(item.obj)
    if ident is None and not (item.single and item.name):
        ident = content_hash(item.obj)
    full = f"{item.name}#{ident}" if item.name and ident else (ident or item.name)
    if len(full) <= MAX_CONVERSATION_ID:
        return full
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{full[: MAX_CONVERSATION_ID - 14]}~{digest}"


def parse_line(raw: bytes, where: str, name: str, number: int, size: int = 0) -> Item:
    """One JSONL line (bytes) as an item: not UTF-8, not JSON or too deep is a problem of this line alone."""
    try:
        line = raw.removeprefix(BOM) if number == 1 else raw
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Item(
            where,
            name,
            number,
            problem=f"not UTF-8 ({exc.reason} at byte {exc.start}); save the file as UTF-8",
            size=size,
        )
    try:
        return Item(where, name, number, obj=json.loads(text), size=size)
    except RecursionError:
        return Item(where, name, number, problem=TOO_DEEP, size=size)
    except ValueError as exc:
        return Item(where, name, number, problem=f"invalid JSON: {exc}", size=size)


def jsonl_items(lines: Iterable[bytes], where: str, name: str, max_bytes: int | None = None) -> Iterator[Item]:
    """One conversation per non-blank line, each decoded on its own; a line over ``max_bytes`` is rejected
    unread."""
    return _jsonl_items(((raw, len(raw), len(raw) + 1) for raw in lines), where, name, max_bytes)


def _jsonl_items(
    lines: Iterable[tuple[bytes | None, int, int]], where: str, name: str, max_bytes: int | None
) -> Iterator[Item]:
    """``(line or None when over max_bytes, its length, bytes consumed)`` as items; blank lines are skipped
    (their bytes go to the next item's ``size``)."""
    consumed = 0
    for number, (raw, length, used) in enumerate(lines, start=1):
        consumed += used
        place = f"{where}:{number}" if where else f"line {number}"
        if raw is not None:
            raw = raw.rstrip(b"\r")
            length = len(raw)
        if max_bytes is not None and length > max_bytes:
            yield Item(place, name, number, problem=too_large(f"line {number}", length, max_bytes), size=consumed)
            consumed = 0
        elif raw is not None and raw.strip() and raw.strip() != BOM:
            yield parse_line(raw, place, name, number, consumed)
            consumed = 0


def read_lines(stream: BinaryIO, max_bytes: int | None = None) -> Iterator[tuple[bytes | None, int, int]]:
    """The lines of a binary stream as ``(line without its newline, its length, bytes consumed)``; a line over
    ``max_bytes`` (a ``\r`` before the newline not counted) is skipped through without being held: ``None``."""
    limit = -1 if max_bytes is None else max_bytes + 2  # room for "\r\n"
    while True:
        line = stream.readline(limit)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1], len(line) - 1, len(line)
            continue
        if limit < 0 or len(line) < limit:  # the last line, without a newline
            yield line, len(line), len(line)
            continue
        length = used = len(line)
        while not line.endswith(b"\n"):
            line = stream.readline(1 << 20)
            if not line:
                break
            used += len(line)
            length += len(line) - line.endswith(b"\n")
        yield None, length, used


def document_items(text: str, where: str, name: str, max_bytes: int | None = None, size: int = 0) -> Iterator[Item]:
    """The conversations of one JSON document (``size`` bytes): one conversation, or a list of them; one over
    ``max_bytes`` (measured as compact JSON in a list, as the document for a single one) is rejected."""
    try:
        data = json.loads(text.removeprefix("\ufeff"))
    except RecursionError:
        yield Item(where, name, 0, problem=TOO_DEEP, size=size)
        return
    except json.JSONDecodeError as exc:
        yield Item(f"{where}:{exc.lineno}", name, 0, problem=f"invalid JSON: {exc.msg} (column {exc.colno})", size=size)
        return
    if _is_list_of_conversations(data):
        share, rest = divmod(size, len(data))
        for i, obj in enumerate(data):  # a list of conversations (not a list of messages)
            part = share + (rest if i == len(data) - 1 else 0)
            length = _json_size(obj) if max_bytes is not None and size > max_bytes else 0
            if max_bytes is not None and length > max_bytes:
                problem = too_large(f"conversation {i}", length, max_bytes)
                yield Item(f"{where}[{i}]", name, i, problem=problem, size=part)
            else:
                yield Item(f"{where}[{i}]", name, i, obj=obj, size=part)
    elif max_bytes is not None and size > max_bytes:
        yield Item(where, name, 0, problem=too_large("the file", size, max_bytes), size=size)
    else:
        yield Item(where, name, 0, obj=data, single=True, size=size)


def _json_size(obj: Any) -> int:
    try:
        return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return 0  # left to the importer, which says what is wrong with it


def input_files(path: Path) -> list[Path]:
    """The .json and .jsonl files ``path`` names: itself, or those under it (a directory, recursively)."""
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))


def input_bytes(paths: Iterable[Path]) -> int:
    """How many bytes ``file_items`` will read from ``paths`` (what a progress bar counts to)."""
    total = 0
    for path in paths:
        try:
            total += sum(p.stat().st_size for p in input_files(path))
        except OSError:
            continue
    return total


def file_items(path: Path, max_bytes: int | None = None) -> Iterator[Item]:
    """The conversations of a .json (one, or a list) or .jsonl file, or of such files under a directory.
    Names are relative to the directory given, its own name included as it is on disk (the path resolved,
    so every spelling of it, symlinks too, names the same conversations); a file given alone is its name.
    A line or conversation over ``max_bytes`` is rejected unread."""
    real = path.resolve()
    if path.is_dir():
        try:
            children = input_files(path)
        except OSError as exc:
            yield Item(str(path), real.name, 0, problem=f"cannot list: {exc}")
            return
        for child in children:
            name = (Path(real.name) / child.relative_to(path)).as_posix().replace("/", "~")
            earlier = child.relative_to(path.parent).as_posix().replace("/", "~")  # the name as typed
            for item in _file_items(child, name, max_bytes):
                yield replace(item, aliases=(earlier,)) if earlier != name else item
        return
    earlier = path.name
    for item in _file_items(path, real.name, max_bytes):
        yield replace(item, aliases=(earlier,)) if earlier != real.name else item


def _file_items(path: Path, name: str, max_bytes: int | None) -> Iterator[Item]:
    if path.suffix == ".jsonl":
        try:
            stream = path.open("rb")
        except OSError as exc:
            yield Item(str(path), name, 0, problem=f"cannot read: {exc}")
            return
        with stream:  # read line by line: a file of any size, a line over the limit never held whole
            try:
                yield from _jsonl_items(read_lines(stream, max_bytes), str(path), name, max_bytes)
            except OSError as exc:
                yield Item(str(path), name, 0, problem=f"cannot read past here: {exc}")
        return
    try:
        data = path.read_bytes()
    except OSError as exc:
        yield Item(str(path), name, 0, problem=f"cannot read: {exc}")
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"not UTF-8 ({exc.reason} at byte {exc.start}); save it as UTF-8"
        yield Item(str(path), name, 0, problem=problem, size=len(data))
        return
    yield from document_items(text, str(path), name, max_bytes, len(data))


def _is_list_of_conversations(data: Any) -> bool:
    if not isinstance(data, list) or not data or not all(isinstance(x, dict) for x in data):
        return False
    try:
        detect_format(data)
    except (ValueError, RecursionError):
        return True  # the list itself is no conversation: its items are
    return False


async def import_items(
    db: Database,
    tenant: str,
    user: str,
    items: Iterator[Item],
    format: str | None = None,
    progress: Callable[[ImportCounts], None] | None = None,
    *,
    max_turn_bytes: int | None = None,
    redactor: Redactor | None = None,
) -> ImportCounts:
    """Import every item; new turns are stored in batches (``TurnWriter``), each turn's outcome its own.
    ``progress`` is called after each item (its counts of stored turns lag by at most one batch)."""
    counts = ImportCounts(max_turn_bytes=max_turn_bytes, redactor=redactor)
    writer = TurnWriter(db, tenant, user, counts)
    for item in items:
        counts.conversations += 1
        counts.read_bytes += item.size
        await import_one(db, tenant, user, item, format, counts, writer)
        if progress is not None:
            progress(counts)
    await writer.flush()
    if progress is not None:
        progress(counts)
    return counts


@dataclass
class TurnWriter:
    """New turns of several conversations, stored together: one transaction per ``FLUSH_TURNS`` turns (or per
    ``FLUSH_BYTES`` of input read), not one per turn. Outcomes are counted per turn as ``store`` counts them;
    a conversation whose id is among those waiting is looked up only after they are stored, so a repeated
    conversation finds its turns (``holds``), and one that cannot have any stored is not looked up at all
    (``nothing_stored``)."""

    db: Database
    tenant: str
    user: str
    counts: ImportCounts
    pending: list[tuple[StoredTurn, str]] = field(default_factory=list)
    prefixes: set[str] = field(default_factory=set)
    input_bytes: int = 0
    seen: set[str] = field(default_factory=set)  # the conversations (id prefixes) this import has stored turns of
    fresh: dict[str, bool] = field(default_factory=dict)  # name → the tenant held no turn under it when first met

    def holds(self, prefixes: Iterable[str]) -> bool:
        return any(p in self.prefixes for p in prefixes)

    async def nothing_stored(self, item: Item, prefixes: list[str]) -> bool:
        """Whether the tenant can hold no turn of ``item``'s conversation, so looking its turns up is skipped:
        none was stored under any of its names (each checked once per import, by the part every conversation id
        made from it starts with) before this import, and this import has stored none of this conversation."""
        if any(p in self.seen for p in prefixes):
            return False
        for name in (item.name, *item.aliases):
            key = name[: MAX_CONVERSATION_ID - 14]  # a long id is cut there (``conversation_id``)
            if key not in self.fresh:
                self.fresh[key] = not await crud_turns.holds_any(self.db, self.tenant, key)
            if not self.fresh[key]:
                return False
        return True

    async def add(self, turns: list[tuple[StoredTurn, str]], prefixes: Iterable[str], size: int) -> None:
        self.pending.extend(turns)
        self.prefixes.update(prefixes)
        self.seen.update(prefixes)
        self.input_bytes += size
        if len(self.pending) >= FLUSH_TURNS or self.input_bytes >= FLUSH_BYTES:
            await self.flush()

    async def flush(self) -> None:
        pending, self.pending = self.pending, []
        self.prefixes.clear()
        self.input_bytes = 0
        if not pending:
            return
        counts = self.counts
        try:
            outcomes = await crud_turns.put_turns(
                self.db,
                self.tenant,
                self.user,
                [turn for turn, _ in pending],
                batch=counts.batch_id,
                max_bytes=counts.max_turn_bytes,
            )
        except Exception:  # something about one of them: each on its own, as without batches
            for turn, where in pending:
                try:
                    await store(self.db, self.tenant, self.user, turn, where, counts)
                except Exception as exc:
                    counts.reject(f"{where}: {turn.turn_id}", _failure(exc))
            return
        for (turn, where), outcome in zip(pending, outcomes, strict=True):
            _count(counts, f"{where}: {turn.turn_id}", outcome.created, outcome.problem)


def _validation_reason(error: Any) -> str:
    """One pydantic error as ``turn.<field>: <message>`` (the message names a deeper path when it has one)."""
    loc = ".".join(str(p) for p in error.get("loc", ()))
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    return f"turn.{loc}: {message}" if loc else f"turn: {message}"


def _failure(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return TOO_DEEP
    if isinstance(exc, StorageError):
        return exc.detail
    if isinstance(exc, ValidationError) and exc.errors():
        return "; ".join(_validation_reason(e) for e in exc.errors()[:3])
    if isinstance(exc, UnicodeError):
        return f"not valid Unicode text ({exc}); replace the character or pair the surrogate escape"
    return str(exc) if isinstance(exc, ValueError) else f"cannot import: {type(exc).__name__}: {exc}"


async def import_one(
    db: Database,
    tenant: str,
    user: str,
    item: Item,
    format: str | None,
    counts: ImportCounts,
    writer: TurnWriter | None = None,
) -> None:
    """Import one conversation; any failure rejects it (or, once storing began, its remaining turns) alone.
    With ``writer`` its new turns are stored with the next batch, else one by one now."""
    if item.problem is not None:
        counts.reject(item.where, item.problem)
        return
    try:
        ident = conversation_id(item)
        result = await asyncio.to_thread(import_conversation, item.obj, format, conversation_id=ident)
    except Exception as exc:
        counts.reject(item.where, _failure(exc))
        return
    for issue in result.errors:
        counts.reject(f"{item.where}: {issue.where}", issue.reason)
    for issue in result.warnings:
        counts.warn(f"{item.where}: {issue.where}", issue.reason)
    for issue in result.notes:
        counts.note(f"{item.where}: {issue.where}", issue.reason)
    try:  # the configured values replaced before anything is compared, stored or hashed
        turns = [redact_turn(turn, counts.redactor) for turn in result.turns]
    except Exception as exc:
        counts.reject(item.where, _failure(exc))
        return
    if not turns:
        if not result.notes:
            counts.note(f"{item.where}: {ident}", "no assistant reply with text: no turn")
        return
    prefixes = [f"{name}:" for name in (ident, *aliases(item))]
    if writer is not None and writer.holds(prefixes):
        await writer.flush()
    try:
        fresh = writer is not None and await writer.nothing_stored(item, prefixes)
        found = [] if fresh else await crud_turns.turns_under(db, tenant, prefixes)
    except Exception as exc:
        counts.reject(f"{item.where}: {ident}", _failure(exc))
        return
    # this conversation's turns only: "<id>:<n>" or "<id>:<key>", not those of a conversation "<id>:more"
    held = [r for r in found if any(r.turn_id.startswith(p) and ":" not in r.turn_id[len(p) :] for p in prefixes)]
    held_turns = already_held(held, turns)
    new = []
    for turn in turns:
        if turn.turn_id in held_turns:
            counts.unchanged += 1
        elif writer is not None:
            new.append((turn, item.where))
        else:
            try:
                await store(db, tenant, user, turn, item.where, counts)
            except Exception as exc:
                counts.reject(f"{item.where}: {turn.turn_id}", _failure(exc))
    if writer is not None:
        await writer.add(new, prefixes, item.size)


def aliases(item: Item) -> list[str]:
    """The conversation ids earlier versions gave ``item`` (under the names in ``item.aliases``)."""
    return [conversation_id(replace(item, name=name, aliases=())) for name in item.aliases if name != item.name]


def already_held(records: list[crud_turns.TurnRecord], turns: list[StoredTurn]) -> set[str]:
    """The ids of ``turns`` the tenant holds already: a stored turn of the same id and content key, else (for
    turns stored under other ids: the positional ids of earlier versions, another name of the store) one of
    the same content key. Each stored turn answers one incoming turn; its stored form stands, whatever
    history it had then. A stored turn of the same id but other content is left to ``put_turn`` (a conflict)."""
    by_id = {r.turn_id: turn_key(r.turn) for r in records}
    taken: set[str] = set()
    held: set[str] = set()
    keys = {t.turn_id: turn_key(t) for t in turns}
    for turn in turns:
        if by_id.get(turn.turn_id) == keys[turn.turn_id]:
            taken.add(turn.turn_id)
            held.add(turn.turn_id)
    free: dict[str, list[str]] = {}
    for stored_id, key in by_id.items():
        if stored_id not in taken and stored_id not in keys:
            free.setdefault(key, []).append(stored_id)
    for turn in turns:
        if turn.turn_id not in held and free.get(keys[turn.turn_id]):
            free[keys[turn.turn_id]].pop(0)
            held.add(turn.turn_id)
    return held


async def store(db: Database, tenant: str, user: str, turn: StoredTurn, where: str, counts: ImportCounts) -> None:
    try:
        _, created = await crud_turns.put_turn(
            db, tenant, user, turn, batch=counts.batch_id, max_bytes=counts.max_turn_bytes
        )
    except (RecordConflict, RecordInvalid) as exc:
        _count(counts, f"{where}: {turn.turn_id}", False, exc)
        return
    _count(counts, f"{where}: {turn.turn_id}", created, None)


def _count(counts: ImportCounts, where: str, created: bool, problem: StorageError | None) -> None:
    """One turn's outcome: imported, unchanged, conflicting (with the fields that differ) or rejected (over the
    size limit, with the setting that sets it)."""
    if isinstance(problem, RecordConflict):
        counts.conflicting += 1
        counts.errors.append({"where": where, "reason": problem.detail})
    elif problem is not None:
        limit = problem.record == "turn_body"
        counts.reject(where, turn_too_large(problem.detail) if limit else problem.detail)
    elif created:
        counts.imported += 1
    else:
        counts.unchanged += 1


def source_label(unit: Unit) -> str:
    """What a reader recognises: the instructions label, a tool's name, or who said an earlier message."""
    if unit.layer == Layer.TOOLS:
        return unit.tool
    if unit.layer == Layer.INSTRUCTIONS:
        return unit.label
    return unit.label.split(" · ")[0]


@dataclass
class GatingReport:
    """Totals and most-quoted sources over turns added one by one; per-turn entries are kept only when
    ``keep_turns`` (a caller that streams them keeps memory independent of the number of turns)."""

    keep_turns: bool = True
    turns: list[dict[str, Any]] = field(default_factory=list)
    totals: Counter[str] = field(default_factory=Counter)
    quoted_sources: Counter[str] = field(default_factory=Counter)
    unreadable: list[dict[str, str]] = field(default_factory=list)

    def flag(self, turn_id: str, reason: str) -> None:
        """A stored turn left out of the report because it cannot be read or rendered: named with why."""
        self.unreadable.append(
            {"turn_id": turn_id, "reason": reason, "fix": f"delete it with DELETE /v1/turns/{quote(turn_id, safe='')}"}
        )

    def add(self, turn: StoredTurn) -> dict[str, Any]:
        view = free_tier.gate_view(turn)
        summary = view.report.summary
        counts = {key: int(getattr(summary, key)) for key in ("sources", "sentences", *SUMMARY_KEYS)}
        entry = {"turn_id": turn.turn_id, "summary": summary.line(), "counts": counts}
        if self.keep_turns:
            self.turns.append(entry)
        self.totals.update({"turns": 1, **counts})
        for seg in view.report.segments:
            for source_id in dict.fromkeys(c.source_id for c in seg.citations):
                self.quoted_sources[source_label(view.corpus.by_id(source_id))] += 1
        return entry

    def add_all(self, turns: list[StoredTurn]) -> list[dict[str, Any]]:
        """``add`` each turn; one that cannot be rendered is flagged (``unreadable``) and the rest go on."""
        entries = []
        for turn in turns:
            try:
                entries.append(self.add(turn))
            except Exception as exc:
                self.flag(turn.turn_id, _failure(exc))
        return entries

    def totals_dict(self) -> dict[str, Any]:
        keys = ("turns", "sources", "sentences", *SUMMARY_KEYS)
        return {
            "unreadable": list(self.unreadable),
            "totals": {key: self.totals.get(key, 0) for key in keys},
            "top_quoted_sources": [
                {"source": label, "quotes": n} for label, n in self.quoted_sources.most_common(TOP_SOURCES)
            ],
        }

    def to_dict(self) -> dict[str, Any]:
        return {"turns": self.turns, **self.totals_dict()}

    @staticmethod
    def turn_line(entry: dict[str, Any]) -> str:
        return f"{entry['turn_id']}  {entry['summary']}\n"

    def totals_text(self) -> str:
        data = self.totals_dict()
        totals = data["totals"]
        turns, sentences = totals["turns"], totals["sentences"]
        out = [
            f"\n{turns} turn{'' if turns == 1 else 's'} · {sentences} sentence{'' if sentences == 1 else 's'}: "
            + ", ".join(f"{totals[k]} {k}" for k in SUMMARY_KEYS)
        ]
        if data["top_quoted_sources"]:
            out.append("most quoted sources:")
            out.extend(f"  {s['quotes']:>6}  {s['source']}" for s in data["top_quoted_sources"])
        return "\n".join(out) + "\n"

    def text(self) -> str:
        return "".join(self.turn_line(t) for t in self.turns) + self.totals_text()


def build_report(turns: list[StoredTurn]) -> GatingReport:
    report = GatingReport()
    report.add_all(turns)
    return report


async def gating_report(
    db: Database, tenant: str, on_turns: Callable[[list[dict[str, Any]]], None] | None = None, *, batch: int = 50
) -> GatingReport:
    """The free tier over every turn of ``tenant``, streamed: ``batch`` turns are held at a time (the CPU
    work runs off the event loop). With ``on_turns`` each batch's entries go there and are not kept."""
    report = GatingReport(keep_turns=on_turns is None)
    pending: list[StoredTurn] = []

    async def flush() -> None:
        entries = await asyncio.to_thread(report.add_all, pending)
        pending.clear()
        if on_turns is not None:
            on_turns(entries)

    def skip(exc: RecordUnreadable) -> None:
        report.flag(str(exc.extra.get("turn_id", "")), exc.detail)

    async for record in crud_turns.iter_turns(db, tenant, batch=batch, on_unreadable=skip):
        pending.append(record.turn)
        if len(pending) >= batch:
            await flush()
    if pending:
        await flush()
    return report
