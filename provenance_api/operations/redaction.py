"""Redacting a turn before it is stored: every configured pattern (``core/redaction.py``,
``PROVENANCE_REDACT_PATTERNS``) replaced in its texts, and where it was replaced recorded in the turn itself.

Every string of the turn is redacted — the system prompt, messages, tool arguments and returns, the query, the
response and the platform's metadata — except the fields that name things rather than say them (ids, model,
agent, roles, part kinds, tool names). The turn is redacted before it is stored, so its digest, its sources'
digests and its custody record are of the redacted text; the values themselves are never stored. The turn's
metadata gets ``provenance_redacted``: how many values were replaced in all, per pattern, and per source
(``s3`` — the corpus's ids under the default parameters — with ``response`` and ``query`` for those texts), so a
source that reads ``[redacted:api_key]`` says a value was redacted there. A turn with no match is stored as it
came, unchanged.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from estimator.corpus.build import build_corpus
from estimator.corpus.turn import StoredTurn
from provenance_api.core.redaction import REDACTED_KEY, Redactor

__all__ = ["redact_turn"]

NAMING_FIELDS = frozenset(
    {
        "turn_id",
        "model",
        "agent",
        "created_at",
        "part_kind",
        "tool_name",
        "tool_call_id",
        "role",
        "kind",
        "name",
        "id",
        "type",
        "outcome",
    }
)
"""Keys whose string values name something (ids, roles, kinds, tools): never redacted."""


def _redact(value: Any, redactor: Redactor, counts: Counter[str], key: str | None = None) -> Any:
    if isinstance(value, str):
        if key in NAMING_FIELDS:
            return value
        text, found = redactor.redact(value)
        counts.update(found)
        return text
    if isinstance(value, dict):
        return {k: v if k == REDACTED_KEY else _redact(v, redactor, counts, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, redactor, counts, key) for v in value]
    return value


def _per_source(turn: StoredTurn, redactor: Redactor) -> dict[str, int]:
    """How many markers each source of the redacted turn holds (its shown text: header and text)."""
    markers = redactor.markers
    where: dict[str, int] = {}
    for unit in build_corpus(turn).units:
        shown = f"{unit.header}\n{unit.text}"
        count = sum(shown.count(m) for m in markers)
        if count:
            where[unit.id] = count
    for name, text in (("query", turn.query or ""), ("response", turn.response)):
        count = sum(text.count(m) for m in markers)
        if count:
            where[name] = count
    return where


def redact_turn(turn: StoredTurn, redactor: Redactor | None) -> StoredTurn:
    """``turn`` with every configured pattern replaced, and the replacements recorded in its metadata; the same
    object when nothing matched (or nothing is configured)."""
    if not redactor:
        return turn
    counts: Counter[str] = Counter()
    data = _redact(turn.model_dump(mode="json"), redactor, counts)
    if not counts:
        return turn
    redacted = StoredTurn.model_validate(data)
    record = {"values": sum(counts.values()), "patterns": dict(sorted(counts.items())), "sources": {}}
    record["sources"] = _per_source(redacted, redactor)
    return redacted.model_copy(update={"metadata": {**redacted.metadata, REDACTED_KEY: record}})
