"""HARD.md and its plots from the rows ``hard_run.py`` writes to ``hard.jsonl``, without a model.

    python bench/validity/hard_report.py [hard.jsonl]      # re-renders HARD.md and hard_*.png beside it

The calibration (``calibrate.py``) runs here: thresholds are chosen on the ``tune`` split by the stated rule
and scored once on ``heldout``.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from calibrate import DEFAULTS, GRID, Setting, choose, replay, replay_caveats, score_row, wilson  # noqa: E402
from hard_turns import HARD, SUBSETS  # noqa: E402

from estimator.loo.logprob import DEFAULT_LOGPROB_PARAMS  # noqa: E402

Row = Mapping[str, Any]
Scores = Mapping[str, Any]
ESTIMATORS = ("judged", "expected", "logprob")
PAIRS = (("judged", "logprob"), ("expected", "logprob"), ("judged", "expected"))
PLANTED = {
    "paraphrase": "one tool return; the claim restates it with no 5-word run in common",
    "two_cause": "each half from a different source (two returns, or a return + a mandated policy sentence)",
    "partial": "a return supports half the claim; the other half is in no source",
    "distractor": "the cause + a look-alike with the same id, date and amount that contradicts it",
    "redundant": "the same fact in two tool returns",
    "knowledge": "general knowledge on the sources' topic; no source states it",
    "truncated": "the cause lies past a truncation boundary (history count, message cut, tool window)",
    "long_control": "the same long contexts, cause inside the window (or a knowledge claim)",
}
TRUTH = {
    "paraphrase": "attributed · that return",
    "two_cause": "attributed · either source; both contribute",
    "partial": "attributed · that return",
    "distractor": "attributed · the cause, never the look-alike",
    "redundant": "attributed · either carrier or none; both contribute",
    "knowledge": "internal knowledge · none",
    "truncated": "cannot tell (abstain) · none but the cut source",
    "long_control": "attributed or internal knowledge",
}


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def ci(k: int, n: int) -> str:
    if n == 0:
        return "–"
    lo, hi = wilson(k, n)
    return f"{k}/{n} {100 * k / n:.0f} % [{100 * lo:.0f}–{100 * hi:.0f}]"


def pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f} %)" if n else "–"


def prf(scores: Sequence[Scores]) -> tuple[str, str]:
    tp, fp, fn = (sum(s[k] for s in scores) for k in ("tp", "fp", "fn"))
    return (
        f"{tp}/{tp + fp} {100 * tp / (tp + fp):.0f} %" if tp + fp else "– (none named)",
        f"{tp}/{tp + fn} {100 * tp / (tp + fn):.0f} %" if tp + fn else "– (none to find)",
    )


def subsets(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    out = [(k, [r for r in rows if r["kind"] == k]) for k in SUBSETS]
    out.append(("all", list(rows)))
    return [(k, v) for k, v in out if v]


def metric_table(rows: Sequence[Row], scorer: Callable[[Row], Scores]) -> list[str]:
    lines = [
        "| subset | n | verdict | top source | verdict and top | precision (contributing) | recall | "
        "abstained (right to) | cut: disclosed, no wrong source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, sel in subsets(rows):
        sc = [scorer(r) for r in sel]
        n = len(sc)
        p, rc = prf(sc)
        abst = sum(s["abstained"] for s in sc)
        right = sum(
            1 for r, s in zip(sel, sc, strict=True) if s["abstained"] and r["expected_verdict"] == "cannot_tell"
        )
        lines.append(
            f"| {name} | {n} | {ci(sum(s['verdict_ok'] for s in sc), n)} | "
            f"{ci(sum(s['top_ok'] for s in sc), n)} | {ci(sum(s['both_ok'] for s in sc), n)} | {p} | {rc} | "
            f"{abst}/{n} ({right} right) | "
            + (ci(sum(bool(s["safe"]) for s in sc), n) if name == "truncated" else "")
            + " |"
        )
    return lines


def product_scorer(est: str) -> Callable[[Row], Scores]:
    return lambda r: score_row(r, r[est])


def replay_scorer(setting: Setting) -> Callable[[Row], Scores]:
    return lambda r: score_row(r, replay(r, setting))


def describe(s: Setting) -> str:
    def one(k: str) -> str:
        v = getattr(s, k)
        return f"{k} = {v:g}" + ("" if v == DEFAULTS[k] else f" (before the study: {DEFAULTS[k]:g})")

    return ", ".join(one(k) for k in GRID)


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def plots(out: Path, rows: Sequence[Row], held: Sequence[Row], chosen: Setting) -> list[str]:
    """One PNG per metric; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [k for k in SUBSETS if any(r["kind"] == k for r in held)] + ["all"]
    variants = [
        ("before the study (held-out)", replay_scorer(Setting())),
        ("calibrated (held-out)", replay_scorer(chosen)),
        (
            "calibrated + abstain-when-cut (held-out)",
            replay_scorer(Setting(**{**chosen.values(), "abstain_when_cut": True})),
        ),
    ]

    def sel(name: str) -> list[Row]:
        return list(held) if name == "all" else [r for r in held if r["kind"] == name]

    files: list[str] = []

    def bars(fname: str, title: str, key: str) -> None:
        fig, ax = plt.subplots(figsize=(12, 4))
        width = 0.8 / len(variants)
        for j, (label, scorer) in enumerate(variants):
            ks, ns, los, his = [], [], [], []
            for name in names:
                sc = [scorer(r) for r in sel(name)]
                k, n = sum(bool(s[key]) for s in sc), len(sc)
                lo, hi = wilson(k, n)
                p = k / n if n else math.nan
                ks.append(p)
                ns.append(n)
                los.append(max(0.0, p - lo))
                his.append(max(0.0, hi - p))
            xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(names))]
            ax.bar(xs, ks, width, yerr=[los, his], capsize=2, label=label)
        ax.set_xticks(range(len(names)), names, rotation=20)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("fraction of turns (Wilson 95 %)")
        ax.set_title(title)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        files.append(fname)

    bars("hard_verdict_accuracy.png", "Verdict accuracy, log-probability, held-out split", "verdict_ok")
    bars("hard_top_source_accuracy.png", "Top-source accuracy, log-probability, held-out split", "top_ok")
    bars("hard_abstention.png", "Abstained (said it cannot tell), log-probability, held-out split", "abstained")

    fig, ax = plt.subplots(figsize=(12, 4))
    for j, (label, scorer) in enumerate(variants[:2]):
        ps, rs = [], []
        for name in names:
            sc = [scorer(r) for r in sel(name)]
            tp, fp, fn = (sum(s[k] for s in sc) for k in ("tp", "fp", "fn"))
            ps.append(tp / (tp + fp) if tp + fp else math.nan)
            rs.append(tp / (tp + fn) if tp + fn else math.nan)
        xs = [i + (j - 0.5) * 0.4 for i in range(len(names))]
        ax.bar([x - 0.1 for x in xs], ps, 0.2, label=f"precision, {label}")
        ax.bar([x + 0.1 for x in xs], rs, 0.2, label=f"recall, {label}")
    ax.set_xticks(range(len(names)), names, rotation=20)
    ax.set_ylim(0, 1.05)
    ax.set_title("Contributing sources (grounds or redundant): precision and recall, held-out split")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(out / "hard_contributing_pr.png", dpi=110)
    plt.close(fig)
    files.append("hard_contributing_pr.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    kinds = [k for k in SUBSETS if any(r["kind"] == k for r in rows)]
    axes[0].boxplot([[r["logprob"]["seconds"] for r in rows if r["kind"] == k] for k in kinds])
    axes[0].set_xticks(range(1, len(kinds) + 1), kinds, rotation=30, fontsize=7)
    axes[0].set_ylabel("seconds per trace (wall, CPU)")
    axes[0].set_title("Log-probability trace: seconds")
    axes[1].boxplot([[r["logprob"]["calls"] for r in rows if r["kind"] == k] for k in kinds])
    axes[1].set_xticks(range(1, len(kinds) + 1), kinds, rotation=30, fontsize=7)
    axes[1].set_ylabel("scoring calls per trace")
    axes[1].set_title("Log-probability trace: calls")
    fig.tight_layout()
    fig.savefig(out / "hard_cost.png", dpi=110)
    plt.close(fig)
    files.append("hard_cost.png")

    sample = [r for r in rows if "agreement" in r]
    if sample:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        keys = ("same_verdict", "same_top_layer", "same_top_source")
        for j, (a, b) in enumerate(PAIRS):
            vals = [sum(bool(r["agreement"][f"{a}_vs_{b}"][k]) for r in sample) / len(sample) for k in keys]
            ax.bar([i + (j - 1) * 0.27 for i in range(len(keys))], vals, 0.27, label=f"{a} vs {b}")
        ax.set_xticks(range(len(keys)), [k.replace("_", " ") for k in keys])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Agreement between estimators (sample of {len(sample)} turns)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "hard_agreement.png", dpi=110)
        plt.close(fig)
        files.append("hard_agreement.png")
    return files


CAVEAT_FOR = {
    "shared_carriers": ("distractor", "redundant"),
    "cut_context": ("truncated", "long_control"),
    "reworded_source": ("paraphrase",),
}
"""The subsets each caveat of ``estimator.loo.caveats`` is written for (long_control turns are cut too)."""


def caveat_section(rows: Sequence[Row], held: Sequence[Row], chosen: Setting) -> list[str]:
    """How often each caveat the product adds fires, per subset, with the calibrated thresholds."""
    fired = {r["turn_id"]: replay_caveats(r, chosen) for r in rows}
    lines = [
        "",
        "## What the result tells the user for the kinds of claim it gets wrong",
        "",
        "`estimator/loo/caveats.py` adds a caveat to a result's warnings for each pattern below (text in its "
        "docstring); replayed here on the recorded measurements with the calibrated thresholds. Cells: turns "
        "whose result carries the caveat, all turns (held-out in brackets). A caveat on its own subset is the "
        "disclosure working; elsewhere it is a false alarm.",
        "",
        "| subset | n | " + " | ".join(f"`{k}`" for k in CAVEAT_FOR) + " |",
        "|---|---|" + "---|" * len(CAVEAT_FOR),
    ]
    for name, sel in subsets(rows):
        h = [r for r in sel if r["split"] == "heldout"]
        cells = [
            f"{sum(k in fired[r['turn_id']] for r in sel)}/{len(sel)} "
            f"({sum(k in fired[r['turn_id']] for r in h)}/{len(h)})"
            for k in CAVEAT_FOR
        ]
        lines.append(f"| {name} | {len(sel)} | " + " | ".join(cells) + " |")
    misses = [r for r in held if r["kind"] == "paraphrase" and replay(r, chosen).verdict == "internal_knowledge"]
    told = sum("reworded_source" in fired[r["turn_id"]] for r in misses)
    lines += [
        "",
        f"Held-out paraphrases called internal knowledge: {len(misses)}; of them, carrying the "
        f"`reworded_source` caveat: {told}.",
    ]
    return lines


def render(rows: Sequence[Row], *, model: str, wall_seconds: float | None, out: Path) -> str:
    tune = [r for r in rows if r["split"] == "tune"]
    held = [r for r in rows if r["split"] == "heldout"]
    chosen, best, scored = choose(tune)
    default_tune = next(n for s, n in scored if s == Setting())
    n_tied = sum(1 for _, n in scored if n == best)
    abstain = Setting(**{**chosen.values(), "abstain_when_cut": True})
    abstain_default = Setting(abstain_when_cut=True)
    consistent = sum(
        1
        for r in rows
        if (p := replay(r)).verdict == r["logprob"]["verdict"]
        and p.top_source == r["logprob"]["top_source"]
        and list(p.contributing) == r["logprob"]["contributing"]
    )
    incomplete = sum(1 for r in held if not replay(r, chosen).complete)
    total = len(HARD)
    lines = [
        f"Model: `{model}` (in-process, 2-core CPU, no GPU). Turns run: {len(rows)} of {total} "
        f"({len(tune)} tune, {len(held)} held-out)"
        + (f"; wall time {wall_seconds / 60:.1f} min." if wall_seconds is not None else "."),
        "",
    ]
    lines += ["## The set", "", "| subset | n (tune / held-out) | planted | truth |", "|---|---|---|---|"]
    for k in SUBSETS:
        t = sum(1 for x in HARD if x.kind == k and x.split == "tune")
        h = sum(1 for x in HARD if x.kind == k and x.split == "heldout")
        lines.append(f"| {k} | {t + h} ({t} / {h}) | {PLANTED[k]} | {TRUTH[k]} |")

    product = Setting(
        **{k: getattr(DEFAULT_LOGPROB_PARAMS, k) for k in ("tau_rel", "tau_floor", "gamma_per_token", "gamma_floor")}
    )
    shipped = "are" if product == chosen else "are NOT"
    lines += [
        "",
        "## Held-out accuracy, log-probability, calibrated thresholds (the product's defaults)",
        "",
        f"The product's defaults (`estimator/loo/logprob.py` `LogprobParams`) {shipped} these thresholds. "
        f"Thresholds: {describe(chosen)}. Cells: right/n, % and the Wilson 95 % interval. *Verdict and top*: "
        "both right on the same turn. Precision/recall: of the set of contributing sources (role *grounds* or "
        "*redundant*) against the planted causes, pooled over the subset's turns. *Abstained*: the verdict "
        "says it cannot tell (`no_information`); *right to*: the turn is a truncated one.",
        "",
    ]
    lines += metric_table(held, replay_scorer(chosen))
    lines += [
        "",
        "## Held-out accuracy, log-probability, the thresholds before the study",
        "",
        f"Thresholds: {describe(Setting())}. Replayed from the recorded measurements; the trace itself gave "
        f"the same verdict, top source and contributing set on {consistent}/{len(rows)} turns (the replay "
        "check).",
        "",
    ]
    lines += metric_table(held, replay_scorer(Setting()))
    lines += [
        "",
        "## Held-out accuracy with an abstention rule for cut contexts (proposed, not in the product)",
        "",
        "Rule: when part of the context was cut or left out (a source over its token window, a history message "
        "cut, or history beyond HISTORY_MAX_MESSAGES) and the verdict would be *internal knowledge*, the "
        "verdict is *cannot tell*. It needs a code change in the estimator (not a threshold), so it is "
        "measured here offline. With the calibrated thresholds:",
        "",
    ]
    lines += metric_table(held, replay_scorer(abstain))
    lines += ["", "With the thresholds before the study:", ""]
    lines += metric_table(held, replay_scorer(abstain_default))

    layer_rule = Setting(**{**chosen.values(), "gamma_at_least_layer": True})
    lines += [
        "",
        "## Held-out accuracy with Γ at least the largest layer drop (proposed, not in the product)",
        "",
        "Rule: the internal-knowledge test compares max(Γ, the largest layer drop) with τ_Γ instead of Γ alone: "
        "a claim that loses τ_Γ when one layer is removed is not the model's own knowledge, even when removing "
        "every source (which also replaces the system prompt by the model's default one) does not lower it. "
        "A code change in the estimator, measured offline; with the calibrated thresholds:",
        "",
    ]
    lines += metric_table(held, replay_scorer(layer_rule))
    lines += [
        "",
        "## Calibration",
        "",
        "Rule (stated before the run): on the **tune** split only, maximise the number of turns whose verdict "
        "**and** top source are both right; ties go to the candidate closest to the thresholds before the "
        "study (fewest "
        "thresholds changed, then fewest grid steps). The held-out split is then scored once. Grid:",
        "",
    ]
    for k, v in GRID.items():
        lines.append(f"- `{k}` ∈ {{{', '.join(f'{x:g}' for x in v)}}} (before the study: {DEFAULTS[k]:g})")
    both_default_h = sum(replay_scorer(Setting())(r)["both_ok"] for r in held)
    both_chosen_h = sum(replay_scorer(chosen)(r)["both_ok"] for r in held)
    lines += [
        "",
        "| | tune: verdict and top right | held-out: verdict and top right |",
        "|---|---|---|",
        f"| before the study | {ci(default_tune, len(tune))} | {ci(both_default_h, len(held))} |",
        f"| chosen | {ci(best, len(tune))} | {ci(both_chosen_h, len(held))} |",
        "",
        f"{n_tied} of {len(scored)} grid points reach the best tune count. Chosen: {describe(chosen)}. "
        f"Held-out turns whose replay needed a mask not in the table (roles then unresolved): {incomplete}.",
    ]

    lines += [
        "",
        "## The misses with the calibrated thresholds (all turns run, both splits)",
        "",
        "Per missed turn: what the trace said, Γ against τ_Γ, τ, and the drops s(1) − s(1 ⊖ u) of the planted "
        "cause(s) and of the largest other source (nats).",
        "",
        "| turn | split | expected | verdict | top | Γ | τ_Γ | τ | cause drop | largest other drop |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = replay(r, chosen)
        sc = score_row(r, p)
        if sc["both_ok"]:
            continue
        m = r["masks"]
        drops = {uid[1:]: m["1"] - v for uid, v in m.items() if uid.startswith("-s") and v is not None}
        cause = ", ".join(f"{drops[c]:+.1f}" for c in r["causes"] if c in drops) or "–"
        other = max(((k, v) for k, v in drops.items() if k not in r["causes"]), key=lambda x: x[1], default=None)
        lines.append(
            f"| {r['turn_id']} | {r['split']} | {r['expected_verdict']} | {p.verdict} | {p.top_source} | "
            f"{p.gamma:+.1f} | {p.tau_gamma:.1f} | {p.tau:.1f} | {cause} | "
            + (f"{other[1]:+.1f} ({other[0]})" if other else "–")
            + " |"
        )

    lines += caveat_section(rows, held, chosen)
    lines += [
        "",
        "## Per-turn cost, log-probability (all turns run)",
        "",
        "| subset | n | trace calls (mean) | trace seconds (mean / median) | table: extra calls (mean) | "
        "table: extra seconds (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for name, sel in subsets(rows):
        secs = [r["logprob"]["seconds"] for r in sel]
        lines.append(
            f"| {name} | {len(sel)} | {mean([r['logprob']['calls'] for r in sel]):.1f} | "
            f"{mean(secs):.1f} / {statistics.median(secs):.1f} s | "
            f"{mean([r['table']['calls'] for r in sel]):.1f} | "
            f"{mean([r['table']['seconds'] for r in sel]):.1f} s |"
        )

    sample = [r for r in rows if "agreement" in r]
    if sample:
        lines += [
            "",
            f"## Judged digit, expected digit and log-probability on the sample ({len(sample)} turns, "
            "in round-robin run order: the first of each subset, then the second, …; both splits; the judged "
            "digit's defaults; the log-probability rows as recorded, with the thresholds before the study)",
            "",
            "| subset | n | "
            + " | ".join(f"verdict: {e}" for e in ESTIMATORS)
            + " | "
            + " | ".join(f"top: {e}" for e in ESTIMATORS)
            + " |",
            "|---|---|" + "---|" * 6,
        ]
        for name, sel in subsets(sample):
            cells = [pct(sum(score_row(r, r[e])["verdict_ok"] for r in sel), len(sel)) for e in ESTIMATORS]
            cells += [pct(sum(score_row(r, r[e])["top_ok"] for r in sel), len(sel)) for e in ESTIMATORS]
            lines.append(f"| {name} | {len(sel)} | " + " | ".join(cells) + " |")
        lines += ["", "| agreement | " + " | ".join(f"{a} vs {b}" for a, b in PAIRS) + " |", "|---|---|---|---|"]
        for key, label in (
            ("same_verdict", "same verdict"),
            ("same_top_layer", "same top layer"),
            ("same_top_source", "same top source"),
        ):
            lines.append(
                f"| {label} | "
                + " | ".join(
                    pct(sum(bool(r["agreement"][f"{a}_vs_{b}"][key]) for r in sample), len(sample)) for a, b in PAIRS
                )
                + " |"
            )
        rhos = {
            f"{a}_vs_{b}": [
                r["agreement"][f"{a}_vs_{b}"]["spearman"]
                for r in sample
                if r["agreement"][f"{a}_vs_{b}"]["spearman"] is not None
            ]
            for a, b in PAIRS
        }
        lines.append(
            "| Spearman ρ of source drops | "
            + " | ".join(f"{mean(v):+.2f} ({len(v)} turns)" if v else "– (no turn)" for v in rhos.values())
            + " |"
        )
        lines += [
            "",
            "| cost per turn (mean, sample) | " + " | ".join(ESTIMATORS) + " |",
            "|---|---|---|---|",
            "| calls the estimator makes | "
            + " | ".join(f"{mean([r[e]['calls'] for r in sample]):.1f}" for e in ESTIMATORS)
            + " |",
            "| seconds (wall) | "
            + " | ".join(f"{mean([r[e]['seconds'] for r in sample]):.1f}" for e in ESTIMATORS)
            + " |",
            "",
            "The judged trace is answered from the expected trace's judge calls (one call gives both digits), "
            "so its seconds count only the prompts the expected trace did not send.",
        ]

    files = plots(out, rows, held, chosen)
    lines += ["", "## Plots", ""] + [f"![{f}]({f})" for f in files]
    return "\n".join(lines) + "\n"


def write_report(
    path: Path,
    out: Path,
    *,
    model: str,
    wall_seconds: float | None = None,
    command: str = "python bench/validity/run.py --set hard",
) -> Path:
    rows = load(path)
    text = render(rows, model=model, wall_seconds=wall_seconds, out=out)
    target = out / "HARD.md"
    head = "# The hard planted-cause set: calibration and held-out accuracy\n\n" + f"Command: `{command}`\n\n"
    target.write_text(head + text, encoding="utf-8")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    path = Path(args[0]) if args else HERE / "hard.jsonl"
    rows = load(path)
    wall = sum(r.get("wall_seconds", 0.0) for r in rows)
    target = write_report(path, path.parent, model="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", wall_seconds=wall)
    sys.stdout.write(target.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
