"""Jobs across processes: trace jobs queued in Redis (arq), run by ``provenance worker`` processes.

With ``PROVENANCE_REDIS_URL`` set, ``POST /v1/traces`` creates the job row (``queued``) and its budget
reservation as before, then enqueues it to arq; any worker takes it. Job state lives in the database
(every API replica reads it from there), and live progress is published on a Redis channel that every
API replica listens to, so ``GET /v1/traces/{id}`` and its event stream work on any replica.

Never lost, never run twice silently:

* arq runs each job at most once (``max_tries=1``); the job row's ``queued → running`` transition is
  atomic, so a second delivery finds it not queued and does nothing.
* A worker holds a *lease* on each job it runs (``<prefix>:lease:<job>``, renewed every third of
  ``worker_lease_seconds``; set before the job is marked running). Every worker reaps: a ``running``
  job without a lease belongs to a dead worker. If the dead run had billed no model call, the job
  goes back to ``queued`` and is enqueued again (once); otherwise it ends ``interrupted`` with the
  calls it had billed, and its budget reservation is settled to the calls it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, Protocol

import anyio.to_thread
from arq import func
from arq.connections import ArqRedis, RedisSettings, create_pool
from arq.worker import Worker
from redis import Redis as SyncRedis
from redis.asyncio import Redis

from provenance_api.core.observability import log_fields
from provenance_api.core.settings import Settings
from provenance_api.jobs.runner import ProgressHub, TraceContext, run_trace_job
from provenance_api.storage import crud_calls, crud_traces
from provenance_api.storage.crud_traces import Progress
from provenance_api.storage.limits import Limiter, Reservation
from provenance_api.storage.session import Database

log = logging.getLogger("provenance_api.jobs.queue")

INTERRUPTED_WORKER_LOST = "the worker running this trace stopped (its lease expired); calls already billed are kept"
MAX_REQUEUES = 1


def queue_name(prefix: str) -> str:
    return f"{prefix}:queue"


def lease_key(prefix: str, job_id: str) -> str:
    return f"{prefix}:lease:{job_id}"


def reservation_key(prefix: str, job_id: str) -> str:
    return f"{prefix}:reservation:{job_id}"


def redis_client(url: str) -> Redis:
    client: Redis = Redis.from_url(url, health_check_interval=30)
    return client


# --------------------------------------------------------------------------- API side


class ArqJobRunner:
    """``jobs.JobRunner`` that enqueues to arq instead of running the job here."""

    def __init__(self, url: str, prefix: str, reservation_ttl: int) -> None:
        self.url = url
        self.prefix = prefix
        self.reservation_ttl = reservation_ttl
        self._pool: ArqRedis | None = None
        self._lock = asyncio.Lock()

    async def pool(self) -> ArqRedis:
        async with self._lock:
            if self._pool is None:
                self._pool = await create_pool(
                    RedisSettings.from_dsn(self.url), default_queue_name=queue_name(self.prefix)
                )
            return self._pool

    def submit(self, job_id: str, work: Callable[[], Awaitable[None]]) -> None:
        raise RuntimeError("jobs go through Redis: use enqueue()")

    async def enqueue(self, job_id: str, reservation: Reservation, work: Callable[[], Awaitable[None]]) -> None:
        await enqueue_trace(await self.pool(), self.prefix, job_id, reservation, self.reservation_ttl)

    async def stop(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None


async def enqueue_trace(
    pool: ArqRedis, prefix: str, job_id: str, reservation: Reservation, ttl: int, attempt: int = 0
) -> None:
    payload = asdict(reservation)
    await pool.set(reservation_key(prefix, job_id), json.dumps(payload), ex=ttl)
    arq_id = job_id if attempt == 0 else f"{job_id}.retry{attempt}"
    await pool.enqueue_job("run_trace", job_id, payload, _job_id=arq_id, _queue_name=queue_name(prefix))


class RedisProgressHub(ProgressHub):
    """Live progress shared through a Redis channel.

    A worker's ``publish`` is sent on ``<prefix>:progress`` (in order, by one sender task); an API
    replica's first ``wait`` subscribes, and every message updates ``live`` and wakes the waiters —
    so the unchanged routes serve progress from whichever process runs the job."""

    def __init__(self, redis: Redis, prefix: str) -> None:
        super().__init__()
        self.redis = redis
        self.channel = f"{prefix}:progress"
        self._outbox: asyncio.Queue[tuple[str, Progress | None]] | None = None
        self._sender: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None

    def publish(self, job_id: str, progress: Progress | None) -> None:
        super().publish(job_id, progress)
        if self._outbox is None:
            self._outbox = asyncio.Queue()
            self._sender = asyncio.get_running_loop().create_task(self._send(), name="progress sender")
        self._outbox.put_nowait((job_id, progress))

    async def _send(self) -> None:
        assert self._outbox is not None
        while True:
            job_id, progress = await self._outbox.get()
            message = json.dumps({"job": job_id, "progress": None if progress is None else asdict(progress)})
            try:
                await self.redis.publish(self.channel, message)
            except Exception as exc:  # progress is best effort: the row in the database is the record
                log.warning("progress publish failed (%s)", type(exc).__name__)

    async def wait(self, job_id: str, timeout: float) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._listen(), name="progress listener")
        await super().wait(job_id, timeout)

    async def _listen(self) -> None:
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel)
            while True:
                message = await pubsub.get_message(timeout=5.0)
                if message is None:
                    continue
                data = json.loads(message["data"])
                raw = data.get("progress")
                ProgressHub.publish(self, str(data["job"]), None if raw is None else Progress(**raw))
        except Exception as exc:
            log.warning("progress listener stopped (%s); events fall back to polling", type(exc).__name__)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        for task in (self._sender, self._listener):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._outbox is not None:  # flush what is left
            while not self._outbox.empty():
                job_id, progress = self._outbox.get_nowait()
                message = json.dumps({"job": job_id, "progress": None if progress is None else asdict(progress)})
                with contextlib.suppress(Exception):
                    await self.redis.publish(self.channel, message)
        self._sender = self._listener = None
        self._outbox = None


# --------------------------------------------------------------------------- the reaper


async def reap_dead_jobs(
    db: Database, redis: Redis, pool: ArqRedis, limiter: Limiter, hub: ProgressHub, prefix: str, ttl: int
) -> dict[str, list[str]]:
    """Running jobs whose worker's lease is gone: requeued once if nothing was billed, else interrupted."""
    rows = await crud_traces.running_jobs(db)
    out: dict[str, list[str]] = {"requeued": [], "interrupted": []}
    for job_id, made, billed in rows:
        if await redis.exists(lease_key(prefix, job_id)):
            continue
        raw = await redis.get(reservation_key(prefix, job_id))
        reservation = None if raw is None else Reservation(**json.loads(raw))
        if billed == 0 and reservation is not None:
            tries = int(await redis.incr(f"{prefix}:requeues:{job_id}"))
            await redis.expire(f"{prefix}:requeues:{job_id}", ttl)
            if tries <= MAX_REQUEUES:
                if await crud_traces.requeue_unbilled(db, job_id):
                    await enqueue_trace(pool, prefix, job_id, reservation, ttl, attempt=tries)
                    out["requeued"].append(job_id)
                    log_fields(
                        log, logging.WARNING, "trace requeued: its worker died before any billed call", trace_id=job_id
                    )
                continue
        if await crud_traces.interrupt_running(db, job_id, INTERRUPTED_WORKER_LOST):
            settled = await crud_calls.settle_interrupted(db, job_id)  # calls in flight: billed at their count
            if reservation is not None:
                await limiter.settle(reservation, made, settled.usd if settled.billed else 0.0)
            hub.publish(job_id, None)
            out["interrupted"].append(job_id)
            log_fields(log, logging.WARNING, "trace interrupted: its worker died", trace_id=job_id, calls_billed=billed)
    return out


# --------------------------------------------------------------------------- the worker


class Lease:
    """A job's lease, renewed by a thread (with its own Redis connection), so a busy event loop or a
    long CPU-bound step never lets it lapse; it lapses only when the process is gone."""

    def __init__(self, url: str, key: str, owner: str, seconds: float) -> None:
        self.key = key
        self.owner = owner
        self.ms = max(1, int(seconds * 1000))
        self.every = seconds / 3
        self._redis = SyncRedis.from_url(url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"lease {key}", daemon=True)

    def __enter__(self) -> Lease:
        self._redis.set(self.key, self.owner, px=self.ms)
        self._thread.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.every):
            with contextlib.suppress(Exception):
                self._redis.pexpire(self.key, self.ms)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            self._redis.delete(self.key)
        self._redis.close()


async def run_trace(ctx: dict[str, Any], job_id: str, reservation: dict[str, Any]) -> None:
    """The arq task: hold a lease on the job while ``jobs.run_trace_job`` runs it."""
    settings: Settings = ctx["settings"]
    key = lease_key(settings.redis_prefix, job_id)
    lease = Lease(settings.redis_url or "", key, ctx["worker_id"], settings.worker_lease_seconds)
    await anyio.to_thread.run_sync(lease.__enter__)
    try:
        await run_trace_job(ctx["trace_context"], job_id, Reservation(**reservation))
    finally:
        await anyio.to_thread.run_sync(lease.__exit__)


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class WorkerServices(Protocol):
    """What a worker needs of the service's shared objects (``wiring.build_services`` makes them)."""

    @property
    def db(self) -> Database: ...
    @property
    def limiter(self) -> Limiter: ...
    @property
    def hub(self) -> ProgressHub: ...
    @property
    def trace_context(self) -> TraceContext: ...


def build_worker(
    settings: Settings, build_services: Callable[[], WorkerServices], warm_up: Callable[[], None] | None = None
) -> Worker:
    """An arq ``Worker`` running trace jobs with the service's storage, budget, cache and judge, built by
    ``build_services`` (the same wiring as the API's).

    ``warm_up`` (the provider client's imports, the tokenizer: seconds of CPU) runs in startup, before the
    worker's first poll: a worker still starting takes no job, so no trace waits behind its imports while
    a warm worker could run it."""
    if not settings.redis_url:
        raise RuntimeError("provenance worker needs PROVENANCE_REDIS_URL")
    prefix = settings.redis_prefix

    async def startup(ctx: dict[str, Any]) -> None:
        services = build_services()
        await services.db.migrate()
        if warm_up is not None:
            await anyio.to_thread.run_sync(warm_up)
        ctx["services"] = services
        ctx["settings"] = settings
        ctx["trace_context"] = services.trace_context
        ctx["lease_redis"] = redis_client(settings.redis_url or "")
        ctx["worker_id"] = worker_id()

        async def reaper() -> None:
            while True:
                try:
                    await reap_dead_jobs(
                        services.db,
                        ctx["lease_redis"],
                        ctx["redis"],
                        services.limiter,
                        services.hub,
                        prefix,
                        reservation_ttl(settings),
                    )
                except Exception as exc:
                    log.warning("reaper pass failed (%s)", type(exc).__name__)
                await asyncio.sleep(settings.worker_lease_seconds / 2)

        ctx["reaper"] = asyncio.get_running_loop().create_task(reaper(), name="reaper")
        log_fields(log, logging.INFO, "worker started", worker=ctx["worker_id"], max_jobs=settings.worker_max_jobs)

    async def shutdown(ctx: dict[str, Any]) -> None:
        reaper_task: asyncio.Task[None] | None = ctx.get("reaper")
        if reaper_task is not None:
            reaper_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper_task
        services = ctx.get("services")
        if services is not None:
            hub = services.hub
            if isinstance(hub, RedisProgressHub):
                await hub.close()
            await services.db.dispose()
        lease: Redis | None = ctx.get("lease_redis")
        if lease is not None:
            await lease.aclose()
        log_fields(log, logging.INFO, "worker stopped")

    return Worker(
        functions=[func(run_trace, name="run_trace", max_tries=1, timeout=24 * 3600)],
        queue_name=queue_name(prefix),
        redis_settings=RedisSettings.from_dsn(settings.redis_url),
        max_jobs=settings.worker_max_jobs,
        on_startup=startup,
        on_shutdown=shutdown,
        keep_result=60,
        handle_signals=True,
        job_timeout=24 * 3600,
        poll_delay=0.2,
    )


def reservation_ttl(settings: Settings) -> int:
    return int(settings.base_params.rate_window_seconds) + 24 * 3600
