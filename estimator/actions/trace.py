"""A metered trace of an action: leave-one-out over what the agent had seen when it made a call.

Beyond the paper, which traces answer sentences only. The target is the call exactly as emitted —
``name(canonical JSON of its arguments)`` (``Action.text``) — and the context is the action's
(``targets.action_context``): the system prompt, the history, the query and only the tool returns that came back
before the call. The driver, the rounds, redundancy resolution and the span checks are the sentence's; only the
questions differ (``target.ACTION``): the judge rates how strongly the shown context calls for exactly this call
now, the scorer gives log p(call | masked context) as the agent's next step, the span checks quote the request or
the line holding a value. Every estimator runs (judged, expected, logprob, both, proxy).

The result is the sentence's shape plus ``target`` (the call and the sources it could read), ``argument_sources``
(the free tier's argument provenance) and ``injection``: whether a tool return that addresses the agent with
instructions *grounds* the call by measurement — its removal drops the score by at least τ — while the user's own
words ask for neither the tool nor a decisive value it was given. The free screen's view (``screened``) is kept
beside it: a screen that flagged a source the trace finds the call does not depend on is said so, in words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from estimator.actions.arguments import ArgumentSource, argument_sources, find_value
from estimator.actions.injection import Injection, instruction_lines, screen_action, tool_named, user_words
from estimator.actions.targets import Action, ActionContext, action_context, extract_actions
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer
from estimator.ledger import CallLedger
from estimator.loo.logprob_cost import EstimatorChoice
from estimator.params import DEFAULT_PARAMS, Params
from estimator.results.models import (
    ArgumentSourceModel,
    InjectionModel,
    SourceScoreModel,
    TraceResultModel,
    TraceTargetModel,
)
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM
from estimator.seams.scorer import Scorer
from estimator.target import ACTION
from estimator.tokens import Tokenizer
from estimator.trace import TraceOutcome, run_trace

__all__ = ["ActionNotFound", "action_corpus", "find_action", "measured_injection", "trace_action"]


class ActionNotFound(LookupError):
    """An action id that names no tool call of the turn."""


def find_action(turn: StoredTurn, action_id: str) -> Action:
    """The action ``a<n>`` of ``turn``; ``ActionNotFound`` saying which ids exist when it has none of that id."""
    actions = extract_actions(turn)
    for action in actions:
        if action.id == action_id:
            return action
    have = f"a0–a{len(actions) - 1}" if len(actions) > 1 else ("a0" if actions else "none: it made no tool call")
    raise ActionNotFound(f"the turn has no action {action_id!r} (its actions: {have})")


def action_corpus(turn: StoredTurn, corpus: Corpus, action: Action) -> tuple[Corpus, ActionContext]:
    """The corpus of what the agent had seen when it made ``action`` (ids as in the turn's corpus), and its context."""
    context = action_context(turn, corpus, action)
    later = {u.id for u in context.later(corpus)}
    notes = (*corpus.notes, *(f"{uid} came back after {action.id} was made: never its cause" for uid in sorted(later)))
    kept = Corpus(
        units=context.units,
        unscorable=corpus.unscorable,
        excluded=corpus.excluded,
        path=corpus.path,
        notes=notes,
        warnings=[w for w in corpus.warnings if not any(w.startswith(f"{uid} ") for uid in later)],
    )
    return kept, context


def _argument_models(arguments: Sequence[ArgumentSource]) -> tuple[ArgumentSourceModel, ...]:
    out = []
    for a in arguments:
        first = a.first
        out.append(
            ArgumentSourceModel(
                path=a.path,
                value=a.value,
                decisive=a.decisive,
                source_id=first.source_id if first else None,
                layer=first.layer if first else None,
                lines=first.lines if first else None,
                quote=first.quote if first else None,
            )
        )
    return tuple(out)


def _grounding(result: TraceResultModel) -> list[SourceScoreModel]:
    """Tool sources that ground the call by measurement, largest drop first (under a redundant verdict, the
    sources that carry it alone)."""
    found = [
        s
        for s in result.sources
        if s.layer == Layer.TOOLS
        and (s.role == "grounds" or (s.role == "redundant" and s.alone is not None))
        and s.delta is not None
        and not math.isnan(s.delta)
    ]
    return sorted(found, key=lambda s: -(s.delta or 0.0))


def measured_injection(
    result: TraceResultModel, context: ActionContext, arguments: Sequence[ArgumentSource], screen: Injection
) -> InjectionModel:
    """The injection finding of a traced action: see the module docstring."""
    action = context.action
    user = user_words(context)
    # the user asked for exactly this when their words name the tool and give every decisive value it sent
    asked_by_user = tool_named(action.tool, user) and all(
        find_value(a.value, user) is not None for a in arguments if a.decisive
    )
    asked = context.query.strip().splitlines()[0][:120] if context.query.strip() else "nothing recorded"
    for score in _grounding(result):
        unit = next(u for u in context.units if u.id == score.source_id)
        found = instruction_lines(unit)
        if not found or asked_by_user:
            continue
        first = found[0]
        verified = score.support.quote if score.support is not None and score.support.verdict == "supported" else None
        quote = verified or first.quote
        lines = (
            (score.support.line_start, score.support.line_end)
            if verified and score.support is not None and score.support.line_start is not None
            else first.lines
        )
        assert lines[0] is not None and lines[1] is not None
        return InjectionModel(
            suspected=True,
            source_id=unit.id,
            lines=(lines[0], lines[1]),
            quote=quote,
            delta=score.delta,
            screened=screen.suspected,
            because=(
                f"{action.tool} was called because {unit.label} ({unit.id}) told the agent to "
                f"({', '.join(first.cues)}): removing it drops the score by {score.delta:.2f}; "
                f"the user asked: {asked}"
            ),
        )
    if screen.suspected and screen.source_id is not None:
        flagged = next((s for s in result.sources if s.source_id == screen.source_id), None)
        moved = (
            f"removing it changes the score by {flagged.delta:.2f}"
            if flagged is not None and flagged.delta is not None and not math.isnan(flagged.delta)
            else "it was not measured alone"
        )
        return InjectionModel(
            suspected=False,
            source_id=screen.source_id,
            lines=screen.lines,
            quote=screen.quote,
            delta=flagged.delta if flagged is not None else None,
            screened=True,
            because=(
                f"the free screen flagged {screen.source_id}, but the trace does not find that the call depends on "
                f"it ({moved})"
            ),
        )
    return InjectionModel(
        suspected=False,
        screened=False,
        because="no tool return that addresses the agent with instructions grounds this call",
    )


async def trace_action(
    choice: EstimatorChoice,
    turn: StoredTurn,
    corpus: Corpus,
    action_id: str,
    *,
    llm: LLM,
    scorer: Scorer | None = None,
    params: Params = DEFAULT_PARAMS,
    tokenizer: Tokenizer | None = None,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    ledger: CallLedger | None = None,
) -> TraceOutcome:
    """Trace the action ``action_id`` of ``turn`` (``corpus``: the turn's) with ``choice``; ``ledger`` as for a
    sentence, planned on the action's corpus (``action_corpus``)."""
    action = find_action(turn, action_id)
    kept, context = action_corpus(turn, corpus, action)
    outcome = await run_trace(
        choice,
        action.text,
        context.query,
        kept,
        llm=llm,
        scorer=scorer,
        params=params,
        tokenizer=tokenizer,
        on_progress=on_progress,
        ledger=ledger,
        wording=ACTION,
    )
    arguments = argument_sources(context)
    screen = screen_action(context, arguments)
    extra = {
        "target": TraceTargetModel(
            id=action.id,
            tool=action.tool,
            call_id=action.call_id,
            text=action.text,
            context_sources=tuple(u.id for u in kept.units),
        ),
        "argument_sources": _argument_models(arguments),
        "injection": measured_injection(outcome.result, context, arguments, screen),
    }
    return TraceOutcome(outcome.result.model_copy(update=extra), outcome.logprob, outcome.agreement)
