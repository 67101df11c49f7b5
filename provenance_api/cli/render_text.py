"""Human-readable renderings of the free tier, the cost gate and a trace for the terminal.

Every number is explained where it appears: the verdict in a clause beside it, and the other terms
shown (Γ, s(1), s(0), Δ, the roles, the judge's confidence, the five call counts) in a footnote block
read from the glossary (``provenance explain TERM`` prints the detail). Calls are reported in the words
the API uses: planned, made, cached, billed, failed.
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING, Protocol

from estimator.corpus.redacted import redaction_warnings
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.cost import CostQuote
from estimator.custody.ages import age_text, answer_time, source_ages
from estimator.free_tier.selection import Selection
from estimator.results.models import SpreadModel, TraceResultModel
from provenance_api.cli.style import Style, plural
from provenance_api.core.glossary import GLOSSARY, diagnosis_label
from provenance_api.core.glossary import label as term_label
from provenance_api.core.schemas_actions import ActionsOut

if TYPE_CHECKING:
    from provenance_api.providers.free_tier import GateView

PLAIN = Style()
_STATUS_PAINT = {"traceable": "green", "quoted": "cyan"}


class CallCounts(Protocol):
    """The five numbers (and the memo's) of a trace's calls: a result's account or a job's row."""

    @property
    def planned(self) -> int: ...
    @property
    def made(self) -> int: ...
    @property
    def cached(self) -> int: ...
    @property
    def billed(self) -> int: ...
    @property
    def failed(self) -> int: ...


def _wrap(text: str, indent: str, width: int = 100) -> str:
    return textwrap.fill(" ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent)


def _labelled(label: str, text: str, style: Style, pad: int = 18) -> str:
    """``label`` then ``text`` wrapped under it; the label painted after wrapping (codes have no width)."""
    body = textwrap.fill(" ".join(text.split()), width=100, initial_indent=" " * pad, subsequent_indent=" " * pad)
    return style.bold(label) + body[len(label) :] if len(label) < pad else style.bold(label) + " " + body.lstrip()


def sentence_line(selection: Selection, style: Style = PLAIN) -> str:
    """The sentence being priced or traced, echoed (with its id when it was given as one)."""
    where = f"{selection.segment_id} " if selection.segment_id else ""
    return _labelled("Sentence", f'{where}"{selection.text}"', style) + "\n"


def gate_text(turn: StoredTurn, view: GateView, style: Style = PLAIN, actions: ActionsOut | None = None) -> str:
    out: list[str] = []
    who = " · ".join(x for x in (turn.agent, turn.model, f"turn {turn.turn_id}") if x)
    out.append(style.dim(who))
    line = view.report.summary.line()
    out.append(style.bold(f"{line} · {actions.summary}" if actions is not None and actions.actions else line))
    out.append("")
    out.append(style.bold("Sources"))
    ages = {a.source_id: a for a in source_ages(view.corpus.units, answer_time(turn))}
    for layer in view.corpus.layers_present():
        units = view.corpus.in_layer(layer)
        out.append(f"  {layer.value} ({len(units)})")
        for u in units:
            notes = [t for t in u.evidence.transformations if "truncated" in t or "current text" in t]
            size = plural(u.evidence.tokens, "token")
            age = ages[u.id].age_seconds
            aged = f", {age_text(age)} old" if age is not None else ""
            out.append(f"    {u.id:<4} {u.kind:<13} {u.label}  {style.dim(f'[{size}{aged}]')}")
            for note in notes:
                out.append(style.warn(f"         ! {note}"))
    if ages and all(a.age_seconds is None for a in ages.values()):
        missing = "the answer's time" if answer_time(turn) is None else "the sources' times"
        out.append(style.dim(f"  ages: not recorded ({missing} not in the history)"))
    for warning in view.corpus.unscorable_warnings():
        out.append(f"  unscorable: {warning}")
    for warning in redaction_warnings(view.corpus.units):
        out.append(f"  redacted: {warning}")
    for ex in view.corpus.excluded:
        out.append(f"  excluded: {ex.label} — {ex.reason}")
    out.append("")
    out.append(style.bold("Sentences"))
    if not turn.response.strip():
        out.append(style.dim("  none: the turn ended after its tool calls, without an answer (trace an action)"))
    for g in view.report.segments:
        status = g.status.value
        shown = (
            style.paint(f"{status:<11}", _STATUS_PAINT[status])
            if status in _STATUS_PAINT
            else style.dim(f"{status:<11}")
        )
        out.append(f"  {g.segment.id:<4} {shown} {style.dim(g.klass.value)}")
        out.append(_wrap(g.segment.text, "       "))
        if g.anchors:
            out.append(_wrap("anchors: " + ", ".join(g.anchors), "       "))
        for c in g.citations:
            span = f"lines {c.line_start}–{c.line_end}" if c.line_end != c.line_start else f"line {c.line_start}"
            label = view.corpus.by_id(c.source_id).label
            quoted = f': "{c.quote}"' if c.quote else ""
            out.append(_wrap(f"→ {c.source_id} {label}, {span}{quoted}", "       "))
    if actions is not None and actions.actions:
        out.extend(_actions_text(actions, style))
    return "\n".join(out) + "\n"


def _actions_text(actions: ActionsOut, style: Style) -> list[str]:
    """Each action with its origin, where its values came from, and the injection screen's finding."""
    out = ["", style.bold("Actions")]
    for a in actions.actions:
        origin = style.warn(f"{a.origin:<12}") if a.origin in ("data", "invented") else f"{a.origin:<12}"
        out.append(f"  {a.id:<4} {origin} {a.tool}" + (f"  {style.dim('call ' + a.call_id)}" if a.call_id else ""))
        for arg in a.argument_sources:
            where = f"{arg.source_id}, line {arg.lines[0]}" if arg.source_id and arg.lines else "nowhere it could read"
            out.append(_wrap(f"{arg.path} = {_shown(arg.value)} ← {where}", "       "))
        if a.injection.suspected:
            out.append(style.warn(_wrap(f"! steered by tool data: {a.injection.because}", "       ")))
            if a.injection.quote:
                out.append(_wrap(f'"{a.injection.quote}"', "         "))
        if a.reported_by:
            out.append(_wrap("reported by " + ", ".join(a.reported_by), "       "))
        for rule in a.freshness:
            line = _wrap(f"freshness {rule.because} — rule: {rule.rule}", "       ")
            out.append(style.warn(line) if rule.status == "breach" else line)
    return out


def _shown(value: object, limit: int = 200) -> str:
    """An argument's value as printed: cut after ``limit`` characters, saying how long it is (``--json`` has it all)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def quote_text(quote: CostQuote, style: Style = PLAIN, selection: Selection | None = None) -> str:
    """The cost gate: the planned calls and their worst-case cost (cached answers cost $0)."""
    planned = quote.planned_calls
    if quote.cost_usd is None:
        cost = "unknown (no price is known for this model)"
    else:
        cost = f"at most ~${quote.cost_usd:.3f}, the worst case: all {plural(planned, 'planned call')} sent and billed"
    plan = quote.calls
    parts = [f"round 1: {plan.round1}", f"round 2: {plan.round2}"]
    parts += [f"redundancy: {plan.redundancy}"] if plan.redundancy else []
    parts += [f"span checks: {plan.spans}"] + ([f"probe: {plan.probe}"] if plan.probe else [])
    if plan.repeats > 1:  # rounds and redundancy count every sample
        parts[-1] += f"; {term_label('repeats')} {plan.repeats}: each measurement {plan.repeats} times"
    lines = [sentence_line(selection, style).rstrip("\n")] if selection is not None else []
    lines += [
        f"Model             {quote.model}",
        f"Sources           {quote.sources}",
        f"Model calls       up to {planned} planned ({', '.join(parts)})",
        f"Est. input tokens {quote.input_tokens:,}",
        f"Est. cost         {style.bold(cost) if quote.cost_usd is not None else cost}",
        "                  answers from the judgement cache cost $0 and are not counted as made",
    ]
    for w in quote.warnings:
        lines.append(style.warn(_wrap("⚠ " + w, "  ").lstrip()))
    if quote.refused:
        lines.append(style.bad("REFUSED: " + quote.refused))
    return "\n".join(lines) + "\n"


def _money(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def calls_text(calls: CallCounts, cost_usd: float | None, *, saved: int = 0) -> str:
    """One line in the five words every place uses: planned, made, cached, billed, failed, and the cost billed."""
    cost = 0.0 if cost_usd is None and calls.billed == 0 else cost_usd  # nothing billed costs nothing
    line = (
        f"{calls.planned} planned · {calls.made} made · {calls.cached} cached · {calls.billed} billed · "
        f"{calls.failed} failed · cost {_money(cost)}"
    )
    if saved:
        line += f" ({plural(saved, 'measurement')} reused within this trace)"
    return line


def _num(x: float | None) -> str:
    return f"{x:+.2f}" if _known(x) else "n/a"


def _spread(spread: SpreadModel | None) -> str:
    """A score's samples as printed beside it: " · spread 6.00–8.00" (and how many gave no information);
    "" for a single sample."""
    if spread is None:
        return ""
    if not _known(spread.low):
        return f" · {term_label('spread')}: no sample gave information"
    blank = sum(1 for x in spread.samples if not _known(x))
    missing = f", {blank} of {len(spread.samples)} without information" if blank else ""
    return f" · {term_label('spread')} {spread.low:.2f}–{spread.high:.2f}{missing}"


def _known(x: float | None) -> bool:
    """A score that says something: neither unmeasured (None) nor without information (NaN)."""
    return x is not None and not math.isnan(x)


def terms_used(result: TraceResultModel) -> list[str]:
    """The glossary keys of what a trace's text shows, in the order a reader meets them."""
    keys = ["action", "injection"] if result.target is not None else []
    keys += ["gamma", "s_all", "s_none", "delta"] + (["repeats"] if result.sampling else [])
    spreads = [result.s_all_spread, *(x.spread for x in result.layers), *(s.spread for s in result.sources)]
    if any(x is not None for x in spreads):
        keys.append("spread")
    roles = {layer.role for layer in result.layers} | {s.role for s in result.sources if s.role}
    keys += [f"role.{r}" for r in ("grounds", "distractor", "irrelevant", "redundant") if r in roles]
    if any(_known(s.alone) for s in result.sources):
        keys.append("alone")
    supports = [s.support for s in result.sources if s.support is not None]
    carries = {s.source_id for s in result.sources if s.role in ("grounds", "redundant")}
    shown = [
        "no_quote" if s.support.verdict == "silent" and s.source_id in carries else s.support.verdict
        for s in result.sources
        if s.support is not None
    ]
    keys += [f"support.{v}" for v in ("supported", "contradicted", "silent", "no_quote") if v in shown]
    if supports:
        keys.append("confidence")
    if any(x.downgraded for x in supports):
        keys.append("downgraded")
    if result.disagreements:
        keys.append("disagreement")
    keys += ["calls.planned", "calls.made", "calls.cached", "calls.billed", "calls.failed"]
    if result.calls.saved:
        keys.append("calls.saved")
    return keys


def footnotes(keys: list[str], style: Style = PLAIN) -> str:
    """The one-line explanations of ``keys`` (each once), and where the detail is."""
    seen = list(dict.fromkeys(keys))
    width = max(len(GLOSSARY[k].label) for k in seen) if seen else 0
    out = [style.dim("What these mean (provenance explain TERM for more):")]
    out += [style.dim(f"  {GLOSSARY[k].label:<{width}}  {GLOSSARY[k].short}") for k in seen]
    return "\n".join(out) + "\n"


def trace_text(corpus: Corpus, result: TraceResultModel, style: Style = PLAIN, *, explain: bool = True) -> str:
    """The layer → source → span tree of one traced claim, read from its JSON contract (a score that
    carried no information is None there), with the verdict explained beside it and the other terms
    in footnotes."""
    verdict = GLOSSARY[f"verdict.{result.verdict}"]
    painted = style.good if result.verdict == "attributed" else style.warn
    out = [f"{style.bold('Verdict:')} {painted(result.verdict_text)} — {verdict.short}"]
    if result.target is not None:  # an action: the call, and whether tool data steered it
        out.insert(0, _labelled("Action:", f"{result.target.id} {result.target.text}", style, pad=8))
        if result.injection is not None:
            mark = style.warn("steered by tool data") if result.injection.suspected else "not steered by tool data"
            out.append(_wrap(f"Injection: {mark} — {result.injection.because}", "  "))
            if result.injection.suspected and result.injection.quote:
                first, last = result.injection.lines or (None, None)
                where = f"{result.injection.source_id}, line {first}" if first == last else f"lines {first}–{last}"
                out.append(style.note(_wrap(f'"{result.injection.quote}" ({where})', "  ")))
    elif result.claim:
        out.insert(0, _labelled("Claim:", f'"{result.claim}"', style, pad=7))
    out.append(
        f"Γ = {_num(result.gamma)}  (s(1) = {_num(result.s_all).lstrip('+')}{_spread(result.s_all_spread)}, "
        f"s(0) = {_num(result.s_none).lstrip('+')}{_spread(result.s_none_spread)})"
    )
    if result.sampling:  # absent in results stored before repeats existed
        out.append(_wrap(f"Sampling: {result.sampling}", "  ").lstrip())
    if result.diagnosis:
        out.append(f"Diagnosis: {diagnosis_label(result.diagnosis)}")
    if result.round2_skipped_reason:
        out.append(_wrap(result.round2_skipped_reason, "  "))
    out += [_wrap("Redundancy: " + text, "  ") for text in result.redundancy]
    out += [style.warn(_wrap(f"Disagreement ({d.subject}): {d.text}", "  ")) for d in result.disagreements]
    out.append("")
    for layer in result.layers:
        out.append(
            style.bold(f"{layer.layer.value}  Δ {_num(layer.delta)}  {term_label(f'role.{layer.role}')}")
            + ("  (no information)" if layer.no_information else "")
            + (f"  without it {_num(layer.s_without).lstrip('+')}{_spread(layer.spread)}" if layer.spread else "")
        )
        for src in (s for s in result.sources if s.layer == layer.layer):
            role_label = term_label(f"role.{src.role}") if src.role else ""
            delta = f"  Δ {_num(src.delta)} {role_label}" if _known(src.delta) else ""
            if _known(src.alone):  # measured alone
                role = f" {role_label}" if not _known(src.delta) and src.role else ""
                delta += f"  alone {_num(src.alone).lstrip('+')}{role}"
            if src.spread is not None:
                delta += f"  without it {_num(src.s_without).lstrip('+')}{_spread(src.spread)}"
            out.append(f"  {src.source_id} {src.label}{delta}")
            sup = src.support
            if sup is not None:
                words = term_label(f"support.{sup.verdict}", instructions=src.layer.value == "instructions")
                if sup.verdict == "silent" and src.role in ("grounds", "redundant"):
                    words = term_label("support.no_quote")  # it carries the claim: never "says nothing" beside it
                if sup.quote:
                    span = (
                        f"line {sup.line_start}"
                        if sup.line_start == sup.line_end
                        else f"lines {sup.line_start}–{sup.line_end}"
                    )
                    out.append(style.note(_wrap(f'"{sup.quote}" ({span})', "      ")))
                note = " · downgraded: the quote could not be verified" if sup.downgraded else ""
                confidence = f"{sup.confidence:.2f}" if _known(sup.confidence) else "n/a"
                out.append(f"      {words} · confidence {confidence} (the judge's own rating){note}")
                if src.diagnosis:
                    out.append(f"      → {diagnosis_label(src.diagnosis)}")
            if src.layer.value == "instructions" and corpus.by_id(src.source_id).unversioned:
                out.append(style.dim("      · current text; an edit since this turn can't be detected"))
    for label in result.omitted:
        out.append(f"omitted: {label}")
    for w in result.warnings:
        out.append(style.warn(_wrap("⚠ " + w, "  ").lstrip()))
    out.append(f"{style.bold('Calls:')} {calls_text(result.calls, result.cost_usd, saved=result.calls.saved)}")
    text = "\n".join(out) + "\n"
    return text + ("\n" + footnotes(terms_used(result), style) if explain else "")
