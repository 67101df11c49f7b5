"""§7.5, Algorithm 5 — span localisation: one source, one claim, a verdict with a quote
(``support``) checked against the source text and pinned to its lines (``verify``, Algorithm 5a)."""
