"""What storage says when it cannot do what was asked, in storage's own words.

Storage knows nothing of HTTP: it names the record and the field that identified it, never a status code or
an endpoint to call. ``provenance_api.http.problems.storage_problem`` is the one place that turns these
into problems (404, 409, 410, 422, 503) with a fix for the caller; the CLI prints them through the same mapping.
"""

from __future__ import annotations

from typing import Any


class StorageError(Exception):
    """Base of storage's outcomes. ``record`` is the kind of record (``turn``, ``quote``, ``trace``…),
    ``field`` the input that named it, ``extra`` members a caller may show."""

    def __init__(
        self, detail: str, *, record: str, field: str | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.record = record
        self.field = field
        self.extra = dict(extra or {})


class RecordMissing(StorageError):
    """No such record for this tenant (another tenant's record is missing too)."""


class RecordExpired(StorageError):
    """The record exists but its time is over (an expired quote)."""


class RecordConflict(StorageError):
    """The write contradicts what is stored (different content under a stored id, a used quote)."""


class RecordInvalid(StorageError):
    """The value cannot be stored or read back as given (a lone surrogate, a cursor of another tenant)."""


class RecordUnreadable(StorageError, ValueError):
    """The record is stored but can no longer be read as one (e.g. a turn stored by an older version beyond
    today's limits). Its id is in ``extra``; deleting it is the way out. Also a ``ValueError``, as a body that
    does not parse always was, so callers that skip unreadable rows keep doing so."""


class StorageUnavailable(StorageError):
    """The database cannot durably take (or give) the data right now: the disk is full, the file is damaged,
    replaced or read-only, its write-ahead log is gone, or the server is unreachable. ``cause`` is one of
    ``CAUSES``; ``retry_after`` (seconds) is set when waiting may help, None when an operator must act first.
    ``detail`` never holds a file path or a server address."""

    CAUSES = frozenset(
        {
            "disk-full",
            "io-error",
            "corrupt",
            "not-a-database",
            "read-only",
            "missing",
            "replaced",
            "wal-lost",
            "busy",
            "unreachable",
        }
    )

    def __init__(self, detail: str, *, cause: str, retry_after: float | None = None) -> None:
        assert cause in self.CAUSES, cause
        extra: dict[str, Any] = {"cause": cause}
        if retry_after is not None:
            extra["retry_after"] = retry_after
        super().__init__(detail, record="database", extra=extra)
        self.cause = cause
        self.retry_after = retry_after
