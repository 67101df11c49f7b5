"""Nothing leaves the machine: importing the adapter and litellm, pricing, tokenizing and one real
model call to a loopback server, all in a fresh interpreter whose sockets refuse (and record) any
non-loopback destination from the first line of start-up (a ``sitecustomize`` guard)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.network_blocked

ROOT = Path(__file__).resolve().parents[2]

GUARD = textwrap.dedent('''
    """Socket guard: refuse and record every non-loopback connection or name lookup."""
    import ipaddress
    import json
    import os
    import socket

    _LOG = os.environ["NETGUARD_LOG"]


    def _loopback(host):
        if host is None:
            return True
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        host = str(host).strip("[]").split("%", 1)[0]
        if host in ("localhost", "localhost.localdomain", "ip6-localhost"):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


    def _record(kind, target):
        with open(_LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, "target": repr(target)}) + "\\n")
        raise OSError(f"network blocked by test guard: {kind} {target!r}")


    def _check_address(kind, sock, address):
        if getattr(sock, "family", None) == getattr(socket, "AF_UNIX", object()):
            return
        host = address[0] if isinstance(address, tuple) and address else address
        if not _loopback(host):
            _record(kind, address)


    _connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
    _sendto = socket.socket.sendto
    _getaddrinfo, _create_connection = socket.getaddrinfo, socket.create_connection


    def connect(self, address):
        _check_address("connect", self, address)
        return _connect(self, address)


    def connect_ex(self, address):
        _check_address("connect_ex", self, address)
        return _connect_ex(self, address)


    def sendto(self, data, *args):
        _check_address("sendto", self, args[-1])
        return _sendto(self, data, *args)


    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host):
            _record("getaddrinfo", host)
        return _getaddrinfo(host, *args, **kwargs)


    def create_connection(address, *args, **kwargs):
        if not _loopback(address[0]):
            _record("create_connection", address)
        return _create_connection(address, *args, **kwargs)


    socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto = connect, connect_ex, sendto
    socket.getaddrinfo, socket.create_connection = getaddrinfo, create_connection
''')

PROBE = textwrap.dedent("""
    import asyncio, json, os, socket, sys, time

    # the guard is live before anything else runs: prove it, then forget the control attempt
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1)
        control = "not blocked"
    except OSError as exc:
        control = str(exc)
    with open(os.environ["NETGUARD_LOG"], encoding="utf-8") as f:
        control_logged = len(f.readlines())
    open(os.environ["NETGUARD_LOG"], "w").close()

    import provenance_api.providers.llm_litellm as adapter
    import litellm
    from estimator.seams.llm import LLMRequest, Message
    from provenance_api.providers.llm_litellm import LiteLLMClient, LiteLLMPricing, aclose_litellm
    from provenance_api.providers.tokenizer import TiktokenTokenizer
    from support.fake_openai import FakeOpenAI

    adapter.load_litellm()
    price = LiteLLMPricing().price("gpt-4o")
    tokenizer = TiktokenTokenizer()
    count = tokenizer.count("x")

    async def call(base_url):
        client = LiteLLMClient("openai/gpt-4o", api_base=base_url, api_key="test-key", backoff_base=0.01)
        plain = await client.complete(LLMRequest(messages=(Message("user", "ping"),)))
        structured = await client.complete(LLMRequest(
            messages=(Message("user", "ping as JSON"),),
            json_schema={"type": "object", "properties": {"a": {"type": "integer"}}}))
        await aclose_litellm(close_http_clients=True)
        return plain, structured

    with FakeOpenAI(lambda req: '{"a": 1}' if req.get("response_format") else "pong") as srv:
        plain, structured = asyncio.run(call(srv.base_url))
    time.sleep(0.5)  # give any background thread litellm started a chance to try the network
    print(json.dumps({
        "control": control, "control_logged": control_logged,
        "price": price, "exact_tokenizer": tokenizer.exact, "count": count,
        "text": plain.text, "structured": structured.text, "cost": plain.usage.cost_usd,
        "cost_map_env": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
        "litellm_loaded": "litellm" in sys.modules,
    }))
""")


@pytest.mark.slow  # child processes (the service, the CLI) importing the provider library under the guard
def test_nothing_reaches_the_network(tmp_path: Path) -> None:
    guard_dir = tmp_path / "guard"
    guard_dir.mkdir()
    (guard_dir / "sitecustomize.py").write_text(GUARD, encoding="utf-8")
    log = tmp_path / "attempts.jsonl"
    log.write_text("", encoding="utf-8")

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LITELLM_", "TIKTOKEN_", "HF_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        {
            "NETGUARD_LOG": str(log),
            "PYTHONPATH": os.pathsep.join([str(guard_dir), str(ROOT), str(ROOT / "tests")]),
            "NO_PROXY": "*",
        }
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])

    # the guard works: a non-loopback connection was refused and recorded
    assert "network blocked" in result["control"] and result["control_logged"] == 1
    # ... and nothing else tried to leave the machine
    attempts = log.read_text(encoding="utf-8").splitlines()
    assert attempts == [], attempts
    # while everything really ran
    assert result["cost_map_env"] == "True"  # set by provenance_api itself
    assert result["price"] and result["price"][0] > 0
    assert result["exact_tokenizer"] is True and result["count"] == 1
    assert result["text"] == "pong" and json.loads(result["structured"]) == {"a": 1}
    assert result["cost"] is not None and result["cost"] > 0
