"""Read-through connectors: import history from the stores agent frameworks write, in place and incrementally.

``provenance import sqlite:///agent.db --format openai-agents-session`` (also ``langgraph-sqlite``, and
``langgraph-postgres`` with a ``postgresql://`` URL) and ``POST /v1/imports/sources/{name}`` for a source
configured in ``PROVENANCE_HISTORY_SOURCES`` for the caller's tenant (``may_import``). The frameworks
themselves are not needed: their tables are read directly and LangGraph's serialisation is decoded by
:mod:`.checkpoint_serde`.
"""

from __future__ import annotations

from provenance_api.operations.connectors.run import SourceImport, import_source, open_reader
from provenance_api.operations.connectors.source import (
    EVERY_TENANT,
    SOURCE_FORMATS,
    Source,
    SourceUnavailable,
    is_source_url,
    may_import,
    parse_source,
    source_tenants,
)

__all__ = [
    "EVERY_TENANT",
    "SOURCE_FORMATS",
    "Source",
    "SourceImport",
    "SourceUnavailable",
    "import_source",
    "is_source_url",
    "may_import",
    "open_reader",
    "parse_source",
    "source_tenants",
]
