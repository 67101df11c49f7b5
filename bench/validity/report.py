"""The tables of the validation study (``RESULTS.md``) from the rows ``run.py`` writes to ``results.jsonl``.

python bench/validity/report.py [results.jsonl]     # re-renders the tables without a model
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from estimator.audit.agreement import spearman

ESTIMATORS: tuple[str, ...] = ("expected", "judged", "logprob")
"""Run order: the expected trace pays for the judge calls the judged trace reuses."""
SHOWN: tuple[str, ...] = ("judged", "expected", "logprob")
PAIRS: tuple[tuple[str, str], ...] = (("judged", "logprob"), ("expected", "logprob"), ("judged", "expected"))
KINDS = ("tool", "rule", "history", "redundant", "knowledge")
SINGLE = ("tool", "rule", "history")


def _pct(rows: Sequence[dict[str, Any]], est: str, key: str) -> str:
    if not rows:
        return "–"
    ok = sum(1 for r in rows if r[est][key])
    return f"{ok}/{len(rows)} ({100 * ok / len(rows):.0f} %)"


def _subsets(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    out = [(k, [r for r in rows if r["kind"] == k]) for k in KINDS]
    out.append(("single-cause (tool+rule+history)", [r for r in rows if r["kind"] in SINGLE]))
    out.append(("all", rows))
    return [(name, sel) for name, sel in out if sel]


def _drops(row: dict[str, Any], est: str) -> list[float]:
    values = [*row[est]["layer_drops"].values(), *row[est]["source_drops"].values()]
    return [v for v in values if v is not None and not math.isnan(v)]


def _ties(rows: list[dict[str, Any]], est: str) -> str:
    """Measured drops (layers and sources) that are exactly 0: masks the scalar cannot tell from s(1)."""
    drops = [d for r in rows for d in _drops(r, est)]
    zero = sum(1 for d in drops if d == 0.0)
    return f"{zero}/{len(drops)} ({100 * zero / len(drops):.0f} %)" if drops else "–"


def _dominates(rows: list[dict[str, Any]], est: str) -> str:
    single = [r for r in rows if r["kind"] in SINGLE]
    ok = 0
    for r in single:
        drops = {k: v for k, v in r[est]["source_drops"].items() if v is not None and not math.isnan(v)}
        cause = [drops[c] for c in r["causes"] if c in drops]
        other = [abs(v) for k, v in drops.items() if k not in r["causes"]]
        ok += bool(cause) and max(cause) > max(other, default=0.0)
    return f"{ok}/{len(single)}" if single else "–"


def _top_layer_by_drop(rows: list[dict[str, Any]], est: str) -> str:
    """Single-cause turns whose largest layer drop is the planted layer, whatever the thresholds."""
    single = [r for r in rows if r["kind"] in SINGLE]
    ok = 0
    for r in single:
        drops = {k: v for k, v in r[est]["layer_drops"].items() if v is not None and not math.isnan(v)}
        if drops and max(drops.values()) > min(drops.values()):
            ok += max(drops, key=lambda k: drops[k]) == r["expected_layer"]
    return f"{ok}/{len(single)}" if single else "–"


def _mean_gamma(rows: list[dict[str, Any]], est: str, kinds: Sequence[str]) -> str:
    values = [r[est]["gamma"] for r in rows if r["kind"] in kinds and not math.isnan(r[est]["gamma"])]
    return f"{sum(values) / len(values):+.2f}" if values else "–"


def _layer_rho(rows: list[dict[str, Any]], a: str, b: str) -> str:
    rhos = []
    for r in rows:
        la, lb = r[a]["layer_drops"], r[b]["layer_drops"]
        common = [k for k in la if k in lb and la[k] is not None and lb[k] is not None]
        rho = spearman([la[k] for k in common], [lb[k] for k in common])
        if rho is not None:
            rhos.append(rho)
    return f"{sum(rhos) / len(rhos):+.2f} (over {len(rhos)} turns)" if rhos else "– (no turn)"


def _distinct_s1(rows: list[dict[str, Any]], est: str) -> int:
    return len({round(r[est]["s_all"], 6) for r in rows if not math.isnan(r[est]["s_all"])})


def table(rows: list[dict[str, Any]], model: str, *, wall_seconds: float | None = None) -> str:
    n = len(rows)
    lines = [
        f"Model: `{model}` (in-process, CPU). Turns: {n}"
        + (f"; wall time {wall_seconds / 60:.1f} min." if wall_seconds is not None else "."),
        "",
    ]
    head = " | ".join(f"top source: {e}" for e in SHOWN) + " | " + " | ".join(f"Γ-verdict: {e}" for e in SHOWN)
    lines += [f"| subset | n | {head} |", "|---|---|" + "---|" * (2 * len(SHOWN))]
    for name, sel in _subsets(rows):
        cells = [_pct(sel, e, "top_ok") for e in SHOWN] + [_pct(sel, e, "verdict_ok") for e in SHOWN]
        lines.append(f"| {name} | {len(sel)} | " + " | ".join(cells) + " |")

    lines += ["", "| agreement | " + " | ".join(f"{a} vs {b}" for a, b in PAIRS) + " |", "|---|" + "---|" * len(PAIRS)]
    for key, label in (
        ("same_verdict", "same verdict"),
        ("same_top_layer", "same top layer"),
        ("same_top_source", "same top source"),
    ):
        cells = [f"{sum(r['agreement'][f'{a}_vs_{b}'][key] for r in rows)}/{n}" for a, b in PAIRS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    rho_cells = []
    for a, b in PAIRS:
        rhos = [
            r["agreement"][f"{a}_vs_{b}"]["spearman"]
            for r in rows
            if r["agreement"][f"{a}_vs_{b}"]["spearman"] is not None
        ]
        rho_cells.append(f"{sum(rhos) / len(rhos):+.2f} (over {len(rhos)} turns)" if rhos else "– (no turn)")
    lines.append(
        "| Spearman ρ of source drops (turns with ≥ 2 shared, non-constant drops) | " + " | ".join(rho_cells) + " |"
    )
    lines.append(
        "| Spearman ρ of layer drops (turns with ≥ 2 non-constant layer drops) | "
        + " | ".join(_layer_rho(rows, a, b) for a, b in PAIRS)
        + " |"
    )

    lines += [
        "",
        "| resolution | " + " | ".join(SHOWN) + " |",
        "|---|" + "---|" * len(SHOWN),
        "| drops exactly 0 (layers and sources measured) | " + " | ".join(_ties(rows, e) for e in SHOWN) + " |",
        "| distinct s(1) values over the turns | " + " | ".join(str(_distinct_s1(rows, e)) for e in SHOWN) + " |",
        "| single-cause turns where the cause's drop exceeds every other source's absolute drop | "
        + " | ".join(_dominates(rows, e) for e in SHOWN)
        + " |",
        "| single-cause turns whose largest layer drop is the planted layer (no threshold) | "
        + " | ".join(_top_layer_by_drop(rows, e) for e in SHOWN)
        + " |",
        "| mean Γ: single-cause turns | " + " | ".join(_mean_gamma(rows, e, SINGLE) for e in SHOWN) + " |",
        "| mean Γ: knowledge turns | " + " | ".join(_mean_gamma(rows, e, ("knowledge",)) for e in SHOWN) + " |",
        "| masks with no information | "
        + " | ".join(str(sum(r[e]["no_information"] for r in rows)) for e in SHOWN)
        + " |",
    ]

    lines += ["", "| cost per turn (mean) | " + " | ".join(SHOWN) + " |", "|---|" + "---|" * len(SHOWN)]
    for key, unit in (("calls", "calls"), ("model_calls", "sent"), ("seconds", "s")):
        cells = [f"{sum(r[e][key] for r in rows) / n:.1f} {unit}" for e in SHOWN] if n else ["–"] * len(SHOWN)
        label = {
            "calls": "calls the estimator makes",
            "model_calls": "calls sent to the model in this run",
            "seconds": "seconds (wall) in this run",
        }[key]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The judged trace is answered from the expected trace's judge calls (one call gives the argmax "
        "digit and the expected digit), so its seconds here count only the prompts the expected trace did "
        "not send; its own cost is its calls, each the same request as the expected digit's without "
        "top_logprobs.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    path = Path(args[0]) if args else Path(__file__).resolve().parent / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sys.stdout.write(table(rows, "(from " + path.name + ")"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
