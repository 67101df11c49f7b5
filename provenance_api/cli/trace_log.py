"""Where ``provenance trace`` keeps what it did: the service's data directory (its database and judgement cache).

Each trace is logged as a job of the admin tenant with ``source='cli'`` (through ``operations.trace_log``),
so ``provenance traces``, the viewer and ``GET /v1/traces/{id}`` show it. ``--no-log`` (or
``PROVENANCE_NO_LOG=1``) leaves no record. Judge and span-check answers are cached per tenant and turn as
the service caches them, so a repeated trace is answered for $0 (``--no-cache`` sends every call). A log
that cannot be written never stops a trace: it says so on stderr and the trace runs unlogged.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

from estimator.corpus.turn import StoredTurn
from estimator.cost import CostQuote
from estimator.free_tier.selection import Selection
from estimator.ledger import CallLedger
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import TraceJobResult
from estimator.seams.llm import LLM
from provenance_api.cli.settings import load_settings
from provenance_api.cli.style import Style
from provenance_api.core.settings import Settings
from provenance_api.operations.trace_log import CliTrace, LoggedTrace, finish_cli_trace, start_cli_trace
from provenance_api.storage.session import Database

__all__ = ["NO_LOG_ENV", "TraceLog", "logging_off"]

NO_LOG_ENV = "PROVENANCE_NO_LOG"
# Anything the store raises (a conflicting turn, a locked or unreadable database, a full disk): the log is a
# side record, so it never stops a trace nor loses its printed result.
_LOG_ERRORS = (Exception,)


def logging_off(args: argparse.Namespace) -> bool:
    """``--no-log``, or ``PROVENANCE_NO_LOG`` set to anything but 0/false/no/off."""
    value = os.environ.get(NO_LOG_ENV, "").strip().lower()
    return bool(getattr(args, "no_log", False)) or value not in ("", "0", "false", "no", "off")


@dataclass
class TraceLog:
    """One CLI trace's record in the data directory (or none, when logging is off or fails)."""

    settings: Settings
    turn_id: str
    trace: CliTrace | None
    style: Style
    db: Database | None = None
    logged: LoggedTrace | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        args: argparse.Namespace,
        turn: StoredTurn,
        selection: Selection,
        quote: CostQuote,
        model: str,
        planned: int,
        style: Style,
        params: Params = DEFAULT_PARAMS,
    ) -> TraceLog:
        settings = load_settings()
        trace = (
            None
            if logging_off(args)
            else CliTrace(
                turn=turn,
                sentence=args.sentence,
                claim=selection.text,
                segment_id=selection.segment_id,
                model=model,
                params=params,
                quote=quote,
                estimator=args.estimator,
                planned=planned,
                cost_usd=quote.cost_usd,
            )
        )
        return cls(settings, turn.turn_id, trace, style)

    def cached(self, llm: LLM, args: argparse.Namespace) -> LLM:
        """``llm`` behind the judgement cache of the data directory (scoped to the admin tenant and this
        turn, as the service scopes it), unless ``--no-cache`` or the cache is switched off."""
        if args.no_cache or not self.settings.judgement_cache:
            return llm
        from provenance_api.providers.llm_cache import CachingLLM
        from provenance_api.storage.judgement_cache import judgement_store

        try:
            store = judgement_store(self.settings, None)
        except OSError as exc:
            self._note(f"judgement cache not used: {exc}")
            return llm
        if store is None:
            return llm
        scoped = CachingLLM(llm, store, api_base=args.api_base, shared=self.settings.judgement_cache_shared)
        return scoped.for_tenant(self.settings.admin_tenant, self.turn_id)

    def _note(self, text: str) -> None:
        sys.stderr.write(self.style.dim(f"provenance: {text}") + "\n")

    async def start(self) -> None:
        """Store the turn and the running job; on failure, say why and go on unlogged."""
        if self.trace is None:
            return
        try:
            self.settings.ensure_data_dir()
            self.db = Database(self.settings.effective_database_url)
            await self.db.migrate()
            self.logged = await start_cli_trace(
                self.db,
                self.settings.admin_tenant,
                self.settings.admin_user,
                self.trace,
                self.settings.quote_ttl_seconds,
            )
        except _LOG_ERRORS as exc:
            detail = getattr(exc, "detail", None) or _first_line(exc)
            self._note(f"this trace is not logged: {detail}")
            await self.close()

    async def finish(
        self,
        ledger: CallLedger,
        result: TraceJobResult | None,
        failure: str | None,
        query: str,
        corpus_digest: str,
        *,
        interrupted: bool = False,
    ) -> None:
        """End the logged job with the result or the failure, and the calls the ledger counted."""
        if self.logged is None or self.db is None:
            return
        try:
            job = await finish_cli_trace(
                self.db,
                self.logged,
                ledger,
                result=result,
                reason=failure,
                query=query,
                corpus_digest=corpus_digest,
                interrupted=interrupted,
            )
            self._note(f"logged as {job.id} (provenance traces show {job.id})")
            target = self.settings.otlp_target
            if target is not None:  # as the service exports its traces; the SDK sends them at exit
                from provenance_api.jobs.trace_spans import export_finished_job

                await export_finished_job(self.db, target, job.id, ledger.calls(), None)
        except _LOG_ERRORS as exc:
            self._note(f"this trace's log could not be finished: {_first_line(exc)}")
        finally:
            await self.close()

    async def close(self) -> None:
        if self.db is not None:
            await self.db.dispose()
            self.db = None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0][:200] if lines else "") or type(exc).__name__
