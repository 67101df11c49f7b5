"""Before ``provenance trace`` asks for consent: is there a key, does the endpoint answer, and can the model do
what the estimator needs?

Two checks, no model call billed:

* **the key**: ``--api-key``, or the variable the provider reads (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, …, as litellm names it). A self-hosted server (``--api-base``) may need none.
* **the endpoint**: one ``GET`` with a short timeout — ``{base}/models`` for an OpenAI-compatible server
  (``--api-base``, ``OPENAI_API_BASE``, or the provider's own), Anthropic's ``/v1/models``, else the
  provider's base URL. Any HTTP answer means it is reachable; 401/403 from a models listing means it
  refused the key. Listing models is free on every provider that has it.

A failure is a ``ProviderError`` naming the setting or flag to fix (the command exits 1 without asking).

Then, for a trace that relies on a capability the configuration can only assume — a self-hosted server's
``/v1/completions`` echoing log-probabilities (``logprob``, ``both``, ``proxy``), or its chat answers carrying top
log-probabilities (``expected``) — **one probe call** checks it (``providers.capabilities``): a few dozen tokens,
made outside the trace's ledger, so never counted or billed in the trace. The gate then says what the probe found
(``verify_scoring``, ``verify_top_logprobs``); a server that cannot do it is refused before consent
(``refused_scoring``, ``refused_top_logprobs``: a ``ProviderError`` naming the flag, exit 1), and nothing of the
trace is spent.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from estimator.loo.logprob_cost import ScoringCapability
from estimator.seams.llm import LLM
from estimator.seams.scorer import Scorer
from provenance_api.core.errors import ProviderAuthError, ProviderError, ProviderResponseInvalid, ProviderUnavailable
from provenance_api.providers.capabilities import TopLogprobsCapability, probe_scoring, probe_top_logprobs

if TYPE_CHECKING:
    from provenance_api.operations.trace_plan import TraceDecision

__all__ = [
    "NO_KEY",
    "SCORER_FIX",
    "Endpoint",
    "check",
    "client_key",
    "completions_scorer",
    "endpoint_for",
    "refused_scoring",
    "refused_top_logprobs",
    "verified",
    "verify_scoring",
    "verify_top_logprobs",
]

PREFLIGHT_TIMEOUT = 5.0
NO_KEY = "no-key-given"  # sent to a self-hosted server when no key is configured (it may need none)
# providers whose credentials may come from a file or an instance role rather than a variable
_CREDENTIAL_FILES = frozenset({"bedrock", "sagemaker", "vertex_ai", "vertex_ai_beta", "gemini_vertex"})
_DEFAULT_BASES = {
    "openai": ("https://api.openai.com/v1", ("OPENAI_API_BASE", "OPENAI_BASE_URL")),
    "anthropic": ("https://api.anthropic.com", ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL")),
}


@dataclass(frozen=True)
class Endpoint:
    """Where a model's calls go, and how its key is found."""

    model: str
    provider: str
    base: str | None
    base_setting: str  # the flag or variable the base came from, to name in a fix
    key: str | None
    key_settings: tuple[str, ...]  # the variables the provider reads its key from, when none is set
    openai_compatible: bool
    self_hosted: bool  # --api-base: a server of the user's own, which may need no key

    @property
    def key_setting(self) -> str:
        """The flag or variable that gives this endpoint its key."""
        if self.self_hosted:
            return "--api-key"
        return self.key_settings[0] if self.key_settings else f"{self.provider.upper()}_API_KEY"


def endpoint_for(model: str, api_base: str | None, api_key: str | None) -> Endpoint:
    """Resolve ``model`` the way litellm will: its provider, base URL and key (offline)."""
    from provenance_api.providers.llm_litellm import load_litellm

    litellm = load_litellm()
    try:
        _, provider, dynamic_key, default_base = litellm.get_llm_provider(model, api_base=api_base)
    except Exception as exc:  # litellm names the problem (an unknown provider prefix)
        from provenance_api.core.errors import InvalidInput

        raise InvalidInput(
            f"model {model!r} names no provider litellm knows: {str(exc)[:200]}",
            field="--model",
            fix="use provider/model, e.g. openai/gpt-4o-mini or anthropic/claude-3-5-haiku-latest, "
            "or openai/NAME with --api-base for an OpenAI-compatible server",
        ) from None
    missing: tuple[str, ...] = ()
    if not api_key and not dynamic_key:
        found = litellm.validate_environment(model, api_base=api_base)
        missing = tuple(v for v in found.get("missing_keys") or () if any(w in v for w in ("KEY", "TOKEN")))
    key = api_key or dynamic_key or next((os.environ[v] for v in _key_variables(provider) if os.environ.get(v)), None)
    if api_base:
        base, setting = api_base, "--api-base"
    elif provider in _DEFAULT_BASES:
        default, variables = _DEFAULT_BASES[provider]
        setting = next((v for v in variables if os.environ.get(v)), "")
        base = os.environ[setting] if setting else default
        setting = setting or f"{variables[0]} (unset: {default})"
    else:
        base, setting = default_base, "--api-base"
    compatible = bool(api_base) or provider == "openai" or (default_base is not None and provider != "anthropic")
    return Endpoint(
        model, provider, base.rstrip("/") if base else None, setting, key, missing, compatible, bool(api_base)
    )


def client_key(endpoint: Endpoint) -> str | None:
    """The key to hand the client: the one found, or for a server of the user's own that needs none a
    placeholder (litellm's OpenAI client refuses to send a request without some key)."""
    if endpoint.key is None and endpoint.self_hosted and endpoint.openai_compatible:
        return NO_KEY
    return endpoint.key


def _key_variables(provider: str) -> tuple[str, ...]:
    return (f"{provider.upper()}_API_KEY",)


def check(endpoint: Endpoint, *, timeout: float = PREFLIGHT_TIMEOUT) -> None:
    """Raise a ProviderError naming the fix when the key is missing or the endpoint does not answer."""
    needs_key = not endpoint.self_hosted and endpoint.provider not in _CREDENTIAL_FILES
    if needs_key and endpoint.key_settings and not endpoint.key:
        names = " or ".join(endpoint.key_settings)
        raise ProviderAuthError(
            f"no API key for {endpoint.provider} (model {endpoint.model}): {names} is not set",
            field=endpoint.key_settings[0],
            fix=f"export {endpoint.key_settings[0]}=… (the provider's key), or pass --api-key; for a server "
            "of your own pass --api-base URL",
        )
    if endpoint.base is None:
        return  # litellm resolves this provider's address itself: nothing to probe before the first call
    _probe(endpoint, timeout)


def _probe(endpoint: Endpoint, timeout: float) -> None:
    headers: dict[str, str] = {}
    base = endpoint.base or ""
    if endpoint.openai_compatible:
        url, listing = f"{base}/models", True
        if endpoint.key:
            headers = {"Authorization": f"Bearer {endpoint.key}"}
    elif endpoint.provider == "anthropic":
        url, listing = f"{base}/v1/models", True
        if endpoint.key:
            headers = {"x-api-key": endpoint.key, "anthropic-version": "2023-06-01"}
    else:
        url, listing = base, False
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            status = client.get(url, headers=headers).status_code
    except httpx.TimeoutException:
        raise _unreachable(endpoint, f"no answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise _unreachable(endpoint, _reason(exc)) from None
    if listing and status in (401, 403):
        where = endpoint.key_setting
        given = "no key was given" if not endpoint.key else "the key given was refused"
        raise ProviderAuthError(
            f"{endpoint.base} refused the request for its models (HTTP {status}): {given}",
            provider_status=status,
            field=where,
            fix=f"give a key valid for {endpoint.base}: {where}" + ("" if where == "--api-key" else " or --api-key"),
        )


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError) and "refused" in text.lower():
        return "connection refused"
    return text[:200]


def _unreachable(endpoint: Endpoint, reason: str) -> ProviderError:
    if endpoint.self_hosted:
        fix = (
            f"start the server at {endpoint.base}, or pass --api-base with the URL of one that answers "
            "(an OpenAI-compatible server's /v1)"
        )
    else:
        fix = f"check the network, or point {endpoint.base_setting.split(' ', 1)[0]} at a reachable endpoint"
    return ProviderUnavailable(
        f"cannot reach {endpoint.base} ({endpoint.provider}): {reason}",
        field=endpoint.base_setting.split(" ", 1)[0],
        fix=fix,
    )


# --------------------------------------------------------------------------- what the estimator needs, probed

SCORER_FIX = (
    "point --scorer-api-base (default: --api-base) at a server whose /v1/completions echoes log-probabilities "
    "(llama.cpp's server, vLLM), or pass --local-model FILE.gguf, or use --estimator judged"
)
"""What to change when the scoring server cannot score: a probe found so, or every scoring call of a trace failed."""
TOP_LOGPROBS_FIX = (
    "use --estimator judged, or a judge that returns top log-probabilities (OpenAI or Azure chat completions, "
    "vLLM, a llama.cpp server, --local-model)"
)


def verify_scoring(scorer: Scorer, capability: ScoringCapability) -> ScoringCapability:
    """``capability`` checked by one probe call of ``scorer`` when it names a server this process cannot see
    (``completions-echo``: a yes there is only assumed); unchanged otherwise."""
    if not (capability.can_score and capability.how == "completions-echo"):
        return capability
    probed = anyio.run(probe_scoring, scorer)
    return capability.verified(probed.ok, probed.found)


def refused_scoring(capability: ScoringCapability, estimator: str, field: str) -> ProviderError:
    """The refusal of a trace whose scoring server a probe found unable to score (exit 1, nothing spent)."""
    return ProviderResponseInvalid(
        f"--estimator {estimator} needs a scoring-capable model: {capability.reason}", field=field, fix=SCORER_FIX
    )


def verify_top_logprobs(llm: LLM, capability: TopLogprobsCapability) -> TopLogprobsCapability:
    """``capability`` checked by one probe call of ``llm`` when it is assumed (unchanged otherwise). A provider
    error of the probe is raised as it is: the command exits 1 naming its fix."""
    if not (capability.offered and capability.assumed):
        return capability
    return capability.verified(anyio.run(probe_top_logprobs, llm))


def refused_top_logprobs(capability: TopLogprobsCapability) -> ProviderError:
    return ProviderResponseInvalid(
        f"--estimator expected needs a judge that returns top log-probabilities: {capability.reason}",
        field="--estimator",
        fix=TOP_LOGPROBS_FIX,
    )


def completions_scorer(args: argparse.Namespace, model: str) -> Any:
    """The scoring server's client: ``--scorer-api-base`` (under proxy), else ``--api-base``, as ``--scorer-model``
    or the judge model's name (``local`` under proxy)."""
    from provenance_api.providers.scorer_completions import CompletionsScorer

    proxy = args.estimator == "proxy"
    base = args.scorer_api_base if proxy else args.scorer_api_base or args.api_base
    name = args.scorer_model or ("local" if proxy else model.split("/", 1)[-1])
    return CompletionsScorer(name, base, args.api_key, timeout=max(args.timeout, 600.0))


def verified(
    args: argparse.Namespace, model: str, decision: TraceDecision
) -> tuple[ScoringCapability, TopLogprobsCapability, ProviderError | None]:
    """The gate's scoring and expected-digit capabilities, each checked by one probe call where the trace relies
    on one the configuration can only assume; and the refusal to raise once the gate is shown,
    when a probe found the server unable (None when it may run). Under proxy the scoring shown is the ranking's."""
    from estimator.trace import needs_scorer

    scoring = decision.scoring
    if args.estimator == "proxy" and decision.ranking_quote is not None:
        scoring = decision.ranking_quote.capability
    expected, refusal = decision.expected, None
    assert scoring is not None and expected is not None  # a trace, not a probe
    if needs_scorer(args.estimator) and not args.local_model and decision.may_run:
        scoring = verify_scoring(completions_scorer(args, model), scoring)
        if not scoring.can_score:
            field = "--scorer-api-base" if args.scorer_api_base or args.estimator == "proxy" else "--api-base"
            refusal = refused_scoring(scoring, args.estimator, field)
    if args.estimator == "expected" and not args.local_model and decision.may_run:
        from provenance_api.providers.llm_litellm import LiteLLMClient

        judge = LiteLLMClient(model, api_base=args.api_base, api_key=args.api_key, timeout=args.timeout)
        expected = verify_top_logprobs(judge, expected)
        if not expected.offered:
            refusal = refused_top_logprobs(expected)
    return scoring, expected, refusal
