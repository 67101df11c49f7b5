"""§7.1, Algorithm 1 — BuildLayeredCorpus: the stored turn (``turn``), the layered corpus's vocabulary
(``units``: layers, evidence records, source units), its construction (``build``), how a tool's return reads
as text (``tool_content``: an MCP ``CallToolResult`` in any carrier, media named and never inlined) and the system
prompt split into its rules, each an instructions source (``rules``); every source's evidence envelope — tool,
server, resource, when observed, for whom, digest, transformations, custody — is ``envelope``; the warnings of
sources whose values were redacted before storage are ``redacted``."""
