"""§7.1, Algorithm 1 — BuildLayeredCorpus: the stored turn (``turn``), the layered corpus's vocabulary
(``units``: layers, evidence records, source units), its construction (``build``) and how a tool's return reads
as text (``tool_content``: an MCP ``CallToolResult`` in any carrier, media named and never inlined)."""
