"""A small MCP server written with the official SDK (``MCPServer``), for the evidence gateway's tests.

Run as a script: ``python mcp_tools_server.py`` serves stdio; ``python mcp_tools_server.py http PORT`` serves
streamable HTTP on 127.0.0.1:PORT at ``/mcp``. Its tools answer from their arguments alone, so a test knows every
result without asking the server; three misbehave on purpose:

- ``garbage``: writes a line that is not JSON-RPC to the transport (stdio only) before its real answer;
- ``die``: the process exits in the middle of the call (exit status 3), before any answer;
- ``hang``: never answers (the client's timeout ends the call).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

GARBAGE = b"this is not JSON-RPC {\n"

server = MCPServer("gateway-test-tools")


@server.tool()
def forecast(city: str) -> str:
    """The weather in a city (made up from its name)."""
    return f"Forecast for {city}: {len(city) * 3} °C, clear.\nWind {len(city)} m/s from the west."


@server.tool()
def invoice(vendor: str, amount: float) -> dict[str, Any]:
    """An invoice as structured content."""
    return {"vendor": vendor, "amount": amount, "iban": "DE89370400440532013000"}


@server.tool()
def refuse(reason: str) -> str:
    """Fails as a tool (isError: true) with the reason."""
    raise ToolError(f"refused: {reason}")


@server.tool()
def garbage() -> str:
    """Writes a non-JSON line to stdout first, then answers."""
    os.write(1, GARBAGE)
    return "answered after the garbage"


@server.tool()
def die() -> str:
    """Exits mid-call."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answers."""
    await anyio.sleep_forever()
    return "never"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
