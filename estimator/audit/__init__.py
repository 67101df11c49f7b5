"""Audits over a traced answer: declared attribution and conflation (``declared``), the answer-level
gate (``answer_gate``), the agreement of two estimators (``agreement``), and the rules that tie every word of
a result to its numbers (``invariants``: property-tested, and checked on every result at run time)."""
