"""Read-through connectors: import history from the stores agent frameworks write, in place and incrementally.

``provenance import sqlite:///agent.db --format openai-agents-session`` (also ``langgraph-sqlite``, and
``langgraph-postgres`` with a ``postgresql://`` URL) and ``POST /v1/imports/sources/{name}`` for a source
configured in ``PROVENANCE_HISTORY_SOURCES``. The frameworks themselves are not needed: their tables are
read directly and LangGraph's serialisation is decoded by :mod:`.checkpoint_serde`.
"""

from __future__ import annotations

from provenance_api.operations.connectors.run import SourceImport, import_source, open_reader
from provenance_api.operations.connectors.source import (
    SOURCE_FORMATS,
    Source,
    SourceUnavailable,
    is_source_url,
    parse_source,
)

__all__ = [
    "SOURCE_FORMATS",
    "Source",
    "SourceImport",
    "SourceUnavailable",
    "import_source",
    "is_source_url",
    "open_reader",
    "parse_source",
]
