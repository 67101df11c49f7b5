"""§7.7 — prompt-injection containment, with a fence that input cannot forge.

Everything a request carries from the turn — the claim, the query, every source with its
``[id] label`` header — travels in its own data region: a line holding the request's fence marker,
the text, and the marker again. The marker is ``<<<DATA-`` + a 16-hex nonce + ``>>>``, the nonce a
digest of the inputs every request of one trace shares (the claim and the query), so the prefix
shared by the masks of a trace stays identical and prompt caching keeps working.

Before anything is wrapped, every fence-like marker in it — any ``<<<…>>>`` on one line, the
marker of this request, of another request or of an earlier version of this project — is replaced
by ``[fence marker removed]``. So no input can hold the marker of its request, and no input can
close its region: the nonce is defence in depth, the neutralising is the guarantee. The data-only
rule (``prompts/data_only_rule.txt``) names the marker of the request.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import regex

FENCE = "<<<PROVENANCE-SOURCE-DATA>>>"
"""The fixed marker of earlier versions. Like every fence-like marker, it is neutralised in input."""
FENCE_REMOVED = "[fence marker removed]"
NONCE_HEX = 16

# ``<<<``, up to 200 characters without ``< > [ ] newline``, ``>>>``. The replacement holds ``[`` and ``]``,
# so no marker can form around it: one linear pass removes every one, however the input nests them.
_FENCE_LIKE = regex.compile(r"<<<[^<>\[\]\n]{0,200}+>>>")
MARKER_RE = regex.compile(r"<<<DATA-[0-9a-f]{" + str(NONCE_HEX) + r"}>>>")
"""A request's marker, whatever its nonce."""
MARKER_LINE_RE = regex.compile(r"^" + MARKER_RE.pattern + r"$", regex.MULTILINE)
"""A line holding only a marker: what opens and closes a data region (the rule only names it inline)."""


def neutralise(text: str) -> str:
    """Replace every fence-like marker by ``[fence marker removed]`` (idempotent, linear in the text)."""
    return _FENCE_LIKE.sub(FENCE_REMOVED, text)


def _one_line(label: str) -> str:
    return " ".join(label.split())


@dataclass(frozen=True)
class Fence:
    """The fence of one request: its marker and the ways to put text inside it."""

    marker: str

    @classmethod
    def for_inputs(cls, *shared: str) -> Fence:
        """The fence for requests sharing ``shared`` (claim and query of a trace): one nonce per trace."""
        digest = hashlib.sha256("\x00".join(shared).encode("utf-8", "surrogatepass")).hexdigest()
        return cls(f"<<<DATA-{digest[:NONCE_HEX]}>>>")

    def wrap(self, text: str) -> str:
        """marker + "\\n" + neutralise(text) + "\\n" + marker."""
        return self.marker + "\n" + neutralise(text) + "\n" + self.marker

    def block(self, source_id: str, label: str, text: str) -> str:
        """A source as the tiers list it: its ``[id] label`` line and its text, both inside the region.
        A label comes from tool arguments, which an attacker can influence, so it never stands outside
        the data region; it is kept on one line so it cannot start lines of its own."""
        return self.wrap(f"[{source_id}] {_one_line(label)}\n{text}")

    def rule(self) -> str:
        """The data-only rule naming this request's marker, shared by every tier."""
        return data_only_rule(self.marker)


def split_fenced(text: str) -> tuple[list[str], str]:
    """(the data regions, the text outside them) of a rendered prompt, whatever its marker."""
    parts = MARKER_LINE_RE.split(text)
    return parts[1::2], "\n".join(parts[0::2])


def data_only_rule(marker: str) -> str:
    """The data-only rule naming a request's marker, one prompt file shared by every tier."""
    from prompts import render

    return render("data_only_rule", fence=marker).text


def data_only_rule_version() -> str:
    from prompts import template

    return template("data_only_rule")[1]
