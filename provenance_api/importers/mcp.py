"""Tool-return contents flattened to text, MCP ``CallToolResult`` first among them.

An MCP result ``{"content": [blocks], "structuredContent": {...}, "isError": bool}`` becomes the text of
its text blocks and embedded text resources; images, audio and binary resources are named, never
inlined; ``isError: true`` is a failed execution whose text is the tool's error. It is read in every
carrier: the object, a JSON string of one (an agent that passed the result on as text, an OpenTelemetry
attribute), a tool message whose only text part is such a string; so are bare MCP media blocks given as
a JSON string (``{"type": "image", "data": …}``), which are named. The same block flattening serves the
block lists other formats put in a tool return (Anthropic ``tool_result`` blocks, OpenAI ``input_*``
parts, OpenTelemetry parts), so every importer turns a return into text the same way.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

from estimator.corpus.tool_content import RESULT_KEYS, is_mcp_block, json_object
from estimator.corpus.turn import SourceMeta
from provenance_api.importers.common import NeutralToolResult, as_dict, parse_time

_TEXT_KINDS = frozenset({"text", "input_text", "output_text"})
_MEDIA_KINDS = frozenset(
    {
        "image",
        "audio",
        "video",
        "input_image",
        "input_audio",
        "blob",
        "uri",
        "file",
        "image_url",
        "input_file",
        "document",
        "computer_screenshot",
    }
)
_BLOCK_KINDS = _TEXT_KINDS | _MEDIA_KINDS | {"resource", "resource_link", "search_result", "refusal"}


def is_call_tool_result(content: Any) -> bool:
    """An MCP CallToolResult: a ``content`` block list with ``isError`` or ``structuredContent`` beside it (or
    ``is_error`` / ``structured_content``: the MCP SDK's ``model_dump_json()`` without aliases writes those)."""
    return (
        isinstance(content, dict)
        and isinstance(content.get("content"), list)
        and any(key in content for key in RESULT_KEYS)
    )


def _is_error(result: dict[str, Any]) -> bool:
    return result.get("isError", result.get("is_error")) is True


def _structured(result: dict[str, Any]) -> Any:
    return result.get("structuredContent", result.get("structured_content"))


def call_tool_result(content: Any) -> dict[str, Any] | None:
    """The MCP ``CallToolResult`` a tool return carries, in any carrier: the object, a JSON string of one, or a
    list whose only item is a text part holding such a string; None when it carries none."""
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], (str, dict)):
        inner = content[0] if isinstance(content[0], str) else content[0].get("text")
        if isinstance(inner, str) and (isinstance(content[0], str) or content[0].get("type") == "text"):
            found = call_tool_result(inner)
            if found is not None:
                return found
    value = json_object(content) if isinstance(content, str) else content
    return value if is_call_tool_result(value) else None


def _media_blocks(text: str) -> list[Any] | None:
    """Bare MCP blocks given as a JSON string (one block, or a list) with media among them: an agent library
    that passed a tool's image on as ``{"type": "image", "data": …}`` text. None for any other text."""
    value = json_object(text)
    blocks = [value] if isinstance(value, dict) else value
    if not isinstance(blocks, list) or not blocks or not all(is_mcp_block(b) for b in blocks):
        return None
    return blocks if any(b.get("type") != "text" for b in blocks) else None


def flatten_result(content: Any) -> tuple[str, bool]:
    """A tool return as (text, failed). Only an MCP ``isError: true`` marks failure here, in any carrier."""
    result = call_tool_result(content)
    if result is not None:
        text = flatten_blocks(result["content"])
        if not text.strip() and _structured(result) is not None:
            text = _dump(_structured(result))
        return text, _is_error(result)
    if isinstance(content, str):
        blocks = _media_blocks(content)
        if blocks is not None:
            return flatten_blocks(blocks), False
    return flatten_content(content), False


_META_FIELDS = {
    "server": ("server", "serverName", "server_name", "server_label"),
    "resource": ("resource", "resourceUri", "resource_uri", "uri"),
    "principal": ("principal", "user", "userId", "user_id", "subject"),
    "tenant": ("tenant", "tenantId", "tenant_id"),
    "scope": ("scope", "scopes"),
}
_META_TIMES = ("observed_at", "observedAt", "timestamp", "fetched_at", "fetchedAt")


def _meta_text(value: Any) -> str | None:
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return " ".join(value)
    return value if isinstance(value, str) and value.strip() else None


def result_provenance(content: Any) -> tuple[SourceMeta | None, datetime | None]:
    """What an MCP ``CallToolResult`` records of where it came from: its ``_meta`` (the SDK dumps it as
    ``_meta``, or ``meta`` without aliases) read for a server, resource, principal, tenant, scope and time under
    the keys ``_META_FIELDS`` / ``_META_TIMES`` name, and the URI of the first resource it embeds or links.
    (None, None) for any other return, or one that records none of these: nothing is guessed."""
    result = call_tool_result(content)
    if result is None:
        return None, None
    meta = as_dict(result.get("_meta", result.get("meta")))
    found: dict[str, str] = {}
    for name, keys in _META_FIELDS.items():
        value = next((v for v in (_meta_text(meta.get(k)) for k in keys) if v is not None), None)
        if value is not None:
            found[name] = value
    if "resource" not in found:
        for block in (b for b in result["content"] if isinstance(b, dict)):
            uri = as_dict(block.get("resource")).get("uri") if block.get("type") == "resource" else None
            uri = uri or (block.get("uri") if block.get("type") == "resource_link" else None)
            if isinstance(uri, str) and uri:
                found["resource"] = uri
                break
    when = next((t for t in (parse_time(meta.get(k)) for k in _META_TIMES) if t is not None), None)
    return (SourceMeta.model_validate(found) if found else None), when


def observed(
    result: NeutralToolResult, raw: Any, at: datetime | None = None, meta: SourceMeta | None = None
) -> NeutralToolResult:
    """``result`` with what its format recorded of where and when it came from: the MCP result's own ``_meta``
    (``result_provenance`` of the ``raw`` return) first, then ``at`` / ``meta`` the carrier gave (a part's
    timestamp, a hosted call's server)."""
    found, when = result_provenance(raw)
    if found is not None and meta is not None:
        found = meta.model_copy(update=found.model_dump(exclude_none=True))
    return replace(result, at=when or at, meta=found or meta)


def return_text(content: Any) -> tuple[str, bool]:
    """A tool's return as (text, failed), where a ``null`` return is the text ``null``: the tool answered
    with nothing, which is itself evidence (an absent return is not; see each format)."""
    return ("null", False) if content is None else flatten_result(content)


def flatten_content(content: Any) -> str:
    """Text of a return or message content: a string, a list of blocks, or any other JSON (dumped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(_is_block(b) for b in content):
        return flatten_blocks(content)
    if _is_block(content) and not isinstance(content, str):
        return _block_text(content) or ""
    return _dump(content)


def message_content(content: Any) -> tuple[str, list[str]]:
    """A message's text and the names of the media it carries (not inlined): a string or a part list."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return flatten_content(content), []
    texts: list[str] = []
    media: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in _MEDIA_KINDS:
            text = _document_text(part)  # a plain-text document is text; other media are named
            if text is None:
                media.append(media_name(part))
            else:
                texts.append(text)
        elif isinstance(part, dict):
            text = _block_text(part)
            if text:
                texts.append(text)
    return "\n".join(texts), media


def _is_block(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, dict) and value.get("type") in _BLOCK_KINDS)


def flatten_blocks(blocks: list[Any]) -> str:
    """Content blocks joined as text; media and binary blocks named, not inlined."""
    out: list[str] = []
    for block in blocks:
        text = block if isinstance(block, str) else _block_text(block) if isinstance(block, dict) else None
        if text:
            out.append(text)
    return "\n".join(out)


def media_name(block: dict[str, Any]) -> str:
    """A short name for a media or file block, without its bytes."""
    kind = str(block.get("type", "file"))
    source = as_dict(block.get("source"))
    label = (
        block.get("filename")
        or block.get("title")
        or block.get("name")
        or block.get("file_id")
        or block.get("uri")
        or source.get("url")
        or source.get("file_id")
    )
    url = block.get("image_url")
    if label is None and isinstance(url, dict):
        url = url.get("url")
    if label is None and isinstance(url, str) and not url.startswith("data:"):
        label = url
    if label is None and isinstance(block.get("file"), dict):
        label = block["file"].get("filename") or block["file"].get("file_id")
    mime = (
        block.get("mimeType")
        or block.get("mime_type")
        or block.get("media_type")
        or source.get("media_type")
        or block.get("modality")
    )
    kind = kind.removeprefix("input_").removesuffix("_url")
    parts = [kind] + ([str(label)] if label else []) + ([f"({mime})"] if mime else [])
    return " ".join(parts)


def _block_text(block: dict[str, Any]) -> str | None:
    kind = block.get("type")
    if kind in _TEXT_KINDS or kind == "refusal":
        text = block.get("text", block.get("content", block.get("refusal")))
        return text if isinstance(text, str) else None
    if kind == "resource" and isinstance(block.get("resource"), dict):
        resource = block["resource"]
        if isinstance(resource.get("text"), str):
            return str(resource["text"])
        return f"[resource {resource.get('uri', '?')} ({resource.get('mimeType', 'binary')}) not inlined]"
    if kind == "resource_link":
        return f"[resource link {block.get('uri', '?')}]"
    if _document_text(block) is not None:
        return _document_text(block)
    if kind == "search_result":
        head = " · ".join(str(block[k]) for k in ("title", "source") if block.get(k))
        body = flatten_content(block.get("content"))
        return "\n".join(t for t in (head, body) if t)
    if kind in _MEDIA_KINDS:
        return f"[{media_name(block)} not inlined]"
    return None


def _document_text(block: dict[str, Any]) -> str | None:
    """The text of an Anthropic ``document`` block with a plain-text source."""
    source = as_dict(block.get("source"))
    data = source.get("data")
    is_text = block.get("type") == "document" and source.get("type") == "text"
    return data if is_text and isinstance(data, str) else None


def _dump(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)
    except (TypeError, ValueError):
        return str(value)
