"""``provenance trace --estimator proxy`` without a local scoring model: a problem naming the option and the fix,
and nothing spent (the end-to-end run with a real local model is in test_proxy_local.py); with a scoring server
(an echoing ``/v1/completions`` on loopback) and a scripted hosted judge, the text after the tree says whether
the judge confirmed the proxy, the proxy's model, hosted calls beside local passes, both rankings and why the
judge disagreed, each term in the footnotes."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.api_server import SMALL_CLAIM, SMALL_KEY, KeyedJudge, small_turn
from support.fake_openai import FakeOpenAI

from estimator.results.proxy import CONFIRMED_LINE, FALLBACK_LINE
from provenance_api.cli.main import main
from provenance_api.core.glossary import GLOSSARY

FIXTURE_A = str(Path(__file__).resolve().parents[2] / "fixtures" / "eo_worldview_turn.json")
NOTE = "Non-authoritative note: classification maps can change"


def _judge(request: dict[str, Any]) -> str:
    return (
        "5"
        if request.get("max_tokens", 0) <= 8
        else json.dumps({"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"})
    )


def test_a_proxy_trace_without_a_scorer_names_the_setting_and_spends_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeOpenAI(_judge) as srv:
        code = main(
            [
                "trace",
                FIXTURE_A,
                NOTE,
                "--model",
                "openai/fake",
                "--api-base",
                srv.base_url,
                "--api-key",
                "test-key",
                "--estimator",
                "proxy",
                "--yes",
            ]
        )
        sent = srv.requests
    _, err = capsys.readouterr()
    assert code == 2 and sent == []
    assert "--estimator proxy needs a local scoring model" in err
    assert "--local-model FILE.gguf" in err and "--scorer-api-base" in err


# --------------------------------------------------------------------------- the text of a proxy trace


class EchoScorer:
    """A ``/v1/completions`` server with echo on loopback, as llama.cpp's answers, aligned: the 'model' finds
    every word of the prompt likely when ``key`` is among its sources and unlikely when not, and the newline
    after a turn's end certain (so the adapter's alignment check passes)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.prompts: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the preflight's models listing: any answer means reachable
                self._send(200, {"object": "list", "data": [{"id": "qwen-proxy", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self._send(200, outer.answer(body))

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = str(body["prompt"])
        self.prompts.append(prompt)
        word = -0.2 if self.key in prompt else -2.0
        tokens = ECHO_TOKEN.findall(prompt)
        values: list[float | None] = [-0.01 if t == "\n" else word for t in tokens]
        values[0] = None
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        return {
            "object": "text_completion",
            "model": body["model"],
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

    def __enter__(self) -> EchoScorer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


ECHO_TOKEN = re.compile(r"<\|[a-z_]+\|>|\w+|\s|[^\w\s]")
NATS_DROP = (2.0 - 0.2) * len(ECHO_TOKEN.findall(SMALL_CLAIM))  # the claim's words, with the key and without


def _proxy_text(tmp_path: Path, judge_key: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, EchoScorer]:
    """``provenance trace --estimator proxy`` on the small turn, printed plain (captured, not a terminal): the
    scorer ranks by SMALL_KEY (the tool return), the hosted judge by ``judge_key``."""
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps(small_turn()), encoding="utf-8")
    with FakeOpenAI(KeyedJudge(judge_key).openai) as judge, EchoScorer(SMALL_KEY) as scorer:
        code = main(
            [
                "trace",
                str(turn),
                SMALL_CLAIM,
                "--model",
                "openai/fake",
                "--api-base",
                judge.base_url,
                "--api-key",
                "test-key",
                "--estimator",
                "proxy",
                "--scorer-api-base",
                scorer.base_url,
                "--scorer-model",
                "qwen-proxy",
                "--yes",
                "--no-cache",
                "--no-log",
            ]
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\x1b[" not in out  # piped: plain
    return out, scorer


def _block(out: str) -> str:
    assert "Proxy-first trace" in out, out
    return out.split("Proxy-first trace", 1)[1].split("What these mean", 1)[0]


def _footnote(out: str, key: str) -> bool:
    notes = out.split("What these mean", 1)[1]
    return any(
        line.strip().startswith(GLOSSARY[key].label) and line.endswith(GLOSSARY[key].short)
        for line in notes.splitlines()
    )


def test_a_confirmed_proxy_trace_prints_its_block_and_explains_its_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, scorer = _proxy_text(tmp_path, SMALL_KEY, capsys)
    block = _block(out)
    assert out.index("Calls:") < out.index("Proxy-first trace") < out.index("What these mean")  # after the tree
    assert f"✓ {CONFIRMED_LINE}" in block and FALLBACK_LINE not in block
    assert "Proxy model      qwen-proxy · ranked in " in block
    passes = len(scorer.prompts) - 1  # the probe before consent checked the server; it is not one of the trace's
    assert passes > 0
    assert re.search(rf"Calls +\d+ hosted calls? made · {passes} local scoring passes \(free, not in made\)", block)
    assert "s(1) 9.00 · s(0) 2.00 · Γ 7.00 (digits 1–9) · without the tools layer Δ +7.00" in block
    rows = block.split("Rankings, top 5", 1)[1].splitlines()
    assert "proxy Δ (nats)" in rows[0] and "hosted judge Δ (digits 1–9)" in rows[0]
    rank, proxy_side, hosted_side = re.split(r" {3,}", rows[1].strip())
    assert rank == "1" and proxy_side.startswith("s0 lookup_order") and proxy_side.endswith(f"{NATS_DROP:+.2f} grounds")
    assert hosted_side.startswith("s0 lookup_order") and hosted_side.endswith("+7.00")  # both sides' drop of s0
    assert "Disagreements    none" in block
    for key in ("proxy.confirmed", "calls.scored", "proxy.share_margin", "proxy.drops", "calls.made"):
        assert _footnote(out, key), key
    assert GLOSSARY["proxy.fallback"].short not in out  # only what is shown is explained


def test_a_proxy_trace_the_judge_disagrees_with_prints_both_rankings_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, scorer = _proxy_text(tmp_path, "Always name the carrier", capsys)
    block = _block(out)
    assert f"⚠ {FALLBACK_LINE}" in block and CONFIRMED_LINE not in block
    made = int(re.findall(r"Calls: \d+ planned · (\d+) made", out)[0])
    passes = len(scorer.prompts) - 1  # the probe before consent is not one of the trace's
    assert made != passes  # the two counts can be told apart here
    assert f"Calls            {made} hosted calls made · {passes} local scoring passes (free" in block
    rows = block.split("Rankings, top 5", 1)[1].splitlines()
    assert "judged search Δ (digits 1–9)" in rows[0]
    rank, proxy_side, judged_side = re.split(r" {3,}", rows[1].strip())
    assert rank == "1" and proxy_side.startswith("s0 lookup_order") and proxy_side.endswith(f"{NATS_DROP:+.2f} grounds")
    assert judged_side.startswith("s1 agent instr") and judged_side.endswith("+7.00 grounds")  # judge: digits
    assert "  Disagreements\n    - removing the tools layer moves the hosted judge by +0.00" in block
    assert "removing s0 moves the hosted judge by +0.00 < τ = 0.5" in block
    for key in ("proxy.fallback", "calls.scored", "proxy.drops", "tau"):
        assert _footnote(out, key), key
    assert GLOSSARY["proxy.confirmed"].short not in out
