"""Service-only members of the one error hierarchy (``errors.ProvenanceError``): statuses the
HTTP layer needs that the CLI never raises."""

from __future__ import annotations

from provenance_api.core.errors import ProvenanceError


class Gone(ProvenanceError):
    """The resource existed but can no longer be used (an expired quote)."""

    status = 410
    type_slug = "gone"
    title = "Gone"


class MethodNotAllowed(ProvenanceError):
    status = 405
    type_slug = "method-not-allowed"
    title = "Method not allowed"


class NotReady(ProvenanceError):
    """The service cannot serve yet (database unreachable, schema behind)."""

    status = 503
    type_slug = "not-ready"
    title = "Service not ready"
