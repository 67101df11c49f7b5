"""A measured score, and the configuration of every result shape's model (a leaf: imports nothing of the
estimator's).

A score that carries no information is ``NaN`` in memory, where the estimator does arithmetic on it, and
``null`` in JSON, never a number; validating ``null`` gives ``NaN`` back. ``Score | None`` is a score that
may also not have been measured at all (``None`` in memory); in JSON both are ``null``, and ``null``
validates to ``None``.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema

__all__ = ["RESULT_CONFIG", "Score", "json_number"]


def json_number(value: float | None) -> float | None:
    """A float for JSON: NaN and infinities become null (no information), never a number."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return value


def _null_is_nan(value: object) -> object:
    return math.nan if value is None else value


Score = Annotated[
    float,
    BeforeValidator(_null_is_nan),
    PlainSerializer(json_number, when_used="json"),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "null"}]}),
]
"""A measured score: NaN in memory and null in JSON when the measurement carries no information."""


RESULT_CONFIG = ConfigDict(frozen=True, from_attributes=True)
"""A result shape's model: immutable, and validated from any object with its fields' attributes."""
