"""§7.7 — prompt-injection containment.

A source's text is wrapped between two copies of a fence marker; any copy of the marker
inside the source is neutralised first, so a source can never close its own data region.
The data-only rule that goes with it is one prompt file (``prompts/data_only_rule.txt``)
appended to every tier's instructions.
"""

from __future__ import annotations

FENCE = "<<<PROVENANCE-SOURCE-DATA>>>"
FENCE_REMOVED = "[fence marker removed]"


def neutralise(text: str) -> str:
    return text.replace(FENCE, FENCE_REMOVED)


def fence(text: str) -> str:
    """Fence(text) = FENCE + "\\n" + replace(text, FENCE, "[fence marker removed]") + "\\n" + FENCE."""
    return FENCE + "\n" + neutralise(text) + "\n" + FENCE


def fenced_block(source_id: str, label: str, text: str) -> str:
    """A source as the grounding tiers list it: its ``[id] label`` header and its text, both inside
    the fence. A label comes from tool arguments, which an attacker can influence, so it never stands
    outside the data region; it is kept on one line so it cannot start lines of its own."""
    header = f"[{source_id}] {' '.join(label.split())}"
    return fence(header + "\n" + text)


def data_only_rule() -> str:
    """The data-only rule, one prompt file shared by every tier."""
    from prompts import render

    return render("data_only_rule", fence=FENCE).text


def data_only_rule_version() -> str:
    from prompts import template

    return template("data_only_rule")[1]
