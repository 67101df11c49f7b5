"""The tokens of a scored tool call that carry its content: the tool's name and its argument values.

An action is scored as the call exactly as emitted, ``name({"key": value, …})`` (``actions.targets.Action.text``:
canonical JSON, keys sorted, ``", "`` and ``": "`` separators). Most of its tokens are syntax — braces, quotes,
separators and the argument keys the tool's schema fixes once its name is chosen — which the model predicts
whatever the context shows. A threshold that grows with every token of the call (τ_Γ = 0.25 nats per token on
answer sentences, ``logprob``) then asks the context for an effect the call's syntax never carries. The tokens
that can depend on a source are those of the tool's name and of each argument *value*; ``content_token_count``
counts them, and the log-probability estimator scales an action's τ_Γ by that count (``logprob.thresholds``).

A token counts when any of its characters lies in the name or in a value (a string value without its quotes).
When the scorer's token pieces do not spell the scored text (a scorer that returns no pieces, or pieces of a
different normalisation), the count is the share of the call's characters that carry content times its tokens;
a text that is not a canonical call counts every token, as for a sentence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["call_content_spans", "content_token_count", "content_token_mask"]

Span = tuple[int, int]


def _dump(value: Any, at: int, spans: list[Span]) -> str:
    """``json.dumps(value, ensure_ascii=False, sort_keys=True)`` written from offset ``at``, recording the
    character spans of its leaf values (a string's without its quotes)."""
    if isinstance(value, dict):
        out = "{"
        for i, key in enumerate(sorted(value)):
            if i:
                out += ", "
            out += json.dumps(key, ensure_ascii=False) + ": "
            out += _dump(value[key], at + len(out), spans)
        return out + "}"
    if isinstance(value, list):
        out = "["
        for i, item in enumerate(value):
            if i:
                out += ", "
            out += _dump(item, at + len(out), spans)
        return out + "]"
    text = json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        if len(text) > 2:
            spans.append((at + 1, at + len(text) - 1))
    else:
        spans.append((at, at + len(text)))
    return text


def call_content_spans(text: str) -> list[Span] | None:
    """The character spans of the tool's name and of each argument value in ``name(json)``; None when ``text``
    is not a call in the canonical form (it is then scored as any text)."""
    open_at = text.find("(")
    if open_at <= 0 or not text.endswith(")"):
        return None
    body = text[open_at + 1 : -1]
    try:
        arguments = json.loads(body)
    except ValueError:
        return None
    spans: list[Span] = [(0, open_at)]
    try:
        rebuilt = _dump(arguments, open_at + 1, spans)
    except (TypeError, ValueError):
        return None
    if rebuilt != body:
        return None
    return spans


def content_token_mask(text: str, tokens: Sequence[str]) -> list[bool] | None:
    """For each token piece of the scored ``text``, whether it carries content; None when the pieces do not
    spell ``text`` or ``text`` is not a canonical call."""
    spans = call_content_spans(text)
    if spans is None or not tokens or "".join(tokens) != text:
        return None
    mask: list[bool] = []
    start = 0
    for piece in tokens:
        end = start + len(piece)
        mask.append(any(a < end and start < b for a, b in spans) if end > start else False)
        start = end
    return mask


def content_token_count(text: str, tokens: Sequence[str], n_tokens: int) -> int:
    """How many of the ``n_tokens`` tokens of the scored call ``text`` carry its content (at least 1); see the
    module docstring for the two fallbacks."""
    mask = content_token_mask(text, tokens)
    if mask is not None and len(mask) == n_tokens:
        return max(1, sum(mask))
    spans = call_content_spans(text)
    if spans is None or not text:
        return max(1, n_tokens)
    chars = sum(b - a for a, b in spans)
    return max(1, round(n_tokens * chars / len(text)))
