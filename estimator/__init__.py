"""The method of the seed paper's §6–§7, as a pure library: no service, SQL, HTTP or model provider.

Where each paragraph of §7 lives:

- §7.1 Algorithm 1, corpus construction ............ ``corpus/`` (``turn``, ``units``, ``build``)
- §7.2 Algorithm 2, anchor extraction .............. ``free_tier/anchors.py``, ``free_tier/anchor_groups.py``
- §7.3 Algorithm 3, free gating .................... ``free_tier/gating.py``, ``free_tier/verbatim.py``
- §7.4 Algorithm 4, hierarchical attribution ....... ``loo/`` (``driver``, ``rounds``, ``redundancy``, ``assembly``)
- §7.5 Algorithm 5, span localisation .............. ``spans/`` (``support``, ``verify``)
- §7.6 Algorithm 6, the contributive probe .......... ``probe.py``
- §7.7 prompt-injection containment ................ ``fence.py``
- §7.8 parameters .................................. ``params.py``
- §7.9 what a run costs ............................. ``cost.py`` (the gate), ``ledger.py`` (the one meter)

Beyond the paper: the expected digit and the log-probability scalars (``loo/``), proxy-first tracing
(``proxy/``), the audits (``audit/``), action provenance's free tier (``actions/``: what the agent did).
The results each trace returns are in ``results/``; the I/O seams (chat model, scorer) in ``seams/``.
``estimator/README.md`` holds the same map.

The names below are the estimator's public API: everything the service uses, importable from here
(``from estimator import Params``). They load on first use (PEP 562), so importing one part of the estimator
does not import all of it (the CLI's free commands start without the result models). A test keeps the
type checkers' imports, ``_EXPORTS`` and ``__all__`` equal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from estimator.actions.report import screen_actions
    from estimator.actions.targets import Action, action_context
    from estimator.actions.trace import ActionNotFound, action_corpus, find_action, trace_action
    from estimator.audit.answer_gate import (
        Decision,
        GateSentence,
        Rule,
        SentenceOutcome,
        decide,
        outcome_from_trace,
        quoted_outcome,
    )
    from estimator.audit.declared import audit_declared, audit_trace
    from estimator.corpus.build import build_corpus
    from estimator.corpus.envelope import NOT_RECORDED, Envelope, shown_time
    from estimator.corpus.redacted import redaction_warnings
    from estimator.corpus.tool_content import RESULT_KEYS, flatten, is_mcp_block, json_object
    from estimator.corpus.turn import SourceMeta, StoredTurn
    from estimator.corpus.units import Corpus, Layer, Unit
    from estimator.cost import MESSAGE_OVERHEAD_TOKENS, CostQuote, Pricing, quote_cost, request_tokens, round_usd
    from estimator.custody.ages import SourceAge, age_text, answer_time, source_ages
    from estimator.custody.freshness import (
        FreshnessFinding,
        FreshnessPolicy,
        FreshnessRulesError,
        check_freshness,
        parse_policy,
    )
    from estimator.free_tier.gating import GateReport, gate_turn
    from estimator.free_tier.segment import Segment, client_segments, segment_response
    from estimator.free_tier.selection import Selection, select_claim
    from estimator.ledger import AttemptRefused, CallEvent, CallLedger, CallRecord, another_attempt
    from estimator.loo.coherence import SCORES_DISAGREE
    from estimator.loo.diagnosis import GROUNDED, KNEW_IT, MISREAD, OVERRODE, UNVERIFIABLE
    from estimator.loo.labels import (
        DIAGNOSIS_LABELS,
        INSTRUCTION_SUPPORT_LABELS,
        ROLE_LABELS,
        SUPPORT_LABELS,
        VERDICT_LABELS,
        VERDICT_TEXT,
    )
    from estimator.loo.logprob_cost import (
        EstimatorChoice,
        ScoringCapability,
        ScoringQuote,
        quote_scoring,
        scoring_capability,
    )
    from estimator.params import DEFAULT_PARAMS, MAX_REPEATS, Params
    from estimator.probe import probe_source
    from estimator.proxy.confirm import DEFAULT_PROXY_PARAMS
    from estimator.proxy.cost import proxy_capability, quote_proxy
    from estimator.results.models import (
        DeclaredAuditModel,
        InjectionModel,
        ProbeResultModel,
        ProxyTraceResultModel,
        QuoteCallsModel,
        ScoringQuoteModel,
        SourceScoreModel,
        SpreadModel,
        TraceJobResult,
        TraceResultModel,
        Verdict,
        trace_job_result,
    )
    from estimator.results.proxy import HostedCheckModel, ProxyQuoteModel, RankedModel
    from estimator.results.trace import ProgressEvent
    from estimator.seams.llm import LLM, LLMError, LLMRequest, LLMResponse, Message, Usage
    from estimator.seams.scorer import QWEN_TEMPLATE, ChatTemplate, ScoredTarget, Scorer, ScorerError
    from estimator.spans.verify import normalise
    from estimator.tokens import ApproxTokenizer, Tokenizer
    from estimator.trace import ESTIMATORS, TraceOutcome, needs_scorer, planned_calls, run_trace
    from estimator.trace_failure import ScoringTally, TraceFailure, failed_trace

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "screen_actions": "estimator.actions.report",
    "Action": "estimator.actions.targets",
    "action_context": "estimator.actions.targets",
    "ActionNotFound": "estimator.actions.trace",
    "action_corpus": "estimator.actions.trace",
    "find_action": "estimator.actions.trace",
    "trace_action": "estimator.actions.trace",
    "RESULT_KEYS": "estimator.corpus.tool_content",
    "flatten": "estimator.corpus.tool_content",
    "redaction_warnings": "estimator.corpus.redacted",
    "NOT_RECORDED": "estimator.corpus.envelope",
    "Envelope": "estimator.corpus.envelope",
    "shown_time": "estimator.corpus.envelope",
    "SourceMeta": "estimator.corpus.turn",
    "SourceAge": "estimator.custody.ages",
    "answer_time": "estimator.custody.ages",
    "age_text": "estimator.custody.ages",
    "source_ages": "estimator.custody.ages",
    "FreshnessFinding": "estimator.custody.freshness",
    "FreshnessPolicy": "estimator.custody.freshness",
    "FreshnessRulesError": "estimator.custody.freshness",
    "check_freshness": "estimator.custody.freshness",
    "parse_policy": "estimator.custody.freshness",
    "is_mcp_block": "estimator.corpus.tool_content",
    "json_object": "estimator.corpus.tool_content",
    "ApproxTokenizer": "estimator.tokens",
    "AttemptRefused": "estimator.ledger",
    "CallEvent": "estimator.ledger",
    "CallLedger": "estimator.ledger",
    "CallRecord": "estimator.ledger",
    "ChatTemplate": "estimator.seams.scorer",
    "Corpus": "estimator.corpus.units",
    "CostQuote": "estimator.cost",
    "DEFAULT_PARAMS": "estimator.params",
    "MAX_REPEATS": "estimator.params",
    "DEFAULT_PROXY_PARAMS": "estimator.proxy.confirm",
    "DIAGNOSIS_LABELS": "estimator.loo.labels",
    "Decision": "estimator.audit.answer_gate",
    "DeclaredAuditModel": "estimator.results.models",
    "ESTIMATORS": "estimator.trace",
    "EstimatorChoice": "estimator.loo.logprob_cost",
    "GROUNDED": "estimator.loo.diagnosis",
    "GateReport": "estimator.free_tier.gating",
    "GateSentence": "estimator.audit.answer_gate",
    "HostedCheckModel": "estimator.results.proxy",
    "INSTRUCTION_SUPPORT_LABELS": "estimator.loo.labels",
    "KNEW_IT": "estimator.loo.diagnosis",
    "LLM": "estimator.seams.llm",
    "LLMError": "estimator.seams.llm",
    "LLMRequest": "estimator.seams.llm",
    "LLMResponse": "estimator.seams.llm",
    "Layer": "estimator.corpus.units",
    "MESSAGE_OVERHEAD_TOKENS": "estimator.cost",
    "MISREAD": "estimator.loo.diagnosis",
    "Message": "estimator.seams.llm",
    "OVERRODE": "estimator.loo.diagnosis",
    "Params": "estimator.params",
    "Pricing": "estimator.cost",
    "ProbeResultModel": "estimator.results.models",
    "ProgressEvent": "estimator.results.trace",
    "ProxyQuoteModel": "estimator.results.proxy",
    "ProxyTraceResultModel": "estimator.results.models",
    "QWEN_TEMPLATE": "estimator.seams.scorer",
    "QuoteCallsModel": "estimator.results.models",
    "ROLE_LABELS": "estimator.loo.labels",
    "RankedModel": "estimator.results.proxy",
    "Rule": "estimator.audit.answer_gate",
    "SUPPORT_LABELS": "estimator.loo.labels",
    "VERDICT_TEXT": "estimator.loo.labels",
    "SCORES_DISAGREE": "estimator.loo.coherence",
    "ScoringTally": "estimator.trace_failure",
    "TraceFailure": "estimator.trace_failure",
    "failed_trace": "estimator.trace_failure",
    "ScoredTarget": "estimator.seams.scorer",
    "Scorer": "estimator.seams.scorer",
    "ScorerError": "estimator.seams.scorer",
    "ScoringCapability": "estimator.loo.logprob_cost",
    "ScoringQuote": "estimator.loo.logprob_cost",
    "ScoringQuoteModel": "estimator.results.models",
    "InjectionModel": "estimator.results.models",
    "Segment": "estimator.free_tier.segment",
    "Selection": "estimator.free_tier.selection",
    "SentenceOutcome": "estimator.audit.answer_gate",
    "SourceScoreModel": "estimator.results.models",
    "SpreadModel": "estimator.results.models",
    "StoredTurn": "estimator.corpus.turn",
    "Tokenizer": "estimator.tokens",
    "TraceJobResult": "estimator.results.models",
    "TraceResultModel": "estimator.results.models",
    "UNVERIFIABLE": "estimator.loo.diagnosis",
    "Unit": "estimator.corpus.units",
    "Usage": "estimator.seams.llm",
    "VERDICT_LABELS": "estimator.loo.labels",
    "Verdict": "estimator.results.models",
    "another_attempt": "estimator.ledger",
    "audit_declared": "estimator.audit.declared",
    "audit_trace": "estimator.audit.declared",
    "build_corpus": "estimator.corpus.build",
    "client_segments": "estimator.free_tier.segment",
    "decide": "estimator.audit.answer_gate",
    "gate_turn": "estimator.free_tier.gating",
    "needs_scorer": "estimator.trace",
    "normalise": "estimator.spans.verify",
    "outcome_from_trace": "estimator.audit.answer_gate",
    "planned_calls": "estimator.trace",
    "probe_source": "estimator.probe",
    "proxy_capability": "estimator.proxy.cost",
    "quote_cost": "estimator.cost",
    "quote_proxy": "estimator.proxy.cost",
    "quote_scoring": "estimator.loo.logprob_cost",
    "quoted_outcome": "estimator.audit.answer_gate",
    "request_tokens": "estimator.cost",
    "round_usd": "estimator.cost",
    "run_trace": "estimator.trace",
    "scoring_capability": "estimator.loo.logprob_cost",
    "segment_response": "estimator.free_tier.segment",
    "select_claim": "estimator.free_tier.selection",
    "trace_job_result": "estimator.results.models",
    "TraceOutcome": "estimator.trace",
}

__all__ = [
    "DEFAULT_PARAMS",
    "DEFAULT_PROXY_PARAMS",
    "DIAGNOSIS_LABELS",
    "ESTIMATORS",
    "GROUNDED",
    "INSTRUCTION_SUPPORT_LABELS",
    "KNEW_IT",
    "LLM",
    "MAX_REPEATS",
    "MESSAGE_OVERHEAD_TOKENS",
    "MISREAD",
    "NOT_RECORDED",
    "OVERRODE",
    "QWEN_TEMPLATE",
    "RESULT_KEYS",
    "ROLE_LABELS",
    "SCORES_DISAGREE",
    "SUPPORT_LABELS",
    "UNVERIFIABLE",
    "VERDICT_LABELS",
    "VERDICT_TEXT",
    "Action",
    "ActionNotFound",
    "ApproxTokenizer",
    "AttemptRefused",
    "CallEvent",
    "CallLedger",
    "CallRecord",
    "ChatTemplate",
    "Corpus",
    "CostQuote",
    "Decision",
    "DeclaredAuditModel",
    "Envelope",
    "EstimatorChoice",
    "FreshnessFinding",
    "FreshnessPolicy",
    "FreshnessRulesError",
    "GateReport",
    "GateSentence",
    "HostedCheckModel",
    "InjectionModel",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "Layer",
    "Message",
    "Params",
    "Pricing",
    "ProbeResultModel",
    "ProgressEvent",
    "ProxyQuoteModel",
    "ProxyTraceResultModel",
    "QuoteCallsModel",
    "RankedModel",
    "Rule",
    "ScoredTarget",
    "Scorer",
    "ScorerError",
    "ScoringCapability",
    "ScoringQuote",
    "ScoringQuoteModel",
    "ScoringTally",
    "Segment",
    "Selection",
    "SentenceOutcome",
    "SourceAge",
    "SourceMeta",
    "SourceScoreModel",
    "SpreadModel",
    "StoredTurn",
    "Tokenizer",
    "TraceFailure",
    "TraceJobResult",
    "TraceOutcome",
    "TraceResultModel",
    "Unit",
    "Usage",
    "Verdict",
    "action_context",
    "action_corpus",
    "age_text",
    "another_attempt",
    "answer_time",
    "audit_declared",
    "audit_trace",
    "build_corpus",
    "check_freshness",
    "client_segments",
    "decide",
    "failed_trace",
    "find_action",
    "flatten",
    "gate_turn",
    "is_mcp_block",
    "json_object",
    "needs_scorer",
    "normalise",
    "outcome_from_trace",
    "parse_policy",
    "planned_calls",
    "probe_source",
    "proxy_capability",
    "quote_cost",
    "quote_proxy",
    "quote_scoring",
    "quoted_outcome",
    "redaction_warnings",
    "request_tokens",
    "round_usd",
    "run_trace",
    "scoring_capability",
    "screen_actions",
    "segment_response",
    "select_claim",
    "shown_time",
    "source_ages",
    "trace_action",
    "trace_job_result",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'estimator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
