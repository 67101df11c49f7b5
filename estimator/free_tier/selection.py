"""Which sentence the user selected: it must occur in the turn's response (after
normalisation) or be one of its segments. Anything else is refused, not guessed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from estimator.free_tier.segment import Segment
from estimator.spans.verify import normalise


@dataclass(frozen=True)
class Selection:
    text: str
    segment_id: str | None


def select_claim(response: str, segments: Sequence[Segment], sentence: str) -> Selection | None:
    """Return the selection when ``sentence`` is a segment (by id or text) or occurs in the response."""
    wanted = sentence.strip()
    if not wanted:
        return None
    for seg in segments:
        if seg.id == wanted:
            return Selection(seg.text, seg.id)
    needle = normalise(wanted)
    for seg in segments:
        if normalise(seg.text) == needle:
            return Selection(seg.text, seg.id)
    if needle and needle in normalise(response):
        containing = next((s.id for s in segments if needle in normalise(s.text)), None)
        return Selection(wanted, containing)
    return None
