"""Audits over a traced answer: declared attribution and conflation (``declared``), the answer-level
gate (``answer_gate``) and the agreement of two estimators (``agreement``)."""
