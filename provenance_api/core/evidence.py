"""Evidence records: what the MCP gateway (``provenance gateway``) saw a tool return, and how a stored turn's tool
return is bound to one.

A record is written for every ``tools/call`` response the gateway relays: the server's name (the gateway's own
``--name``), the tool, the sha-256 of the call's canonical JSON arguments, the sha-256 of the result's text, whether
the result said ``isError``, when the gateway received it (``observed_at``, the gateway's clock, UTC) and the
principal and tenant of the gateway's own configuration — never anything the model or the server said of itself.

The result's text is the one every importer and Algorithm 1 give an MCP ``CallToolResult``
(``estimator.corpus.tool_content.flatten``): the text of its blocks joined by newlines, media named and never
inlined, its ``structuredContent`` when the blocks hold no text. So a return imported later from the agent's own
history has the same digest as the result the gateway relayed, and ``digest`` is what binds the two.

A gap is a record of its own kind (``kind="gap"``): ``missed`` results the gateway relayed but could not record,
and why (``cause``). A gap never stops forwarding; it is reported on the gateway's stderr and by
``provenance evidence list``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from estimator.corpus.tool_content import flatten
from estimator.corpus.units import Corpus, Layer
from provenance_api.core.schemas_actions import ActionSourceOut

__all__ = [
    "CUSTODY_GATEWAY",
    "CUSTODY_HISTORY",
    "Custody",
    "EvidenceRecord",
    "arguments_digest",
    "bind_custody",
    "canonical_json",
    "result_digest",
    "result_text",
    "return_digests",
    "text_digest",
]

CUSTODY_GATEWAY: Literal["gateway"] = "gateway"
"""A tool return whose text matches a result the gateway recorded: its custody is the gateway's record."""
CUSTODY_HISTORY: Literal["history"] = "history"
"""A tool return that matches no record: it is as the agent's history reports it."""

Custody = Literal["gateway", "history"]


def canonical_json(value: Any) -> str:
    """Keys sorted, no spaces, UTF-8 text (not ASCII escapes): the one serialisation arguments are digested in."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def text_digest(text: str) -> str:
    """The sha-256 (hex) of a text as UTF-8."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def arguments_digest(arguments: Any) -> str:
    """The sha-256 of a call's canonical JSON arguments (a call without arguments digests ``{}``)."""
    return text_digest(canonical_json({} if arguments is None else arguments))


def result_text(result: Any) -> str:
    """An MCP ``CallToolResult`` (as the wire carries it, a JSON object) as the text a source of the turn shows:
    the same function Algorithm 1 reads every tool return through."""
    return flatten(result)


def result_digest(result: Any) -> str:
    """The digest that binds a relayed result to a return imported from the agent's history."""
    return text_digest(result_text(result))


class EvidenceRecord(BaseModel):
    """One relayed ``tools/call`` result (``kind="result"``), or results relayed but not recorded (``"gap"``)."""

    model_config = ConfigDict(frozen=True)

    id: int | None = Field(None, description="the record's number in the store (None before it is stored)")
    kind: Literal["result", "gap"] = "result"
    tenant: str
    principal: str = Field(description="who ran the gateway, from its own configuration (never from the model)")
    server: str = Field(description="the MCP server's name, as the gateway was told it (--name)")
    transport: Literal["stdio", "http"]
    tool: str = ""
    request_id: str = Field("", description="the JSON-RPC id of the call, as text")
    arguments_digest: str = ""
    digest: str = Field("", description="sha-256 of the result's text (result_text); empty for a gap")
    is_error: bool = False
    observed_at: datetime = Field(description="when the gateway received the result (UTC, the gateway's clock)")
    missed: int = Field(0, description="a gap: how many results were relayed but not recorded")
    cause: str = Field("", description="a gap: why they were not recorded")


def return_digests(corpus: Corpus) -> dict[str, str]:
    """Each tool return of the turn (its tools layer) by source id: the digest of its text, as a record's."""
    return {u.id: text_digest(u.text) for u in corpus.units if u.layer == Layer.TOOLS}


def bind_custody(
    sources: Sequence[ActionSourceOut], corpus: Corpus, records: Mapping[str, EvidenceRecord]
) -> list[ActionSourceOut]:
    """The sources with their custody: each tool return whose text matches a recorded result by digest is
    ``gateway`` (with the record's time and server), every other tool return ``history``; other layers are left
    as they are. The envelope's ``custody`` says the same, so the two never disagree."""
    digests = return_digests(corpus)
    bound: list[ActionSourceOut] = []
    for source in sources:
        digest = digests.get(source.id)
        if digest is None:
            bound.append(source)
            continue
        record = records.get(digest)
        custody: Custody = CUSTODY_GATEWAY if record is not None else CUSTODY_HISTORY
        update: dict[str, Any] = {
            "custody": custody,
            "custody_observed_at": record.observed_at if record else None,
            "custody_server": record.server if record else None,
        }
        if source.envelope is not None:
            update["envelope"] = source.envelope.model_copy(update={"custody": custody})
        bound.append(source.model_copy(update=update))
    return bound
