"""The CLI's settings and database: read ``PROVENANCE_*`` once, open the database for one piece of work.

Every command that needs them (``serve``, ``worker``, ``keys``, ``import``, ``traces``, the trace log) takes
them from here, so no command module imports another's private helpers. The database layer is imported only
when a command opens it: the free commands (``gate``, ``quote``, ``explain``) never pay for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from provenance_api.core.errors import InvalidInput
from provenance_api.core.settings import Settings

if TYPE_CHECKING:
    from provenance_api.storage.session import Database

__all__ = ["load_settings", "with_db"]

T = TypeVar("T")


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment, with the command's flags (``None``: not given) on top; a bad
    value is an ``InvalidInput`` naming the variable and the fix."""
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "PROVENANCE_" + ".".join(str(x) for x in first["loc"]).upper()
        raise InvalidInput(f"{name}: {first['msg']}", field=name, fix=f"correct or unset {name}") from None
    settings.base_params  # noqa: B018 - validate PROVENANCE_PARAMS before anything starts
    return settings


async def with_db(settings: Settings, work: Callable[[Database], Awaitable[T]]) -> T:
    """Run ``work`` against the configured database, migrated to the newest schema, and close it."""
    from provenance_api.storage.session import Database

    settings.ensure_data_dir()
    db = Database(settings.effective_database_url)
    try:
        await db.migrate()
        return await work(db)
    finally:
        await db.dispose()
