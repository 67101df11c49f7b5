"""Bulk import of chat history into stored turns, and the free-tier report over a tenant's turns.

Shared by ``provenance import`` / ``POST /v1/imports`` and ``provenance gate --all`` /
``GET /v1/reports/gating``. Nothing is dropped silently: every conversation or line that cannot be
read, every importer error and every conflicting turn is counted and reported with where it was.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from estimator.turn import StoredTurn
from estimator.units import Layer, Unit

from . import free_tier
from .db import crud_turns
from .db.session import Database
from .errors import Conflict, InvalidInput
from .importers import MAX_CONVERSATION_ID, detect_format, import_conversation, normalize_format

SUMMARY_KEYS: tuple[str, ...] = ("traceable", "quoted", "agent_voice", "action", "unanchored")
TOP_SOURCES = 20


@dataclass
class ImportCounts:
    imported: int = 0
    unchanged: int = 0
    conflicting: int = 0
    rejected: int = 0
    conversations: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)

    def reject(self, where: str, reason: str) -> None:
        self.rejected += 1
        self.errors.append({"where": where, "reason": reason})

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "unchanged": self.unchanged,
            "conflicting": self.conflicting,
            "rejected": self.rejected,
            "errors": list(self.errors),
        }

    def line(self) -> str:
        return (
            f"{self.conversations} conversations: {self.imported} imported, {self.unchanged} unchanged, "
            f"{self.conflicting} conflicting, {self.rejected} rejected"
        )


@dataclass(frozen=True)
class Item:
    """One conversation to import (``obj``), or one that could not be parsed (``problem``)."""

    where: str
    stem: str
    index: int
    obj: Any = None
    problem: str | None = None


def check_format(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return normalize_format(name)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="format", fix="leave it out to detect the format") from None


def conversation_id(obj: Any, stem: str, index: int) -> str:
    """``<stem>-<id>`` from an ``id`` / ``conversation_id`` / ``task_id``+``trial`` field, else ``<stem>-<index>``."""
    ident: str = str(index)
    if isinstance(obj, dict):
        for key in ("conversation_id", "id"):
            value = obj.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                ident = str(value).strip()
                break
        else:
            if "task_id" in obj and "trial" in obj:
                ident = f"{obj['task_id']}-{obj['trial']}"
    return f"{stem}-{ident}"[:MAX_CONVERSATION_ID] if stem else ident[:MAX_CONVERSATION_ID]


def parse_jsonl(lines: Iterator[str], where: str, stem: str) -> Iterator[Item]:
    """One conversation per non-blank line; a line that is not JSON becomes a problem item."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        at = f"{where}:{number}" if where else f"line {number}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            yield Item(at, stem, number, problem=f"invalid JSON: {exc}")
            continue
        yield Item(at, stem, number, obj=obj)


def file_items(path: Path) -> Iterator[Item]:
    """The conversations of a .json (one, or a list) or .jsonl file, or of such files under a directory."""
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")):
            yield from file_items(child)
        return
    stem = path.stem
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        yield Item(str(path), stem, 0, problem=f"cannot read: {exc}")
        return
    if path.suffix == ".jsonl":
        yield from parse_jsonl(iter(text.splitlines()), str(path), stem)
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        yield Item(f"{path}:{exc.lineno}", stem, 0, problem=f"invalid JSON: {exc.msg}")
        return
    if _is_list_of_conversations(data):
        for i, obj in enumerate(data):  # a list of conversations (not a list of messages)
            yield Item(f"{path}[{i}]", stem, i, obj=obj)
    else:
        yield Item(str(path), stem, 0, obj=data)


def _is_list_of_conversations(data: Any) -> bool:
    if not isinstance(data, list) or not data or not all(isinstance(x, dict) for x in data):
        return False
    try:
        detect_format(data)
    except ValueError:
        return True  # the list itself is no conversation: its items are
    return False


async def import_items(
    db: Database,
    tenant: str,
    user: str,
    items: Iterator[Item],
    format: str | None = None,
    progress: Callable[[ImportCounts], None] | None = None,
) -> ImportCounts:
    counts = ImportCounts()
    for item in items:
        counts.conversations += 1
        await import_one(db, tenant, user, item, format, counts)
        if progress is not None:
            progress(counts)
    return counts


async def import_one(
    db: Database, tenant: str, user: str, item: Item, format: str | None, counts: ImportCounts
) -> None:
    if item.problem is not None:
        counts.reject(item.where, item.problem)
        return
    try:
        result = import_conversation(item.obj, format, conversation_id=conversation_id(item.obj, item.stem, item.index))
    except ValueError as exc:  # UnknownFormatError included: not a conversation at all
        counts.reject(item.where, str(exc))
        return
    for issue in result.errors:
        counts.reject(f"{item.where}: {issue.where}", issue.reason)
    for turn in result.turns:
        await store(db, tenant, user, turn, item.where, counts)


async def store(db: Database, tenant: str, user: str, turn: StoredTurn, where: str, counts: ImportCounts) -> None:
    try:
        _, created = await crud_turns.put_turn(db, tenant, user, turn)
    except Conflict as exc:
        counts.conflicting += 1
        counts.errors.append({"where": f"{where}: {turn.turn_id}", "reason": exc.detail})
        return
    if created:
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
    turns: list[dict[str, Any]] = field(default_factory=list)
    totals: Counter[str] = field(default_factory=Counter)
    quoted_sources: Counter[str] = field(default_factory=Counter)

    def add(self, turn: StoredTurn) -> None:
        view = free_tier.gate_view(turn)
        summary = view.report.summary
        counts = {key: int(getattr(summary, key)) for key in ("sources", "sentences", *SUMMARY_KEYS)}
        self.turns.append({"turn_id": turn.turn_id, "summary": summary.line(), "counts": counts})
        self.totals.update({"turns": 1, **counts})
        for seg in view.report.segments:
            for source_id in dict.fromkeys(c.source_id for c in seg.citations):
                self.quoted_sources[source_label(view.corpus.by_id(source_id))] += 1

    def to_dict(self) -> dict[str, Any]:
        keys = ("turns", "sources", "sentences", *SUMMARY_KEYS)
        return {
            "turns": self.turns,
            "totals": {key: self.totals.get(key, 0) for key in keys},
            "top_quoted_sources": [
                {"source": label, "quotes": n} for label, n in self.quoted_sources.most_common(TOP_SOURCES)
            ],
        }

    def text(self) -> str:
        data = self.to_dict()
        out = [f"{t['turn_id']}  {t['summary']}" for t in self.turns]
        totals = data["totals"]
        out.append(
            f"\n{totals['turns']} turns · {totals['sentences']} sentences: "
            + ", ".join(f"{totals[k]} {k}" for k in SUMMARY_KEYS)
        )
        if data["top_quoted_sources"]:
            out.append("most quoted sources:")
            out.extend(f"  {s['quotes']:>6}  {s['source']}" for s in data["top_quoted_sources"])
        return "\n".join(out) + "\n"


def build_report(turns: list[StoredTurn]) -> GatingReport:
    report = GatingReport()
    for turn in turns:
        report.add(turn)
    return report


async def gating_report(db: Database, tenant: str) -> GatingReport:
    """The free tier over every turn of ``tenant`` (the CPU work runs off the event loop)."""
    turns = [record.turn async for record in crud_turns.iter_turns(db, tenant)]
    return await asyncio.to_thread(build_report, turns)
