"""The README's examples are run: every ```console block's ``$ `` commands (the free ones — no model call) run in
order in one fresh data directory, from the repository's root, and print what the README shows (a line ``...``
stands for any lines; trace ids and dates are normalised); and every repository path a shell example names
exists."""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from provenance_api.cli.main import main

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
FREE = {"gate", "quote", "import", "explain", "traces", "--version"}  # commands that never call a model
PROGRAMS = {"provenance", ".venv/bin/provenance"}
REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:\./)?((?:fixtures|scripts|bench|docs|tests|estimator|provenance_api|prompts)"
    r"/[\w./-]*)"
)
NORMALISE = (
    (re.compile(r"\btr_[0-9a-f]{20}\b"), "tr_…"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?Z?\b"), "<date>"),
)


@dataclass(frozen=True)
class Example:
    line: int
    command: str
    expected: list[str]


def _blocks(text: str) -> list[tuple[str, int, str]]:
    return [(m.group(1), text.count("\n", 0, m.start()) + 1, m.group(2)) for m in FENCE.finditer(text)]


def console_examples(text: str) -> list[Example]:
    out: list[Example] = []
    for lang, start, body in _blocks(text):
        if lang != "console":
            continue
        for offset, line in enumerate(body.splitlines()):
            if line.startswith("$ "):
                out.append(Example(start + 1 + offset, line[2:], []))
            elif out and out[-1].line >= start:
                out[-1].expected.append(line)
            else:
                raise AssertionError(f"README line {start + 1 + offset}: console output before any $ command")
    return out


def _normalise(text: str) -> str:
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.splitlines())


def matches(expected: list[str], actual: str) -> bool:
    """``actual`` is ``expected`` line for line, where a ``...`` line stands for any lines (none included)."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == "..." else re.escape(_normalise(line)) + r"\n" for line in expected
    )
    return re.fullmatch(pattern, _normalise(actual) + "\n") is not None


def test_the_matcher_reads_ellipses_and_normalises_ids() -> None:
    assert matches(["a", "...", "d"], "a\nb\nc\nd\n") and matches(["a", "...", "b"], "a\nb")
    assert not matches(["a", "d"], "a\nb\nd") and not matches(["a"], "a\nextra")
    assert matches(["tr_… 2026-01-01 10:00"], "tr_0123456789abcdef0123 2031-12-31 23:59  ")


def test_the_readme_shows_checked_console_examples() -> None:
    examples = console_examples(README.read_text(encoding="utf-8"))
    commands = {shlex.split(e.command)[1] for e in examples}
    assert {"gate", "quote", "explain", "import"} <= commands


def test_every_console_example_prints_what_the_readme_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("PROVENANCE_DATA_DIR", str(tmp_path / "data"))
    failures: list[str] = []
    for example in console_examples(README.read_text(encoding="utf-8")):
        argv = shlex.split(example.command)
        assert argv[0] in PROGRAMS, f"README line {example.line}: {argv[0]!r} is not the provenance command"
        assert argv[1] in FREE, (
            f"README line {example.line}: {argv[1]!r} may call a model; console examples "
            f"are run, so show it in a bash block instead"
        )
        capsys.readouterr()
        try:
            code = main(argv[1:])
        except SystemExit as done:  # --version
            code = int(done.code or 0)
        out = capsys.readouterr().out
        if code != 0 or not matches(example.expected, out):
            failures.append(
                f"README line {example.line}: $ {example.command}\n--- exit {code}, printed:\n{out}"
                f"--- the README shows:\n" + "\n".join(example.expected)
            )
    assert not failures, "\n\n".join(failures)


def test_every_repository_path_in_a_shell_example_exists() -> None:
    missing = []
    for lang, start, body in _blocks(README.read_text(encoding="utf-8")):
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        for offset, line in enumerate(body.splitlines()):
            if lang == "console" and not line.startswith("$ "):
                continue
            code = line.removeprefix("$ ").split(" #", 1)[0]
            paths = set(REPO_PATH.findall(code)) | _path_arguments(code)
            missing += [
                f"README line {start + 1 + offset}: {path}"
                for path in sorted(paths)
                if not (REPO / path.rstrip(".,;:")).exists()
            ]
    assert missing == []


def _path_arguments(command: str) -> set[str]:
    """The relative paths a ``provenance`` command is given as arguments (not option values such as a model,
    URLs, placeholders or shell expansions)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return set()
    if not argv or argv[0] not in PROGRAMS:
        return set()
    positional = [a for before, a in itertools.pairwise(argv) if not before.startswith("--")]  # not --model's
    return {a for a in positional if "/" in a and not a.startswith(("-", "/")) and "://" not in a and "$" not in a}
