"""Before/after behaviour check: the JSON of every fixture's gate, quote and trace, one file each.

A refactor that promises "the output does not change" is checked by snapshotting the command line's JSON
contracts on the shipped fixtures before the change, again after it, and comparing the two folders byte by
byte. The tool only uses interfaces that survive a refactor of the code's layout: the ``provenance`` command
line (its console-script entry point, read from the checkout's ``pyproject.toml``) with ``--json``, run in
child processes whose ``PYTHONPATH`` is the checkout under test (the child refuses to run if
``provenance_api`` or ``estimator`` would be imported from anywhere else), and a scripted OpenAI-compatible
provider on loopback that this script starts itself (no test helper of the checkout is imported).

What is recorded, for every stored-turn fixture in the checkout's ``fixtures/*.json`` (a file ``provenance
gate`` refuses as not a stored turn, e.g. ``conflation_set.json`` or ``*.expected.json``, is listed as
skipped in ``_manifest.json``), under ``--out DIR``:

* ``FIXTURE/gate.json``: ``provenance gate FILE --json``;
* ``FIXTURE/rN/quote.json``: ``provenance quote FILE rN --json`` (the turn's own model), for every sentence
  the gate lists, whatever its status (a refusal is recorded as the problem JSON and the exit status);
* ``FIXTURE/rN/trace-ESTIMATOR.json``: ``provenance trace FILE rN --model openai/gpt-5.2 --json --yes
  --no-cache --no-log`` against the scripted provider, for every sentence and every ``--estimator`` the
  checkout's ``trace --help`` offers (judged, expected, logprob, both and proxy on the current code: the
  provider serves chat answers with top log-probabilities and an echoing ``/v1/completions`` scorer, so none
  needs a local model).

Each file holds the command (with placeholders for the provider's URL), the exit status and the parsed JSON
of stdout, written with sorted keys and an indent of 2. Normalised, because they change from run to run and
not with the code: the provider's base URL (a free port each run) becomes ``<API_BASE>`` and the temporary
data directory ``<DATA_DIR>``, wherever they occur in a string, and the one measured duration, a proxy
trace's ``proxy_seconds`` (the wall time of its local ranking), becomes ``<SECONDS>``; every float keeps 12
significant digits (a cost summed over calls in the order they finished differs in its last bits from run to
run). Nothing else is: the
outputs hold no timestamps or generated ids, and prompt hashes are kept, since the prompts must not change.

The scripted provider answers from the request content only, never from its order or timing: the judge's
digit is 1 + 8 × the share of the claim's words (5+ letters) found among the sources shown, with top
log-probabilities around that digit; a span check is "supported" quoting the longest run of 3+ claim words
found verbatim in the source, else "silent"; the scorer's echo gives a word log p = -0.2 when the word
already occurred earlier in the prompt, else -2.0 (a model that copies from its context).

Run from the repository root with the project's virtualenv::

    python bench/fixture_outputs.py --checkout PATH_BEFORE --out before/    # before the refactor
    python bench/fixture_outputs.py --out after/                            # this checkout, after it
    python bench/fixture_outputs.py --compare before/ after/                # exit 1 on any difference

``--jobs N`` runs N child processes side by side (each imports the project once and then runs its share of
the commands, ``main(argv)`` of the console script); ``--fresh`` starts one child per command instead
(slower: every command pays the imports). ``--only NAME`` restricts the run to fixtures whose file name
contains NAME.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
API_KEY = "fixture-outputs-key"
API_BASE_PLACEHOLDER = "<API_BASE>"
DATA_DIR_PLACEHOLDER = "<DATA_DIR>"
MANIFEST = "_manifest.json"
DIFF_LINES = 30
FLOAT_DIGITS = 12
"""Significant digits a float keeps: a sum over calls (a cost) is added in the order the calls finished, so
its last bits differ from run to run (0.0571865 vs 0.057186499999999994); 12 digits keep every real change."""
TRACE_MODEL = "openai/gpt-5.2"
"""The judge model of every trace: an OpenAI chat model (the scripted provider speaks OpenAI's protocol only;
a turn's own ``anthropic/…`` model would send Anthropic's), priced in litellm's cost map (so ``cost_usd`` is
checked) and offered top log-probabilities and echo scoring on a self-hosted base URL."""
VOLATILE_KEYS = {"proxy_seconds": "<SECONDS>"}
"""Keys whose value is measured, not computed: replaced wherever they occur (``proxy_seconds``: the wall
time of the proxy's local ranking)."""

# ------------------------------------------------------------------------------------------- scripted provider

_WORD = re.compile(r"\w{5,}")
_ECHO_TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|\s|[^\w\s]")
_MARKER_LINE = re.compile(r"^<<<DATA-[0-9a-f]{16}>>>$", re.MULTILINE)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _between(text: str, start: str, end: str | None) -> str:
    head = text.split(start, 1)[1] if start in text else ""
    return head.split(end, 1)[0] if end is not None and end in head else head


def _unfenced(text: str) -> str:
    return _MARKER_LINE.sub("", text)


def _regions(text: str) -> list[str]:
    """The data regions of a fenced request: the text between each pair of marker lines, in order."""
    marks = list(_MARKER_LINE.finditer(text))
    return [text[a.end() : b.start()].strip("\n") for a, b in zip(marks[0::2], marks[1::2], strict=False)]


def judge_digit(user: str) -> int:
    """1 + 8 x the share of the claim's words found among the sources shown (1 with no claim words)."""
    claim = _words(_unfenced(_between(user, "CLAIM:", "QUERY:")))
    sources = _words(_unfenced(_between(user, "SOURCES:", "Answer with a single digit")))
    if not claim:
        return 1
    return 1 + round(8 * len(claim & sources) / len(claim))


def digit_alternatives(digit: int) -> dict[str, float]:
    """The top log-probabilities at the digit position: the digit, its neighbours, one non-digit."""
    alternatives = {str(digit): math.log(0.6), "The": math.log(0.01)}
    for neighbour in (digit - 1, digit + 1):
        if 1 <= neighbour <= 9:
            alternatives[str(neighbour)] = math.log(0.15)
    return alternatives


def span_verdict(user: str) -> dict[str, Any]:
    """The longest run of 3+ consecutive claim words found verbatim in the source: supported, else silent."""
    regions = _regions(user)
    if len(regions) < 2:
        return {"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "no fenced claim and source"}
    claim, source = regions[0], regions[-1]
    words = claim.split()
    best = ""
    for i in range(len(words)):
        for j in range(len(words), i + 2, -1):  # runs of at least 3 words, longest first
            run = " ".join(words[i:j])
            if len(run) <= len(best):
                break
            if run in source:
                best = run
                break
    if best:
        return {"verdict": "supported", "evidence_quote": best, "confidence": 0.9, "reason": "the source states it"}
    return {"verdict": "silent", "evidence_quote": "", "confidence": 0.8, "reason": "nothing on it"}


def _tokens_of(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def chat_answer(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion answering ``body`` from its content alone."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    user = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
    is_digit = "strict judge of support" in system or "Answer with a single digit" in user
    top: list[dict[str, float]] | None = None
    if is_digit:
        digit = judge_digit(user)
        text = str(digit)
        top = [digit_alternatives(digit)]
    else:
        text = json.dumps(span_verdict(user))
    logprobs: dict[str, Any] | None = None
    if body.get("logprobs"):
        positions = top if top is not None else [{ch: 0.0} for ch in text]
        k = body.get("top_logprobs") if isinstance(body.get("top_logprobs"), int) else 0
        content = []
        for alternatives in positions:
            ranked = sorted(alternatives.items(), key=lambda kv: (-kv[1], kv[0]))
            chosen, chosen_lp = ranked[0]
            content.append(
                {
                    "token": chosen,
                    "logprob": chosen_lp,
                    "bytes": list(chosen.encode()),
                    "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in ranked[:k]],
                }
            )
        logprobs = {"content": content, "refusal": None}
    prompt_tokens, completion_tokens = _tokens_of(system + "\n" + user), _tokens_of(text)
    return {
        "id": "chatcmpl-fixture",
        "object": "chat.completion",
        "created": 0,
        "model": str(body.get("model") or "fake"),
        "system_fingerprint": "fp_fixture",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": logprobs,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


def echo_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A ``/v1/completions`` answer with echo, aligned: a word already seen earlier in the prompt is likely."""
    prompt = str(body.get("prompt", ""))
    tokens = _ECHO_TOKEN.findall(prompt)
    seen: set[str] = set()
    values: list[float | None] = []
    for token in tokens:
        if token == "\n":
            values.append(-0.01)
        elif token.isspace():
            values.append(-0.05)
        else:
            key = token.lower()
            values.append(-0.2 if key in seen else -2.0)
            seen.add(key)
    if values:
        values[0] = None
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    return {
        "id": "cmpl-fixture",
        "object": "text_completion",
        "created": 0,
        "model": str(body.get("model") or "fake"),
        "choices": [
            {
                "index": 0,
                "text": prompt,
                "finish_reason": "length",
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": values,
                    "text_offset": offsets,
                    "top_logprobs": [None] * len(tokens),
                },
            }
        ],
        "usage": {"prompt_tokens": len(tokens), "completion_tokens": 0, "total_tokens": len(tokens)},
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model", "created": 0}]})
        else:
            self._send(404, {"error": {"message": f"no route for GET {self.path}", "type": "not_found_error"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._send(400, {"error": {"message": "body is not a JSON object", "type": "invalid_request_error"}})
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/chat/completions"):
            self._send(200, chat_answer(body))
        elif path.endswith("/completions"):
            self._send(200, echo_answer(body))
        else:
            self._send(404, {"error": {"message": f"no route for POST {self.path}", "type": "not_found_error"}})

    def _send(self, status: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up on a kept-alive connection is no error; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedProvider:
    """The scripted OpenAI-compatible provider on loopback (chat, completions with echo, models)."""

    def __init__(self) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="scripted-provider", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------------------- child processes

# Runs in the child: imports the console script of the checkout once, then answers one JSON line per command.
WORKER = r"""
import contextlib, importlib, io, json, os, sys, tomllib
checkout = os.path.realpath(sys.argv[1])
proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)  # anything printed to the real stdout goes to stderr, never into the protocol
with open(os.path.join(checkout, "pyproject.toml"), "rb") as fh:
    target = tomllib.load(fh)["project"]["scripts"]["provenance"]
module, _, attr = target.partition(":")
entry = getattr(importlib.import_module(module), attr)
origins = {}
for name in ("provenance_api", "estimator"):
    origin = os.path.realpath(importlib.import_module(name).__file__)
    origins[name] = origin
    if not origin.startswith(checkout + os.sep):
        proto.write(json.dumps({"fatal": f"{name} imported from {origin}, not from {checkout}"}) + "\n")
        proto.flush()
        sys.exit(3)
proto.write(json.dumps({"ready": True, "entry": target, "origins": origins}) + "\n")
proto.flush()
for line in sys.stdin:
    argv = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = entry(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        except BaseException as exc:
            code = -1
            err.write(f"uncaught {type(exc).__name__}: {exc}\n")
    proto.write(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}) + "\n")
    proto.flush()
"""


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


class Worker:
    """One child process running the checkout's ``provenance`` entry point for command after command."""

    def __init__(self, checkout: Path, data_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PROVENANCE_", "OPENAI_", "ANTHROPIC_"))}
        env.update(
            PYTHONPATH=str(checkout),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            HF_HUB_OFFLINE="1",
            XDG_DATA_HOME=str(data_dir),
            PROVENANCE_NO_LOG="1",
            NO_COLOR="1",
            PYTHONHASHSEED="0",
        )
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(checkout)],
            cwd=checkout,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            encoding="utf-8",
        )
        ready = self._read()
        if "ready" not in ready:
            raise SystemExit(f"the child could not start: {ready.get('fatal') or self._stderr_tail()}")
        self.origins: dict[str, str] = ready["origins"]

    def _stderr_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-2000:]

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            return {"fatal": f"child exited with status {self.proc.returncode}: {self._stderr_tail()}"}
        doc: dict[str, Any] = json.loads(line)
        return doc

    def run(self, argv: Sequence[str]) -> Outcome:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(list(argv)) + "\n")
        self.proc.stdin.flush()
        doc = self._read()
        if "fatal" in doc:
            raise SystemExit(str(doc["fatal"]))
        return Outcome(int(doc["code"]), str(doc["stdout"]), str(doc["stderr"]))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# ------------------------------------------------------------------------------------------- the snapshot


@dataclass(frozen=True)
class Job:
    """One command: ``argv`` holds placeholders, filled in just before it runs."""

    relpath: str
    argv: tuple[str, ...]


@dataclass
class Context:
    checkout: Path
    api_base: str
    scratch: Path
    fresh: bool
    workers: queue.Queue[Worker] = field(default_factory=queue.Queue)
    counter: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fill(self, argv: Sequence[str]) -> list[str]:
        return [a.replace(API_BASE_PLACEHOLDER, self.api_base) for a in argv]

    def new_worker(self) -> Worker:
        with self.lock:
            self.counter += 1
            n = self.counter
        return Worker(self.checkout, self.scratch / f"data-{n}")

    def run(self, argv: Sequence[str]) -> Outcome:
        if self.fresh:
            worker = self.new_worker()
            try:
                return worker.run(self.fill(argv))
            finally:
                worker.close()
        worker = self.workers.get()
        try:
            return worker.run(self.fill(argv))
        finally:
            self.workers.put(worker)


def normalise(value: Any, replacements: Sequence[tuple[str, str]]) -> Any:
    """``value`` with every run-specific string (the provider's URL, the data directory) replaced."""
    if isinstance(value, float):
        return float(f"{value:.{FLOAT_DIGITS}g}")
    if isinstance(value, str):
        for old, new in replacements:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [normalise(v, replacements) for v in value]
    if isinstance(value, dict):
        return {k: VOLATILE_KEYS.get(k) or normalise(v, replacements) for k, v in value.items()}
    return value


def record(ctx: Context, job: Job, outcome: Outcome) -> dict[str, Any]:
    replacements = [(ctx.api_base, API_BASE_PLACEHOLDER), (str(ctx.scratch), DATA_DIR_PLACEHOLDER)]
    doc: dict[str, Any] = {"argv": ["provenance", *job.argv], "exit_code": outcome.code}
    try:
        doc["stdout_json"] = json.loads(outcome.stdout)
    except ValueError:
        doc["stdout_text"] = outcome.stdout  # not JSON (a crash, a usage error): kept as text
        doc["stderr_tail"] = outcome.stderr[-2000:]
    return dict(normalise(doc, replacements))


def dump(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def estimators_offered(ctx: Context) -> list[str]:
    """The ``--estimator`` choices of the checkout's ``provenance trace --help``."""
    help_text = ctx.run(["trace", "--help"]).stdout
    found = re.search(r"--estimator\s+\{([^}]*)\}", help_text)
    if found is None:
        raise SystemExit(f"no --estimator choices in `provenance trace --help`:\n{help_text}")
    return [e.strip() for e in found.group(1).split(",") if e.strip()]


def trace_argv(fixture: str, segment: str, estimator: str) -> tuple[str, ...]:
    argv = ["trace", fixture, segment, "--estimator", estimator, "--model", TRACE_MODEL]
    argv += ["--api-base", API_BASE_PLACEHOLDER]
    argv += ["--api-key", API_KEY, "--yes", "--json", "--no-cache", "--no-log"]
    if estimator == "proxy":
        argv += ["--scorer-api-base", API_BASE_PLACEHOLDER, "--scorer-model", "fake"]
    return tuple(argv)


def run_parallel(ctx: Context, jobs: Sequence[Job], jobs_n: int, out: Path) -> dict[str, int]:
    """Run every job on ``jobs_n`` threads (one child each), write its file; the exit codes by file."""
    pending: queue.Queue[Job] = queue.Queue()
    for job in jobs:
        pending.put(job)
    codes: dict[str, int] = {}
    errors: list[BaseException] = []
    done = [0]

    def loop() -> None:
        while True:
            try:
                job = pending.get_nowait()
            except queue.Empty:
                return
            try:
                outcome = ctx.run(job.argv)
                dump(out / job.relpath, record(ctx, job, outcome))
                with ctx.lock:
                    codes[job.relpath] = outcome.code
                    done[0] += 1
                    if done[0] % 10 == 0 or done[0] == len(jobs):
                        print(f"  {done[0]}/{len(jobs)} commands", flush=True)
            except BaseException as exc:  # kept, re-raised after the others stop
                errors.append(exc)
                return

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(max(1, jobs_n))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return codes


def snapshot(checkout: Path, out: Path, jobs_n: int, fresh: bool, only: str | None) -> int:
    checkout = checkout.resolve()
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty: give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (
        ScriptedProvider() as provider,
        tempfile.TemporaryDirectory(prefix="fixture-outputs-") as scratch_dir,
    ):
        ctx = Context(checkout, provider.base_url, Path(scratch_dir).resolve(), fresh)
        if not fresh:
            print(f"starting {jobs_n} child process(es) on {checkout} (each imports the project once)", flush=True)
            starters = [threading.Thread(target=lambda: ctx.workers.put(ctx.new_worker())) for _ in range(jobs_n)]
            for t in starters:
                t.start()
            for t in starters:
                t.join()
            if ctx.workers.qsize() != jobs_n:
                raise SystemExit("a child process did not start (see above)")
            first = ctx.workers.get()
            print(f"imports from: {first.origins}", flush=True)
            ctx.workers.put(first)
        try:
            estimators = estimators_offered(ctx)
            fixtures = sorted(p.name for p in (checkout / "fixtures").glob("*.json"))
            if only:
                fixtures = [f for f in fixtures if only in f]
            gate_jobs = [Job(f"{Path(f).stem}/gate.json", ("gate", f"fixtures/{f}", "--json")) for f in fixtures]
            print(f"gate on {len(fixtures)} fixture file(s); estimators offered: {', '.join(estimators)}", flush=True)
            gate_codes = run_parallel(ctx, gate_jobs, jobs_n, out)
            manifest: dict[str, Any] = {"estimators": estimators, "fixtures": {}, "skipped": {}}
            jobs: list[Job] = []
            for f, gate_job in zip(fixtures, gate_jobs, strict=True):
                gate_file = out / gate_job.relpath
                doc = json.loads(gate_file.read_text(encoding="utf-8"))
                if gate_codes[gate_job.relpath] != 0:
                    problem = doc.get("stdout_json", {}).get("error", {})
                    manifest["skipped"][f] = problem.get("detail") or doc.get("stdout_text") or "gate failed"
                    gate_file.unlink()
                    gate_file.parent.rmdir()
                    continue
                segments = [str(s["id"]) for s in doc["stdout_json"]["segments"]]
                manifest["fixtures"][f] = segments
                stem, path = Path(f).stem, f"fixtures/{f}"
                for seg in segments:
                    jobs.append(Job(f"{stem}/{seg}/quote.json", ("quote", path, seg, "--json")))
                    for est in estimators:
                        jobs.append(Job(f"{stem}/{seg}/trace-{est}.json", trace_argv(path, seg, est)))
            print(f"{len(jobs)} quote and trace commands", flush=True)
            codes = run_parallel(ctx, jobs, jobs_n, out)
        finally:
            while not ctx.workers.empty():
                ctx.workers.get().close()
    dump(out / MANIFEST, manifest)
    tally: dict[str, dict[str, int]] = {}
    for relpath, code in sorted({**codes, **{k: v for k, v in gate_codes.items() if (out / k).exists()}}.items()):
        kind = Path(relpath).stem
        tally.setdefault(kind, {}).setdefault(f"exit {code}", 0)
        tally[kind][f"exit {code}"] += 1
    print(f"wrote {len(codes) + len(manifest['fixtures'])} files to {out} in {time.monotonic() - started:.0f} s")
    for kind, counts in sorted(tally.items()):
        print(f"  {kind:16} " + ", ".join(f"{n} {c}" for c, n in sorted(counts.items())))
    for f, why in manifest["skipped"].items():
        print(f"  skipped {f}: {why}")
    return 0


# ------------------------------------------------------------------------------------------- comparison


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.json") if p.is_file()}


def compare(a: Path, b: Path) -> int:
    """Print identical / differs (with the first lines of a unified diff) / missing per file; 1 on any difference."""
    if not a.is_dir() or not b.is_dir():
        raise SystemExit(f"both must be folders: {a}, {b}")
    names_a, names_b = _files(a), _files(b)
    counts = {"identical": 0, "differs": 0, "missing": 0}
    for name in sorted(names_a | names_b):
        if name not in names_b or name not in names_a:
            counts["missing"] += 1
            print(f"missing    {name} (only in {a if name in names_a else b})")
            continue
        left, right = (a / name).read_bytes(), (b / name).read_bytes()
        if left == right:
            counts["identical"] += 1
            print(f"identical  {name}")
            continue
        counts["differs"] += 1
        print(f"differs    {name}")
        diff = difflib.unified_diff(
            left.decode("utf-8").splitlines(),
            right.decode("utf-8").splitlines(),
            fromfile=f"{a.name}/{name}",
            tofile=f"{b.name}/{name}",
            n=2,
            lineterm="",
        )
        lines = list(_first(diff, DIFF_LINES + 1))
        for line in lines[:DIFF_LINES]:
            print(f"    {line}")
        if len(lines) > DIFF_LINES:
            print("    …")
    total = sum(counts.values())
    print(f"\n{total} files: {counts['identical']} identical, {counts['differs']} differ, {counts['missing']} missing")
    return 0 if counts["differs"] == counts["missing"] == 0 else 1


def _first(lines: Iterator[str], n: int) -> Iterator[str]:
    for i, line in enumerate(lines):
        if i >= n:
            return
        yield line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout under test (default: this one)")
    parser.add_argument("--out", type=Path, help="a new (or empty) folder for the snapshot")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("DIR_A", "DIR_B"), help="compare two snapshots")
    parser.add_argument("--jobs", type=int, default=2, help="child processes side by side (default 2)")
    parser.add_argument("--fresh", action="store_true", help="one child process per command (slow, fully isolated)")
    parser.add_argument("--only", help="only the fixtures whose file name contains this")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("give --out DIR (a snapshot) or --compare DIR_A DIR_B")
    return snapshot(args.checkout, args.out, args.jobs, args.fresh, args.only)


if __name__ == "__main__":
    sys.exit(main())
