"""LangGraph's checkpoint serialisation, decoded without LangGraph: values as plain JSON-like data.

A checkpointer stores each value as ``(type, bytes)``. ``msgpack`` (the default) packs objects LangGraph
cannot put in plain msgpack as extension types whose payload is itself msgpack: ``(module, class, value[,
method])``. Codes 0–3 are constructor/method calls (UUID, datetime, Send, sets, dataclasses…), 4 and 5
are pydantic models (LangChain messages among them) with their field dict, 6 a numpy array, 7 a
``DeltaChannel`` snapshot wrapping a value. Here no class is ever imported or called: a LangChain
message becomes its ``messages_to_dict`` form ``{"type": "ai", "data": {...fields}}``, any other object
its payload value. ``json`` values are JSON whose objects may be LangChain ``dumpd`` constructors, which
the LangChain importer reads as they are. Anything else (``pickle`` above all) is refused, never run.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import msgpack

EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_POS_ARGS = 1
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V1 = 4
EXT_PYDANTIC_V2 = 5
EXT_NUMPY_ARRAY = 6
EXT_DELTA_SNAPSHOT = 7
MESSAGE_MODULE = "langchain_core.messages"


class UnreadableValue(ValueError):
    """A stored value this reader does not decode (its type, or bytes that are not what the type says)."""


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_DELTA_SNAPSHOT:
        return _unpack(data)
    if code == EXT_NUMPY_ARRAY:
        return None  # an array of numbers: nothing a conversation is made of
    value = _unpack(data)
    if not isinstance(value, (list, tuple)) or len(value) < 3:
        return value
    module, name, payload = value[0], value[1], value[2]
    if (
        code in (EXT_PYDANTIC_V1, EXT_PYDANTIC_V2)
        and isinstance(module, str)
        and isinstance(payload, dict)
        and module.startswith(MESSAGE_MODULE)
    ):
        kind = payload.get("type") or str(name).removesuffix("Chunk").removesuffix("Message").lower()
        return {"type": kind, "data": payload}
    if code == EXT_CONSTRUCTOR_SINGLE_ARG and module == "uuid" and isinstance(payload, str) and len(payload) == 32:
        return f"{payload[:8]}-{payload[8:12]}-{payload[12:16]}-{payload[16:20]}-{payload[20:]}"
    return payload


def decode(kind: str | None, data: bytes | str | None) -> Any:
    """One stored value as plain data. Raises ``UnreadableValue`` naming the type when it cannot be read."""
    if data is None or kind in (None, "null", "empty"):
        return None
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        if kind == "msgpack":
            return _unpack(raw)
        if kind == "json":
            return json.loads(raw)
        if kind == "str":
            return raw.decode("utf-8")
        if kind in ("bytes", "bytearray"):
            return raw
    except (ValueError, RecursionError) as exc:  # msgpack's errors are ValueErrors
        raise UnreadableValue(f"a {kind} value that does not decode: {exc}") from None
    raise UnreadableValue(
        f"values serialised as {kind!r} are not read (only msgpack and json; pickle is never unpickled)"
    )


class Packed(NamedTuple):
    """An extension object left packed by :func:`shallow`: its code and payload, decoded by :func:`unpacked`."""

    code: int
    data: bytes


def _shallow_hook(code: int, data: bytes) -> Any:
    return _unpack_shallow(data) if code == EXT_DELTA_SNAPSHOT else Packed(code, data)


def _unpack_shallow(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_shallow_hook, raw=False, strict_map_key=False)


def shallow(kind: str | None, data: bytes | str | None) -> Any:
    """One stored value with its extension objects (messages among them) left :class:`Packed`: a cheap read of a
    checkpoint's plain fields and of the messages it holds, each of which equal bytes decode to the same
    message. Values that are not msgpack are decoded whole. Raises ``UnreadableValue`` as :func:`decode` does."""
    if kind != "msgpack" or data is None:
        return decode(kind, data)
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        return _unpack_shallow(raw)
    except (ValueError, RecursionError) as exc:
        raise UnreadableValue(f"a {kind} value that does not decode: {exc}") from None


def unpacked(value: Any) -> Any:
    """A value :func:`shallow` left packed, decoded as :func:`decode` would have (anything else as it is)."""
    if not isinstance(value, Packed):
        return value
    try:
        return _ext_hook(value.code, value.data)
    except (ValueError, RecursionError) as exc:
        raise UnreadableValue(f"a msgpack value that does not decode: {exc}") from None
