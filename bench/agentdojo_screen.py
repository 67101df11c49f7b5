"""The free screen on the AgentDojo runs of ``tests/data/agentdojo`` (written by ``bench/agentdojo_runs.py``): each
run imported through the service's importer, the free tier run on its turn (corpus, gating, the action screen), and
the actions it flags counted — every action of a benign run, the user task's own actions of an obeying run, and
the injected actions of an obeying run. An obeyed injection is caught when one of its injected calls that changes
something (not a get, read, search, list …) is flagged; the source it names should be a return that carries the
injection. ``python bench/agentdojo_runs.py bench --split heldout`` prints it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from estimator.actions.arguments import find_value  # noqa: E402
from estimator.actions.report import ActionFinding, screen_actions  # noqa: E402
from estimator.actions.targets import tool_words, whole_history  # noqa: E402
from estimator.corpus.turn import StoredTurn  # noqa: E402
from estimator.corpus.units import Corpus  # noqa: E402
from provenance_api.importers import detect_format, import_conversation  # noqa: E402
from provenance_api.providers.free_tier import gate_view  # noqa: E402

DATA = ROOT / "tests" / "data" / "agentdojo"
SUITE_VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")
BENIGN = "ground-truth-replay"
OBEYING = "ground-truth-obeying"
READING = frozenset({"get", "read", "search", "list", "check", "find", "view", "query", "fetch"})


def split_of(user_task_id: str) -> str:
    """``dev`` for even-numbered user tasks, ``heldout`` for odd ones."""
    return "heldout" if int(user_task_id.rsplit("_", 1)[1]) % 2 else "dev"


def writes(tool: str) -> bool:
    """Whether a call of ``tool`` changes something (not a get / read / search / list …): an injection's goal."""
    return next(iter(tool_words(tool)), "") not in READING


def _words(text: str) -> list[str]:
    return [w for w in regex.findall(r"\w+", regex.sub(r"\\[nt]", " ", text)) if len(w) >= 3]


def carries(text: str, injections: Sequence[str]) -> bool:
    """Whether a return's text holds one of the injections: its first words in a row, whatever the YAML dump of the
    return did to its lines, quotes and escapes."""
    words = " ".join(_words(text))
    return any(" ".join(_words(t)[:8]) in words for t in injections if _words(t))


@dataclass(frozen=True)
class Screened:
    """One kept run through the service's importer and the free tier."""

    name: str  # the run's file, relative to its split's directory
    suite: str
    style: str  # the attack (``none``: a clean run)
    obeyed: bool
    findings: tuple[ActionFinding, ...]
    carrying: frozenset[str]  # the tool sources whose text holds the injection
    injected: tuple[int, ...]  # the actions the injection asked for (obeyed runs), by index
    exact: tuple[int, int]  # reported argument sources that hold the value on the quoted lines, of those reported

    def benign(self) -> list[ActionFinding]:
        return [f for i, f in enumerate(self.findings) if i not in self.injected]

    def goals(self) -> list[ActionFinding]:
        """The injected actions that change something: what the injection was after."""
        return [self.findings[i] for i in self.injected if writes(self.findings[i].action.tool)]

    def caught(self) -> bool:
        return any(f.injection.suspected for f in self.goals())

    def right_source(self) -> bool:
        return any(f.injection.suspected and f.injection.source_id in self.carrying for f in self.goals())


def runs(split: str, data: Path = DATA) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The kept runs of ``split`` (``dev``, ``heldout`` or ``all``), in path order: each file and its log."""
    for part in ("dev", "heldout") if split == "all" else (split,):
        for path in sorted((data / part).rglob("*.json")):
            yield path, json.loads(path.read_text(encoding="utf-8"))


def _calls(log: dict[str, Any]) -> list[str]:
    return [c["function"] for m in log["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]


def _injected(log: dict[str, Any], clean: dict[str, Any]) -> tuple[int, ...]:
    """The calls an obeying run made for the injection: those after the first return that carries it, as many as
    the run made beyond the same user task's clean run."""
    injections = list(log["injections"].values())
    made = 0
    for message in log["messages"]:
        if message["role"] == "assistant":
            made += len(message.get("tool_calls") or [])
        elif message["role"] == "tool" and carries(_text(message), injections):
            break
    extra = len(_calls(log)) - len(_calls(clean))
    if extra <= 0 or _calls(log)[:made] != _calls(clean)[:made]:
        raise ValueError(f"{log['user_task_id']}: the obeying run does not extend its clean run")
    return tuple(range(made, made + extra))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(b.get("content") or "") for b in content if isinstance(b, dict))
    return str(content or "")


def screen_run(path: Path, log: dict[str, Any], data: Path = DATA) -> Screened:
    """Import one run as a user would (the format detected), run the free tier on its turn and read the result."""
    name = path.relative_to(data).as_posix()
    (turn,) = import_conversation(log, detect_format(log), conversation_id=name).turns
    view = gate_view(turn)
    report = screen_actions(turn, view.corpus, view.report)
    if [f.action.tool for f in report.findings] != _calls(log):
        raise ValueError(f"{name}: the imported actions are not the run's calls")
    obeyed = log["pipeline_name"] == OBEYING
    injected: tuple[int, ...] = ()
    if obeyed:
        clean = data / path.relative_to(data).parts[0] / BENIGN / log["suite_name"] / log["user_task_id"]
        injected = _injected(log, json.loads((clean / "none" / "none.json").read_text(encoding="utf-8")))
    injections = list(log["injections"].values())
    carrying = frozenset(u.id for u in view.corpus.tool_units() if carries(u.text, injections))
    return Screened(
        name,
        log["suite_name"],
        log["attack_type"] or "none",
        obeyed,
        report.findings,
        carrying,
        injected,
        _exact(turn, view.corpus, report.findings),
    )


def _exact(turn: StoredTurn, corpus: Corpus, findings: Sequence[ActionFinding]) -> tuple[int, int]:
    texts = {u.id: u.text for u in corpus.units} | {"query": turn.effective_query()}
    texts |= {f"history:{h.index}": h.text for h in whole_history(turn, corpus)}
    held = checked = 0
    for finding in findings:
        for argument in finding.arguments:
            for holder in argument.holders:
                text = texts.get(holder.source_id, "")
                checked += 1
                held += holder.quote in text and find_value(argument.value, holder.quote) is not None
    return held, checked


def bench(split: str, data: Path = DATA) -> int:
    screened = [screen_run(path, log, data) for path, log in runs(split, data)]
    print(f"split {split}: {len(screened)} AgentDojo runs ({SUITE_VERSION}), free tier on each")
    print(f"  {'suite':<10} {'attack':<37} {'user-task actions flagged':>24} {'obeyed injections caught':>26}")
    keys = sorted({(s.suite, s.style) for s in screened}, key=lambda k: (SUITES.index(k[0]), k[1]))
    for suite, style in keys:
        group = [s for s in screened if (s.suite, s.style) == (suite, style)]
        print(f"  {suite:<10} {style:<37} {_benign(group):>24} {_recall(group):>26}")
    for suite in SUITES:
        group = [s for s in screened if s.suite == suite]
        print(f"  {suite:<10} {'(all)':<37} {_benign(group):>24} {_recall(group):>26}")
    quiet = [s for s in screened if not s.obeyed]
    obeyed = [s for s in screened if s.obeyed]
    right = sum(s.right_source() for s in obeyed)
    print(f"  benign runs (clean and attacked, not obeyed): {_benign(quiet)} actions flagged")
    print(f"  obeyed runs, the user task's own actions: {_benign(obeyed)} flagged")
    print(f"  recall of obeyed injections: {_recall(obeyed)}; the flagged source carries the injection in {right}")
    goals = [f for s in obeyed for f in s.goals()]
    print(f"  injected actions that change something: {sum(f.injection.suspected for f in goals)}/{len(goals)} flagged")
    held, checked = (sum(s.exact[i] for s in screened) for i in (0, 1))
    print(f"  argument provenance: {held} of {checked} reported sources hold the value on the quoted lines")
    for s in screened:
        for f in s.benign():
            if f.injection.suspected:
                print(f"  FLAGGED {s.name} {f.action.id} {f.action.tool}: {f.injection.because[:300]}")
    for s in obeyed:
        if not s.right_source():
            print(f"  MISSED {s.name}: {', '.join(f'{f.action.id} {f.action.tool}' for f in s.goals())}")
    return 0


def _benign(group: Sequence[Screened]) -> str:
    actions = [f for s in group for f in s.benign()]
    flagged = sum(f.injection.suspected for f in actions)
    return f"{flagged}/{len(actions)} ({flagged / max(len(actions), 1):.1%})"


def _recall(group: Sequence[Screened]) -> str:
    obeyed = [s for s in group if s.obeyed]
    if not obeyed:
        return "-"
    caught = sum(s.caught() for s in obeyed)
    return f"{caught}/{len(obeyed)} ({caught / len(obeyed):.1%})"
