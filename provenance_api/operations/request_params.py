"""A request's ``params``: the server's constants with the request's overrides, validated against the
server's ceilings and policy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from estimator.params import Params
from provenance_api.core.errors import InvalidInput

# A request may lower these, never raise them above the server's value.
CEILINGS = (
    "max_calls",
    "max_evidence_tokens",
    "max_sources",
    "concurrency",
    "causal_samples",
    "causal_max_output",
    "source_token_cap",
    "support_token_cap",
    "history_max_messages",
)
# Server policy, not per-request.
SERVER_ONLY = ("rate_max_calls", "rate_window_seconds", "regex_timeout_seconds")


def request_params(base: Params, overrides: Mapping[str, Any] | None) -> Params:
    """``base`` with a request's overrides, validated: unknown names, bad values, server-only
    fields and raised ceilings are InvalidInput naming ``params.<field>``."""
    if not overrides:
        return base
    for name in overrides:
        if name in SERVER_ONLY:
            raise InvalidInput(
                f"params.{name} is server policy and cannot be set per request",
                field=f"params.{name}",
                fix=f"remove params.{name} from the request",
            )
    try:
        params = base.override(dict(overrides))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        name = f"params.{where}" if where else "params"
        raise InvalidInput(
            f"{name}: {first['msg']}",
            field=name,
            fix="see the Params schema for each constant's range; unknown names are rejected",
        ) from None
    for name in CEILINGS:
        if getattr(params, name) > getattr(base, name):
            raise InvalidInput(
                f"params.{name}={getattr(params, name)} is above this server's ceiling of {getattr(base, name)}",
                field=f"params.{name}",
                fix=f"use a value of at most {getattr(base, name)}, or omit it",
            )
    return params
