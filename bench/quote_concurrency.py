"""Concurrent quotes of one large turn: the former quote path against the shipped one, in one run.

Stores one turn of about 1.5 MB (a tool return of that size, or with ``--shape response`` an answer of that
size) and sends ``--quotes`` concurrent ``POST /v1/quotes`` for it over real HTTP to the service (uvicorn in a
thread, SQLite), first with the former quote path — every quote built the turn's corpus, segmented and gated
its whole answer and tokenized its sources on its own — then as shipped (``free_tier.quote_view``: the
corpus and segments built once for the tenant's quotes of that content, no gating, source token counts
remembered). Prints the wall time of each, their ratio, and whether both answered the same quotes.

    .venv/bin/python bench/quote_concurrency.py [--quotes 20] [--megabytes 1.5] [--shape tool|response] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.api_server import ApiServer, scripted_factory, small_turn

from estimator.corpus.turn import StoredTurn
from estimator.params import Params
from provenance_api.providers import free_tier
from provenance_api.providers.llm_litellm import load_litellm

LINE = "Order A-{i} shipped 2025-03-03 with carrier DHL, tracking {i}; the Leipzig warehouse packed it.\n"
FIELDS = ("refused", "planned_calls", "input_tokens", "output_tokens", "untruncated_corpus_tokens", "cost_usd")


def big_turn(megabytes: float, shape: str) -> dict[str, Any]:
    lines: list[str] = []
    size = 0
    while size < megabytes * 1_000_000:
        lines.append(LINE.format(i=len(lines)))
        size += len(lines[-1])
    turn = small_turn("t-big-quote")
    if shape == "tool":
        turn["response_payload"]["tool_calls"][0]["response"] = "".join(lines)
    else:
        turn["response"] = turn["response"] + " " + " ".join(line.strip() for line in lines)
    return turn


def former_view(turn: StoredTurn, params: Params, *, tenant: str, digest: str) -> free_tier.QuoteView:
    """The quote path before: the whole free tier (corpus, segments and the gating report) for every quote,
    and its own token counts."""
    view = free_tier.gate_view(turn, params)
    return free_tier.QuoteView(view.corpus, view.segments, free_tier.MemoTokenizer(free_tier.tokenizer(), 0))


async def burst(base_url: str, key: str, quotes: int) -> tuple[float, list[dict[str, Any]]]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=3600) as client:
        start = time.perf_counter()
        answers = await asyncio.gather(
            *(client.post("/v1/quotes", json={"turn_id": "t-big-quote", "sentence": "r0"}) for _ in range(quotes))
        )
        seconds = time.perf_counter() - start
    for answer in answers:
        if answer.status_code != 201:
            raise SystemExit(f"a quote failed: {answer.status_code} {answer.text[:300]}")
    return seconds, [{k: a.json()[k] for k in FIELDS} for a in answers]


def timed(server: ApiServer, quotes: int, rounds: int, view: Callable[..., free_tier.QuoteView]) -> tuple[float, Any]:
    shipped = free_tier.quote_view
    free_tier.quote_view = view  # the path under test, for this run only
    try:
        best = float("inf")
        answers: list[dict[str, Any]] = []
        for _ in range(rounds):
            free_tier.QUOTE_VIEWS.clear()  # each round starts cold: nothing of the turn is known yet
            seconds, answers = asyncio.run(burst(server.base_url, server.admin_key, quotes))
            best = min(best, seconds)
        return best, answers
    finally:
        free_tier.quote_view = shipped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quotes", type=int, default=20)
    parser.add_argument("--megabytes", type=float, default=1.5)
    parser.add_argument("--shape", choices=("tool", "response"), default="tool")
    parser.add_argument("--rounds", type=int, default=2, help="timed bursts per path; the best is kept")
    args = parser.parse_args()
    load_litellm()  # its import (seconds) is not part of any quote's time
    free_tier.tokenizer().count("warm up")
    turn = big_turn(args.megabytes, args.shape)
    with (
        tempfile.TemporaryDirectory() as data_dir,
        ApiServer(
            Path(data_dir), llm_factory=scripted_factory(), warm_up=False, free_tier_rate_max_requests=100_000
        ) as server,
    ):
        with server.client(server.admin_key, timeout=600) as api:
            stored = api.post("/v1/turns", json=turn)
            if stored.status_code != 201:
                raise SystemExit(f"the turn was not stored: {stored.status_code} {stored.text[:300]}")
        size = len(httpx.Request("POST", "http://x", json=turn).content)
        before, former = timed(server, args.quotes, args.rounds, former_view)
        after, shipped = timed(server, args.quotes, args.rounds, free_tier.quote_view)
    same = former == shipped and all(a == shipped[0] for a in shipped)
    print(f"turn: {size / 1e6:.2f} MB ({args.shape}), {args.quotes} concurrent quotes, best of {args.rounds}")
    print(f"former path: {before:.2f} s   shipped: {after:.2f} s   ratio (former / shipped): {before / after:.1f}x")
    print(f"the same quotes from both paths: {'yes' if same else 'NO'}; refused: {shipped[0]['refused']!r}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
