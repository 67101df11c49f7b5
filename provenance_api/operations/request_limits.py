"""The free tier's request-rate limit as the HTTP layer applies it: one ``RequestLimiter`` per service
(Redis-backed, shared by every process, when Redis is configured; in memory in the embedded mode), and
the check of one caller's request against it."""

from __future__ import annotations

from provenance_api.operations.auth import Principal
from provenance_api.operations.services import Services
from provenance_api.storage.request_limits import InProcessRequestLimiter, RedisRequestLimiter, RequestLimiter


def free_tier_limiter(services: Services) -> RequestLimiter:
    settings = services.settings
    size, window = settings.free_tier_rate_max_requests, settings.free_tier_rate_window_seconds
    if services.redis is not None:
        return RedisRequestLimiter(services.redis, size, window, prefix=settings.redis_prefix)
    return InProcessRequestLimiter(size, window)


async def check_free_tier_rate(limiter: RequestLimiter, caller: Principal) -> None:
    """Count the caller's request (per tenant and user) or raise ``RateLimited`` with its Retry-After."""
    await limiter.hit(caller.budget_key)
