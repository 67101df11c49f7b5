"""What a tool returned, as the text a source shows: an MCP ``CallToolResult`` in any carrier (an object, a JSON
string of one, the MCP SDK's unaliased dump), its ``isError``, and the media it held — an image, audio, a binary
resource — named where they stood, never inlined, and listed (``tool_media``) as unscorable. Part of Algorithm 1
(``build.py``), which reads every tool return and history message through ``flatten``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from estimator.corpus.units import Layer, ToolMedia, Unit

__all__ = [
    "MCP_BLOCK_KEYS",
    "RESULT_KEYS",
    "bare_blocks",
    "call_tool_result",
    "flatten",
    "is_mcp_block",
    "json_object",
    "mcp_is_error",
    "tool_media",
]

RESULT_KEYS = ("isError", "structuredContent", "is_error", "structured_content")
"""Beside a ``CallToolResult``'s ``content``; the snake-case pair is what the MCP SDK's ``model_dump_json()``
writes without aliases."""
MCP_BLOCK_KEYS = {"text": "text", "image": "data", "audio": "data", "resource": "resource", "resource_link": "uri"}
_NOT_INLINED = re.compile(r"^\[(?P<what>[^\[\]\n]+?) not inlined\]$", re.MULTILINE)


def call_tool_result(content: Any) -> dict[str, Any] | None:
    """An MCP ``CallToolResult`` in any carrier: the object itself, or a JSON string of one (an agent that sent
    the result on as text). A string counts only with ``isError`` or ``structuredContent`` beside its ``content``,
    or when every block of it is an MCP block; anything else is None."""
    strict = isinstance(content, str)
    if strict:
        content = json_object(content)
    if not isinstance(content, dict) or not isinstance(content.get("content"), list):
        return None
    blocks = content["content"]
    marked = any(key in content for key in RESULT_KEYS)
    if marked or (_all_mcp_blocks(blocks) if strict else _looks_like_mcp_blocks(blocks)):
        return content
    return None


def json_object(text: str) -> Any:
    """A JSON object or list given as text, else None (most tool returns are plain text: not parsed)."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")) or ('"type"' not in stripped and '"content"' not in stripped):
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def is_mcp_block(block: Any) -> bool:
    """A content block of MCP's own kinds, with the field its kind requires (``text``, ``data``, ``uri`` …)."""
    return isinstance(block, dict) and MCP_BLOCK_KEYS.get(str(block.get("type"))) in block


def _all_mcp_blocks(blocks: Any) -> bool:
    return isinstance(blocks, list) and bool(blocks) and all(is_mcp_block(b) for b in blocks)


def bare_blocks(content: Any) -> list[Any] | None:
    """MCP content blocks given without their result: one block or a list of them, as objects or as a JSON
    string (an agent library that passed a tool's image on as ``{"type": "image", "data": …}`` text)."""
    value = json_object(content) if isinstance(content, str) else content
    if is_mcp_block(value) and (isinstance(content, str) or value.get("type") != "text"):
        return [value]
    if _all_mcp_blocks(value) and (isinstance(content, str) or any(b.get("type") != "text" for b in value)):
        return list(value)
    return None


def flatten(content: Any) -> str:
    """Flatten a tool return to text. An MCP ``CallToolResult`` (an object or a JSON string of one) becomes the
    text of its blocks, or its ``structuredContent`` when they have none; images, audio and binary resources are
    named, never inlined (so is a bare media block, or a JSON string of one)."""
    if content is None:
        return ""
    result = call_tool_result(content)
    if result is not None:
        text = _flatten_mcp_blocks(result["content"])
        structured = result.get("structuredContent", result.get("structured_content"))
        if not text.strip() and structured is not None:
            return json.dumps(structured, ensure_ascii=False, indent=2, default=str)
        return text
    blocks = bare_blocks(content)
    if blocks is not None:
        return _flatten_mcp_blocks(blocks)
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):
        return str(content)


def _looks_like_mcp_blocks(blocks: list[Any]) -> bool:
    return bool(blocks) and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in blocks)


def _flatten_mcp_blocks(blocks: list[Any]) -> str:
    out: list[str] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            out.append(block["text"])
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            res = block["resource"]
            if isinstance(res.get("text"), str):
                out.append(res["text"])
            else:
                out.append(f"[resource {res.get('uri', '?')} ({_mime(res, 'binary')}) not inlined]")
        elif kind in {"image", "audio"}:
            out.append(f"[{kind} ({_mime(block, 'unknown type')}) not inlined]")
        elif kind == "resource_link":
            out.append(f"[resource link {block.get('uri', '?')}]")
    return "\n".join(out)


def _mime(block: dict[str, Any], unknown: str) -> str:
    return str(block.get("mimeType") or block.get("mime_type") or unknown)


def mcp_is_error(content: Any) -> bool:
    """An MCP ``CallToolResult`` (object or JSON string) that says ``isError: true``."""
    result = call_tool_result(content)
    return result is not None and result.get("isError", result.get("is_error")) is True


def tool_media(units: Iterable[Unit]) -> tuple[ToolMedia, ...]:
    """The media the tools returned, as their flattened text names them (``[image (image/png) not inlined]``, by
    this module and by every importer), in the tools layer and in earlier turns' tool results; each name once,
    with the first source that names it."""
    out: dict[str, ToolMedia] = {}
    for unit in units:
        if unit.layer == Layer.TOOLS:
            tool = unit.tool
        elif unit.layer == Layer.HISTORY and unit.tool == "tool":
            call = unit.header.split("\n")[1] if "\n" in unit.header else "tool"
            tool = call.split("(", 1)[0]
        else:
            continue
        for match in _NOT_INLINED.finditer(unit.text):
            media = ToolMedia(what=match.group("what"), tool=tool, source_id=unit.id)
            out.setdefault(media.name, media)
    return tuple(out.values())
