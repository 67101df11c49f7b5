"""Sources whose text holds a redaction marker: a value the operator's patterns replaced before the turn was
stored (``[redacted:NAME]``, written by the service's redaction). The estimator never sees the value; it says
where one was replaced, so a quote, a trace result and the gate never present the marker as the source's words.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from estimator.corpus.units import Unit

__all__ = ["MARKER", "redaction_warnings"]

MARKER = re.compile(r"\[redacted:([a-z0-9_]{1,32})\]")
"""The marker a redacted value is replaced by, on the same line (so line spans stay valid)."""


def redaction_warnings(units: Iterable[Unit]) -> list[str]:
    """One line per source with a redacted value: its id, label and how many values of which pattern."""
    out = []
    for unit in units:
        found = Counter(MARKER.findall(f"{unit.header}\n{unit.text}"))
        if found:
            counts = ", ".join(f"{n} × {name}" for name, n in sorted(found.items()))
            values = "a value was" if sum(found.values()) == 1 else "values were"
            out.append(f"{unit.id} ({unit.label}): {values} redacted before the turn was stored ({counts})")
    return out
