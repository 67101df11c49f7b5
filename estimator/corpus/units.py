"""The layered corpus's vocabulary: layers, evidence records and source units."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

from estimator.corpus.envelope import Envelope


class Layer(StrEnum):
    """The three layers of provenance (§2.1), in display order."""

    TOOLS = "tools"
    INSTRUCTIONS = "instructions"
    HISTORY = "history"


PROVENANCE_LAYER_ORDER: tuple[Layer, ...] = (Layer.TOOLS, Layer.INSTRUCTIONS, Layer.HISTORY)

TOOL_ERROR = "tool_error"
"""The kind of a source that is a failed or denied call's error text (in the tools layer, and in the history layer
for an earlier turn's failed return): evidence of what went wrong, labelled so a reader never takes it for data."""


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Evidence:
    """An evidence record for one unit (in the spirit of an evidence envelope).

    ``digest`` is the sha256 of the unit's full, untruncated text (a tool's with its call header above
    it, as the model saw it); ``tokens`` its untruncated size; ``transformations`` every change made
    on the way to a prompt.
    """

    digest: str
    source: str
    tokens: int
    transformations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unit:
    """One source of the context: a tool call with its return (or, ``kind`` ``tool_error``, the error text of a
    call that failed), the system prompt or one of its rules, or a prior message.

    ``text`` is the source's own content and nothing else: the tool's return, the system prompt, the
    message. Quotes verify against it and its line numbers are the content's own (line 1 is the
    content's first line). ``header`` is the line(s) this project writes above the content in every
    prompt — the call ``name(json(args))`` of a tool, ``[user said, 2 turn(s) ago]`` of a message —
    shown to the model (``shown``) but never evidence: a quote of it does not verify."""

    id: str
    kind: str
    tool: str
    label: str
    text: str
    ordinal: int
    layer: Layer
    evidence: Evidence
    unversioned: bool = False
    turns_ago: int | None = None
    header: str = ""
    call_id: str | None = None
    """A tool source's call id, as the history recorded it (None when it has none, or for other layers)."""
    returned_at: int | None = None
    """When a tool source's return reached the agent: its position in the turn's sequence of tool calls and
    returns (``estimator.actions.targets``); a call made at a later position could have read it."""
    prompt_lines: tuple[int, int] | None = None
    """A rule of the system prompt (``Params.instructions_as_rules``): the prompt's lines it spans, 1-based and
    inclusive — its line n is the prompt's line ``prompt_lines[0] + n - 1``. None for the prompt kept whole."""
    recorded: Envelope | None = None
    """The evidence envelope ``build_corpus`` made from what the history recorded (``envelope`` reads it)."""

    @property
    def envelope(self) -> Envelope:
        """The source's evidence envelope (``estimator.corpus.envelope``); a unit made without one has its tool,
        digest and transformations, everything else not recorded."""
        if self.recorded is not None:
            return self.recorded
        return Envelope(tool=self.tool, digest=self.evidence.digest, transformations=self.evidence.transformations)

    @property
    def lines(self) -> list[str]:
        """The content's lines; ``lines[n - 1]`` is line n of a quote's window."""
        return self.text.split("\n")

    @property
    def shown(self) -> str:
        """What a prompt shows of this source: the header (if any) above the content."""
        return self.header + "\n" + self.text if self.header else self.text


@dataclass(frozen=True)
class ExcludedCall:
    """A tool call that was not made a unit, and why (disclosed, never silent)."""

    tool: str
    label: str
    reason: str


@dataclass(frozen=True)
class ToolMedia:
    """An image, audio clip, video or binary resource a tool returned: its text names it (``[image (image/png)
    not inlined]``), its bytes are not in any source, so nothing drawn from it can be scored."""

    what: str
    """What it is, as the return names it: ``image (image/png)``, ``resource file:///b.bin (binary)``."""
    tool: str
    source_id: str
    """The unit whose text names it."""

    @property
    def name(self) -> str:
        """Its entry in ``Corpus.unscorable``."""
        return f"{self.what} returned by tool {self.tool}"

    @property
    def warning(self) -> str:
        article = "An" if self.what[:1].lower() in "aeiou" else "A"
        return (
            f"{article} {self.what} returned by tool {self.tool} ({self.source_id}) cannot be scored: only its name "
            "is in the source, so a claim drawn from it reads as ungrounded."
        )


@dataclass(frozen=True)
class Corpus:
    """The layered corpus of one turn."""

    units: tuple[Unit, ...]
    unscorable: tuple[str, ...] = ()
    """What the turn's context held that no tier can read: the attachments whose bytes were not kept, then the
    media the tools returned (``tool_media``, by ``ToolMedia.name``)."""
    excluded: tuple[ExcludedCall, ...] = ()
    path: str = "none"
    notes: tuple[str, ...] = field(default=())
    warnings: list[str] = field(default_factory=list, compare=False, hash=False)
    """Every truncation and cap made while building the corpus, in plain words, each naming the source
    id it concerns (a cut message, a source over a tier's token cap, history items dropped by the cap)."""
    tool_media: tuple[ToolMedia, ...] = ()
    failed_calls_as_sources: bool = True
    """Whether failed calls' error texts are sources (``Params.failed_calls_as_sources``): the history layer's
    items are ``build.history_messages(turn, failed_calls=…)`` with this value."""

    def unscorable_warnings(self) -> list[str]:
        """One sentence per entry of ``unscorable``: an attachment that was not kept, or a tool's image."""
        media = {m.name: m for m in self.tool_media}
        return [
            media[name].warning if name in media else f"Attachment {name!r} was not kept, so it cannot be scored."
            for name in self.unscorable
        ]

    def __len__(self) -> int:
        return len(self.units)

    def by_id(self, unit_id: str) -> Unit:
        for u in self.units:
            if u.id == unit_id:
                return u
        raise KeyError(unit_id)

    def layers_present(self) -> tuple[Layer, ...]:
        present = {u.layer for u in self.units}
        return tuple(layer for layer in PROVENANCE_LAYER_ORDER if layer in present)

    def in_layer(self, layer: Layer) -> tuple[Unit, ...]:
        return tuple(u for u in self.units if u.layer == layer)

    def tool_units(self) -> tuple[Unit, ...]:
        return self.in_layer(Layer.TOOLS)

    @property
    def digest(self) -> str:
        """A digest over every unit's digest, in id order: identifies the corpus a result was computed on."""
        return sha256_hex("\n".join(f"{u.id}:{u.evidence.digest}" for u in self.units))

    @property
    def unversioned(self) -> bool:
        return any(u.unversioned for u in self.units)
