"""A trace as a Markdown citation block: what to paste into a pull request or an audit ticket.

The claim as a blockquote, the verdict in words, every source that carries it — its drop, or for a source that
carries the claim alone (redundant) its score kept alone against s(1) — with its verified quote and line range,
then how it was measured: the judge model, the estimator, the calls (planned, made, cached, billed, failed), the
cost, the prompt versions, the trace id and its date. Every number says its unit and what it means. A trace that
did not succeed says so and why; it never shows a verdict it does not have.

The same content rules as the viewer's result (``static/js/order.js``, ``tree.js``): the sources by effect,
largest first (a redundant source by its score kept alone above s(0)); at most ``TOP_SOURCES`` written out in
full, the rest named after "and N more"; a source that carries the claim and whose span check was silent reads
"the span check found no quote", never "says nothing about this claim".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from estimator import SCORES_DISAGREE
from estimator.corpus.envelope import NOT_RECORDED, Envelope, shown_time
from estimator.results.models import ProxyTraceResultModel, SourceScoreModel, TraceJobResult
from provenance_api.core.glossary import GLOSSARY
from provenance_api.core.schemas import TraceOut

TOP_SOURCES = 3
_CARRIES = ("grounds", "redundant")
_INLINE = re.compile(r"([\\`*_\[\]<>|])")
_LINE_START = re.compile(r"^(\s*)([#+\-=]|\d+[.)])", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_LINE_END = re.compile(r"\r\n|\r|\n")


def escape(text: str) -> str:
    """Text shown as written: Markdown's emphasis, links, HTML and line-start markers escaped."""
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), _INLINE.sub(r"\\\1", text))


def code(text: str) -> str:
    """``text`` as a Markdown code span that nothing in it can close (CommonMark): fenced by one backtick
    more than its longest backtick run, padded with a space where it starts or ends with a backtick (or
    with a space at both ends, which a parser strips once). A line ending becomes a space, as a parser
    reads it anyway, so the span cannot end its line and let the next one start a block."""
    text = _LINE_END.sub(" ", text)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    padded = text[:1] == "`" or text[-1:] == "`" or (text[:1] == " " and text[-1:] == " " and text.strip(" ") != "")
    pad = " " if padded else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def blockquote(text: str) -> str:
    return "\n".join("> " + line if line.strip() else ">" for line in escape(text).splitlines() or [""])


def _words(key: str, fallback: str) -> tuple[str, str]:
    """(label, one-line meaning) of a glossary term."""
    term = GLOSSARY.get(key)
    return (term.label, term.short) if term else (fallback, "")


def _when(at: datetime | None) -> str:
    return "—" if at is None else at.strftime("%Y-%m-%d %H:%M UTC")


def _number(value: float | None) -> str:
    return "unknown" if value is None or math.isnan(value) else f"{value:.2f}"


def _cost(cost: float | None, billed: int) -> str:
    if cost is None:
        return f"not priced: no price is known for this model ({billed} billed calls)"
    shown = f"{cost:.4f}" if cost >= 0.01 or cost == 0 else f"{cost:.6f}"
    return f"${shown} USD, what the provider billed for this trace"


def _calls(planned: int, made: int, cached: int, billed: int, failed: int) -> str:
    return (
        f"{planned} planned (the cost gate's worst case, reserved from the budget) · {made} made (sent to the "
        f"provider) · {cached} cached (answered from the judgement cache, not sent, $0) · {billed} billed "
        f"(charged by the provider) · {failed} failed (sent, no usable answer)"
    )


def score_unit(result: TraceJobResult) -> tuple[Literal["points", "nats"], str]:
    """(unit, scale in words) of the trace's scores (a proxy's in nats when confirmed)."""
    if result.estimator == "logprob" or (isinstance(result, ProxyTraceResultModel) and result.units == "nats"):
        return "nats", "log-probability of the claim's words, in nats"
    return "points", "on the judge's 1–9 scale of how likely the sources make the claim"


def _known(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def carries_alone(source: SourceScoreModel) -> bool:
    """Measured kept alone, and carries the claim so (its role is redundant)."""
    return source.role == "redundant" and _known(source.alone)


def effect(source: SourceScoreModel, s_none: float | None) -> float | None:
    """A source's effect on the claim: the size of its drop |Δ|, or for a source that carries the claim alone
    (whose drop reads zero: another source still says it) its score kept alone above s(0); None when
    unmeasured; a source measured only kept alone by that score too. The viewer orders by the same rule
    (``static/js/order.js``)."""
    lift = None
    if source.alone is not None and not math.isnan(source.alone):
        lift = source.alone - (s_none if s_none is not None and not math.isnan(s_none) else 0.0)
    if source.role == "redundant" and lift is not None:
        return lift
    return abs(source.delta) if source.delta is not None and not math.isnan(source.delta) else lift


def by_effect(sources: Sequence[SourceScoreModel], s_none: float | None) -> list[SourceScoreModel]:
    """The sources by effect, largest first; unmeasured last; ties in their order in the result (by layer)."""
    ranked = [(effect(s, s_none), k, s) for k, s in enumerate(sources)]
    return [s for e, k, s in sorted(ranked, key=lambda x: (x[0] is None, -(x[0] or 0.0), x[1]))]


def _measured(source: SourceScoreModel, result: TraceJobResult, unit: str) -> str:
    role, _ = _words(f"role.{source.role}", source.role or "not tested")
    if carries_alone(source):
        return (
            f"{role}: kept alone (the other sources of its layer removed) the claim's score is "
            f"{_number(source.alone)} {unit}, against s(1) = {_number(result.s_all)} with every source — it "
            f"carries the claim by itself; removing it changes the score by {_number(source.delta)} {unit} (Δ) "
            "because another source still says it"
        )
    if source.delta is not None:
        return f"{role}: removing it lowers the claim's score by {_number(source.delta)} {unit} (Δ)"
    return f"{role}: its drop was not measured"


def _source(index: int, source: SourceScoreModel, result: TraceJobResult, unit: str) -> list[str]:
    where_from = f"({code(source.source_id)}, {source.layer} layer)"
    lines = [f"{index}. **{escape(source.label)}** {where_from} — {_measured(source, result, unit)}."]
    support = source.support
    instructions = source.layer == "instructions"
    if support is not None and support.quote and support.line_start is not None:
        end = support.line_end if support.line_end is not None else support.line_start
        where = f"line {support.line_start}" if end == support.line_start else f"lines {support.line_start}–{end}"
        label = _label(f"support.{support.verdict}", support.verdict, instructions)
        lines.append(f"   Verified quote ({label}), {where} of the source:")
        lines.extend("   " + line for line in blockquote(support.quote).splitlines())
    elif support is not None and support.verdict == "silent" and not support.no_information:
        # it carries the claim by measurement: the span check's silence is said as such, never "says nothing"
        label = _label("support.no_quote", "no quote", instructions)
        meaning = GLOSSARY["support.no_quote"].short
        lines.append(f"   {label[:1].upper()}{label[1:]} — {meaning[:1].lower()}{meaning[1:]}")
    else:
        lines.append("   No quote of this source was verified for the claim.")
    if source.envelope is not None:
        lines.append("   " + envelope_line(source.envelope))
    return lines


def envelope_line(envelope: Envelope) -> str:
    """A source's evidence envelope in one line: each field the history did not carry reads "not recorded"."""
    fields = [
        ("tool", code(envelope.tool)),
        ("server", escape(envelope.server) if envelope.server else NOT_RECORDED),
        ("resource", code(envelope.resource) if envelope.resource else NOT_RECORDED),
        ("observed", escape(shown_time(envelope.observed_at))),
        ("principal", escape(envelope.principal) if envelope.principal else NOT_RECORDED),
        ("digest", code(envelope.digest[:16] + "…")),
        ("custody", envelope.custody),
    ]
    if envelope.lossy:
        fields.append(("lossy", escape("; ".join(envelope.lossy))))
    return "Evidence envelope: " + " · ".join(f"{name} {value}" for name, value in fields) + "."


def _label(key: str, fallback: str, instructions: bool) -> str:
    term = GLOSSARY.get(key)
    if term is None:
        return fallback
    return (term.instruction_label or term.label) if instructions else term.label


def _carrying(result: TraceJobResult, unit: str) -> list[str]:
    """Every source that carries the claim, by effect: the first ``TOP_SOURCES`` in full, the rest named."""
    carrying = by_effect([s for s in result.sources if s.role in _CARRIES], result.s_none)
    if not carrying:
        return ["**No single source carries it** (no source's removal lowered the score by the threshold τ)."]
    out = ["**Sources that carry it**", ""]
    for i, source in enumerate(carrying[:TOP_SOURCES], 1):
        out.extend(_source(i, source, result, unit))
    rest = carrying[TOP_SOURCES:]
    if rest:
        named = "; ".join(f"{code(s.source_id)} {escape(s.label)} ({_words(f'role.{s.role}', '')[0]})" for s in rest)
        out += ["", f"… and {len(rest)} more that carry it: {named}."]
    return out


def _result_block(trace: TraceOut, result: TraceJobResult) -> list[str]:
    label, meaning = _words(f"verdict.{result.verdict}", result.verdict_text)
    unit, scale = score_unit(result)
    # hedged by the result's own disagreements, never by comparing texts (an older result's words may differ)
    hedge = _words("disagreement", "")[0] if any(d.kind in SCORES_DISAGREE for d in result.disagreements) else ""
    out = [f"**Verdict: {label}**{f' ({hedge})' if hedge else ''} — {meaning}", ""]
    out.append(
        f"**Γ = {_number(result.gamma)} {unit}** ({scale}): the claim's score with every source, "
        f"s(1) = {_number(result.s_all)}, minus its score with none, s(0) = {_number(result.s_none)} — how "
        "much the context raises it."
    )
    if result.disagreements:
        title = _words("disagreement", "")[0]
        out += ["", f"**{title[:1].upper() + title[1:]}**", ""]
        for d in result.disagreements:
            out.append(f"- {escape(_words(f'disagreement.{d.kind}', d.kind)[0])}: {escape(d.text)}")
    if result.redundancy:
        out += ["", "**What carries the claim alone**", ""] + [f"- {escape(r)}" for r in result.redundancy]
    out += ["", *_carrying(result, unit)]
    if result.warnings:
        out += ["", "**Warnings**", ""] + [f"- {escape(w)}" for w in result.warnings]
    calls = result.calls
    scored_by = "judged" if result.estimator == "both" else result.estimator  # both: the scores shown are judged
    estimator_label, estimator_meaning = _words(f"estimator.{scored_by}", scored_by)
    cost = _cost(result.cost_usd, calls.billed)
    out += [
        "",
        "**How it was measured**",
        "",
        f"- Judge model: {code(result.model)}",
        f"- Estimator: {estimator_label} — {estimator_meaning}",
        f"- Calls: {_calls(calls.planned, calls.made, calls.cached, calls.billed, calls.failed)}",
        f"- Cost: {cost}",
        f"- Tokens: {result.usage.input_tokens:,} input, {result.usage.output_tokens:,} output (sent and received)",
        "- Prompt versions: " + ", ".join(code(v) for v in sorted(result.prompt_versions.values())),
        f"- Trace {code(trace.trace_id)} of turn {code(trace.turn_id)}, finished {_when(trace.finished_at)}",
    ]
    return out


def _unfinished_block(trace: TraceOut) -> list[str]:
    if trace.status in ("queued", "running"):
        head = f"**Status: {trace.status}** — not finished yet: no verdict. Export it again when it has ended."
    else:
        head = f"**Status: {trace.status}** — no result: a trace that did not succeed has no verdict."
    out = [head]
    if trace.reason:
        out += ["", f"Reason: {escape(trace.reason)}"]
    c = trace.calls
    out += [
        "",
        "**What it spent**",
        "",
        f"- Judge model: {code(trace.model)}",
        f"- Calls: {_calls(c.planned, c.made, c.cached, c.billed, c.failed)}",
        f"- Trace {code(trace.trace_id)} of turn {code(trace.turn_id)}, started {_when(trace.created_at)}"
        + (f", ended {_when(trace.finished_at)}" if trace.finished_at else ""),
    ]
    return out


def citation_markdown(trace: TraceOut) -> str:
    """The trace as a Markdown citation block."""
    result = trace.result if trace.status == "succeeded" else None
    action = trace.segment_id if trace.segment_id and trace.segment_id[:1] == "a" else None
    what = f"an action ({action}, a tool call the agent made)" if action else "a claim"
    title = f"### Provenance of {what}" + ("" if result is not None else f" — trace {trace.status}")
    body = _result_block(trace, result) if result is not None else _unfinished_block(trace)
    if result is not None and result.injection is not None:
        i = result.injection
        said = "**Steered by tool data.**" if i.suspected else "Not steered by tool data."
        body = [
            f"{said} {escape(i.because)}",
            *(["", blockquote(i.quote)] if i.suspected and i.quote else []),
            "",
            *body,
        ]
    return "\n".join([title, "", blockquote(trace.claim), "", *body]) + "\n"
