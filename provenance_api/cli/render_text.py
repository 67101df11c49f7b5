"""Human-readable renderings of the free tier and the cost gate for the terminal."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from estimator.cost import CostQuote
from estimator.result_models import TraceResultModel
from estimator.turn import StoredTurn
from estimator.units import Corpus

if TYPE_CHECKING:
    from provenance_api.providers.free_tier import GateView


def _wrap(text: str, indent: str, width: int = 100) -> str:
    return textwrap.fill(" ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent)


def gate_text(turn: StoredTurn, view: GateView) -> str:
    out: list[str] = []
    who = " · ".join(x for x in (turn.agent, turn.model, f"turn {turn.turn_id}") if x)
    out.append(who)
    out.append(view.report.summary.line())
    out.append("")
    out.append("Sources")
    for layer in view.corpus.layers_present():
        units = view.corpus.in_layer(layer)
        out.append(f"  {layer.value} ({len(units)})")
        for u in units:
            notes = [t for t in u.evidence.transformations if "truncated" in t or "current text" in t]
            size = f"{u.evidence.tokens:,} tokens"
            out.append(f"    {u.id:<4} {u.kind:<13} {u.label}  [{size}]")
            for note in notes:
                out.append(f"         ! {note}")
    for name in view.corpus.unscorable:
        out.append(f"  unscorable: attachment {name!r} (bytes not kept)")
    for ex in view.corpus.excluded:
        out.append(f"  excluded: {ex.label} — {ex.reason}")
    out.append("")
    out.append("Sentences")
    for g in view.report.segments:
        out.append(f"  {g.segment.id:<4} {g.status.value:<11} {g.klass.value}")
        out.append(_wrap(g.segment.text, "       "))
        if g.anchors:
            out.append(_wrap("anchors: " + ", ".join(g.anchors), "       "))
        for c in g.citations:
            span = f"lines {c.line_start}–{c.line_end}" if c.line_end != c.line_start else f"line {c.line_start}"
            label = view.corpus.by_id(c.source_id).label
            quoted = f': "{c.quote}"' if c.quote else ""
            out.append(_wrap(f"→ {c.source_id} {label}, {span}{quoted}", "       "))
    return "\n".join(out) + "\n"


def quote_text(quote: CostQuote) -> str:
    cost = "unknown" if quote.cost_usd is None else f"~${quote.cost_usd:.3f}"
    lines = [
        f"Model             {quote.model}",
        f"Sources           {quote.sources}",
        f"Model calls       {quote.planned_calls}  (round 1: {quote.plan.round1}, round 2: {quote.plan.round2}, "
        + (f"redundancy: {quote.plan.redundancy}, " if quote.plan.redundancy else "")
        + f"span checks: {quote.plan.spans}" + (f", probe: {quote.plan.probe}" if quote.plan.probe else "") + ")",
        f"Est. input tokens {quote.input_tokens:,}",
        f"Est. cost         {cost}",
    ]
    for w in quote.warnings:
        lines.append(_wrap("⚠ " + w, "  ").lstrip())
    if quote.refused:
        lines.append("REFUSED: " + quote.refused)
    return "\n".join(lines) + "\n"


_SUPPORT_WORDS = {
    ("supported", False): "states the claim",
    ("supported", True): "directs this response",
    ("contradicted", False): "contradicts the claim",
    ("contradicted", True): "contradicts this response",
    ("silent", False): "says nothing about this",
    ("silent", True): "no instruction here bears on this",
}


def _num(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{x:+.2f}"


def trace_text(corpus: Corpus, result: TraceResultModel) -> str:
    """The layer → source → span tree of one traced claim, read from its JSON contract (a score that
    carried no information is None there)."""
    out = [
        f"Verdict: {result.verdict_text}",
        f"Γ = {_num(result.gamma)}  (s(1) = {_num(result.s_all).lstrip('+')}, "
        f"s(0) = {_num(result.s_none).lstrip('+')})",
    ]
    if result.diagnosis:
        out.append(f"Diagnosis: {result.diagnosis}")
    if result.round2_skipped_reason:
        out.append(_wrap(result.round2_skipped_reason, "  "))
    out += [_wrap("Redundancy: " + text, "  ") for text in result.redundancy]
    out.append("")
    for layer in result.layers:
        out.append(f"{layer.layer.value}  Δ {_num(layer.delta)}  {layer.role}"
                   + ("  (no information)" if layer.no_information else ""))
        for src in (s for s in result.sources if s.layer == layer.layer):
            delta = "" if src.delta is None else f"  Δ {_num(src.delta)} {src.role}"
            if src.alone is not None:  # measured alone
                role = f" {src.role}" if src.delta is None and src.role else ""
                delta += f"  alone {_num(src.alone).lstrip('+')}{role}"
            out.append(f"  {src.source_id} {src.label}{delta}")
            sup = src.support
            if sup is not None:
                words = _SUPPORT_WORDS.get((sup.verdict, src.layer.value == "instructions"), sup.verdict)
                if sup.quote:
                    span = f"line {sup.line_start}" if sup.line_start == sup.line_end else \
                        f"lines {sup.line_start}–{sup.line_end}"
                    out.append(_wrap(f'"{sup.quote}" ({span})', "      "))
                note = " · downgraded: the quote could not be verified" if sup.downgraded else ""
                confidence = "n/a" if sup.confidence is None else f"{sup.confidence:.2f}"
                out.append(f"      {words} · confidence {confidence}{note}")
                if src.diagnosis:
                    out.append(f"      → {src.diagnosis}")
            if src.layer.value == "instructions" and corpus.by_id(src.source_id).unversioned:
                out.append("      · current text; an edit since this turn can't be detected")
    for label in result.omitted:
        out.append(f"omitted: {label}")
    for w in result.warnings:
        out.append(_wrap("⚠ " + w, "  ").lstrip())
    c = result.calls
    cost = "unknown" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    out.append(f"Calls: {c.made} made of {c.planned} planned · {c.saved} saved · {c.cached} cached · cost {cost}")
    return "\n".join(out) + "\n"
