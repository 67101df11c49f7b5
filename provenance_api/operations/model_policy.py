"""Which judge model runs, and at what price: the operator's policy, not the tenant's.

A trace is paid with the operator's provider key, so the operator decides which models may run:

- ``PROVENANCE_DEFAULT_MODEL`` (else ``openai/gpt-4o-mini``) always may;
- ``PROVENANCE_ALLOWED_MODELS`` (JSON list or ``a,b``) names the others; ``PROVENANCE_TENANT_MODELS``
  (JSON tenant → list) replaces that list for the tenants it names. With no list, only the default runs.

A model asked for explicitly (the request's ``model``) that is not allowed is refused (422 naming ``model``
and the setting to change). A stored turn's own model that is not allowed is not an error — the turn was
written by the agent, not chosen by the caller — so the default runs instead and the quote says why
(``model_reason``).

Whatever the lists say, a model string that carries a URL or a host (``huggingface/http://…``,
``openai/https://…``) is refused at quote time: litellm would send the call, with the operator's key, to a
host the operator never configured. The provider's host is configured by ``PROVENANCE_JUDGE_API_BASE`` (or
litellm's environment), never by a model name. A turn whose own model carries a URL runs the default.

Every model that runs must have a price — litellm's bundled (offline) map, or the operator's
``PROVENANCE_MODEL_PRICES`` (model → ``{input_per_mtok, output_per_mtok}`` USD, which wins over the map) —
because budgets are kept in money; an unpriced model is refused (422 naming ``model``). The one exception
is a service whose judge runs in its own process (``serve --local-model``): it costs nothing per call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from estimator.cost import Pricing
from provenance_api.core.errors import InvalidInput
from provenance_api.core.settings import Settings
from provenance_api.providers import free_tier

ChoiceSource = Literal["explicit", "turn", "default"]

_URL = re.compile(r"(?i)([a-z][a-z0-9+.-]*://|//|\\\\|^https?:|/https?:|\bwww\.|\s)")
"""A scheme (``http://``), a protocol-relative or UNC host, ``www.`` or whitespace: a model string that names a
place rather than a model (``@`` is allowed: Vertex AI versions models with it)."""


@dataclass(frozen=True)
class ModelChoice:
    """The judge model that will run, where the choice came from, and why (shown on the quote)."""

    model: str
    source: ChoiceSource
    reason: str


def default_model(settings: Settings) -> str:
    return settings.default_model or free_tier.FALLBACK_MODEL


def allowed_models(settings: Settings, tenant: str) -> tuple[str, ...]:
    """The models ``tenant`` may choose: its own list where the operator set one, else the service's list;
    the default always."""
    listed = settings.tenant_models.get(tenant, settings.allowed_models)
    return tuple(dict.fromkeys([default_model(settings), *listed]))


def list_setting(settings: Settings, tenant: str) -> str:
    """The setting that governs ``tenant``'s list (named in refusals)."""
    return "PROVENANCE_TENANT_MODELS" if tenant in settings.tenant_models else "PROVENANCE_ALLOWED_MODELS"


def names_a_host(model: str) -> bool:
    """Whether ``model`` carries a URL or host that would route the call somewhere the operator did not
    configure (``huggingface/http://…``, ``openai/https://…``)."""
    return bool(_URL.search(model))


def choose_model(settings: Settings, tenant: str, *, turn_model: str | None, explicit: str | None) -> ModelChoice:
    """The judge for a request of ``tenant``: ``explicit`` if allowed (else 422), else the turn's own model if
    allowed, else the default. Never returns a model that names a host or is not allowed."""
    default = default_model(settings)
    allowed = allowed_models(settings, tenant)
    if explicit:
        if names_a_host(explicit):
            raise host_refused(explicit)
        if explicit not in allowed:
            where = list_setting(settings, tenant)
            raise InvalidInput(
                f"model {explicit!r} is not on this service's allow-list of judge models "
                f"(allowed: {', '.join(allowed)})",
                field="model",
                fix=f"drop model to run the default {default!r}, choose an allowed model, or ask the operator to "
                f"add it to {where}" + (f" for tenant {tenant!r}" if where == "PROVENANCE_TENANT_MODELS" else ""),
                extra={"allowed_models": list(allowed)},
            )
        return ModelChoice(explicit, "explicit", "requested explicitly, on the allow-list")
    if turn_model:
        if turn_model == default:
            return ModelChoice(default, "turn", "the turn's own model, the service's default")
        if names_a_host(turn_model):
            return ModelChoice(
                default,
                "default",
                f"the default: the turn's model {turn_model!r} names a host, "
                "and calls go only to the providers this service configures",
            )
        if turn_model in allowed:
            return ModelChoice(turn_model, "turn", "the turn's own model, on the allow-list")
        return ModelChoice(
            default, "default", f"the default: the turn's model {turn_model} is not on this service's allow-list"
        )
    return ModelChoice(default, "default", "the default: the turn names no model")


def host_refused(model: str) -> InvalidInput:
    return InvalidInput(
        f"model {model!r} names a host: calls go only to the providers this service configures",
        field="model",
        fix="name the model without a URL (e.g. openai/gpt-4o-mini); the operator sets the provider's address "
        "with PROVENANCE_JUDGE_API_BASE",
    )


class OperatorPricing:
    """``estimator.cost.Pricing``: the operator's ``PROVENANCE_MODEL_PRICES`` first, then litellm's bundled
    (offline) price map."""

    def __init__(self, settings: Settings) -> None:
        from provenance_api.providers.llm_litellm import LiteLLMPricing

        self._overrides = {name: price.per_token() for name, price in settings.model_prices.items()}
        self._litellm = LiteLLMPricing()

    def price(self, model: str) -> tuple[float, float] | None:
        if model in self._overrides:
            return self._overrides[model]
        return self._litellm.price(model)


def pricing(settings: Settings) -> Pricing:
    return OperatorPricing(settings)


def require_runnable(settings: Settings, choice: ModelChoice, *, local_model: bool = False) -> ModelChoice:
    """Refuse (422 naming ``model``) a choice that names a host, or that has no price (unless the judge runs
    in this process)."""
    if names_a_host(choice.model):
        raise host_refused(choice.model)
    if not local_model and pricing(settings).price(choice.model) is None:
        raise InvalidInput(
            f"no price is known for judge model {choice.model!r} ({choice.reason}), so its cost cannot be budgeted",
            field="model",
            fix="choose a model litellm prices, or ask the operator to set its price in PROVENANCE_MODEL_PRICES "
            '(JSON: {"<model>": {"input_per_mtok": …, "output_per_mtok": …}} in USD)',
        )
    return choice


def judge_for(
    settings: Settings, tenant: str, *, turn_model: str | None, explicit: str | None, local_model: bool = False
) -> ModelChoice:
    """``choose_model`` then ``require_runnable``: the model a service request runs, or a 422."""
    choice = choose_model(settings, tenant, turn_model=turn_model, explicit=explicit)
    return require_runnable(settings, choice, local_model=local_model)
