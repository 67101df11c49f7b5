"""``provenance serve`` and ``provenance keys``: the commands that run on the service's storage.

Both build the same ``Settings`` (``PROVENANCE_*``), so they find the same data directory and
database. ``serve`` binds its socket first, so it can say where to open the service even with
``--port 0``; on a first start with no keys the service prints the admin key once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from typing import Any

from provenance_api.cli.settings import load_settings, with_db
from provenance_api.core.errors import InvalidInput


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the HTTP service (SQLite in the data directory, in-process jobs)")
    serve.add_argument("--host", help="interface to listen on (default: PROVENANCE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: PROVENANCE_PORT or 8000; 0 picks a free one)")
    serve.add_argument(
        "--local-model",
        metavar="FILE.gguf",
        help="run every model call (judge, span checks, probes) on this local model in-process: "
        "nothing leaves the machine",
    )
    serve.add_argument("--n-ctx", type=int, default=8192, help="context size of --local-model (default 8192)")
    serve.set_defaults(func=cmd_serve)

    worker = sub.add_parser("worker", help="run trace jobs queued in Redis (needs PROVENANCE_REDIS_URL)")
    worker.add_argument("--max-jobs", type=int, help="jobs at once (default: PROVENANCE_WORKER_MAX_JOBS or 4)")
    worker.set_defaults(func=cmd_worker)

    keys = sub.add_parser("keys", help="manage API keys (each bound to a tenant and a user)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True, help="the tenant every request with this key is scoped to")
    create.add_argument("--user", required=True, help="the user whose model-call budget the key spends")
    create.set_defaults(func=cmd_keys_create)
    listing = keys_sub.add_parser("list", help="list keys (prefixes only; a key cannot be shown again)")
    listing.add_argument("--tenant", help="only this tenant's keys")
    listing.set_defaults(func=cmd_keys_list)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id (key_…)")
    revoke.add_argument("key_id")
    revoke.set_defaults(func=cmd_keys_revoke)

    imp = sub.add_parser(
        "import",
        help="import chat history (.json, .jsonl or directories of them) as stored turns",
        epilog="Each file, line and conversation is imported on its own: one that cannot be read is rejected "
        "with its place and reason, the rest is imported, and the summary is always printed. "
        "Conversation ids come from the file's path relative to the directory given (and the "
        "conversation's id field, or a hash of its content), so re-importing is idempotent. "
        "A line, a conversation or a turn over PROVENANCE_MAX_BODY_BYTES (the API's request body limit) is "
        "rejected, as the API would. Progress goes to stderr: a bar on a terminal, else a line of counts "
        "every 10 s. Of many issues of one kind the first few are printed and then how many more (--json has "
        "every one). Exit status: 0 when nothing was rejected or conflicting (warnings, and conversations that "
        "gave no turn, which are noted, fail nothing), 1 when anything was, 2 on a usage error.",
    )
    imp.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a .json / .jsonl file, or a directory (recursive); "
        "or a history store read in place, incrementally: sqlite:///agent.db, postgresql://…",
    )
    imp.add_argument(
        "--format",
        help="the format of every conversation (default: detected per conversation); "
        "for a store: openai-agents-session, langgraph-sqlite or langgraph-postgres",
    )
    imp.add_argument("--tenant", help="the tenant to store into (default: PROVENANCE_ADMIN_TENANT)")
    imp.add_argument("--json", action="store_true", help="print the counts and errors as JSON")
    imp.set_defaults(func=cmd_import)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket. Created with ``IPPROTO_TCP`` explicitly: accepted sockets inherit the listener's
    protocol number, and asyncio sets ``TCP_NODELAY`` only on sockets whose protocol says TCP; with protocol 0
    every response after the first on a keep-alive connection waited for the peer's delayed ACK (~40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(
            f"cannot listen on {host}:{port}: {exc.strerror}",
            field="--port",
            fix="choose another --port (0 picks a free one) or stop what is using it",
        ) from None
    sock.set_inheritable(True)
    return sock


def local_factories(path: str, n_ctx: int) -> tuple[Any, Any]:
    """One in-process model for every trace, as judge and as scorer (calls to it are serialised); the
    turn's model name is ignored."""
    from provenance_api.providers.llm_llamacpp import LlamaCppLLM
    from provenance_api.providers.scorer_llamacpp import LlamaCppScorer, LocalModel, LocalModelUnavailable

    try:
        local = LocalModel(path, n_ctx=n_ctx)
    except LocalModelUnavailable as exc:
        raise InvalidInput(
            str(exc), field="--local-model", fix="pass a GGUF file; scripts/local-model.sh path prints the built one"
        ) from exc
    llm = LlamaCppLLM(local)
    sys.stdout.write(f"Local model: {local.path.name} in-process (no model call leaves this machine)\n")

    scorer = LlamaCppScorer(local)

    def build(model: str, api_base: str | None) -> LlamaCppLLM:
        return llm

    def build_scorer(model: str) -> LlamaCppScorer:
        return scorer

    return build, build_scorer


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from provenance_api.core.observability import configure_logging
    from provenance_api.http.app import create_app

    settings = load_settings(host=args.host, port=args.port)
    configure_logging(settings.log_level, json_lines=settings.log_json)
    settings.ensure_data_dir()
    sock = _bind(settings.host, settings.port)
    port = sock.getsockname()[1]
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "", "::") else settings.host
    url = f"http://{shown}:{port}" if ":" not in shown else f"http://[{shown}]:{port}"
    sys.stdout.write(
        f"Provenance service listening on {url}\n  API docs:  {url}/docs\n  data dir:  {settings.data_dir}\n"
    )
    sys.stdout.flush()
    llm_factory, scorer_factory = local_factories(args.local_model, args.n_ctx) if args.local_model else (None, None)
    config = uvicorn.Config(
        create_app(settings, llm_factory, scorer_factory, local_model=bool(args.local_model)),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        server_header=False,
    )
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Consume the Redis job queue until SIGINT/SIGTERM (jobs running then end ``interrupted``)."""
    from provenance_api.core.observability import configure_logging
    from provenance_api.wiring import queue_worker

    settings = load_settings(worker_max_jobs=args.max_jobs)
    configure_logging(settings.log_level, json_lines=settings.log_json)
    if not settings.redis_url:
        raise InvalidInput(
            "provenance worker needs a Redis server to take jobs from",
            field="PROVENANCE_REDIS_URL",
            fix="set PROVENANCE_REDIS_URL=redis://host:6379/0 (the same for the API processes)",
        )
    settings.ensure_data_dir()
    sys.stdout.write(
        f"Provenance worker: queue {settings.redis_prefix}:queue, {settings.worker_max_jobs} jobs at once\n"
    )
    sys.stdout.flush()
    queue_worker(settings).run()  # arq's own loop, with its SIGINT/SIGTERM handlers
    return 0


def cmd_keys_create(args: argparse.Namespace) -> int:
    from provenance_api.operations.auth import create_key

    async def work(db: Any) -> Any:
        return await create_key(db, args.tenant, args.user)

    record, key = asyncio.run(with_db(load_settings(), work))
    sys.stdout.write(f"{key}\n")
    sys.stderr.write(
        f"Created {record.id} for tenant {record.tenant!r}, user {record.user!r}. "
        "The key is shown only now; store it safely.\n"
    )
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    from provenance_api.storage.crud_keys import list_keys

    async def work(db: Any) -> Any:
        return await list_keys(db, args.tenant)

    for k in asyncio.run(with_db(load_settings(), work)):
        state = "revoked" if k.revoked else ("admin" if k.admin else "active")
        sys.stdout.write(
            f"{k.id}  {k.prefix}…  tenant={k.tenant}  user={k.user}  {state}  {k.created_at:%Y-%m-%d %H:%M}Z\n"
        )
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from provenance_api.core.errors import NotFound
    from provenance_api.storage.crud_keys import revoke_key

    async def work(db: Any) -> Any:
        return await revoke_key(db, args.key_id)

    if not asyncio.run(with_db(load_settings(), work)):
        raise NotFound(f"no active key {args.key_id!r}", field="key_id", fix="see: provenance keys list")
    sys.stdout.write(f"revoked {args.key_id}\n")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Files and directories: the API's limits per line, conversation and turn (``PROVENANCE_MAX_BODY_BYTES``),
    progress on stderr, the summary on stdout (issues capped by kind; ``--json`` has every one)."""
    from pathlib import Path

    from provenance_api.operations import imports as bulk

    if any("://" in p for p in args.paths):  # a history store read in place (connectors/cli.py)
        from provenance_api.cli.connectors import cmd_import_source

        return cmd_import_source(args)
    fmt = bulk.check_format(args.format)
    paths = [Path(p) for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InvalidInput(f"no such file or directory: {', '.join(missing)}", field="PATH", fix="check the path")
    settings = load_settings()
    tenant = args.tenant or settings.admin_tenant
    limit = settings.max_body_bytes  # the API's request body limit, here per line, conversation and turn

    def items() -> Any:
        for path in paths:
            yield from bulk.file_items(path, limit)

    from provenance_api.cli.style import Progress

    shown = Progress.for_stream(sys.stderr, args.no_color)
    total = bulk.input_bytes(paths)

    def progress(counts: bulk.ImportCounts) -> None:
        done = counts.read_bytes / total if total else None
        shown.count("importing", counts.line(), done, _amount(counts.read_bytes, total))

    async def work(db: Any) -> Any:
        return await bulk.import_items(
            db, tenant, settings.admin_user, items(), fmt, progress, max_turn_bytes=limit, redactor=settings.redactor
        )

    try:
        counts = asyncio.run(with_db(settings, work))
    finally:
        shown.done()
    write_import_summary(args.json, f"tenant {tenant!r}: {counts.line()}", counts, counts.to_dict())
    return 1 if counts.failed else 0


def _amount(read: int, total: int) -> str:
    """``18.5 of 50.0 MB`` (``kB`` under a megabyte)."""
    unit, scale = ("MB", 1e6) if total >= 1_000_000 else ("kB", 1e3)
    return f"{read / scale:.1f} of {total / scale:.1f} {unit}"


def write_import_summary(as_json: bool, head: str, counts: Any, data: dict[str, Any]) -> None:
    """``data`` as JSON (every issue), or ``head`` and the issues under it: rejections, then warnings, then notes,
    each cut to a few of each kind with how many more there are."""
    from provenance_api.cli.style import capped_lines

    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return
    more = " (all of them: --json)"
    lines = [
        head,
        *capped_lines(counts.errors, more=more),
        *capped_lines(counts.warnings, "warning: ", more=more),
        *capped_lines(counts.notes, "note: ", more=more),
    ]
    sys.stdout.write("\n".join(lines) + "\n")


def cmd_gate_all(tenant: str | None, as_json: bool) -> int:
    """The report over every stored turn, written as it is computed: memory does not grow with the turns."""
    from provenance_api.operations import imports as bulk

    settings = load_settings()
    written = 0

    def write(entries: list[dict[str, Any]]) -> None:
        nonlocal written
        for entry in entries:
            if as_json:
                sys.stdout.write(('{"turns": [\n' if written == 0 else ",\n") + json.dumps(entry, ensure_ascii=False))
            else:
                sys.stdout.write(bulk.GatingReport.turn_line(entry))
            written += 1

    async def work(db: Any) -> Any:
        return await bulk.gating_report(db, tenant or settings.admin_tenant, write)

    report = asyncio.run(with_db(settings, work))
    if as_json:
        rest = json.dumps(report.totals_dict(), indent=2, ensure_ascii=False)[1:]
        sys.stdout.write(("\n]" if written else '{"turns": []') + ",\n" + rest + "\n")
    else:
        sys.stdout.write(report.totals_text())
    return 0
