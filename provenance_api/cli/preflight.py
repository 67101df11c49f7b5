"""Before ``provenance trace`` asks for consent: is there a key, and does the endpoint answer?

Two checks, no model call billed:

* **the key**: ``--api-key``, or the variable the provider reads (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, …, as litellm names it). A self-hosted server (``--api-base``) may need none.
* **the endpoint**: one ``GET`` with a short timeout — ``{base}/models`` for an OpenAI-compatible server
  (``--api-base``, ``OPENAI_API_BASE``, or the provider's own), Anthropic's ``/v1/models``, else the
  provider's base URL. Any HTTP answer means it is reachable; 401/403 from a models listing means it
  refused the key. Listing models is free on every provider that has it.

A failure is a ``ProviderError`` naming the setting or flag to fix (the command exits 1 without asking).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx

from provenance_api.core.errors import ProviderAuthError, ProviderError, ProviderUnavailable

__all__ = ["NO_KEY", "Endpoint", "check", "client_key", "endpoint_for"]

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
