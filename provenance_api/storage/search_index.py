"""The turn search index: substring search over a turn's id, agent, model, query and response without
reading every stored turn.

Each stored turn gets one row of searchable text (normalised as quotes are: case-folded, JSON escapes decoded,
whitespace collapsed), written in the same transaction as the turn. SQLite keeps it in an FTS5 table with the
trigram tokenizer; PostgreSQL in a plain table with a ``pg_trgm`` GIN index. Both answer "contains this text"
(a phrase of trigrams is a substring) from the index for needles of three characters or more; shorter needles
scan the index table's text, still without parsing any turn. Turns stored before the index existed are indexed
at startup (``backfill``).
"""

from __future__ import annotations

from sqlalchemy import Integer, bindparam, column, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.selectable import TextualSelect

from estimator.corpus.turn import StoredTurn
from estimator.spans.verify import normalise
from provenance_api.storage.session import Database

BACKFILL_BATCH = 500


def searchable_text(turn: StoredTurn) -> str:
    """What a search looks in: the turn's id, agent, model, query and response, normalised."""
    parts = [turn.turn_id, turn.agent or "", turn.model or "", turn.effective_query(), turn.response]
    return normalise("\n".join(parts))


def _like_pattern(needle: str) -> str:
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _seq(session: AsyncSession) -> str:
    """The column holding a turn's sequence number: the FTS5 table's rowid in SQLite (an indexed lookup),
    the primary key ``seq`` in PostgreSQL."""
    return "rowid" if session.get_bind().dialect.name == "sqlite" else "seq"


async def index_turn(session: AsyncSession, *, seq: int, tenant: str, turn: StoredTurn) -> None:
    """Add a just-inserted turn to the index, inside the caller's transaction."""
    await session.execute(
        text(f"INSERT INTO turn_search ({_seq(session)}, tenant, text) VALUES (:seq, :tenant, :text)"),
        {"seq": seq, "tenant": tenant, "text": searchable_text(turn)},
    )


async def index_turns(session: AsyncSession, tenant: str, turns: list[tuple[int, StoredTurn]]) -> None:
    """``index_turn`` for many just-inserted turns (``(seq, turn)``), in one statement."""
    if turns:
        await session.execute(
            text(f"INSERT INTO turn_search ({_seq(session)}, tenant, text) VALUES (:seq, :tenant, :text)"),
            [{"seq": seq, "tenant": tenant, "text": searchable_text(turn)} for seq, turn in turns],
        )


async def unindex(session: AsyncSession, seqs: list[int]) -> None:
    """Remove deleted turns' rows from the index, inside the caller's transaction."""
    if seqs:
        await session.execute(
            text(f"DELETE FROM turn_search WHERE {_seq(session)} IN :seqs").bindparams(
                bindparam("seqs", expanding=True)
            ),
            {"seqs": seqs},
        )


async def search(db: Database, tenant: str, query: str, *, after: int | None, limit: int) -> list[int]:
    """Sequence numbers of the tenant's turns whose searchable text contains ``query`` (normalised), in
    storage order after ``after``, ``limit`` at most."""
    needle = normalise(query)
    params: dict[str, object] = {"tenant": tenant, "after": after or 0, "limit": limit}
    async with db.session() as session:
        seq = _seq(session)
        if seq == "rowid" and len(needle) >= 3:
            params["phrase"] = '"' + needle.replace('"', '""') + '"'
            sql = (
                "SELECT rowid FROM turn_search WHERE turn_search MATCH :phrase AND tenant = :tenant "
                "AND rowid > :after ORDER BY rowid LIMIT :limit"
            )
        else:
            params["pattern"] = _like_pattern(needle)
            sql = (
                f"SELECT {seq} FROM turn_search WHERE tenant = :tenant AND {seq} > :after "
                f"AND text LIKE :pattern ESCAPE '\\' ORDER BY {seq} LIMIT :limit"
            )
        rows = (await session.execute(text(sql), params)).all()
    return [int(r[0]) for r in rows]


def matching(dialect: str, tenant: str, query: str) -> TextualSelect:
    """The sequence numbers of the tenant's turns whose searchable text contains ``query`` (normalised), as a
    subquery a list composes with its filters, order and count (``seq IN (…)``)."""
    needle = normalise(query)
    seq = "rowid" if dialect == "sqlite" else "seq"
    if seq == "rowid" and len(needle) >= 3:
        sql = text("SELECT rowid FROM turn_search WHERE turn_search MATCH :ts_phrase AND tenant = :ts_tenant")
        sql = sql.bindparams(ts_phrase='"' + needle.replace('"', '""') + '"', ts_tenant=tenant)
    else:
        sql = text(f"SELECT {seq} FROM turn_search WHERE tenant = :ts_tenant AND text LIKE :ts_pattern ESCAPE '\\'")
        sql = sql.bindparams(ts_tenant=tenant, ts_pattern=_like_pattern(needle))
    return sql.columns(column(seq, Integer))


async def backfill(db: Database) -> int:
    """Index every stored turn that has no index row yet (turns stored before the index existed). Returns
    how many were indexed."""
    done = 0
    after = 0
    while True:
        async with db.transaction() as session:
            rows = (
                await session.execute(
                    text(
                        f"SELECT t.seq, t.tenant, t.body FROM stored_turns t WHERE t.seq > :after AND NOT EXISTS "
                        f"(SELECT 1 FROM turn_search s WHERE s.{_seq(session)} = t.seq) ORDER BY t.seq LIMIT :n"
                    ),
                    {"after": after, "n": BACKFILL_BATCH},
                )
            ).all()
            for seq, tenant, body in rows:
                try:
                    turn = StoredTurn.model_validate_json(body)
                except ValueError:  # a row that no longer parses is left out of search, never fails startup
                    continue
                await index_turn(session, seq=int(seq), tenant=str(tenant), turn=turn)
                done += 1
        if len(rows) < BACKFILL_BATCH:
            return done
        after = int(rows[-1][0])
