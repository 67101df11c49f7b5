"""The evidence gateway for MCP (``provenance gateway``): relays an agent's MCP traffic unchanged, over stdio or
streamable HTTP, and records every ``tools/call`` result it relays (``core.evidence``) in the store, append-only.
Only the command line starts it; nothing else in the service imports it."""
