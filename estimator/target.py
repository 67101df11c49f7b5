"""What a trace measures support for: a sentence of the answer, or a tool call the agent made.

The method is the same for both — leave-one-out over the context, span checks verified on the source's
lines — and only the questions change: for a sentence, "how well do the sources support this claim?"; for an
action, "how strongly does the shown context call for the assistant to make exactly this call now?". A
``Wording`` names the prompt files that ask them; every function that renders a prompt of a trace takes one
(``SENTENCE`` by default), and the result records the versions of the files it used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ACTION", "SENTENCE", "TargetKind", "Wording"]

TargetKind = Literal["sentence", "action"]


@dataclass(frozen=True)
class Wording:
    """The prompt files of one kind of target (names of ``prompts/<name>.txt``)."""

    kind: TargetKind
    judge_system: str
    judge_user: str
    logprob_system: str
    support_evidence: str
    support_directive: str
    target_heading: str
    """How the target is headed where a prompt shows it (``CLAIM`` / ``CALL``)."""

    @property
    def prompt_names(self) -> tuple[str, ...]:
        """The files a judged trace renders (the log-probability system prompt is added by its estimator)."""
        return (
            self.judge_system,
            self.judge_user,
            self.support_evidence,
            self.support_directive,
            "support_retry_nudge",
            "data_only_rule",
        )


SENTENCE = Wording(
    kind="sentence",
    judge_system="judge_system",
    judge_user="judge_user",
    logprob_system="logprob_system",
    support_evidence="support_evidence",
    support_directive="support_directive",
    target_heading="CLAIM",
)
ACTION = Wording(
    kind="action",
    judge_system="judge_action_system",
    judge_user="judge_action_user",
    logprob_system="logprob_action_system",
    support_evidence="support_action_evidence",
    support_directive="support_action_directive",
    target_heading="CALL",
)
