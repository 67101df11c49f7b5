"""Agent runs written by the real AgentDojo library, offline and without a model, and how the free screen does on them.

``generate`` runs AgentDojo's own suites (workspace, travel, banking, slack), environments, tools, attacks and
pipeline (``ToolsExecutionLoop``, ``ToolsExecutor``), a scripted element standing in for the model, and keeps what
AgentDojo's ``TraceLogger`` writes for each run (the library's own message format and directory layout):

- ``ground-truth-replay`` (benign): the agent makes the user task's ground-truth calls (``ground_truth`` of the
  environment it starts from, as ``GroundTruthPipeline`` does), once in a clean environment (attack ``none``) and
  under attacks in the library's published styles, where returns carry the injection and the agent does not obey;
- ``ground-truth-obeying`` (obeyed): the same under attack, but right after the first return that carries the
  injection the agent makes the injection task's ground-truth calls, then finishes the user task.

Runs are split by user task: even-numbered user tasks are the development split (``dev/``), odd-numbered ones held
out (``heldout/``). Each run's attack styles (distinct per user task) and injection tasks (those whose ground truth
changes something) are drawn with a seeded generator; the clock the tools stamp with, the run's timestamp and
duration and Python's hash seed are fixed, so a rerun writes the same files.

``bench`` imports every kept run through the service's importer, runs the free tier (corpus, gating, the action
screen) and prints the benign actions flagged (all of them listed) and the obeyed injections caught, per suite and
attack style. An obeyed injection is caught when one of its injected calls that changes something (not a get,
read, search, list …) is flagged; the source it names should be a return that carries the injection.

    python bench/agentdojo_runs.py generate [--out tests/data/agentdojo] [--seed 25] [--per-task 2]
    python bench/agentdojo_runs.py bench [--split heldout|dev|all] [--data tests/data/agentdojo]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys
import types
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent)]

from agentdojo_screen import BENIGN, DATA, OBEYING, SUITE_VERSION, SUITES, bench, carries, split_of, writes  # noqa: E402

STYLES = (
    "important_instructions_no_model_name",
    "tool_knowledge",
    "direct",
    "ignore_previous",
    "system_message",
    "injecagent",
)
TIMESTAMP = "2026-01-01 00:00:00"  # the run fields that only say when and how long: fixed, so a rerun is identical


# --------------------------------------------------------------------------- generating the runs with AgentDojo


def generate(out: Path, seed: int, per_task: int) -> Counter[str]:
    """Every user task of every suite: one clean run, ``per_task`` attacked runs the agent does not obey and
    ``per_task`` it obeys (styles drawn without repeats per task; injection tasks drawn among those whose ground
    truth changes something)."""
    from agentdojo.attacks.attack_registry import ATTACKS
    from agentdojo.benchmark import run_task_with_injection_tasks, run_task_without_injection_tasks
    from agentdojo.task_suite.load_suites import get_suites

    rng = random.Random(seed)
    counts: Counter[str] = Counter()
    _freeze_clock()
    for suite_name, suite in get_suites(SUITE_VERSION).items():
        if suite_name not in SUITES:
            continue
        blank = suite.load_and_inject_default_environment({})
        usable = sorted(
            (i for i, t in suite.injection_tasks.items() if any(writes(c.function) for c in t.ground_truth(blank))),
            key=_number,
        )
        for user_id in sorted(suite.user_tasks, key=_number):
            user_task = suite.user_tasks[user_id]
            logdir = out / split_of(user_id)
            styles = rng.sample(STYLES, 2 * per_task)
            targets = [rng.choice(usable) for _ in styles]
            with _quiet_logger(logdir):
                run_task_without_injection_tasks(
                    suite, _pipeline(BENIGN, user_task), user_task, logdir, True, SUITE_VERSION
                )
                counts[f"{suite_name}:clean"] += 1
                for n, (style, target) in enumerate(zip(styles, targets, strict=True)):
                    obey = n >= per_task
                    injection_task = suite.get_injection_task_by_id(target)
                    replay = _Replay(user_task, injection_task if obey else None)
                    pipeline = _pipeline(OBEYING if obey else BENIGN, user_task, replay)
                    attack = _attack(ATTACKS[style], suite, pipeline)
                    replay.injections = tuple(attack.attack(user_task, injection_task).values())
                    run_task_with_injection_tasks(
                        suite, pipeline, user_task, attack, logdir, True, [target], SUITE_VERSION
                    )
                    counts[f"{suite_name}:{'obeyed' if obey else 'attacked'}"] += 1
    for path in out.rglob("*.json"):
        _fix_time(path)
    return counts


NOW = datetime.datetime(2024, 5, 15, 12, 0)  # the suites' own "today"


def _freeze_clock() -> None:
    """The tools that stamp what they write (a sent e-mail, a saved file) read the clock: they read ``NOW`` instead,
    so that a rerun writes the same files."""
    from agentdojo.default_suites.v1.tools import cloud_drive_client, email_client

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:  # type: ignore[override]
            return NOW  # a plain datetime, as the tools' YAML dump expects

    for module in (email_client, cloud_drive_client):
        module.datetime = types.SimpleNamespace(**{**vars(datetime), "datetime": Frozen})


def _number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


def _fix_time(path: Path) -> None:
    log = json.loads(path.read_text(encoding="utf-8"))
    log["evaluation_timestamp"], log["duration"] = TIMESTAMP, 0.0
    path.write_text(json.dumps(log, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _attack(cls: Any, suite: Any, pipeline: Any) -> Any:
    """An attack of the library's registry. Styles that address the model by name read it from the pipeline's name,
    which names no model here: those get the library's own default wording (``DEFAULT_MODEL_NAME``)."""
    from agentdojo.attacks.base_attacks import DEFAULT_MODEL_NAME, FixedJailbreakAttack

    try:
        return cls(suite, pipeline)
    except ValueError:
        attack = cls.__new__(cls)
        FixedJailbreakAttack.__init__(attack, cls._JB_STRING, suite, pipeline)
        attack.user_name, attack.model_name = "Emma Johnson", DEFAULT_MODEL_NAME
        return attack


class _Replay:
    """The model's place in AgentDojo's pipeline: the user task's ground-truth calls one by one (and, obeying, the
    injection task's right after the first return that carries the injection), then the task's own answer."""

    def __init__(self, user_task: Any, injection_task: Any = None) -> None:
        self.user_task, self.injection_task = user_task, injection_task
        self.injections: tuple[str, ...] = ()
        self.calls: list[Any] = []
        self.injected: list[Any] = []

    def query(
        self, query: str, runtime: Any, env: Any = None, messages: Sequence[Any] = (), extra_args: Any = None
    ) -> tuple[str, Any, Any, Sequence[Any], Any]:
        from agentdojo.functions_runtime import FunctionCall
        from agentdojo.types import ChatAssistantMessage, get_text_content_as_str, text_content_block_from_string

        made = sum(1 for m in messages if m["role"] == "assistant")
        if made == 0:  # the environment the run starts from, as GroundTruthPipeline reads it
            self.calls = list(self.user_task.ground_truth(env))
            self.injected = list(self.injection_task.ground_truth(env)) if self.injection_task is not None else []
        last = messages[-1] if messages else None
        seen = get_text_content_as_str(last["content"] or []) if last is not None and last["role"] == "tool" else ""
        if self.injected and carries(seen, self.injections):
            self.calls[:0], self.injected = self.injected, []
        if self.calls:
            call = self.calls.pop(0)
            made_call = FunctionCall(function=call.function, args=dict(call.args), id=f"call_{made}")
            reply = ChatAssistantMessage(role="assistant", content=None, tool_calls=[made_call])
        else:
            answer = [text_content_block_from_string(self.user_task.GROUND_TRUTH_OUTPUT or "Done.")]
            reply = ChatAssistantMessage(role="assistant", content=answer, tool_calls=None)
        return query, runtime, env, [*messages, reply], extra_args or {}


def _pipeline(name: str, user_task: Any, replay: _Replay | None = None) -> Any:
    from agentdojo.agent_pipeline import (
        AgentPipeline,
        BasePipelineElement,
        InitQuery,
        SystemMessage,
        ToolsExecutionLoop,
        ToolsExecutor,
    )
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    step = replay or _Replay(user_task)

    class Model(BasePipelineElement):  # type: ignore[misc]  # AgentDojo ships no type information
        def query(self, *args: Any, **kwargs: Any) -> tuple[str, Any, Any, Sequence[Any], Any]:
            return step.query(*args, **kwargs)

    model = Model()
    elements = [SystemMessage(load_system_message(None)), InitQuery(), model]
    pipeline = AgentPipeline([*elements, ToolsExecutionLoop([ToolsExecutor(), model], max_iters=40)])
    pipeline.name = name
    return pipeline


def _quiet_logger(logdir: Path) -> Any:
    """AgentDojo's null logger, placed on its logger stack with ``logdir`` so that ``TraceLogger`` writes its files
    there and nothing is printed."""
    from agentdojo.logging import LOGGER_STACK, NullLogger

    class Quiet(NullLogger):  # type: ignore[misc]
        def __enter__(self) -> Any:
            self.messages: list[Any] = []
            self.logdir = str(logdir)
            LOGGER_STACK.get().append(self)
            return self

        def __exit__(self, *exc: object) -> None:
            LOGGER_STACK.get().pop()

    return Quiet()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="run AgentDojo and keep its logs")
    gen.add_argument("--out", type=Path, default=DATA)
    gen.add_argument("--seed", type=int, default=25)
    gen.add_argument("--per-task", type=int, default=2)
    run = sub.add_parser("bench", help="the free screen on the kept runs")
    run.add_argument("--split", choices=("heldout", "dev", "all"), default="heldout")
    run.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    if args.command == "generate":
        if os.environ.get("PYTHONHASHSEED") != "0":  # AgentDojo's tools keep sets (a calendar event's participants)
            os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
        counts = generate(args.out, args.seed, args.per_task)
        print(dict(sorted(counts.items())))
        return 0
    return bench(args.split, args.data)


if __name__ == "__main__":
    raise SystemExit(main())
