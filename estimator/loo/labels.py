"""The short words shown for each verdict, role, span-check label and diagnosis, defined here once.

A result's ``verdict_text`` is ``VERDICT_TEXT[verdict]``. The glossary (``GET /v1/glossary``) takes each
term's ``label`` from these mappings, and the viewer and the command line show the glossary's labels, so
a word changed here changes everywhere. The estimator never imports the service, so the words it
returns, and the words for the values it returns, live here.
"""

from __future__ import annotations

from collections.abc import Mapping

from estimator.loo.diagnosis import GROUNDED, KNEW_IT, MISREAD, OVERRODE, UNVERIFIABLE
from estimator.results.models import Role, SupportLabel, Verdict

__all__ = [
    "DIAGNOSIS_LABELS",
    "INSTRUCTION_SUPPORT_LABELS",
    "ROLE_LABELS",
    "SUPPORT_LABELS",
    "VERDICT_LABELS",
    "VERDICT_TEXT",
]

VERDICT_LABELS: Mapping[Verdict, str] = {
    "attributed": "attributed",
    "redundant": "carried by several sources",
    "internal_knowledge": "model's own knowledge",
    "no_information": "no information",
}
"""Each verdict in a few words, as a title shows it."""

VERDICT_TEXT: Mapping[Verdict, str] = {
    **VERDICT_LABELS,
    "no_information": VERDICT_LABELS["no_information"]
    + ": the judge gave no usable score for a measurement the verdict rests on",
}
"""A result's ``verdict_text``: the verdict's label, and for no information why."""

ROLE_LABELS: Mapping[Role, str] = {
    "grounds": "grounds",
    "distractor": "distractor",
    "irrelevant": "irrelevant",
    "redundant": "redundant",
}
"""A layer's or source's role, as shown beside its drop."""

SUPPORT_LABELS: Mapping[SupportLabel, str] = {
    "supported": "states the claim",
    "contradicted": "contradicts the claim",
    "silent": "says nothing about this claim",
}
"""What the span check found in a source, in words."""

INSTRUCTION_SUPPORT_LABELS: Mapping[SupportLabel, str] = {
    "supported": "directs this response",
    "contradicted": "contradicts this response",
    "silent": "no instruction here bears on this",
}
"""The same for a source of the instructions layer: an instruction directs a response rather than states."""

DIAGNOSIS_LABELS: Mapping[str, str] = {
    GROUNDED: GROUNDED,
    MISREAD: MISREAD,
    KNEW_IT: "the model already knew this, and your data agrees",
    OVERRODE: OVERRODE,
    UNVERIFIABLE: UNVERIFIABLE,
}
"""Each diagnosis a result can carry (the estimator's value) as a reader is shown it."""
