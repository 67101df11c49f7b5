"""Results that contradict themselves under a noisy judge: counted with the invariant checker, before and after.

Every estimator × every kind of judge (``tests/support/noisy_judges.py``: random, noisy, adversarial,
constant) × the fixture turns' sentences × seeds is traced through the real driver; each result is checked
against every rule of ``estimator.audit.invariants`` (the checker of this tree). With ``--baseline DIR`` the
same traces run on another checkout (in a child process, with its own ``estimator``) and are checked by the
same rules, so the figures compare like with like. A result stored before ``searched_layers`` existed listed
round 2's search as ``contributing_layers``; it is read that way.

    python bench/invariants.py                          # this tree
    git worktree add ../before <commit> && python bench/invariants.py --baseline ../before
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parents[1]
TURNS = ("redundant_sources_turn.json", "eo_worldview_turn.json", "vendor_terms_turn.json", "failures_turn.json")
KINDS = ("random", "noisy", "adversarial", "constant")


def emit(seeds: int) -> None:
    """Trace every combination with the ``estimator`` on sys.path and print each result as a JSON line."""
    import anyio

    sys.path.insert(0, str(ROOT / "tests"))
    from support.noisy_judges import judges

    from estimator.seams.llm import ScriptedLLM
    from estimator.seams.scorer import ScriptedScorer
    from estimator.trace import ESTIMATORS, EstimatorChoice, run_trace
    from provenance_api.importers.turn_files import load_turn_file
    from provenance_api.providers.free_tier import gate_view, tokenizer

    for name in TURNS:
        turn = load_turn_file(ROOT / "fixtures" / name)
        view = gate_view(turn)
        query, corpus = turn.effective_query(), view.corpus
        sentences = [s.text for s in view.segments if s.text.strip()][:6]
        for choice in ESTIMATORS:
            for kind in KINDS:
                for claim in sentences:
                    for seed in range(seeds):
                        judge = judges(kind, seed, claim)
                        outcome = anyio.run(
                            functools.partial(
                                run_trace,
                                cast("EstimatorChoice", choice),
                                claim,
                                query,
                                corpus,
                                llm=ScriptedLLM(judge.chat),
                                scorer=ScriptedScorer(judge.score),
                                tokenizer=tokenizer(),
                            )
                        )
                        for result in (outcome.result, outcome.logprob):
                            if result is not None:
                                print(json.dumps({"choice": choice, "kind": kind, "result": result.to_dict()}))


def check(lines: list[str]) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]], Counter[int]]:
    sys.path.insert(0, str(ROOT))  # this tree's checker, whichever tree traced
    from estimator.audit.invariants import violations
    from estimator.results.models import LogprobTraceResultModel, TraceResultModel

    total: Counter[tuple[str, str]] = Counter()
    broken: Counter[tuple[str, str]] = Counter()
    rules: Counter[int] = Counter()  # rule → results breaking it; -1: results that report a disagreement
    for line in lines:
        row = json.loads(line)
        doc = row["result"]
        if "searched_layers" not in doc:  # before: contributing_layers was round 2's search
            doc["searched_layers"] = doc.get("contributing_layers", [])
        model = LogprobTraceResultModel if "thresholds" in doc and doc.get("units") == "nats" else TraceResultModel
        fields = {k: v for k, v in doc.items() if k in model.model_fields}
        result = model.model_validate(fields)
        key = (row["choice"], row["kind"])
        total[key] += 1
        found = violations(result)
        if result.disagreements:
            rules[-1] += 1
        if found:
            broken[key] += 1
            rules.update({v.rule for v in found})
    return total, broken, rules


def run(tree: Path, seeds: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--emit", "--seeds", str(seeds)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [x for x in out.stdout.splitlines() if x.startswith("{")]


def report(label: str, lines: list[str]) -> None:
    total, broken, rules = check(lines)
    n, b = sum(total.values()), sum(broken.values())
    print(f"{label}: {b} of {n} results contradict themselves ({100 * b / max(n, 1):.1f} %)")
    print(
        "  by estimator and judge (broken/checked): "
        + ", ".join(f"{c}/{k} {broken[(c, k)]}/{total[(c, k)]}" for c, k in sorted(total))
    )
    told = rules.pop(-1, 0)
    print("  rules broken (results): " + (", ".join(f"rule {r}: {k}" for r, k in sorted(rules.items())) or "none"))
    print(f"  results that tell the reader the judge's answers disagree: {told}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout, traced with its own estimator")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per estimator, judge kind and sentence")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emit:
        emit(args.seeds)
        return
    if args.baseline is not None:
        report(f"before ({args.baseline})", run(args.baseline.resolve(), args.seeds))
    report("after (this tree)", run(ROOT, args.seeds))


if __name__ == "__main__":
    main()
