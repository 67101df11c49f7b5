"""The turn list and the trace list users expect, and a trace's export — in process, on SQLite and PostgreSQL.

- ``GET /v1/turns``: each filter (model, agent, since, until, min_traceable, q) narrows the list to exactly the
  turns that match, ``total`` says how many on every page, every sort orders as documented, and the cursor visits
  every turn exactly once, also while turns are stored and deleted between pages. Each turn carries its
  ``traceable`` count (the free tier's, also for turns stored by an import, before the count existed, or that can
  no longer be read) and its ``traces``.
- ``GET /v1/traces``: the tenant's traces across turns (probes are not listed), filtered, sorted and paged the
  same way, after real traces through litellm against a scripted judge behind an OpenAI-compatible server.
- ``GET /v1/traces/{id}/export``: JSON equal to ``GET /v1/traces/{id}``; Markdown with the claim, the verdict in
  words, the verified quote and its line range and the cost; a failed trace exports as failed.
- Bad values, cursors of another sort, filter or tenant: 422 problems naming the field. Another tenant's rows are
  never listed, counted or exported.

The references below are computed here, from what each turn and trace reads back one at a time; the string
values sort the same way under a binary and a linguistic collation.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from alembic import command
from sqlalchemy import text, update
from support.api_server import InProcessApi, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI, FakeReply
from support.services import DbBackend

from estimator.corpus.turn import StoredTurn
from provenance_api.storage import search_index
from provenance_api.storage.models import StoredTurnRow, TraceJobRow, utcnow
from provenance_api.storage.session import Database, alembic_config

PROBLEM = "application/problem+json"
PROVIDER_KEY = "sk-lists-test-0000"
FAIL_MARK = "FAIL-ME"
MODELS = ["openai/gpt-4o", "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", None]
AGENTS = ["support bot", "billing bot", "sales agent", None]
DATED = [
    datetime(2025, 1, 5, 10, 0, tzinfo=UTC),
    datetime(2025, 2, 10, 8, 30, tzinfo=UTC),
    datetime(2025, 2, 10, 8, 30, tzinfo=UTC),
    datetime(2025, 3, 1, 0, 0, tzinfo=UTC),
    datetime(2025, 3, 20, 17, 45, tzinfo=UTC),
]
DATES: list[datetime | None] = [*DATED, None]
TURN_SORTS = ["stored_at", "-stored_at", "created_at", "-created_at", "model", "-model", "traceable", "-traceable"]
TRACE_SORTS = ["-created_at", "created_at", "cost", "-cost"]
GENERATED = 36


def judge_script(judge: KeyedJudge) -> Callable[[dict[str, Any]], str | FakeReply]:
    """The keyed judge, except that any request about the planted failure is refused as a bad request."""

    def answer(request: dict[str, Any]) -> str | FakeReply:
        if FAIL_MARK in json.dumps(request):
            return FakeReply.error(400, "this request is refused")
        return judge.openai(request)

    return answer


def generated_turns(seed: int = 16) -> list[dict[str, Any]]:
    """Turns with varied models, agents, dates (some equal, some missing) and 0-3 traceable sentences."""
    rng = random.Random(seed)
    turns = []
    for i in range(GENERATED):
        n = rng.randint(0, 3)
        sentences = [f"Parcel P-{i}{k} left the depot on 2025-04-{k + 1:02d} with DHL." for k in range(n)]
        created = rng.choice(DATES)
        turn = small_turn(
            f"turn-{i:02d}",
            model=rng.choice(MODELS),
            agent=rng.choice(AGENTS),
            response=" ".join(sentences or ["Thanks for waiting."]) + " Would you like the tracking number?",
            query=f"Where is parcel P-{i}?",
        )
        if created is not None:
            turn["created_at"] = created.isoformat()
        turns.append(turn)
    return turns


def db_run(server: InProcessApi, work: Callable[[Database], Any]) -> Any:
    """Run ``work(db)`` on the server's database through a second engine, as another process would."""

    async def run() -> Any:
        db = Database(server.settings.effective_database_url)
        try:
            return await work(db)
        finally:
            await db.dispose()

    return asyncio.run(run())


def plant_unreadable(server: InProcessApi, tenant: str, turn_id: str) -> None:
    """A turn stored by an older version beyond today's nesting limit: listed, never readable."""
    turn = small_turn(
        turn_id=turn_id, response="Order D-1 shipped with DHL.", model="openai/gpt-4o", agent="support bot"
    )
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(200):
        value = {"a": value}
    turn["response_payload"]["tool_calls"][0]["arguments"] = value
    body = json.dumps(turn, separators=(",", ":"))
    shallow = StoredTurn.model_validate(small_turn(turn_id=turn_id, response=turn["response"]))

    async def work(db: Database) -> None:
        async with db.transaction() as session:
            row = StoredTurnRow(
                tenant=tenant,
                turn_id=turn_id,
                digest=hashlib.sha256(body.encode()).hexdigest(),
                body=body,
                model="openai/gpt-4o",
                agent="support bot",
                turn_created_at=None,
                stored_at=utcnow(),
                stored_by="old-version",
            )
            session.add(row)
            await session.flush()
            await search_index.index_turn(session, seq=row.seq, tenant=tenant, turn=shallow)

    db_run(server, work)


def forget_counts(server: InProcessApi, tenant: str, turn_ids: list[str]) -> None:
    """As a turn stored before the count existed: its traceable column empty."""

    async def work(db: Database) -> None:
        async with db.transaction() as session:
            await session.execute(
                update(StoredTurnRow)
                .where(StoredTurnRow.tenant == tenant, StoredTurnRow.turn_id.in_(turn_ids))
                .values(traceable=None)
            )

    db_run(server, work)


def plant_probe(server: InProcessApi, tenant: str, turn_id: str) -> None:
    """A probe job of ``turn_id``: a job, but not a trace."""

    async def work(db: Database) -> None:
        now = utcnow()
        async with db.transaction() as session:
            session.add(
                TraceJobRow(
                    id="pr_planted0000000000",
                    kind="probe",
                    source_id="s0",
                    tenant=tenant,
                    user="ann",
                    turn_id=turn_id,
                    quote_id="q_planted",
                    claim="a probe",
                    segment_id="r0",
                    model="openai/gpt-4o-mini",
                    params={},
                    status="succeeded",
                    reason=None,
                    calls_planned=2,
                    calls_made=2,
                    calls_billed=2,
                    round=None,
                    message=None,
                    layer_scores={},
                    quoted_cost_usd=None,
                    max_cost_usd=None,
                    created_at=now,
                    started_at=now,
                    finished_at=now,
                    updated_at=now,
                )
            )

    db_run(server, work)


@dataclass
class World:
    server: InProcessApi
    acme: str
    other: str
    turns: dict[str, dict[str, Any]]  # acme's turns as read back one by one (the reference)
    traces: dict[str, dict[str, Any]]  # acme's traces as GET /v1/traces/{id} answers, with the estimator asked
    other_trace: str


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def _reference_turn(api: httpx.Client, turn_id: str) -> dict[str, Any]:
    path = "/v1/turns/" + quote(turn_id, safe="")
    got = api.get(path)
    if got.status_code == 409:  # the planted unreadable turn
        return {
            "turn_id": turn_id,
            "model": "openai/gpt-4o",
            "agent": "support bot",
            "created_at": None,
            "stored_at": None,
            "traceable": 0,
            "text": "order d-1 shipped with dhl.",
        }
    assert got.status_code == 200, got.text
    body = got.json()
    turn = body["turn"]
    segments = api.get(path + "/segments").json()
    return {
        "turn_id": turn_id,
        "model": turn.get("model"),
        "agent": turn.get("agent"),
        "created_at": _when(turn.get("created_at")),
        "stored_at": _when(body["stored_at"]),
        "traceable": segments["summary"]["traceable"],
        "text": " ".join(
            " ".join(
                [turn_id, turn.get("agent") or "", turn.get("model") or "", turn.get("query") or "", turn["response"]]
            )
            .casefold()
            .split()
        ),
    }


def _trace(api: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    started = api.post("/v1/traces", json=body)
    assert started.status_code == 202, started.text
    done: dict[str, Any] = api.get(
        f"/v1/traces/{started.json()['trace_id']}", params={"wait": True, "timeout": 120}
    ).json()
    assert done["status"] in ("succeeded", "failed"), done
    return done | {"asked_estimator": body.get("estimator", "judged")}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, db_backend: DbBackend) -> Iterator[World]:
    judge = KeyedJudge()
    with pytest.MonkeyPatch.context() as env, FakeOpenAI(judge_script(judge), api_key=PROVIDER_KEY) as provider:
        env.setenv("OPENAI_API_KEY", PROVIDER_KEY)
        env.setenv("OPENAI_API_BASE", provider.base_url)
        with InProcessApi(tmp_path_factory.mktemp("lists"), warm_up=False, database_url=db_backend.fresh_url()) as srv:
            acme, other = srv.key("acme", "ann"), srv.key("other", "eve")
            with srv.client(acme, timeout=180) as api, srv.client(other, timeout=180) as eve:
                for turn in generated_turns():
                    assert api.post("/v1/turns", json=turn).status_code == 201
                trace_turns = {
                    "tr-dhl-1": small_turn("tr-dhl-1"),
                    "tr-dhl-2": small_turn("tr-dhl-2", model="openai/gpt-4o"),
                    "tr-ups": small_turn(
                        "tr-ups",
                        response="Order A-1 shipped on 2025-03-03 with UPS.",
                        response_payload={
                            "tool_calls": [
                                {
                                    "name": "lookup_order",
                                    "arguments": {"order_id": "A-1"},
                                    "response": "Order A-1 shipped 2025-03-03, tracking 99812.",
                                }
                            ]
                        },
                    ),
                    "tr-fail": small_turn("tr-fail", response=f"Order {FAIL_MARK}-1 shipped on 2025-03-03 with DHL."),
                }
                for turn in trace_turns.values():
                    assert api.post("/v1/turns", json=turn).status_code == 201
                upload = "\n".join(
                    json.dumps(
                        {
                            "id": f"imp-{c}",
                            "messages": [
                                {"role": "system", "content": "You are a support agent."},
                                {"role": "user", "content": f"Where is order I-{c}?"},
                                {
                                    "role": "assistant",
                                    "content": f"Order I-{c}7 left the depot on 2025-05-02 with DHL.",
                                },
                            ],
                        }
                    )
                    for c in "ab"
                )
                imported = api.post("/v1/imports", content=upload.encode())
                assert imported.status_code == 200 and imported.json()["imported"] == 2, imported.text
                plant_unreadable(srv, "acme", "old-deep")
                forget_counts(srv, "acme", ["turn-03", "turn-04", "turn-05"])
                for i in range(4):
                    assert eve.post("/v1/turns", json=small_turn(f"eve-{i}", model="openai/gpt-4o")).status_code == 201

                claim = "Order A-1 shipped on 2025-03-03 with DHL."
                runs = [
                    {"turn_id": "tr-dhl-1", "sentence": claim, "model": "openai/gpt-4o-mini"},
                    {"turn_id": "tr-dhl-2", "sentence": claim, "model": "openai/gpt-4o"},
                    {"turn_id": "tr-ups", "sentence": "r0", "model": "openai/gpt-4o-mini"},
                    {"turn_id": "tr-fail", "sentence": "r0", "model": "openai/gpt-4o-mini"},
                    {"turn_id": "tr-dhl-1", "sentence": claim, "model": "openai/gpt-4o", "estimator": "expected"},
                ]
                traces = {}
                for run in runs:
                    done = _trace(api, run | {"max_cost_usd": 5.0})
                    traces[done["trace_id"]] = done
                other_trace = _trace(
                    eve, {"turn_id": "eve-0", "sentence": claim, "max_cost_usd": 5.0, "model": "openai/gpt-4o"}
                )["trace_id"]
                plant_probe(srv, "acme", "tr-dhl-1")

                listed = api.get("/v1/turns", params={"limit": 500, "sort": "stored_at"}).json()
                turns = {t["turn_id"]: _reference_turn(api, t["turn_id"]) for t in listed["items"]}
                for t in listed["items"]:
                    turns[t["turn_id"]]["stored_at"] = _when(t["stored_at"])
            yield World(srv, acme, other, turns, traces, other_trace)


# --------------------------------------------------------------------------- helpers


def walk(api: httpx.Client, path: str, params: dict[str, Any], limit: int) -> tuple[list[dict[str, Any]], set[int]]:
    """Every item of a list, page by page with the cursor; and the totals the pages reported."""
    items: list[dict[str, Any]] = []
    totals: set[int] = set()
    cursor = None
    for _ in range(500):
        page = api.get(path, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["items"]) <= limit
        items += body["items"]
        totals.add(body["total"])
        cursor = body["next_cursor"]
        if cursor is None:
            return items, totals
    raise AssertionError("the cursor never ended")


def ordered(rows: list[dict[str, Any]], sort: str, tie: str) -> list[str]:
    """The documented order: rows with the value by (value, tie), then rows without it by tie; reversed
    within each group for a descending sort."""
    key, descending = sort.removeprefix("-"), sort.startswith("-")
    valued = sorted((r for r in rows if r[key] is not None), key=lambda r: (r[key], r[tie]), reverse=descending)
    missing = sorted((r for r in rows if r[key] is None), key=lambda r: r[tie], reverse=descending)
    return [r[tie] for r in valued + missing]


def assert_problem(response: httpx.Response, status: int, field: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["field"] == field, body
    assert body.get("fix"), body
    return body


def day(row: dict[str, Any]) -> datetime:
    value: datetime = row["created_at"] or row["stored_at"]
    return value


# --------------------------------------------------------------------------- turns


def test_each_turn_carries_its_traceable_count_and_its_traces(world: World) -> None:
    with world.server.client(world.acme) as api:
        items, totals = walk(api, "/v1/turns", {}, 500)
    assert totals == {len(world.turns)} == {GENERATED + 4 + 2 + 1}
    counts = {t["turn_id"]: t["traceable"] for t in items}
    assert counts == {tid: ref["traceable"] for tid, ref in world.turns.items()}
    assert {counts[f"turn-{i:02d}"] for i in range(GENERATED)} == {0, 1, 2, 3}  # varied, as generated
    assert counts["old-deep"] == 0  # cannot be read: listed, counted 0
    assert [counts[t] for t in ("turn-03", "turn-04", "turn-05")] == [
        world.turns[t]["traceable"] for t in ("turn-03", "turn-04", "turn-05")
    ]
    assert all(counts[t] == 1 for t in counts if t.startswith("imp-"))  # stored by an import, counted at the list
    traces = {t["turn_id"]: t["traces"] for t in items}
    assert {t: n for t, n in traces.items() if n} == {"tr-dhl-1": 2, "tr-dhl-2": 1, "tr-ups": 1, "tr-fail": 1}


def test_a_turn_is_counted_as_it_is_stored(world: World) -> None:
    turn = generated_turns(seed=3)[0] | {"turn_id": "fresh-1"}
    turn["response"] = "Parcel P-90 left the depot on 2025-04-01 with DHL. Parcel P-91 left on 2025-04-02 with UPS."
    with world.server.client(world.server.key("fresh", "fay")) as api:
        assert api.post("/v1/turns", json=turn).status_code == 201
        expected = api.get("/v1/turns/fresh-1/segments").json()["summary"]["traceable"]

    async def stored(db: Database) -> int | None:
        async with db.session() as session:
            found: int | None = (
                await session.execute(
                    text("SELECT traceable FROM stored_turns WHERE tenant = 'fresh' AND turn_id = 'fresh-1'")
                )
            ).scalar()
            return found

    assert db_run(world.server, stored) == expected == 2  # in its row before any list asked for it


TURN_FILTERS: list[tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]] = [
    *[({"model": m}, lambda r, m=m: r["model"] == m) for m in MODELS if m],
    *[({"agent": a}, lambda r, a=a: r["agent"] == a) for a in AGENTS if a],
    ({"since": "2025-02-10T08:30:00Z"}, lambda r: day(r) >= DATED[1]),
    ({"since": "2025-02-10"}, lambda r: day(r) >= datetime(2025, 2, 10, tzinfo=UTC)),
    ({"until": "2025-03-01T02:00:00+02:00"}, lambda r: day(r) < DATED[3]),
    ({"since": "2025-01-05T10:00:00Z", "until": "2025-03-01T00:00:00Z"}, lambda r: DATED[0] <= day(r) < DATED[3]),
    ({"min_traceable": 0}, lambda r: True),
    ({"min_traceable": 1}, lambda r: r["traceable"] >= 1),
    ({"min_traceable": 2}, lambda r: r["traceable"] >= 2),
    ({"min_traceable": 3}, lambda r: r["traceable"] >= 3),
    ({"q": "depot"}, lambda r: "depot" in r["text"]),
    ({"q": "P-1"}, lambda r: "p-1" in r["text"]),
    (
        {"q": "depot", "model": "openai/gpt-4o", "min_traceable": 2},
        lambda r: "depot" in r["text"] and r["model"] == "openai/gpt-4o" and r["traceable"] >= 2,
    ),
    (
        {"model": "openai/gpt-4o-mini", "agent": "support bot", "since": "2025-02-01"},
        lambda r: (
            r["model"] == "openai/gpt-4o-mini"
            and r["agent"] == "support bot"
            and day(r) >= datetime(2025, 2, 1, tzinfo=UTC)
        ),
    ),
    ({"model": "no/such-model"}, lambda r: False),
]


@pytest.mark.parametrize(("params", "keep"), TURN_FILTERS, ids=[json.dumps(p) for p, _ in TURN_FILTERS])
def test_each_filter_keeps_exactly_the_matching_turns_and_total_counts_them(
    world: World, params: dict[str, Any], keep: Callable[[dict[str, Any]], bool]
) -> None:
    expected = {tid for tid, ref in world.turns.items() if keep(ref)}
    with world.server.client(world.acme) as api:
        items, totals = walk(api, "/v1/turns", params, 7)
    assert {t["turn_id"] for t in items} == expected
    assert len(items) == len(expected) and totals == {len(expected)}
    if params not in ({"min_traceable": 0},):
        assert len(expected) < len(world.turns)  # the filter narrowed the list


@pytest.mark.parametrize("sort", TURN_SORTS)
def test_every_sort_orders_as_documented_and_the_cursor_visits_each_turn_once(world: World, sort: str) -> None:
    rows = [ref | {"stored_at": ref["stored_at"]} for ref in world.turns.values()]
    with world.server.client(world.acme) as api:
        for limit in (1, 4, 7, 500):
            items, totals = walk(api, "/v1/turns", {"sort": sort}, limit)
            assert [t["turn_id"] for t in items] == ordered(rows, sort, "turn_id"), (sort, limit)
            assert totals == {len(rows)}
        with_filter, totals = walk(api, "/v1/turns", {"sort": sort, "q": "depot", "min_traceable": 1}, 3)
    kept = [r for r in rows if "depot" in r["text"] and r["traceable"] >= 1]
    assert [t["turn_id"] for t in with_filter] == ordered(kept, sort, "turn_id") and totals == {len(kept)}


def test_the_default_order_is_newest_first(world: World) -> None:
    with world.server.client(world.acme) as api:
        newest = api.get("/v1/turns", params={"limit": 5}).json()["items"]
        explicit = api.get("/v1/turns", params={"limit": 5, "sort": "-stored_at"}).json()["items"]
    assert newest == explicit
    stored = [_when(t["stored_at"]) for t in newest]
    assert stored == sorted(stored, reverse=True)  # type: ignore[type-var]


@pytest.mark.parametrize("sort", ["model", "-stored_at", "traceable"])
def test_paging_stays_exact_while_turns_are_stored_and_deleted(world: World, sort: str) -> None:
    tenant = f"churn-{sort.strip('-')}"
    with world.server.client(world.server.key(tenant, "cy")) as api:
        for turn in generated_turns(seed=7)[:12]:
            assert api.post("/v1/turns", json=turn).status_code == 201
        before = [t["turn_id"] for t in walk(api, "/v1/turns", {"sort": sort}, 500)[0]]
        seen: list[str] = []
        page = api.get("/v1/turns", params={"sort": sort, "limit": 3}).json()
        seen += [t["turn_id"] for t in page["items"]]
        new = generated_turns(seed=8)[0] | {"turn_id": "late-arrival"}
        assert api.post("/v1/turns", json=new).status_code == 201
        gone = before[7]
        assert api.delete(f"/v1/turns/{gone}").status_code == 204
        assert api.delete(f"/v1/turns/{seen[-1]}").status_code == 204  # the cursor's own turn
        cursor = page["next_cursor"]
        while cursor:
            page = api.get("/v1/turns", params={"sort": sort, "limit": 3, "cursor": cursor}).json()
            seen += [t["turn_id"] for t in page["items"]]
            cursor = page["next_cursor"]
    assert len(seen) == len(set(seen))
    assert [t for t in seen if t != "late-arrival"] == [t for t in before if t != gone]


def test_a_cursor_after_the_longest_model_and_turn_id_still_fits_the_query(world: World) -> None:
    wide = ["ü" * 250 + f"-{i}" for i in range(3)]
    with world.server.client(world.server.key("wide", "wu")) as api:
        for turn_id in wide:
            assert api.post("/v1/turns", json=small_turn(turn_id, model="m/" + "é" * 250)).status_code == 201
        items, totals = walk(api, "/v1/turns", {"sort": "-model"}, 1)
    assert [t["turn_id"] for t in items] == sorted(wide, reverse=True) and totals == {3}


# --------------------------------------------------------------------------- traces


def _trace_rows(world: World) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": tid,
            "turn_id": t["turn_id"],
            "status": t["status"],
            "model": t["model"],
            "verdict": (t["result"] or {}).get("verdict"),
            "estimator": t["asked_estimator"],
            "cost": (t["result"] or {}).get("cost_usd"),
            "created_at": _when(t["created_at"]),
        }
        for tid, t in world.traces.items()
    ]


def test_the_traces_ran_as_the_script_says(world: World) -> None:
    rows = {(r["turn_id"], r["model"], r["estimator"]): r for r in _trace_rows(world)}
    assert rows[("tr-dhl-1", "openai/gpt-4o-mini", "judged")]["verdict"] == "attributed"
    assert rows[("tr-dhl-2", "openai/gpt-4o", "judged")]["verdict"] == "attributed"
    assert rows[("tr-dhl-1", "openai/gpt-4o", "expected")]["verdict"] == "attributed"
    assert rows[("tr-ups", "openai/gpt-4o-mini", "judged")]["verdict"] == "internal_knowledge"
    failed = rows[("tr-fail", "openai/gpt-4o-mini", "judged")]
    assert failed["status"] == "failed" and failed["verdict"] is None and failed["cost"] is None
    assert all(r["cost"] and r["cost"] > 0 for r in rows.values() if r["status"] == "succeeded")


def test_the_trace_list_shows_each_trace_as_its_own_page_does(world: World) -> None:
    with world.server.client(world.acme) as api:
        items, totals = walk(api, "/v1/traces", {}, 500)
    assert totals == {len(world.traces)} and len(items) == len(world.traces)  # the probe is not listed
    for item in items:
        full = world.traces[item["trace_id"]]
        assert {k: item[k] for k in ("turn_id", "claim", "status", "model", "calls", "created_at", "finished_at")} == {
            k: full[k] for k in ("turn_id", "claim", "status", "model", "calls", "created_at", "finished_at")
        }
        assert item["verdict"] == (full["result"] or {}).get("verdict")
        assert item["cost_usd"] == (full["result"] or {}).get("cost_usd")
        assert item["estimator"] == full["asked_estimator"] and item["source"] == "api"


TRACE_FILTERS: list[tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]] = [
    ({"turn_id": "tr-dhl-1"}, lambda r: r["turn_id"] == "tr-dhl-1"),
    ({"verdict": "attributed"}, lambda r: r["verdict"] == "attributed"),
    ({"verdict": "internal_knowledge"}, lambda r: r["verdict"] == "internal_knowledge"),
    ({"verdict": "no_information"}, lambda r: False),
    ({"status": "failed"}, lambda r: r["status"] == "failed"),
    ({"status": "succeeded"}, lambda r: r["status"] == "succeeded"),
    ({"model": "openai/gpt-4o"}, lambda r: r["model"] == "openai/gpt-4o"),
    ({"estimator": "expected"}, lambda r: r["estimator"] == "expected"),
    ({"estimator": "judged"}, lambda r: r["estimator"] == "judged"),
    (
        {"turn_id": "tr-dhl-1", "model": "openai/gpt-4o", "verdict": "attributed"},
        lambda r: r["turn_id"] == "tr-dhl-1" and r["model"] == "openai/gpt-4o" and r["verdict"] == "attributed",
    ),
    ({"turn_id": "eve-0"}, lambda r: False),  # another tenant's turn
]


@pytest.mark.parametrize(("params", "keep"), TRACE_FILTERS, ids=[json.dumps(p) for p, _ in TRACE_FILTERS])
def test_each_trace_filter_keeps_exactly_the_matching_traces(
    world: World, params: dict[str, Any], keep: Callable[[dict[str, Any]], bool]
) -> None:
    rows = _trace_rows(world)
    expected = {r["trace_id"] for r in rows if keep(r)}
    with world.server.client(world.acme) as api:
        items, totals = walk(api, "/v1/traces", params, 2)
    assert {t["trace_id"] for t in items} == expected and len(items) == len(expected)
    assert totals == {len(expected)} and len(expected) < len(rows)


@pytest.mark.parametrize("sort", TRACE_SORTS)
def test_every_trace_sort_orders_and_pages_exactly(world: World, sort: str) -> None:
    rows = _trace_rows(world)
    with world.server.client(world.acme) as api:
        for limit in (1, 2, 500):
            items, totals = walk(api, "/v1/traces", {"sort": sort}, limit)
            assert [t["trace_id"] for t in items] == ordered(rows, sort, "trace_id"), (sort, limit)
            assert totals == {len(rows)}


def test_the_default_trace_order_is_newest_first(world: World) -> None:
    with world.server.client(world.acme) as api:
        items = api.get("/v1/traces").json()["items"]
    assert [t["trace_id"] for t in items] == ordered(_trace_rows(world), "-created_at", "trace_id")


# --------------------------------------------------------------------------- bad input and tenants


def test_bad_values_are_problems_naming_the_field(world: World) -> None:
    with world.server.client(world.acme) as api:
        cases: list[tuple[str, dict[str, str | int], str]] = [
            ("/v1/turns", {"sort": "newest"}, "query.sort"),
            ("/v1/turns", {"min_traceable": -1}, "query.min_traceable"),
            ("/v1/turns", {"since": "last tuesday"}, "query.since"),
            ("/v1/turns", {"until": "2025-13-01"}, "query.until"),
            ("/v1/turns", {"since": "2025-03-01", "until": "2025-02-01"}, "query.until"),
            ("/v1/turns", {"since": "2025-03-01", "until": "2025-03-01"}, "query.until"),
            ("/v1/turns", {"cursor": "not-a-cursor"}, "query.cursor"),
            ("/v1/turns", {"limit": 0}, "query.limit"),
            ("/v1/traces", {"sort": "verdict"}, "query.sort"),
            ("/v1/traces", {"verdict": "grounded"}, "query.verdict"),
            ("/v1/traces", {"status": "done"}, "query.status"),
            ("/v1/traces", {"estimator": "guess"}, "query.estimator"),
            ("/v1/traces", {"cursor": "eyJ2IjoxfQ"}, "query.cursor"),
        ]
        for path, params, field in cases:
            problem = assert_problem(api.get(path, params=params), 422, field)
            if field == "query.sort":
                assert "-stored_at" in problem["detail"] or "-created_at" in problem["detail"]  # the allowed values
        trace_id = next(iter(world.traces))
        problem = assert_problem(
            api.get(f"/v1/traces/{trace_id}/export", params={"format": "pdf"}), 422, "query.format"
        )
        assert "markdown" in problem["detail"]


def test_a_cursor_only_continues_the_list_it_came_from(world: World) -> None:
    with world.server.client(world.acme) as api, world.server.client(world.other) as eve:
        cursor = api.get("/v1/turns", params={"sort": "model", "model": "openai/gpt-4o", "limit": 2}).json()[
            "next_cursor"
        ]
        assert cursor
        ok = api.get("/v1/turns", params={"sort": "model", "model": "openai/gpt-4o", "limit": 2, "cursor": cursor})
        assert ok.status_code == 200
        changes: list[dict[str, str | int]] = [
            {"sort": "-model", "model": "openai/gpt-4o"},
            {"sort": "model"},
            {"sort": "model", "model": "openai/gpt-4o", "q": "depot"},
            {"sort": "model", "model": "openai/gpt-4o", "min_traceable": 1},
        ]
        for changed in changes:
            problem = assert_problem(api.get("/v1/turns", params={**changed, "cursor": cursor}), 422, "query.cursor")
            assert "another sort, filter or search" in problem["detail"]
        assert_problem(
            eve.get("/v1/turns", params={"sort": "model", "model": "openai/gpt-4o", "cursor": cursor}),
            422,
            "query.cursor",
        )
        assert_problem(api.get("/v1/traces", params={"sort": "model", "cursor": cursor}), 422, "query.sort")
        assert_problem(api.get("/v1/traces", params={"cursor": cursor}), 422, "query.cursor")
        trace_cursor = api.get("/v1/traces", params={"limit": 1}).json()["next_cursor"]
        assert_problem(api.get("/v1/traces", params={"sort": "cost", "cursor": trace_cursor}), 422, "query.cursor")
        assert_problem(eve.get("/v1/traces", params={"cursor": trace_cursor}), 422, "query.cursor")
        assert_problem(api.get("/v1/turns", params={"cursor": trace_cursor}), 422, "query.cursor")


def test_another_tenants_turns_and_traces_are_never_listed_counted_or_exported(world: World) -> None:
    with world.server.client(world.acme) as api, world.server.client(world.other) as eve:
        theirs, totals = walk(eve, "/v1/turns", {}, 3)
        assert sorted(t["turn_id"] for t in theirs) == [f"eve-{i}" for i in range(4)] and totals == {4}
        assert [t["traces"] for t in theirs if t["turn_id"] == "eve-0"] == [1]
        mine, _ = walk(api, "/v1/turns", {"model": "openai/gpt-4o"}, 500)
        assert not any(t["turn_id"].startswith("eve-") for t in mine)
        their_traces = eve.get("/v1/traces").json()
        assert [t["trace_id"] for t in their_traces["items"]] == [world.other_trace] and their_traces["total"] == 1
        assert world.other_trace not in {t["trace_id"] for t in walk(api, "/v1/traces", {}, 500)[0]}
        for fmt in ("json", "markdown"):
            missing = api.get(f"/v1/traces/{world.other_trace}/export", params={"format": fmt})
            assert missing.status_code == 404 and missing.headers["content-type"].startswith(PROBLEM)
        assert eve.get(f"/v1/traces/{world.other_trace}/export").status_code == 200


# --------------------------------------------------------------------------- export


def _by(world: World, turn_id: str, estimator: str = "judged", model: str = "openai/gpt-4o-mini") -> dict[str, Any]:
    return next(
        t
        for t in world.traces.values()
        if (t["turn_id"], t["asked_estimator"], t["model"]) == (turn_id, estimator, model)
    )


def test_the_json_export_is_the_trace_as_a_download(world: World) -> None:
    with world.server.client(world.acme) as api:
        for trace_id in world.traces:
            exported = api.get(f"/v1/traces/{trace_id}/export", params={"format": "json"})
            assert exported.status_code == 200
            assert exported.headers["content-type"] == "application/json"
            assert exported.headers["content-disposition"] == f'attachment; filename="{trace_id}.json"'
            assert exported.json() == api.get(f"/v1/traces/{trace_id}").json()
        assert api.get(f"/v1/traces/{trace_id}/export").json() == exported.json()  # json is the default


def test_the_markdown_export_is_a_citation_block(world: World) -> None:
    trace = _by(world, "tr-dhl-1")
    result = trace["result"]
    grounding = next(s for s in result["sources"] if s["role"] == "grounds")
    support = grounding["support"]
    with world.server.client(world.acme) as api:
        exported = api.get(f"/v1/traces/{trace['trace_id']}/export", params={"format": "markdown"})
    assert exported.status_code == 200
    assert exported.headers["content-type"] == "text/markdown; charset=utf-8"
    assert exported.headers["content-disposition"] == f'attachment; filename="{trace["trace_id"]}.md"'
    md = exported.text
    assert f"> {trace['claim']}\n" in md  # the claim as a blockquote
    assert "**Verdict: attributed** — The context carries the claim" in md  # the verdict in words
    assert f"   > {support['quote']}\n" in md and support["quote"] == "with carrier DHL"  # the verified quote
    assert f"line {support['line_start']} of the source" in md  # its line range
    assert f"Γ = {result['gamma']:.2f} points** (on the judge's 1–9 scale" in md  # a number, its unit, its meaning
    assert (
        f"Cost: ${result['cost_usd']:.6f} USD, what the provider billed" in md
        or f"Cost: ${result['cost_usd']:.4f} USD, what the provider billed" in md
    )
    calls = result["calls"]
    assert f"{calls['made']} made (sent to the provider)" in md and f"{calls['billed']} billed" in md
    assert f"Judge model: `{trace['model']}`" in md and "Estimator: judged — " in md
    assert all(f"`{v}`" in md for v in result["prompt_versions"].values())
    assert f"Trace `{trace['trace_id']}` of turn `tr-dhl-1`, finished {trace['finished_at'][:10]}" in md


def test_the_markdown_of_a_claim_no_source_carries_says_so(world: World) -> None:
    trace = _by(world, "tr-ups")
    with world.server.client(world.acme) as api:
        md = api.get(f"/v1/traces/{trace['trace_id']}/export", params={"format": "markdown"}).text
    assert "**Verdict: model's own knowledge** — The claim survives removing the whole context" in md
    assert "**No single source carries it**" in md and "Verified quote" not in md


def test_a_failed_trace_exports_as_failed(world: World) -> None:
    trace = _by(world, "tr-fail")
    assert trace["status"] == "failed" and trace["reason"]
    with world.server.client(world.acme) as api:
        as_json = api.get(f"/v1/traces/{trace['trace_id']}/export", params={"format": "json"}).json()
        md = api.get(f"/v1/traces/{trace['trace_id']}/export", params={"format": "markdown"}).text
    assert as_json == {k: v for k, v in trace.items() if k != "asked_estimator"} and as_json["result"] is None
    assert md.startswith("### Provenance of a claim — trace failed\n")
    assert "**Status: failed** — no result: a trace that did not succeed has no verdict." in md
    assert trace["reason"].split("\n")[0][:60] in md.replace("\\", "")
    assert "Verdict" not in md and "Γ" not in md and "Cost:" not in md
    assert f"{trace['calls']['made']} made (sent to the provider)" in md


# --------------------------------------------------------------------------- the migration


def test_turns_stored_before_the_count_existed_are_counted_and_listed(tmp_path: Path, db_backend: DbBackend) -> None:
    url = db_backend.fresh_url() or f"sqlite+aiosqlite:///{tmp_path / 'provenance.db'}"
    command.upgrade(alembic_config(url), "0010")
    old = StoredTurn.model_validate(small_turn("from-0010", created_at="2025-01-01T00:00:00Z"))
    body = json.dumps(old.model_dump(mode="json"), separators=(",", ":"))

    async def store_as_0010_did() -> None:
        db = Database(url)
        async with db.transaction() as session:
            await session.execute(
                text(
                    "INSERT INTO stored_turns (tenant, turn_id, digest, body, model, agent, turn_created_at, stored_at,"
                    " stored_by) VALUES ('local', 'from-0010', :digest, :body, 'openai/fake-judge', 'support bot',"
                    " :created, :stored, 'admin')"
                ),
                {
                    "digest": hashlib.sha256(body.encode()).hexdigest(),
                    "body": body,
                    "created": datetime(2025, 1, 1),
                    "stored": datetime(2025, 6, 1),
                },
            )
        await db.dispose()

    asyncio.run(store_as_0010_did())
    with InProcessApi(tmp_path, warm_up=False, database_url=url) as srv, srv.client(srv.admin_key) as api:
        assert api.post("/v1/turns", json=small_turn("after-0011")).status_code == 201
        listed = api.get("/v1/turns", params={"min_traceable": 1, "sort": "created_at", "q": "order a-1"}).json()
    assert [(t["turn_id"], t["traceable"], t["traces"]) for t in listed["items"]] == [
        ("from-0010", 1, 0),
        ("after-0011", 1, 0),
    ]
    assert listed["total"] == 2
