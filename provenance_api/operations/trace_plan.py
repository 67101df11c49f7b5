"""Whether a trace may run: the one decision, for ``provenance trace`` and for the service alike.

``decide(turn, sentence, estimator, model, surface=…)`` gates the sentence, chooses the judge model (and says
why), quotes the trace, checks what the estimator needs (a scorer, a judge's top log-probabilities, a local
model to rank under ``proxy``) and returns a ``TraceDecision``: everything it found, and either "may run"
(``refusal is None``) or a typed ``Refusal`` naming the field and the fix. A request that cannot be quoted at
all — a sentence that is not in the response, a model the operator's policy refuses — raises its
``InvalidInput`` instead: there is no quote to show.

What really differs between the two callers is a ``TraceSurface``, not a second code path:

- **whose models**: the CLI runs on the user's own key, so no allow-list applies (``policy=None``; a
  ``--local-model`` file is the judge itself); the service applies the operator's model policy, prices and
  budgets (``OperatorPolicy``: ``operations.model_policy``).
- **where the endpoints are**: flags (``--api-base``, ``--scorer-api-base``) or the operator's settings.
- **a cost-gate refusal**: the CLI refuses at once; the service records it on the quote it stores and
  refuses when a trace is started from it (``cost_refusal``).
- **words**: a field is a flag on the command line (``--estimator``) and a body field on the API
  (``estimator``), and each fix names the settings its user can change (``Vocabulary``).

A trace whose every call failed is explained by ``failure_fix``: the setting to fix is read from the type of
the last provider error (``ProviderError.setting``), never from its message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from estimator.corpus.turn import StoredTurn
from estimator.corpus.units import Corpus
from estimator.cost import CostQuote, Pricing, round_usd
from estimator.free_tier.selection import Selection
from estimator.loo.logprob_cost import (
    EstimatorChoice,
    ScoringCapability,
    ScoringQuote,
    quote_scoring,
    scoring_capability,
)
from estimator.params import DEFAULT_PARAMS, Params
from estimator.proxy.cost import proxy_capability, quote_proxy
from estimator.results.proxy import ProxyQuoteModel
from estimator.tokens import Tokenizer
from estimator.trace import needs_scorer, planned_calls
from provenance_api.core.errors import CostRefused, InvalidInput, ProviderError, ProviderSetting
from provenance_api.core.schemas import ExpectedDigitOut
from provenance_api.core.settings import Settings
from provenance_api.operations import model_policy
from provenance_api.operations.model_policy import ModelChoice
from provenance_api.providers import free_tier
from provenance_api.providers.capabilities import TopLogprobsCapability, top_logprobs_capability
from provenance_api.providers.free_tier import GateView, QuoteView
from provenance_api.storage.quotes import StoredQuote, quote_times

__all__ = [
    "CLI_WORDS",
    "SERVICE_WORDS",
    "FailureFix",
    "OperatorPolicy",
    "Refusal",
    "RefusalKind",
    "TraceDecision",
    "TraceSurface",
    "Vocabulary",
    "check_max_cost",
    "check_probe",
    "choose_judge",
    "cli_surface",
    "cost_refusal",
    "decide",
    "failure_fix",
    "service_surface",
]

RefusalKind = Literal["probe-estimator", "cost", "proxy-scorer", "scorer", "expected"]
"""Why a trace may not run: a probe asked for another estimator, the cost gate refused it, ``proxy`` has no
local model to rank with, the estimator needs a scoring-capable model, or ``expected`` needs a judge that
returns top log-probabilities."""


@dataclass(frozen=True)
class Vocabulary:
    """How one surface names the estimator and the fix of each refusal."""

    estimator_field: str
    estimator_named: str  # "{name}" is replaced by the estimator's name
    fixes: Mapping[RefusalKind, str]

    def estimator(self, name: str) -> str:
        return self.estimator_named.format(name=name)


CLI_WORDS = Vocabulary(
    estimator_field="--estimator",
    estimator_named="--estimator {name}",
    fixes={
        "probe-estimator": "drop --estimator",
        "cost": "narrow the turn's corpus or raise the ceiling",
        "proxy-scorer": "pass --local-model FILE.gguf (scripts/local-model.sh path prints the built one) or "
        "--scorer-api-base URL of a /v1/completions server with echo; or --estimator judged",
        "scorer": "use --local-model FILE.gguf or --scorer-api-base URL, or --estimator judged",
        "expected": "use --estimator judged, or a judge that offers them (OpenAI or Azure chat "
        "completions, vLLM, a llama.cpp server, --local-model)",
    },
)
SERVICE_WORDS = Vocabulary(
    estimator_field="estimator",
    estimator_named="estimator {name!r}",
    fixes={
        "probe-estimator": "drop estimator, or quote a trace (probe: false)",
        "cost": "narrow the turn's corpus or lower the request's params",
        "proxy-scorer": "set PROVENANCE_SCORER_API_BASE (and PROVENANCE_SCORER_MODEL) to a scoring endpoint with "
        "/v1/completions echo, such as a llama.cpp server, or start the service with serve --local-model "
        "FILE.gguf; or use estimator judged",
        "scorer": "use estimator judged, or run the service with a scoring model (serve --local-model, or "
        "PROVENANCE_SCORER_API_BASE naming a self-hosted /v1/completions server with echo)",
        "expected": "use estimator judged, or a judge model that offers top log-probabilities (OpenAI or Azure chat "
        "completions, vLLM, a llama.cpp server, the local model)",
    },
)


@dataclass(frozen=True)
class OperatorPolicy:
    """The operator's model policy for one tenant: allow-lists, prices (``operations.model_policy``)."""

    settings: Settings
    tenant: str


@dataclass(frozen=True)
class TraceSurface:
    """What differs between the callers of ``decide`` (see the module's docstring)."""

    words: Vocabulary
    policy: OperatorPolicy | None  # None: the user's own key, no allow-list (the CLI)
    local_model: bool  # the judge (and scorer) run in this process
    api_base: str | None
    scorer_api_base: str | None
    cost_refusal: Literal["refuse", "record"]
    view: Callable[[StoredTurn, Params], GateView | QuoteView] = field(default=free_tier.gate_view)

    @property
    def pricing(self) -> Pricing | None:
        """The operator's prices, or None for litellm's bundled map."""
        return model_policy.pricing(self.policy.settings) if self.policy is not None else None


def cli_surface(*, local_model: bool, api_base: str | None, scorer_api_base: str | None) -> TraceSurface:
    """``provenance trace``: the user's own key and models, flags for endpoints, a refusal at once."""
    return TraceSurface(CLI_WORDS, None, local_model, api_base, scorer_api_base, "refuse")


def service_surface(
    settings: Settings,
    tenant: str,
    *,
    local_model: bool,
    view: Callable[[StoredTurn, Params], GateView | QuoteView] = free_tier.gate_view,
) -> TraceSurface:
    """The service: the operator's policy for ``tenant``, its configured endpoints; a cost refusal is kept on
    the quote and refused when a trace starts from it."""
    return TraceSurface(
        SERVICE_WORDS,
        OperatorPolicy(settings, tenant),
        local_model,
        settings.judge_api_base,
        settings.scorer_api_base,
        "record",
        view,
    )


@dataclass(frozen=True)
class Refusal:
    """Why a trace may not run, the field to change and how."""

    kind: RefusalKind
    field: str
    detail: str
    fix: str

    def error(self) -> InvalidInput | CostRefused:
        """The typed error to raise (a problem on the API, an exit status on the CLI)."""
        cls = CostRefused if self.kind == "cost" else InvalidInput
        return cls(self.detail, field=self.field, fix=self.fix)


@dataclass(frozen=True)
class TraceDecision:
    """Everything ``decide`` found, and whether the trace may run."""

    estimator: EstimatorChoice
    probe: bool
    view: GateView | QuoteView
    selection: Selection  # the gated sentence, or the action's call (its id as ``segment_id``)
    corpus: Corpus  # what the trace runs on: the turn's, or what the agent had seen when it made the action
    action: str | None  # the action traced (a0, a1, …); None for a sentence
    choice: ModelChoice  # the judge model, where the choice came from and why
    quote: CostQuote
    planned: int  # the ceiling the ledger enforces and the budget reserves
    scoring: ScoringCapability | None  # whether the judge model can score (None for a probe)
    scoring_quote: ScoringQuote | None  # the scoring a logprob trace on the judge model would add
    ranking_quote: ScoringQuote | None  # under proxy: the scoring the local ranking adds
    expected: TopLogprobsCapability | None  # the judge's top log-probabilities (None for a probe)
    proxy: ProxyQuoteModel | None  # both sides of a proxy trace, when one can rank
    refusal: Refusal | None

    @property
    def model(self) -> str:
        return self.choice.model

    @property
    def may_run(self) -> bool:
        return self.refusal is None

    def require(self) -> None:
        """Raise the refusal's typed error, if there is one."""
        if self.refusal is not None:
            raise self.refusal.error()

    @property
    def cost_usd(self) -> float | None:
        """The price the service shows and reserves: the cost gate's (as its JSON rounds it), or under proxy
        the fallback's worst case."""
        return self.proxy.worst_case_cost_usd if self.proxy is not None else round_usd(self.quote.cost_usd)

    def stored_quote(
        self, *, tenant: str, user: str, turn_id: str, sentence: str, params: Params, ttl_seconds: int
    ) -> StoredQuote:
        """The quote as the service stores and shows it: the cost gate, the scoring the estimator adds, both
        sides of a proxy trace (the budget reserves the fallback's worst case), the estimator and the model's
        reason, and the judge's top log-probabilities."""
        created_at, expires_at = quote_times(ttl_seconds)
        scoring = self.ranking_quote or self.scoring_quote
        return StoredQuote(
            tenant=tenant,
            user=user,
            turn_id=turn_id,
            sentence=sentence,
            claim=self.selection.text,
            segment_id=self.selection.segment_id,
            model=self.model,
            probe=self.probe,
            params=params.model_dump(),
            estimator=self.estimator,
            planned_calls=self.planned,
            cost_usd=self.cost_usd,
            refused=self.quote.refused,
            priced=self.quote,
            scoring=None if scoring is None else scoring.to_model(),
            proxy=self.proxy,
            model_reason=self.choice.reason,
            model_source=self.choice.source,
            expected_digit=(
                None
                if self.expected is None
                else ExpectedDigitOut(offered=self.expected.offered, how=self.expected.how, reason=self.expected.reason)
            ),
            created_at=created_at,
            expires_at=expires_at,
        )


def _own_model(turn: StoredTurn, explicit: str | None, local_model: bool) -> ModelChoice:
    """The judge on the user's own key: ``--local-model``, else ``--model``, the turn's own, the default."""
    if local_model:
        return ModelChoice("local", "explicit", "the local model given with --local-model, in this process")
    model = free_tier.resolve_model(turn, explicit)
    if explicit:
        return ModelChoice(model, "explicit", "requested with --model")
    if turn.model:
        return ModelChoice(model, "turn", "the turn's own model")
    return ModelChoice(model, "default", "the default: the turn names no model")


def choose_judge(turn: StoredTurn, explicit: str | None, surface: TraceSurface, *, proxy: bool = False) -> ModelChoice:
    """The judge model: the operator's policy (422 naming ``model`` when it refuses), or the user's own."""
    if surface.policy is None:
        return _own_model(turn, explicit, surface.local_model and not proxy)  # under proxy the judge is hosted
    return model_policy.judge_for(
        surface.policy.settings,
        surface.policy.tenant,
        turn_model=turn.model,
        explicit=explicit,
        local_model=surface.local_model,
    )


def decide(
    turn: StoredTurn,
    sentence: str,
    estimator: EstimatorChoice,
    model: str | None,
    *,
    surface: TraceSurface,
    params: Params = DEFAULT_PARAMS,
    probe: bool = False,
) -> TraceDecision:
    """Whether a trace of ``sentence`` with ``estimator`` may run (or, with ``probe``, the probe alone): see
    the module's docstring. No model call, no I/O beyond tokenizing the turn."""
    words = surface.words
    check_probe(estimator, probe, words)
    proxy = estimator == "proxy"  # a hosted judge confirms what a local model or scoring endpoint ranked
    choice = choose_judge(turn, model, surface, proxy=proxy)
    view = surface.view(turn, params)
    target = free_tier.action_target(turn, view.corpus, sentence)
    if target is not None and probe:
        raise InvalidInput(
            "a probe regenerates the answer to test one sentence's source; an action is traced, not probed",
            field="probe",
            fix="trace the action (without probe), or probe a sentence",
        )
    selection, corpus = (
        target if target is not None else (free_tier.require_selection(turn, view, sentence), view.corpus)
    )
    tokens: Tokenizer = view.tokenizer if isinstance(view, QuoteView) else free_tier.tokenizer()
    pricing = surface.pricing
    quote = free_tier.cost_quote(
        turn,
        corpus,
        selection.text,
        model=choice.model,
        params=params,
        probe=probe,
        trace=not probe,
        pricing=pricing,
        tokens=tokens,
    )
    refusals: list[Refusal] = []
    if quote.refused and surface.cost_refusal == "refuse":
        refusals.append(cost_refusal(words, quote.refused, field="sentence"))
    scoring = expected = ranking = None
    scoring_quote = ranking_quote = None
    proxy_quote = None
    if not probe:
        query = turn.effective_query()
        scoring = scoring_capability(
            choice.model,
            local_model=surface.local_model,
            scorer_api_base=surface.scorer_api_base,
            api_base=surface.api_base,
        )
        expected = top_logprobs_capability(choice.model, local_model=surface.local_model, api_base=surface.api_base)
        ranking = (
            proxy_capability(local_model=surface.local_model, scorer_api_base=surface.scorer_api_base)
            if proxy
            else scoring
        )
        scoring_quote = quote_scoring(corpus, selection.text, scoring, query=query, params=params, tokenizer=tokens)
        if proxy:
            ranking_quote = quote_scoring(corpus, selection.text, ranking, query=query, params=params, tokenizer=tokens)
        if proxy and not ranking.can_score:
            refusals.append(
                Refusal(
                    "proxy-scorer",
                    words.estimator_field,
                    f"{words.estimator('proxy')} needs a local scoring model to rank the sources: {ranking.reason}",
                    words.fixes["proxy-scorer"],
                )
            )
        elif needs_scorer(estimator) and not ranking.can_score:
            refusals.append(
                Refusal(
                    "scorer",
                    words.estimator_field,
                    f"{words.estimator(estimator)} needs a scoring-capable model: {ranking.reason}",
                    words.fixes["scorer"],
                )
            )
        elif proxy:
            from provenance_api.providers.llm_litellm import LiteLLMPricing  # cost_quote's price by default

            proxy_quote = quote_proxy(
                corpus,
                selection.text,
                ranking,
                quote,
                query=query,
                params=params,
                tokenizer=tokens,
                pricing=pricing or LiteLLMPricing(),
            ).to_model()
        if estimator == "expected" and not expected.offered:
            refusals.append(
                Refusal(
                    "expected",
                    words.estimator_field,
                    f"{words.estimator('expected')} needs a judge that returns top log-probabilities: "
                    f"{expected.reason}",
                    words.fixes["expected"],
                )
            )
    return TraceDecision(
        estimator=estimator,
        probe=probe,
        view=view,
        selection=selection,
        corpus=corpus,
        action=selection.segment_id if target is not None else None,
        choice=choice,
        quote=quote,
        planned=quote.planned_calls if probe else planned_calls(estimator, corpus, params),
        scoring=scoring,
        scoring_quote=scoring_quote,
        ranking_quote=ranking_quote,
        expected=expected,
        proxy=proxy_quote,
        refusal=refusals[0] if refusals else None,
    )


def check_probe(estimator: EstimatorChoice, probe: bool, words: Vocabulary) -> None:
    """A probe regenerates answers: only the judged estimator applies (422 naming the estimator)."""
    if probe and estimator != "judged":
        raise Refusal(
            "probe-estimator",
            words.estimator_field,
            f"a probe regenerates answers: estimator {estimator!r} does not apply",
            words.fixes["probe-estimator"],
        ).error()


def cost_refusal(words: Vocabulary, refused: str, *, field: str) -> Refusal:
    """The cost gate's refusal (``refused``: its reason), naming ``field``."""
    return Refusal("cost", field, refused, words.fixes["cost"])


def check_max_cost(
    refused: str | None, cost_usd: float | None, model: str, max_cost_usd: float, *, what: str = "trace"
) -> None:
    """The service's ceiling per request: refuse (422 naming max_cost_usd) a quote the cost gate did not
    refuse (``refused``) that is unpriced or over ``max_cost_usd``."""
    if refused is not None:
        return
    if cost_usd is None:
        raise CostRefused(
            f"no price is known for model {model!r}, so max_cost_usd cannot be guaranteed",
            field="max_cost_usd",
            fix=f"quote with POST /v1/quotes and start the {what} by quote_id to accept an "
            "unpriced quote, or choose a model with a known price",
        )
    if cost_usd > max_cost_usd:
        raise CostRefused(
            f"the quoted cost ${cost_usd:.4f} is over max_cost_usd ${max_cost_usd:.4f}",
            field="max_cost_usd",
            fix="raise max_cost_usd, lower params.max_sources, or choose a cheaper model",
        )


# --------------------------------------------------------------------------- a trace whose every call failed


@dataclass(frozen=True)
class FailureFix:
    """The setting to change after a trace whose every call failed, and how (None: no one setting)."""

    setting: ProviderSetting | None
    fix: str


def failure_fix(error: BaseException | None, *, api_base: str | None) -> FailureFix:
    """The fix for the CLI's failed trace, from the type of the last provider error (``error``; a scorer's or
    no error names no setting). The message is never read."""
    setting = error.setting if isinstance(error, ProviderError) else None
    if setting == "key":
        return FailureFix(
            setting,
            "give the judge's provider a key: the provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, "
            "…) or --api-key with --api-base",
        )
    if setting == "endpoint":
        where = f"--api-base {api_base}" if api_base else "the provider's endpoint (OPENAI_API_BASE, …)"
        return FailureFix(
            setting, f"check that {where} answers, or pass --api-base for a reachable OpenAI-compatible server"
        )
    return FailureFix(None, "check --model, --api-base and the provider's key; the error above is the provider's own")
