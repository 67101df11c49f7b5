"""The judgement cache: deterministic model calls answered from a shared store.

``CachingLLM`` wraps any ``estimator.seams.llm.LLM`` (the service wraps ``LiteLLMClient``), so the
estimator is untouched. Only deterministic calls are cached — ``temperature == 0`` and not the
probe (judge and support calls); sampled calls (temperature None) and every ``probe`` call always
go to the provider. The key is a SHA-256 of the model, the provider base URL, the rendered
messages and every parameter sent (temperature, max_tokens, json_schema, schema_name), and a repeated
measurement's sample index (``LLMRequest.sample``, from 1: a repeat is never the first sample's answer). A hit is an
``LLMResponse`` with ``cached=True`` and zero usage and cost: it was not a model call and is not
billed. Entries live ``ttl_seconds``.

Entries are kept per tenant: the store is asked for a key *within a scope* (``tenant_scope(tenant)``),
so one tenant's cached judgement never answers another tenant's call — otherwise a tenant could learn,
from a ``cached`` call or a $0 trace, that another tenant traced the same content. The trace runner
scopes the judge to the job's tenant (``CachingLLM.for_tenant``). Only when the operator turns on
``PROVENANCE_JUDGEMENT_CACHE_SHARED`` do all tenants share one scope (``SHARED_SCOPE``). A client that
was never scoped (the CLI's single user) uses the shared scope.

Stores: ``RedisJudgementCache`` (shared by every process when ``PROVENANCE_REDIS_URL`` is set) and
``SqliteJudgementCache`` (a file in the data directory: the embedded mode), both in
``provenance_api.storage.judgement_cache``. A store that fails is
logged and the call goes to the provider — the cache never fails a trace.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Protocol

from estimator.seams.llm import LLM, LLMRequest, LLMResponse, Usage
from provenance_api.storage.judgement_cache import SHARED_SCOPE, CachedAnswer, tenant_scope, turn_scope

log = logging.getLogger("provenance_api.providers.llm_cache")

KEY_VERSION = 1


class JudgementCache(Protocol):
    async def get(self, scope: str, key: str) -> CachedAnswer | None: ...

    async def put(self, scope: str, key: str, answer: CachedAnswer) -> None: ...

    async def purge(self, scope: str) -> int:
        """Remove every entry of ``scope`` (e.g. ``tenant_scope(tenant)``); returns how many were removed."""
        ...


def cacheable(request: LLMRequest) -> bool:
    """Deterministic judge/support calls only: never a sampled call, never the probe, never a call asking
    for top log-probabilities (the cache keeps the answer's text, not its distribution)."""
    return request.temperature == 0.0 and request.purpose != "probe" and not request.top_logprobs


def cache_key(model: str, api_base: str | None, request: LLMRequest) -> str:
    material = {
        "v": KEY_VERSION,
        "model": model,
        "api_base": api_base or "",
        "messages": [[m.role, m.content] for m in request.messages],
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "json_schema": request.json_schema,
        "schema_name": request.schema_name if request.json_schema is not None else None,
    }
    if request.sample:  # a repeat of a measurement (repeats > 1) is its own judgement; the first keeps its old key
        material["sample"] = request.sample
    blob = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachingLLM:
    """An ``LLM`` that answers repeated deterministic calls from a ``JudgementCache``, within the scope of
    one tenant (``tenant``) unless ``shared``; unscoped (``tenant=None``) it uses the shared scope."""

    def __init__(
        self,
        inner: LLM,
        cache: JudgementCache,
        *,
        api_base: str | None = None,
        tenant: str | None = None,
        shared: bool = False,
        turn_id: str | None = None,
    ) -> None:
        self.inner = inner
        self.cache = cache
        self.api_base = api_base
        self.tenant = tenant
        self.shared = shared
        self.turn_id = turn_id

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def scope(self) -> str:
        if self.shared or self.tenant is None:
            return SHARED_SCOPE
        return tenant_scope(self.tenant) if self.turn_id is None else turn_scope(self.tenant, self.turn_id)

    def for_tenant(self, tenant: str, turn_id: str | None = None) -> CachingLLM:
        """The same judge and store, its entries kept within ``tenant``'s scope (unless shared) — within one
        stored turn's scope when ``turn_id`` is given, so deleting the turn can purge them."""
        return CachingLLM(
            self.inner, self.cache, api_base=self.api_base, tenant=tenant, shared=self.shared, turn_id=turn_id
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        if not cacheable(request):
            return await self.inner.complete(request)
        key = cache_key(self.inner.model, self.api_base, request)
        scope = self.scope
        try:
            found = await self.cache.get(scope, key)
        except Exception as exc:  # a broken cache must not fail the trace
            log.warning("judgement cache read failed (%s); calling the model", type(exc).__name__)
            found = None
        if found is not None:  # the trace's ledger counts it as cached: not a call, not billed
            return LLMResponse(text=found.text, usage=Usage(cost_usd=0.0), model=found.model, cached=True)
        response = await self.inner.complete(request)
        if not response.cached:
            try:
                await self.cache.put(scope, key, CachedAnswer(response.text, response.model or self.inner.model))
            except Exception as exc:
                log.warning("judgement cache write failed (%s)", type(exc).__name__)
        return response
