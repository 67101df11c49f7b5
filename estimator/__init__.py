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
(``proxy/``), the audits (``audit/``). The results each trace returns are in ``results/``; the I/O seams
(chat model, scorer) in ``seams/``. ``estimator/README.md`` holds the same map.

The names below are the estimator's public API: everything the service uses, importable from here
(``from estimator import Params``). A test keeps ``__all__`` equal to them.
"""

from __future__ import annotations

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
from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus, Layer, Unit
from estimator.cost import MESSAGE_OVERHEAD_TOKENS, CostQuote, Pricing, quote_cost, request_tokens, round_usd
from estimator.free_tier.gating import GateReport, gate_turn
from estimator.free_tier.segment import Segment, client_segments, segment_response
from estimator.free_tier.selection import Selection, select_claim
from estimator.ledger import AttemptRefused, CallEvent, CallLedger, CallRecord, another_attempt
from estimator.loo.diagnosis import GROUNDED, KNEW_IT, MISREAD, OVERRODE, UNVERIFIABLE
from estimator.loo.labels import (
    DIAGNOSIS_LABELS,
    INSTRUCTION_SUPPORT_LABELS,
    ROLE_LABELS,
    SUPPORT_LABELS,
    VERDICT_LABELS,
)
from estimator.loo.logprob_cost import (
    EstimatorChoice,
    ScoringCapability,
    ScoringQuote,
    quote_scoring,
    scoring_capability,
)
from estimator.params import DEFAULT_PARAMS, Params
from estimator.probe import probe_source
from estimator.proxy.confirm import DEFAULT_PROXY_PARAMS
from estimator.proxy.cost import proxy_capability, quote_proxy
from estimator.proxy.result import ProxyTraceResultModel
from estimator.results.models import (
    DeclaredAuditModel,
    ProbeResultModel,
    QuoteCallsModel,
    ScoringQuoteModel,
    SourceScoreModel,
    TraceJobResultModel,
    TraceResultModel,
    Verdict,
)
from estimator.results.proxy import HostedCheckModel, ProxyQuoteModel, RankedModel
from estimator.results.trace import ProgressEvent
from estimator.seams.llm import LLM, LLMError, LLMRequest, LLMResponse, Message, Usage
from estimator.seams.scorer import QWEN_TEMPLATE, ChatTemplate, ScoredTarget, Scorer, ScorerError
from estimator.spans.verify import normalise
from estimator.tokens import ApproxTokenizer, Tokenizer
from estimator.trace import ESTIMATORS, needs_scorer, planned_calls, run_trace

__all__ = [
    "DEFAULT_PARAMS",
    "DEFAULT_PROXY_PARAMS",
    "DIAGNOSIS_LABELS",
    "ESTIMATORS",
    "GROUNDED",
    "INSTRUCTION_SUPPORT_LABELS",
    "KNEW_IT",
    "LLM",
    "MESSAGE_OVERHEAD_TOKENS",
    "MISREAD",
    "OVERRODE",
    "QWEN_TEMPLATE",
    "ROLE_LABELS",
    "SUPPORT_LABELS",
    "UNVERIFIABLE",
    "VERDICT_LABELS",
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
    "EstimatorChoice",
    "GateReport",
    "GateSentence",
    "HostedCheckModel",
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
    "Segment",
    "Selection",
    "SentenceOutcome",
    "SourceScoreModel",
    "StoredTurn",
    "Tokenizer",
    "TraceJobResultModel",
    "TraceResultModel",
    "Unit",
    "Usage",
    "Verdict",
    "another_attempt",
    "audit_declared",
    "audit_trace",
    "build_corpus",
    "client_segments",
    "decide",
    "gate_turn",
    "needs_scorer",
    "normalise",
    "outcome_from_trace",
    "planned_calls",
    "probe_source",
    "proxy_capability",
    "quote_cost",
    "quote_proxy",
    "quote_scoring",
    "quoted_outcome",
    "request_tokens",
    "round_usd",
    "run_trace",
    "scoring_capability",
    "segment_response",
    "select_claim",
]
