"""The free tier's account of a turn's actions: for each, its argument provenance, origin and the injection
screen, and the answer sentences that report it — the JSON ``provenance gate`` prints beside the sentences.

A sentence *reports* an action when the agent says it did something ("I have transferred …", "We sent …": the
first person and a past tense) and names a decisive value the action sent, or the tool's words ("transferred"
for ``transfer_money``); ``reported_by`` lists those sentences' ids, so a user can go from the sentence to the
action to what caused it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import regex

from estimator.actions.arguments import ArgumentSource, argument_sources, find_value
from estimator.actions.injection import Injection, instruction_lines, screen_action
from estimator.actions.origin import Origin, action_origin
from estimator.actions.targets import Action, action_context, extract_actions, tool_words, whole_history
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.free_tier.gating import GateReport, GateStatus

__all__ = ["ActionFinding", "ActionsReport", "screen_actions"]


@dataclass(frozen=True)
class ActionFinding:
    action: Action
    arguments: tuple[ArgumentSource, ...]
    origin: Origin
    injection: Injection
    reported_by: tuple[str, ...]


@dataclass(frozen=True)
class ActionsReport:
    findings: tuple[ActionFinding, ...]

    @property
    def steered(self) -> int:
        return sum(1 for f in self.findings if f.injection.suspected)

    def summary(self) -> str:
        """``3 actions: 1 steered by tool data`` (or ``no actions``)."""
        n = len(self.findings)
        if not n:
            return "no actions"
        return f"{n} action{'s' if n != 1 else ''}: {self.steered} steered by tool data"


_DID = regex.compile(
    r"\b(?:I|[Ww]e)(?:\s*['’]ve|\s+have|\s+had)?(?:\s+\w+ly|\s+(?:also|just|already|now|then))?"
    r"\s+(?:\w{3,}ed|sent|paid|made|put|set|wrote|bought|sold|gave|forwarded|spent|took|ran)\b"
)


def _reports(action: Action, arguments: Sequence[ArgumentSource], text: str) -> bool:
    if not _DID.search(text):
        return False
    if any(a.decisive and find_value(a.value, text) is not None for a in arguments):
        return True
    lowered = text.lower()
    return any(word[:-1] in lowered for word in tool_words(action.tool) if len(word) > 4)


def screen_actions(turn: StoredTurn, corpus: Corpus, gate: GateReport | None = None) -> ActionsReport:
    """Argument provenance, origin, the injection screen and the reporting sentences of every action."""
    findings: list[ActionFinding] = []
    reporting = [g for g in gate.segments if g.status != GateStatus.AGENT_VOICE] if gate is not None else []
    history = whole_history(turn, corpus)
    instructions = {u.id: instruction_lines(u) for u in corpus.tool_units()}  # once per turn, not per action
    for action in extract_actions(turn):
        context = action_context(turn, corpus, action, history)
        arguments = argument_sources(context)
        reported = tuple(g.segment.id for g in reporting if _reports(action, arguments, g.segment.text))
        findings.append(
            ActionFinding(
                action, arguments, action_origin(arguments), screen_action(context, arguments, instructions), reported
            )
        )
    return ActionsReport(tuple(findings))
