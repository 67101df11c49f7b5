"""The text of a proxy-first trace (``--estimator proxy``) for the terminal: the result tree, then what the
proxy did and what the hosted judge made of it.

After the tree (``render_text.trace_text``): whether the hosted judge confirmed the proxy's ranking or the
full judged search ran (a mark and words, never colour alone), the proxy's model, the hosted calls made
beside the local scoring passes (free, never in made), what the hosted judge measured, the two rankings
side by side (the proxy's drops in nats; the judge's in digits: the full search's after a fallback, else
its check of the proxy's top source) and, after a fallback, why the judge disagreed. The terms shown are
explained in the footnotes, as every other term of a trace is.
"""

from __future__ import annotations

import math
import textwrap

from estimator.corpus.units import Corpus
from estimator.proxy.result import ProxyTraceResultModel
from estimator.results.models import TraceResultModel
from estimator.results.proxy import HostedCheckModel, RankedModel
from provenance_api.cli import render_text
from provenance_api.cli.style import Style, plural
from provenance_api.core.glossary import label

__all__ = ["TOP", "proxy_block", "proxy_terms", "result_text"]

PLAIN = Style()
TOP = 5
"""How many sources of each ranking the block shows."""
_PAD = 19
_LABEL = 16


def _num(x: float | None) -> str:
    return "not measured" if x is None or x != x else f"{x:+.2f}"


def _plain(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{x:.2f}"


def _row(label: str, text: str, style: Style) -> str:
    body = textwrap.fill(" ".join(text.split()), width=100, initial_indent=" " * _PAD, subsequent_indent=" " * _PAD)
    return "  " + style.bold(label) + body[len(label) + 2 :]


def _label(corpus: Corpus, source_id: str) -> str:
    """The source's id and the start of its label (the tree above gives it in full)."""
    try:
        label = corpus.by_id(source_id).label
    except KeyError:
        return source_id
    return f"{source_id} {label if len(label) <= _LABEL else label[: _LABEL - 1] + '…'}"


def _hosted_line(hosted: HostedCheckModel) -> str:
    parts = [f"s(1) {_plain(hosted.s_all)} · s(0) {_plain(hosted.s_none)} · Γ {_plain(hosted.gamma)} (digits 1–9)"]
    if hosted.top_layer is not None:
        parts.append(f"without the {hosted.top_layer} layer Δ {_num(hosted.top_layer_drop)}")
    if hosted.top_source is not None:
        parts.append(f"without {hosted.top_source} Δ {_num(hosted.top_source_drop)}")
    if hosted.span_checked:
        parts.append(f"span-checked {', '.join(hosted.span_checked)}")
    return " · ".join(parts)


def _cell(corpus: Corpus, ranked: RankedModel) -> str:
    role = f" {label(f'role.{ranked.role}')}" if ranked.role else ""
    return f"{_label(corpus, ranked.id)}  {_num(ranked.drop)}{role}"


def _rankings(corpus: Corpus, result: ProxyTraceResultModel, style: Style) -> list[str]:
    """The proxy's ranking and the judge's, side by side, top ``TOP`` of each."""
    report = result.proxy
    proxy = report.proxy_ranking[:TOP]
    if report.judged_ranking is not None:
        judged: list[RankedModel] = report.judged_ranking[:TOP]
        right_head = "judged search Δ (digits 1–9)"
    else:
        hosted = report.hosted
        drop = hosted.top_source_drop
        checked = hosted.top_source is not None and drop is not None and not math.isnan(drop)
        judged = [RankedModel(id=hosted.top_source or "", drop=drop)] if checked and drop is not None else []
        right_head = "hosted judge Δ (digits 1–9), its top-source check"
    left = [_cell(corpus, r) for r in proxy]
    right = [_cell(corpus, r) for r in judged]
    rows = max(len(left), len(right))
    if rows == 0:
        return [_row("Rankings", "no source was tested by either side", style)]
    width = max(len("proxy Δ (nats)"), *(len(x) for x in left))
    label = f"Rankings, top {TOP}"
    out = ["  " + style.bold(label) + " " * (_PAD - 2 - len(label)) + f"{'proxy Δ (nats)':<{width}}   {right_head}"]
    for k in range(rows):
        a = left[k] if k < len(left) else "—"
        b = right[k] if k < len(right) else "—"
        out.append(f"    {k + 1:<{_PAD - 4}}{a:<{width}}   {b}")
    return out


def proxy_block(corpus: Corpus, result: ProxyTraceResultModel, style: Style = PLAIN) -> str:
    """The proxy's block (see the module docstring), plain unless ``style`` paints."""
    report = result.proxy
    mark = style.good("✓ " + result.confirmation) if result.confirmed else style.warn("⚠ " + result.confirmation)
    tokens = "not reported" if report.evaluated_tokens is None else f"{report.evaluated_tokens:,}"
    passes = plural(result.calls.scored or 0, "local scoring pass", "local scoring passes")
    out = [
        style.bold("Proxy-first trace"),
        f"  {mark}",
        _row(
            "Proxy model",
            f"{result.proxy_model} · ranked in {report.proxy_seconds:.2f} s · prompt tokens evaluated: {tokens}",
            style,
        ),
        _row("Calls", f"{plural(result.calls.made, 'hosted call')} made · {passes} (free, not in made)", style),
        _row("Hosted judge", _hosted_line(report.hosted), style),
        _row("Share margin", f"{report.share_margin:g} of Γ", style),
        *_rankings(corpus, result, style),
    ]
    if report.disagreements:
        out.append("  " + style.bold("Disagreements"))
        out += [
            style.warn(textwrap.fill(d, width=100, initial_indent="    - ", subsequent_indent="      "))
            for d in report.disagreements
        ]
    else:
        out.append(_row("Disagreements", "none: the hosted judge's checks agree with the proxy's ranking", style))
    return "\n".join(out) + "\n"


def proxy_terms(result: ProxyTraceResultModel) -> list[str]:
    """The glossary keys of what the block shows, in the order a reader meets them."""
    keys = [
        "proxy.confirmed" if result.confirmed else "proxy.fallback",
        "estimator.proxy",
        "proxy.seconds",
        "proxy.evaluated_tokens",
        "calls.made",
        "calls.scored",
        "s_all",
        "s_none",
        "gamma",
        "delta",
        "proxy.share_margin",
        "proxy.drops",
    ]
    said = " ".join(result.proxy.disagreements)
    keys += [key for key, symbol in (("tau_gamma", "τ_Γ"), ("tau", "τ =")) if symbol in said]
    return keys


def result_text(corpus: Corpus, result: TraceResultModel, style: Style = PLAIN) -> str:
    """A trace's text: the tree with its footnotes; for a proxy trace, the proxy's block between them."""
    if not isinstance(result, ProxyTraceResultModel):
        return render_text.trace_text(corpus, result, style)
    tree = render_text.trace_text(corpus, result, style, explain=False)
    keys = render_text.terms_used(result) + proxy_terms(result)
    return tree + "\n" + proxy_block(corpus, result, style) + "\n" + render_text.footnotes(keys, style)
