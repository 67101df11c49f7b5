"""Freshness rules for actions: the operator's policy that an action needs recent, unaltered evidence.

A rule reads "a ``send_money`` call needs evidence from ``get_balance`` no older than 30 s, from the same
principal, with no lossy transformation"::

    [[rules]]
    action_tool = "send_money"
    evidence_tool = "get_balance"
    max_age_seconds = 30
    same_principal = true
    lossless = true

(the same as JSON: ``{"rules": [{…}]}``). A tool matches a rule by its name, or by its name behind an MCP
server's (``bank.send_money`` matches ``send_money``).

``check_freshness`` checks the rules of an action's tool over what the agent had read when it made the call (its
context's tools-layer sources, failed calls excluded): the rule passes when one source from the evidence tool meets
every condition; it is **not checkable** when no source fails outright but a time (or a principal the rule asks
about) is not recorded — never guessed; otherwise it is a **breach**, naming the rule, the source (the freshest
from the evidence tool, or none when the agent read none) and its age. Without rules nothing is judged.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from estimator.corpus.units import TOOL_ERROR, Layer, Unit
from estimator.custody.ages import age_seconds, age_text

__all__ = [
    "FreshnessFinding",
    "FreshnessPolicy",
    "FreshnessRule",
    "FreshnessRulesError",
    "check_freshness",
    "parse_policy",
    "tool_matches",
]

Status = Literal["pass", "breach", "not checkable"]


class FreshnessRule(BaseModel):
    """One rule: an ``action_tool`` call needs evidence from ``evidence_tool`` at most ``max_age_seconds`` old
    when the call was made; ``same_principal``: fetched for the principal the call was made for; ``lossless``:
    with no transformation that lost part of it (a cut to a token budget)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action_tool: str = Field(min_length=1)
    evidence_tool: str = Field(min_length=1)
    max_age_seconds: float = Field(gt=0, allow_inf_nan=False)
    same_principal: StrictBool = False
    lossless: StrictBool = False

    @property
    def text(self) -> str:
        """The rule in words, as findings name it."""
        words = f"a {self.action_tool} call needs evidence from {self.evidence_tool} no older than "
        words += f"{self.max_age_seconds:g} s"
        if self.same_principal:
            words += ", from the same principal"
        if self.lossless:
            words += ", with no lossy transformation"
        return words


class FreshnessPolicy(BaseModel):
    """The operator's rules (none: ages are shown and nothing is judged)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[FreshnessRule, ...] = ()

    def for_tool(self, tool: str) -> tuple[FreshnessRule, ...]:
        return tuple(r for r in self.rules if tool_matches(tool, r.action_tool))


class FreshnessRulesError(ValueError):
    """A rules file that cannot be read, naming the file and the field."""

    def __init__(self, name: str, field: str, problem: str) -> None:
        super().__init__(f"freshness rules {name}: {field}: {problem}")
        self.name, self.field, self.problem = name, field, problem


def parse_policy(text: str, name: str) -> FreshnessPolicy:
    """A policy from the text of a TOML or JSON file called ``name`` (a ``.json`` name is JSON, any other TOML).
    Every problem is a ``FreshnessRulesError`` naming the file and the field (``rules[0].max_age_seconds``)."""
    try:
        data: Any = json.loads(text) if name.lower().endswith(".json") else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if name.lower().endswith(".json") else "TOML"
        raise FreshnessRulesError(name, "(file)", f"not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise FreshnessRulesError(name, "(file)", 'expected an object with a "rules" list')
    try:
        return FreshnessPolicy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
        raise FreshnessRulesError(name, where or "(file)", first["msg"]) from None


def tool_matches(tool: str, wanted: str) -> bool:
    """``tool`` is ``wanted``, or ``wanted`` behind a server's name (``bank.send_money``)."""
    return tool == wanted or tool.endswith("." + wanted)


class FreshnessFinding(BaseModel):
    """One rule checked for one action."""

    model_config = ConfigDict(frozen=True)

    rule: str = Field(description="the rule, in words")
    status: Status
    source_id: str | None = Field(description="the evidence source judged (None: the agent read none)")
    age_seconds: float | None = Field(description="its age when the action was made (None: not recorded)")
    failed: tuple[str, ...] = Field(description="each condition it failed, or could not be checked on")
    because: str = Field(description="the finding in words")


def _conditions(
    rule: FreshnessRule, unit: Unit, produced_at: datetime | None, principal: str | None
) -> tuple[float | None, list[str], list[str]]:
    """(age, failed, unknown) of one evidence source under ``rule``."""
    envelope = unit.envelope
    age = age_seconds(envelope.observed_at, produced_at)
    failed: list[str] = []
    unknown: list[str] = []
    if age is None:
        missing = [w for w, t in (("the source's", envelope.observed_at), ("the action's", produced_at)) if t is None]
        unknown.append(f"no timestamps: {' and '.join(missing)} time not recorded")
    elif age > rule.max_age_seconds:
        failed.append(f"age {age_text(age)} is over {rule.max_age_seconds:g} s")
    if rule.same_principal:
        if envelope.principal is None or principal is None:
            unknown.append("principal not recorded")
        elif envelope.principal != principal:
            failed.append(f"fetched for {envelope.principal}, the action was made for {principal}")
    if rule.lossless and envelope.lossy:
        failed.append("lossy: " + "; ".join(envelope.lossy))
    return age, failed, unknown


def _check(
    rule: FreshnessRule, units: tuple[Unit, ...], produced_at: datetime | None, principal: str | None
) -> FreshnessFinding:
    evidence = [u for u in units if tool_matches(u.envelope.tool, rule.evidence_tool)]
    if not evidence:
        return FreshnessFinding(
            rule=rule.text,
            status="breach",
            source_id=None,
            age_seconds=None,
            failed=(f"no evidence from {rule.evidence_tool}",),
            because=f"breach: the agent had read nothing from {rule.evidence_tool} when it made the call",
        )
    judged = [(u, *_conditions(rule, u, produced_at, principal)) for u in evidence]
    passing = [j for j in judged if not j[2] and not j[3]]
    if passing:
        unit, age, _, _ = min(passing, key=lambda j: j[1] if j[1] is not None else float("inf"))
        return FreshnessFinding(
            rule=rule.text,
            status="pass",
            source_id=unit.id,
            age_seconds=age,
            failed=(),
            because=f"pass: {unit.id} from {rule.evidence_tool} was {age_text(age)} old",
        )
    open_ = [j for j in judged if not j[2]]
    if open_:
        unit, age, _, unknown = open_[-1]  # the latest the agent read
        return FreshnessFinding(
            rule=rule.text,
            status="not checkable",
            source_id=unit.id,
            age_seconds=age,
            failed=tuple(unknown),
            because=f"not checkable: {'; '.join(unknown)} ({unit.id} from {rule.evidence_tool})",
        )
    newest = max(
        judged, key=lambda j: (j[0].envelope.observed_at is not None, j[0].envelope.observed_at or datetime.min)
    )
    unit, age, failed, unknown = newest
    return FreshnessFinding(
        rule=rule.text,
        status="breach",
        source_id=unit.id,
        age_seconds=age,
        failed=tuple(failed + unknown),
        because=f"breach: {unit.id} from {rule.evidence_tool}: {'; '.join(failed)}",
    )


def check_freshness(
    action_tool: str,
    produced_at: datetime | None,
    principal: str | None,
    units: Iterable[Unit],
    policy: FreshnessPolicy,
) -> tuple[FreshnessFinding, ...]:
    """The findings of every rule of ``action_tool`` over ``units`` — what the agent had read when it made the
    call (an ``ActionContext``'s units) — at ``produced_at``, for ``principal``. Only tools-layer sources that are
    no failed call's error text are evidence. No rule for the tool: no finding."""
    evidence = tuple(u for u in units if u.layer == Layer.TOOLS and u.kind != TOOL_ERROR)
    return tuple(_check(rule, evidence, produced_at, principal) for rule in policy.for_tool(action_tool))
