"""The tables of ``bench/proxy/run.py``'s rows (``results.jsonl``), and the verdicts against the targets."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

CONFIRMED_TARGET = 4.0
AGREEMENT_TARGET = 0.90


def _mean(values: Sequence[float]) -> str:
    return f"{statistics.mean(values):.1f}" if values else "–"


def _tokens(values: Sequence[float]) -> str:
    return f"{statistics.mean(values):,.0f}" if values else "–"


def _share(rows: Sequence[dict[str, Any]], ok: Callable[[dict[str, Any]], bool]) -> str:
    return f"{sum(1 for r in rows if ok(r))}/{len(rows)}" if rows else "–"


def correct(top: str | None, row: dict[str, Any]) -> bool:
    """The top source against the planted truth (as ``bench/validity``): none for internal knowledge;
    none or a carrier for redundant carriers and cut causes; else a carrier."""
    if row["expected_verdict"] == "internal_knowledge":
        return top is None
    if row["kind"] == "redundant" or row["expected_verdict"] == "cannot_tell":
        return top is None or top in row["causes"]
    return top in row["causes"]


def groups(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault((row["set"], row["judge"]), []).append(row)
    return out


def calls_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| set | judge | claims | judged: made · input tokens | proxy: made (all · when confirmed) · input tokens "
        "| confirmed | local passes · seconds (median) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (name, judge), rs in groups(rows).items():
        ok = [r for r in rs if r["proxy"]["confirmed"]]
        lines.append(
            f"| {name} | {judge} | {len(rs)} | {_mean([r['judged']['made'] for r in rs])} · "
            f"{_tokens([r['judged']['input_tokens'] for r in rs])} | {_mean([r['proxy']['made'] for r in rs])} · "
            f"{_mean([r['proxy']['made'] for r in ok])} · {_tokens([r['proxy']['input_tokens'] for r in rs])} | "
            f"{_share(rs, lambda r: r['proxy']['confirmed'])} | {_mean([r['proxy']['scored'] for r in rs])} · "
            f"{statistics.median(r['local_seconds'] for r in rs):.0f} |"
        )
    return lines


def agreement_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| set | judge | turns | same top source as the full judged trace | top source right: proxy result · "
        "proxy ranking · full judged | same verdict | confirmed | made ≤ planned |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (name, judge), rs in groups([r for r in rows if r["expected_verdict"] is not None]).items():
        lines.append(
            f"| {name} | {judge} | {len(rs)} | {_share(rs, lambda r: r['proxy']['top'] == r['judged']['top'])} | "
            f"{_share(rs, lambda r: correct(r['proxy']['top'], r))} · "
            f"{_share(rs, lambda r: correct(r['proxy']['proxy_top'], r))} · "
            f"{_share(rs, lambda r: correct(r['judged']['top'], r))} | "
            f"{_share(rs, lambda r: r['proxy']['verdict'] == r['judged']['verdict'])} | "
            f"{_share(rs, lambda r: r['proxy']['confirmed'])} | "
            f"{_share(rs, lambda r: r['proxy']['made'] <= r['proxy']['planned'])} |"
        )
    return lines


def gate_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The cost gate's quote against what ran: the worst case held (calls and input tokens), a confirmed claim
    spent at most the confirmation's calls, and the local side's estimate against the tokens evaluated."""
    quoted = [r for r in rows if r.get("gate")]
    if not quoted:
        return ["(no rows carry the gate's quote: rerun with the current run.py)"]
    worst = all(
        r["proxy"]["made"] <= r["gate"]["worst_case_calls"]
        and r["proxy"]["input_tokens"] <= r["gate"]["worst_case_input_tokens"]
        for r in quoted
    )
    confirmed = [r for r in quoted if r["proxy"]["confirmed"]]
    confirm = all(
        r["proxy"]["made"] <= r["gate"]["confirm_calls"]
        and r["proxy"]["input_tokens"] <= r["gate"]["confirm_input_tokens"]
        for r in confirmed
    )
    passes = all(r["proxy"]["scored"] <= r["gate"]["local_passes"] for r in quoted)
    ratios = [
        r["gate"]["local_prompt_tokens"] / r["evaluated_tokens"] for r in _claims(quoted) if r.get("evaluated_tokens")
    ]
    spread = (
        f"median {statistics.median(ratios):.2f}, range {min(ratios):.2f}–{max(ratios):.2f}"
        if ratios
        else "not reported by the scorer"
    )
    return [
        f"{'PASS' if worst else 'FAIL'}: hosted calls and input tokens within the gate's worst case, every "
        f"claim and judge ({len(quoted)} rows)",
        f"{'PASS' if confirm else 'FAIL'}: a confirmed claim sent at most the gate's confirmation calls and tokens "
        f"({len(confirmed)} confirmed)",
        f"{'PASS' if passes else 'FAIL'}: local passes within the gate's local passes",
        f"      the gate's local prompt tokens ÷ tokens the scorer evaluated, per claim: {spread} "
        f"({len(ratios)} claims; > 1: the estimate is high)",
    ]


def _claims(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per claim (the ranking is shared by its judges)."""
    return list({(r["set"], r["turn_id"], r["claim"]): r for r in rows}.values())


def report(path: Path) -> int:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        print(f"no rows in {path}")
        return 1
    print("\n".join(calls_table(rows)) + "\n")
    print("\n".join(agreement_table(rows)) + "\n")
    real = [r for r in rows if r["set"] in ("tau", "fixtures") and r["proxy"]["confirmed"]]
    made = statistics.mean(r["proxy"]["made"] for r in real) if real else float("nan")
    knowing = [r for r in rows if r["judge"] == "knowing"]
    same = sum(1 for r in knowing if r["proxy"]["top"] == r["judged"]["top"]) / len(knowing) if knowing else 0.0
    within = all(r["proxy"]["made"] <= r["proxy"]["planned"] for r in rows)
    print(
        f"{'PASS' if real and made <= CONFIRMED_TARGET else 'FAIL'}: hosted calls made per confirmed claim "
        f"(τ-bench and fixtures) {made:.2f} (target ≤ {CONFIRMED_TARGET:g}, {len(real)} claims)"
    )
    unplanted = [r for r in rows if r["set"] in ("tau", "fixtures")]
    if unplanted:
        print(
            f"      all {len(unplanted)} τ-bench and fixture claims: proxy "
            f"{statistics.mean(r['proxy']['made'] for r in unplanted):.2f} vs judged "
            f"{statistics.mean(r['judged']['made'] for r in unplanted):.2f} made per claim "
            f"({sum(r['proxy']['confirmed'] for r in unplanted)} confirmed)"
        )
    planted = [r for r in knowing if r["proxy"]["confirmed"]]
    judged_tokens = max(sum(r["judged"]["input_tokens"] for r in knowing), 1)
    tokens = sum(r["proxy"]["input_tokens"] for r in knowing) / judged_tokens
    if planted:
        print(
            f"      hosted calls made per confirmed claim, planted turns (knowing judge): "
            f"{statistics.mean(r['proxy']['made'] for r in planted):.2f} ({len(planted)} claims); all claims of "
            f"the knowing judge: proxy {statistics.mean(r['proxy']['made'] for r in knowing):.2f} vs judged "
            f"{statistics.mean(r['judged']['made'] for r in knowing):.2f} made, input tokens "
            f"{tokens:.0%} of the judged trace's"
        )
    print(
        f"{'PASS' if same >= AGREEMENT_TARGET else 'FAIL'}: same top source as the full judged trace, knowing "
        f"judge, planted turns {same:.0%} (target ≥ {AGREEMENT_TARGET:.0%}, {len(knowing)} turns)"
    )
    print(f"{'PASS' if within else 'FAIL'}: hosted calls made ≤ planned, every claim and judge")
    print("\n".join(gate_lines(rows)))
    return 0
