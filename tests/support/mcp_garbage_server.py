"""An MCP server that answers some tool calls with garbage, for the gateway's bad-input tests. It speaks JSON-RPC by
hand (no SDK), so it can send what no SDK server would.

``python mcp_garbage_server.py`` serves stdio (one JSON-RPC message a line); ``python mcp_garbage_server.py http
PORT`` serves streamable HTTP on 127.0.0.1:PORT at ``/mcp`` (JSON responses, no session). ``forecast`` answers
properly; the other tools answer a ``tools/call`` with:

- ``not_json``: a line (stdio) or an ``application/json`` body (HTTP) that is not JSON;
- ``not_jsonrpc``: JSON that is not JSON-RPC;
- ``bad_result``: a JSON-RPC response to the call whose ``result`` is not a ``CallToolResult``;
- ``wrong_type`` (HTTP): a ``text/html`` page;
- ``not_http`` (HTTP): bytes that are not an HTTP response, then the connection is closed.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOOLS = ["forecast", "not_json", "not_jsonrpc", "bad_result", "wrong_type", "not_http"]
NOT_JSON = b"this is not JSON {"
NOT_JSONRPC = b'{"weather": "sunny"}'


def _reply(message_id: Any, result: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}).encode()


def answer(message: dict[str, Any]) -> bytes | None:
    """The bytes to send for one client message (None: nothing, as for a notification)."""
    method, message_id = message.get("method"), message.get("id")
    if message_id is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        return _reply(
            message_id,
            {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "garbage", "version": "1"},
            },
        )
    if method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in TOOLS]
        return _reply(message_id, {"tools": tools})
    if method == "ping":
        return _reply(message_id, {})
    if method != "tools/call":
        error = {"code": -32601, "message": f"no method {method}"}
        return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": error}).encode()
    tool = params.get("name")
    city = (params.get("arguments") or {}).get("city", "nowhere")
    if tool == "not_json":
        return NOT_JSON
    if tool == "not_jsonrpc":
        return NOT_JSONRPC
    if tool == "bad_result":
        return _reply(message_id, {"content": "sunny", "isError": False})
    return _reply(message_id, {"content": [{"type": "text", "text": f"Forecast for {city}: clear."}]})


def serve_stdio() -> None:
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        out = answer(message) if isinstance(message, dict) else None
        if out is not None:
            sys.stdout.buffer.write(out + b"\n")
            sys.stdout.buffer.flush()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(405, "text/plain", b"no stream here")

    def do_DELETE(self) -> None:
        self._send(405, "text/plain", b"no sessions here")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = json.loads(body)
        tool = (message.get("params") or {}).get("name") if message.get("method") == "tools/call" else None
        if tool == "not_http":
            self.wfile.write(b"sunny, and this is not HTTP\r\n\r\n")
            self.close_connection = True
            return
        if tool == "wrong_type":
            self._send(200, "text/html; charset=utf-8", b"<html><body>sunny</body></html>")
            return
        out = answer(message)
        if out is None:
            self._send(202, "application/json", b"")
        else:
            self._send(200, "application/json", out)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), _Handler).serve_forever()
    else:
        serve_stdio()
