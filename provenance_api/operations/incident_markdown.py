"""An incident as Markdown: what to attach to an incident ticket or an audit.

A heading, the turn, the chain in words ("a2 `send_money` ← reported by r3 "I have transferred…"; caused by s2
(tool return of `read_file`)"), a table of the sources the target could read with every envelope field ("not
recorded" where the history carries none), their ages when the target was produced, their custody and their full
sha256 digests, the free tier's findings, the latest finished trace, and the custody log's line. Deterministic:
the same incident gives the same bytes (nothing in it is the time it was written).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from estimator.corpus.envelope import NOT_RECORDED, shown_time
from provenance_api.core.glossary import label
from provenance_api.core.schemas_incident import (
    IncidentCauseOut,
    IncidentLinkOut,
    IncidentOut,
    IncidentSourceOut,
    IncidentTargetOut,
    IncidentTraceOut,
)
from provenance_api.operations.citation_markdown import code, escape

__all__ = ["chain_text", "incident_markdown", "source_words"]

_UNITS = {"points": "points of the judge's 1–9 scale", "nats": "nats of log-probability"}
_SHORT = 60  # characters of a sentence quoted in the chain before "…"


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _SHORT else flat[: _SHORT - 1].rstrip() + "…"


def _lines(span: tuple[int, int]) -> str:
    return f"line {span[0]}" if span[0] == span[1] else f"lines {span[0]}–{span[1]}"


def _term(prefix: str, value: str | None) -> str:
    """A value as the glossary labels it (``role.grounds`` → grounds); "not measured" for none."""
    if value is None:
        return "not measured"
    try:
        return label(f"{prefix}.{value}")
    except KeyError:
        return value


def _or_not(value: str | None) -> str:
    return NOT_RECORDED if value is None or value == "" else value


def _tick(text: str, md: bool) -> str:
    return code(text) if md else f"`{text}`"


def _quoted(text: str, md: bool) -> str:
    return f'"{escape(_clip(text)) if md else _clip(text)}"'


def source_words(source: IncidentSourceOut | None, source_id: str, md: bool = False) -> str:
    """How the chain names a source: ``s2 (tool return of `read_file`)``, or its label for other layers."""
    if source is None:
        return "the user's request" if source_id == "query" else source_id
    what = f"tool return of {_tick(source.tool, md)}" if source.layer == "tools" else source.label
    return f"{source.id} ({escape(what) if md and source.layer != 'tools' else what})"


def _target_words(target: IncidentTargetOut, md: bool) -> str:
    if target.kind == "action":
        return f"{target.id} {_tick(target.tool or '', md)}"
    return f"{target.id} {_quoted(target.text or '', md)}"


def _link_words(link: IncidentLinkOut, md: bool) -> str:
    if link.kind == "action":
        return f"{link.id} {_tick(link.text.split('(', 1)[0], md)}"
    return f"{link.id} {_quoted(link.text, md)}"


def chain_text(
    target: IncidentTargetOut,
    reported_by: Sequence[IncidentLinkOut],
    reports: Sequence[IncidentLinkOut],
    causes: Sequence[IncidentCauseOut],
    sources: Mapping[str, IncidentSourceOut],
    md: bool = False,
) -> str:
    """The chain in one line: the target, the sentences that report it (or the actions it reports), its causes.
    ``md``: as Markdown (the sentences escaped, the tools as code spans)."""
    parts = [_target_words(target, md)]
    if target.kind == "action":
        told = ", ".join(_link_words(r, md) for r in reported_by)
        parts[0] += f" ← reported by {told}" if told else " ← reported by no sentence of the answer"
    elif reports:
        parts[0] += " → reports " + ", ".join(_link_words(r, md) for r in reports)
    named = ", ".join(
        source_words(sources.get(c.source_id), c.source_id, md) + (f" through {c.via}" if c.via else "") for c in causes
    )
    parts.append(f"caused by {named}" if named else "caused by no source named (trace it to measure)")
    return "; ".join(parts)


def _custody(source: IncidentSourceOut) -> str:
    if source.custody == "gateway":
        where = f"{_or_not(source.custody_server)}, {shown_time(source.custody_observed_at)}"
        return f"{label('custody.gateway')} ({escape(where)})"
    return label("custody.history")


def _cell(text: str) -> str:
    return escape(" ".join(text.split()))


def _source_row(source: IncidentSourceOut) -> str:
    env = source.envelope
    cells = [
        code(source.id),
        source.layer,
        _cell(source.label),
        code(source.tool),
        _cell(_or_not(env.server if env else None)),
        _cell(_or_not(env.resource if env else None)),
        _cell(shown_time(env.observed_at if env else None)),
        _cell(_or_not(env.principal if env else None)),
        _cell(_or_not(env.tenant if env else None)),
        _cell(_or_not(env.scope if env else None)),
        _cell("; ".join(env.transformations) if env and env.transformations else "none"),
        _cell(", ".join(env.derived_from) if env and env.derived_from else "none"),
        _cell(source.age),
        _custody(source),
        code(source.digest) if source.digest else NOT_RECORDED,
    ]
    return "| " + " | ".join(cells) + " |"


_HEADER = (
    "| source | layer | label | tool | server | resource | observed at (UTC) | principal | tenant | scope "
    "| transformations | derived from | age | custody | digest (sha256) |"
)


def _sources(incident: IncidentOut) -> list[str]:
    moment = "the call was made" if incident.target.kind == "action" else "the answer was produced"
    out = [
        "## Sources it could read",
        "",
        f'Each with its {label("envelope")} ("{NOT_RECORDED}": the history does not carry the field), its '
        f"{label('age')} when {moment} (observed at → then), its {label('custody')} and the sha256 of its raw content.",
        "",
        _HEADER,
        "| " + " | ".join(["---"] * 15) + " |",
    ]
    return out + [_source_row(s) for s in incident.sources]


def _action_findings(incident: IncidentOut) -> list[str]:
    out: list[str] = []
    if incident.argument_sources is not None:
        out += ["", f"## {label('argument_source').capitalize()}", ""]
        for a in incident.argument_sources:
            where = (
                f"← {code(a.source_id)}" + (f", {_lines(a.lines)}" if a.lines else "")
                if a.source_id is not None
                else f"← nowhere the agent could read ({label('origin.invented')})"
            )
            out.append(f"- {code(a.path)} = {code(a.value)} {where}")
        if not incident.argument_sources:
            out.append("- the call sent no value worth looking up")
    if incident.injection is not None:
        found = incident.injection
        verdict = label("suspect_injection") if found.suspected else f"not {label('suspect_injection')}"
        out += ["", "## The steered-by-data screen", "", f"**{escape(verdict)}.** {escape(found.because)}"]
        if found.suspected and found.source_id:
            lines = f", {_lines(found.lines)}" if found.lines else ""
            out.append(f"The instruction, in {code(found.source_id)}{lines}: {code(found.quote or '')}")
    if incident.freshness_rules:
        out += ["", f"## {label('freshness').capitalize()}s ({incident.freshness_rules} in force)", ""]
        for f in incident.freshness:
            age = "" if f.age_seconds is None else f", {f.age_seconds:g} s old"
            out.append(
                f"- {escape(f.rule)}: **{f.status}** ({escape(_or_not(f.source_id))}{age}) — {escape(f.because)}"
            )
        if not incident.freshness:
            out.append("- no rule names this tool")
    return out


def _trace(trace: IncidentTraceOut | None, note: str) -> list[str]:
    out = ["", "## Trace", ""]
    if trace is None:
        return [*out, escape(note) + "."]
    out.append(
        f"Trace {code(trace.trace_id)}: {trace.status}; estimator {_or_not(trace.estimator)}; verdict "
        f"{escape(_term('verdict', trace.verdict))}; finished {shown_time(trace.finished_at)}."
    )
    if trace.reason:
        out.append(f"Reason: {escape(trace.reason)}")
    if trace.sources:
        out += [
            "",
            f"Δ: how much the target's score fell when the source was removed, in {_UNITS[trace.unit or 'points']}; "
            "largest first.",
            "",
            "| rank | source | label | role | Δ |",
            "| --- | --- | --- | --- | --- |",
        ]
        for rank, s in enumerate(trace.sources, 1):
            delta = "not measured" if s.delta is None else f"{s.delta:.3f}"
            out.append(f"| {rank} | {code(s.source_id)} | {_cell(s.label)} | {_term('role', s.role)} | {delta} |")
    if trace.injection is not None:
        inj = trace.injection
        found = label("suspect_injection") if inj.suspected else f"not {label('suspect_injection')}"
        drop = "" if inj.delta is None else f", Δ {inj.delta:.3f}"
        where = f" ({inj.source_id}{drop})" if inj.source_id else ""
        out += ["", f"**{label('injection').capitalize()}:** {escape(found)}{where}. {escape(inj.because)}"]
    return out


def _custody_log(incident: IncidentOut) -> list[str]:
    log = incident.custody_log
    out = ["", f"## {label('audit.custody_log').capitalize()}", ""]
    if log.record is None:
        out.append(f"The turn has no record: {label('audit.not_chained')}.")
    else:
        rec = log.record
        out.append(
            f"The turn's record: number {rec.seq} ({rec.kind}, {shown_time(rec.created_at)}), hash {code(rec.hash)}, "
            f"attesting {code(rec.content_digest)}."
        )
    head = f"; {label('audit.head')} {log.head.seq} {code(log.head.hash)}" if log.head else ""
    if log.intact:
        out.append(
            f"**Verification:** {label('audit.custody_log')} {label('audit.intact')} · {log.records} records{head}."
        )
    else:
        b = log.broken
        assert b is not None
        where = f"record {b.seq}" if b.seq is not None else "a row no record covers"
        mine = " — this turn" if log.turn_broken else ""
        out.append(
            f"**Verification:** {label('audit.custody_log')} {label('audit.broken').upper()} at {where} "
            f"({b.kind} {escape(repr(b.subject))}){mine}: {b.problem} — {escape(b.detail)}{head}."
        )
    return out


def _heading(incident: IncidentOut) -> list[str]:
    t, target = incident.turn, incident.target
    what = f"action {target.id} {code(target.call or '')}" if target.kind == "action" else f"sentence {target.id}"
    out = [
        f"# Incident: {what} in turn {code(t.turn_id)}",
        "",
        f"- Conversation: {escape(_or_not(t.conversation))} · agent {escape(_or_not(t.agent))} · model "
        f"{escape(_or_not(t.model))}",
        f"- Answer produced: {shown_time(t.answered_at)} · stored {shown_time(t.stored_at)} · turn digest "
        f"{code(t.digest)}",
        f"- {'Call made' if target.kind == 'action' else 'Sentence produced'}: {shown_time(target.produced_at)}",
    ]
    if target.kind == "sentence":
        out.append(f"- Sentence ({target.status}): {escape(target.text or '')}")
    else:
        out.append(f"- Origin of its values: {label('origin.' + (target.origin or 'invented'))}")
    chain = incident.chain
    sources = {s.id: s for s in incident.sources}
    out += ["", "## Chain", "", chain_text(target, chain.reported_by, chain.reports, chain.caused_by, sources, md=True)]
    for c in incident.chain.caused_by:
        via = f", through {c.via}" if c.via else ""
        out.append(f"- {code(c.source_id)} ({c.basis}{via}): {escape(c.because)}")
    return [*out, ""]


def incident_markdown(incident: IncidentOut) -> str:
    """The incident as one Markdown document, the same bytes for the same incident."""
    lines = _heading(incident) + _sources(incident) + _action_findings(incident)
    lines += _trace(incident.trace, incident.trace_note) + _custody_log(incident)
    return "\n".join(lines) + "\n"
