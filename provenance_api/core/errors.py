"""The service's one error hierarchy.

Every error the service raises on purpose is a ``ProvenanceError``; one handler turns it into an
RFC 9457 ``application/problem+json`` body with ``to_problem()``. Each class fixes the HTTP
``status``, a stable ``type_slug`` (the problem type is ``urn:provenance:problem:<slug>``) and a
short ``title``; each instance carries a human ``detail`` and optionally the offending input
``field``, a ``fix`` hint and ``extra`` extension members.

Model-provider failures are ``ProviderError``s, which are also the estimator's ``LLMError`` (read
as "no information"), so the estimator and the HTTP layer share one vocabulary. Details are
scrubbed of anything that looks like a credential before they are stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

from estimator.seams.llm import LLMError

__all__ = [
    "PROBLEM_TYPE_PREFIX",
    "Conflict",
    "CostRefused",
    "InvalidInput",
    "JobFailed",
    "NotFound",
    "PayloadTooLarge",
    "ProvenanceError",
    "ProviderAuthError",
    "ProviderBadRequest",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderResponseInvalid",
    "ProviderSetting",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "Unauthorized",
    "problem_type",
    "scrub_secrets",
]

PROBLEM_TYPE_PREFIX = "urn:provenance:problem:"
REDACTED = "[redacted]"

# Members RFC 9457 defines; ``extra`` may not shadow them.
_STANDARD_MEMBERS = frozenset({"type", "title", "status", "detail", "instance"})

# Group 1 of each pattern is kept, the rest of the match is replaced.
_SECRET_PATTERNS = (
    re.compile(r"(?i)\b((?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{4,}"),
    re.compile(r"()\b(?:sk|pk|rk)-[A-Za-z0-9_-]{6,}"),  # OpenAI / Anthropic style keys
    re.compile(
        r"(?i)((?:api[_-]?key|x-api-key|authorization|access[_-]?token|secret)[\"']?\s*[:=]\s*[\"']?)"
        r"[^\s\"',;&]{4,}"
    ),
    re.compile(r"(://)[^/\s:@]+:[^/\s@]+(?=@)"),  # user:password@ in URLs
)


def problem_type(slug: str) -> str:
    return PROBLEM_TYPE_PREFIX + slug


def scrub_secrets(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the given secret values and credential-looking substrings replaced."""
    for secret in secrets:
        if secret and len(secret) >= 3:
            text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


class ProvenanceError(Exception):
    """Base of every deliberate service error; maps to one RFC 9457 problem."""

    status: ClassVar[int] = 500
    type_slug: ClassVar[str] = "internal-error"
    title: ClassVar[str] = "Internal error"

    def __init__(
        self,
        detail: str | None = None,
        *,
        field: str | None = None,
        fix: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.detail: str = scrub_secrets(detail if detail is not None else self.title)
        self.field: str | None = field
        self.fix: str | None = fix
        self.extra: dict[str, Any] = dict(extra or {})
        super().__init__(self.detail)

    @property
    def type_uri(self) -> str:
        return problem_type(self.type_slug)

    def headers(self) -> dict[str, str]:
        """HTTP headers that belong with this problem (e.g. ``Retry-After``)."""
        return {}

    def to_problem(self, instance: str | None = None) -> dict[str, Any]:
        """The RFC 9457 problem object: type, title, status, detail, [instance], [field], [fix], extras."""
        problem: dict[str, Any] = {
            "type": self.type_uri,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
        }
        if instance is not None:
            problem["instance"] = instance
        if self.field is not None:
            problem["field"] = self.field
        if self.fix is not None:
            problem["fix"] = self.fix
        for key, value in self.extra.items():
            if key not in _STANDARD_MEMBERS and key not in problem:
                problem[key] = value
        return problem

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.detail!r})"


def _retry_after_header(retry_after: float | None) -> dict[str, str]:
    if retry_after is None:
        return {}
    seconds = max(0, int(-(-retry_after // 1)))  # HTTP wants whole seconds; round up
    return {"Retry-After": str(seconds)}


class InvalidInput(ProvenanceError):
    status = 422
    type_slug = "invalid-input"
    title = "Invalid input"


class NotFound(ProvenanceError):
    status = 404
    type_slug = "not-found"
    title = "Not found"


class Conflict(ProvenanceError):
    status = 409
    type_slug = "conflict"
    title = "Conflict"


class Unauthorized(ProvenanceError):
    status = 401
    type_slug = "unauthorized"
    title = "Unauthorized"


class RateLimited(ProvenanceError):
    status = 429
    type_slug = "rate-limited"
    title = "Too many requests"

    def __init__(
        self,
        detail: str | None = None,
        *,
        retry_after: float | None = None,
        field: str | None = None,
        fix: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.retry_after = retry_after
        merged = dict(extra or {})
        if retry_after is not None:
            merged.setdefault("retry_after", retry_after)
        super().__init__(detail, field=field, fix=fix, extra=merged)

    def headers(self) -> dict[str, str]:
        return _retry_after_header(self.retry_after)


class PayloadTooLarge(ProvenanceError):
    status = 413
    type_slug = "payload-too-large"
    title = "Payload too large"


class CostRefused(ProvenanceError):
    status = 422
    type_slug = "cost-refused"
    title = "Refused by the cost gate"


class JobFailed(ProvenanceError):
    status = 500
    type_slug = "job-failed"
    title = "Job failed"


# --------------------------------------------------------------------------- provider family

ProviderSetting = Literal["key", "endpoint"]
"""The kind of setting a provider error asks the user to fix: the key (credentials) or the endpoint (where the
calls go). Read from the error's type (``ProviderError.setting``), never from its message."""


class ProviderError(ProvenanceError, LLMError):
    """A model-provider call produced no usable answer (also the estimator's ``LLMError``).

    ``billed``: the provider reported usage for the failed call (it charged for it).
    ``provider_status``: the provider's HTTP status, when it answered one.
    ``retry_after``: seconds the provider asked us to wait, when it said so.
    ``retryable``: whether a later identical call may succeed.
    ``provider_message``: the provider's own error text (secrets scrubbed), when it gave one.
    """

    status = 502
    type_slug = "provider-error"
    title = "Model provider error"
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        detail: str | None = None,
        *,
        billed: bool = False,
        provider_status: int | None = None,
        retry_after: float | None = None,
        provider_message: str | None = None,
        field: str | None = None,
        fix: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        merged = dict(extra or {})
        if provider_status is not None:
            merged.setdefault("provider_status", provider_status)
        if retry_after is not None:
            merged.setdefault("retry_after", retry_after)
        super().__init__(detail, field=field, fix=fix, extra=merged)
        self.billed = billed  # after super(): LLMError.__init__ resets it
        self.provider_status = provider_status
        self.retry_after = retry_after
        self.provider_message: str = scrub_secrets(provider_message or "")

    def headers(self) -> dict[str, str]:
        return _retry_after_header(self.retry_after)

    @property
    def setting(self) -> ProviderSetting | None:
        """The kind of setting to fix, by this error's type; None when no one setting is at fault."""
        return None


class ProviderRateLimited(ProviderError):
    """The provider answered 429. Surfaced as 503 + Retry-After: the service, not its caller, is throttled."""

    status = 503
    type_slug = "provider-rate-limited"
    title = "Model provider rate limit"
    retryable = True


class ProviderUnavailable(ProviderError):
    """The provider answered 5xx, or could not be reached (connection refused/reset)."""

    status = 502
    type_slug = "provider-unavailable"
    title = "Model provider unavailable"
    retryable = True

    @property
    def setting(self) -> ProviderSetting | None:
        """Unreachable (no HTTP status): the endpoint; a 5xx answer came from a reachable one."""
        return "endpoint" if self.provider_status is None else None


class ProviderTimeout(ProviderError):
    status = 504
    type_slug = "provider-timeout"
    title = "Model provider timed out"
    retryable = True

    @property
    def setting(self) -> ProviderSetting | None:
        return "endpoint"


class ProviderAuthError(ProviderError):
    """The provider refused our credentials (401/403). The detail never contains the key."""

    status = 502
    type_slug = "provider-auth"
    title = "Model provider rejected the credentials"

    @property
    def setting(self) -> ProviderSetting | None:
        return "key"


class ProviderBadRequest(ProviderError):
    """The provider rejected the request itself (400/404/422, context window, unknown model). Not retried."""

    status = 502
    type_slug = "provider-bad-request"
    title = "Model provider rejected the request"


class ProviderResponseInvalid(ProviderError):
    """The provider answered 2xx, but with an empty or unreadable body, or without choices or content."""

    status = 502
    type_slug = "provider-response-invalid"
    title = "Model provider answer unusable"
