"""What the proxy benchmarks share: the turns and claims they trace, the local model, the machine's load.

Claims are the free tier's traceable sentences (``gating.gate_turn``), as ``bench/calls_per_claim.py`` takes
them; the τ-bench turns are the shipped dev set's (``bench/tau_turns.py``), the fixtures are ``fixtures/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))  # tau_turns, a sibling of this directory

from tau_turns import tau_turns  # noqa: E402

from estimator.corpus.build import build_corpus  # noqa: E402
from estimator.corpus.turn import StoredTurn  # noqa: E402
from estimator.corpus.units import Corpus  # noqa: E402
from estimator.free_tier.gating import gate_turn  # noqa: E402
from estimator.free_tier.segment import segment_response  # noqa: E402

TAU_BENCH = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"
FIXTURES = (
    "eo_worldview_turn.json",
    "failures_turn.json",
    "fallback_path_turn.json",
    "ndvi_parametric_turn.json",
    "redundant_sources_turn.json",
)


@dataclass(frozen=True)
class Claim:
    """One traceable sentence of one turn, with the turn's corpus and query."""

    where: str
    turn_id: str
    claim: str
    query: str
    corpus: Corpus


def claims_of(turn: StoredTurn, where: str, limit: int) -> list[Claim]:
    corpus = build_corpus(turn)
    if not corpus.units:
        return []
    report = gate_turn(corpus, segment_response(turn.response))
    out = [
        Claim(where, turn.turn_id, g.segment.text, turn.effective_query(), corpus)
        for g in report.segments
        if g.traceable
    ]
    return out[:limit]


def fixture_claims(per_turn: int) -> list[Claim]:
    out: list[Claim] = []
    for name in FIXTURES:
        turn = StoredTurn.model_validate_json((ROOT / "fixtures" / name).read_text(encoding="utf-8"))
        out += claims_of(turn, f"fixture {name}", per_turn)
    return out


def tau_claims(*, sources: int | None = None, every: int = 1, limit: int = 10**6) -> Iterator[Claim]:
    """τ-bench claims, one per turn (its first traceable sentence), from every ``every``-th turn that has
    ``sources`` sources (any number when None), at most ``limit``."""
    n = seen = 0
    for turn in tau_turns(TAU_BENCH):
        if n >= limit:
            return
        found = claims_of(turn, "τ-bench", 1)
        if not found or (sources is not None and len(found[0].corpus.units) != sources):
            continue
        seen += 1
        if (seen - 1) % every == 0:
            n += 1
            yield found[0]


def model_path(small: bool = False) -> str:
    """The GGUF that scripts/local-model.sh built (it builds it when missing)."""
    args = [str(ROOT / "scripts" / "local-model.sh"), *(["--small"] if small else []), "path"]
    out = subprocess.run(args, check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}/{five:.2f}/{fifteen:.2f}"
