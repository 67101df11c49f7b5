"""The lists' page cursors: opaque to clients, bound to one tenant, one list, one sort and one set of filters.

A cursor carries the position its page ended at (the sort key's value on the last row and that row's
tie-breaker, a turn id or a trace id, both the caller's own) and a fingerprint of the tenant, the list, the sort
and the filters it was made for. A cursor used with another sort, other filters, another search, another list or
another tenant's key is refused (422 naming ``query.cursor``) rather than read as a position in a different order,
which would skip or repeat rows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from provenance_api.core.errors import InvalidInput
from provenance_api.storage.lists import Key, Keyset

KeyKind = Literal["datetime", "str", "int", "float"]
FIELD = "query.cursor"
_VERSION = 1


def fingerprint(tenant: str, what: str, sort: str, filters: Mapping[str, object]) -> str:
    """What a cursor is valid for: the tenant, the list, the sort and the filters (values as given)."""
    blob = json.dumps([tenant, what, sort, dict(filters)], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]


def encode(print_: str, key: Key, tie: str) -> str:
    """The cursor of the page that starts after (``key``, ``tie``)."""
    value = key.isoformat() if isinstance(key, datetime) else key
    body = json.dumps({"v": _VERSION, "f": print_, "k": value, "t": tie}, separators=(",", ":"), ensure_ascii=False)
    return base64.urlsafe_b64encode(body.encode("utf-8")).decode("ascii").rstrip("=")


def _invalid(detail: str) -> InvalidInput:
    return InvalidInput(
        detail,
        field=FIELD,
        fix="pass next_cursor from the previous page with the same q, filters and sort, or start "
        "again without a cursor",
    )


def _key(value: object, kind: KeyKind) -> Key:
    if value is None:
        return None
    if kind == "datetime" and isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise _invalid("the cursor is not one this service made") from None
    if kind == "str" and isinstance(value, str):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _invalid("the cursor is not one this service made")


def decode(cursor: str | None, print_: str, kind: KeyKind) -> Keyset | None:
    """The position ``cursor`` stands for, if it was made for ``print_``; InvalidInput naming ``query.cursor``
    for a cursor that is not one of ours or was made for another tenant, list, sort or filter."""
    if not cursor:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise _invalid("the cursor is not one this service made") from None
    if not isinstance(data, dict) or data.get("v") != _VERSION or not isinstance(data.get("t"), str):
        raise _invalid("the cursor is not one this service made")
    if data.get("f") != print_:
        raise _invalid(
            "the cursor was made for another sort, filter or search (or for another key's tenant); a "
            "cursor only continues the list it came from"
        )
    return Keyset(_key(data.get("k"), kind), data["t"])
