"""The service's settings: one object read from ``PROVENANCE_*`` environment variables.

Every command that touches storage (``serve``, ``keys``, ``import``) builds the same ``Settings``,
so they all find the same data directory and database. The judge model's provider is configured
the litellm way (``OPENAI_API_KEY``, ``OPENAI_API_BASE``, ``ANTHROPIC_API_KEY``, …), which litellm
reads itself; ``judge_api_base``/``judge_api_key`` only override those when set.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from estimator.custody.freshness import FreshnessPolicy, FreshnessRulesError, parse_policy
from estimator.params import DEFAULT_PARAMS, Params
from provenance_api.core.errors import InvalidInput
from provenance_api.core.redaction import Redactor, parse_patterns


def read_freshness_rules(path: Path | None) -> FreshnessPolicy:
    """The freshness rules in ``path`` (TOML, or JSON for a ``.json`` name); no path: no rules. A file that cannot
    be read, or a rule that is not valid, is ``InvalidInput`` naming the file and the field."""
    if path is None:
        return FreshnessPolicy()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"freshness rules {path}: cannot be read ({exc.__class__.__name__}: {exc})",
            field="freshness_rules",
            fix="point PROVENANCE_FRESHNESS_RULES (or --freshness-rules) at a readable TOML or JSON file",
        ) from None
    try:
        return parse_policy(text, str(path))
    except FreshnessRulesError as exc:
        raise InvalidInput(
            str(exc),
            field=f"freshness_rules.{exc.field}",
            fix="each [[rules]] entry needs action_tool, evidence_tool and max_age_seconds > 0; same_principal and "
            "lossless are true or false",
        ) from None


DATABASE_FILES = ("provenance.db", "judgements.db")
"""The embedded SQLite files the service keeps in its data directory."""


def default_data_dir() -> Path:
    """Per-user data directory: ``$XDG_DATA_HOME/provenance`` or ``~/.local/share/provenance``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "provenance"


class ModelPrice(BaseModel):
    """An operator's price for a judge model litellm's bundled price map does not know (USD per million tokens)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: float = Field(ge=0, description="USD per million input tokens.")
    output_per_mtok: float = Field(ge=0, description="USD per million output tokens.")

    def per_token(self) -> tuple[float, float]:
        return self.input_per_mtok / 1e6, self.output_per_mtok / 1e6


def _model_list(value: Any) -> Any:
    """A JSON list, or a comma-separated list (``a,b``), of model names; an empty string is no list."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class OtlpTarget(BaseModel):
    """Where finished traces export their OpenTelemetry spans: the OTLP/HTTP traces URL and the headers sent."""

    model_config = ConfigDict(frozen=True)

    traces_url: str
    headers: tuple[tuple[str, str], ...] = Field((), repr=False)  # credentials (PROVENANCE_OTLP_HEADERS)


class Settings(BaseSettings):
    """Configuration of one service instance (env prefix ``PROVENANCE_``)."""

    model_config = SettingsConfigDict(env_prefix="PROVENANCE_", extra="ignore", frozen=True)

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="SQLite file, admin key file; created with owner-only permissions.",
    )
    database_url: str | None = Field(
        None, description="Any SQLAlchemy async URL (postgresql+asyncpg://…); default: SQLite in data_dir."
    )
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    default_model: str | None = Field(
        None, description="The judge model that runs when no other is allowed (else openai/gpt-4o-mini)."
    )
    allowed_models: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Judge models a request or a turn may choose besides the default (JSON list or a,b); "
        "empty: only the default runs.",
    )
    tenant_models: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per tenant, as JSON tenant → [models]: replaces allowed_models for that tenant.",
    )
    model_prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="Operator prices, as JSON model → {input_per_mtok, output_per_mtok} (USD); a model with no "
        "price here or in litellm's bundled map is refused.",
    )
    budget_usd_per_user: float | None = Field(
        None, ge=0, description="USD of model calls per user per rate window (None: no money cap)."
    )
    budget_usd_per_tenant: float | None = Field(
        None, ge=0, description="USD of model calls per tenant per rate window (None: no money cap)."
    )
    judge_api_base: str | None = Field(None, description="Overrides the provider's base URL (else litellm's env).")
    judge_api_key: SecretStr | None = Field(None, description="Overrides the provider's key (else litellm's env).")
    judge_timeout_seconds: float = Field(120.0, gt=0, le=3600)
    provider_max_attempts: int | None = Field(
        None,
        ge=1,
        le=10,
        description="HTTP attempts per model call, the first included (429, 5xx, timeouts and connection errors "
        "are retried with backoff); default 4 for the judge, 3 for the scoring server. 1 turns retries off.",
    )
    scorer_api_base: str | None = Field(
        None,
        description="An OpenAI-compatible server whose /v1/completions echoes log-probabilities "
        "(estimator logprob/both); default: judge_api_base.",
    )
    scorer_model: str | None = Field(
        None,
        description="The model name the scoring server knows (default: the judge model without its provider prefix).",
    )

    params: dict[str, Any] = Field(
        default_factory=dict,
        description="§7.8 constants for this server, as JSON; requests may lower the ceilings, never raise them.",
    )
    max_body_bytes: int = Field(2_000_000, ge=1024, description="Request body size limit (413 above it).")
    quote_ttl_seconds: int = Field(900, ge=1, description="How long a quote id can start a trace.")
    viewer_session_seconds: int = Field(
        8 * 3600, ge=60, description="How long a viewer sign-in lasts before the key must be entered again."
    )
    viewer_session_rotate_seconds: int = Field(
        900, ge=1, description="A viewer session's cookie token is replaced when it is older than this."
    )
    max_running_traces: int = Field(4, ge=1, le=256, description="Trace jobs running at once in this process.")
    wait_max_seconds: float = Field(30.0, gt=0, le=600, description="Longest ?wait=true on GET /v1/traces/{id}.")
    sse_poll_seconds: float = Field(0.5, gt=0, le=30, description="How often an event stream re-reads a job.")
    admin_tenant: str = "local"
    admin_user: str = "admin"
    warm_up: bool = Field(
        True,
        description="Load the tokenizer and litellm at startup: in the background for the "
        "API, before the first job for a worker.",
    )
    log_level: str = "INFO"
    log_json: bool = True

    # scale-out: shared budgets, judgement cache and job queue (docs: README "Running at scale")
    redis_url: str | None = Field(
        None,
        description="redis://…: budgets, judgement cache and trace jobs go through Redis (workers run them).",
    )
    redis_prefix: str = Field("provenance", min_length=1, description="Prefix of every Redis key and queue.")
    judgement_cache: bool = Field(True, description="Answer repeated deterministic judge/support calls from cache.")
    judgement_cache_ttl_seconds: int = Field(7 * 24 * 3600, ge=1, description="How long a cached judgement lives.")
    judgement_cache_shared: bool = Field(
        False,
        description="Let one tenant's cached judgements answer another tenant's identical calls (off: each "
        "tenant has its own entries, so no tenant can tell what another traced).",
    )
    free_tier_rate_max_requests: int = Field(
        3000,
        ge=1,
        description="Requests per caller (tenant and user) per free_tier_rate_window_seconds to the "
        "endpoints that call no model (segments, sources, search, gating report, quotes, verify, viewer reads); "
        "429 above.",
    )
    free_tier_rate_window_seconds: int = Field(60, ge=1, le=86400, description="The free-tier request window (s).")
    worker_max_jobs: int = Field(4, ge=1, le=256, description="Trace jobs one `provenance worker` runs at once.")
    worker_lease_seconds: float = Field(
        30.0, gt=0, le=3600, description="A running job whose worker has not renewed its lease this long is dead."
    )
    history_sources: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description='History stores the API may import from, as JSON: name → {"url", "format", "tenants"} (format: '
        "openai-agents-session, langgraph-sqlite or langgraph-postgres; tenants: the tenants that may import it, "
        '["*"] for every tenant, none given: the admin tenant only); POST /v1/imports/sources/{name}.',
    )
    freshness_rules: Path | None = Field(
        None,
        description='A TOML or JSON file of freshness rules for actions (README "Freshness rules"), checked on '
        "every gate and trace of an action; unset: sources' ages are shown and nothing is judged.",
    )
    # OpenTelemetry (docs: README "Traces in Langfuse or Phoenix"); never read from OTEL_EXPORTER_OTLP_ENDPOINT
    otlp_endpoint: str | None = Field(
        None,
        description="An OTLP/HTTP endpoint (its base URL, /v1/traces appended, or the full …/v1/traces URL): "
        "each finished trace exports its spans there (GenAI conventions); unset: nothing is exported.",
    )
    otlp_headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description='Headers of each export, as JSON (e.g. {"Authorization": "Basic …"}); '
        "empty: OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS apply.",
    )

    redact_patterns: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Values replaced by [redacted:NAME] in every imported or stored turn before it is stored "
        "(and hashed): built-in names (api_key, card_number with a Luhn check, bearer_token), comma-separated, or "
        'a JSON object of names to regular expressions ({"api_key": "", "ticket": "TCK-[0-9]{6}"}); '
        "unset: nothing is redacted.",
    )

    @field_validator("redact_patterns", mode="before")
    @classmethod
    def _redact_patterns(cls, value: Any) -> dict[str, str]:
        return parse_patterns(value)

    @cached_property
    def redactor(self) -> Redactor:
        """The configured redaction rules, compiled (empty: nothing is redacted)."""
        return Redactor.from_patterns(self.redact_patterns)

    @field_validator("otlp_endpoint", mode="after")
    @classmethod
    def _otlp_url(cls, value: str | None) -> str | None:
        text = (value or "").strip()
        if not text:
            return None
        if not text.startswith(("http://", "https://")) or len(text.split("://", 1)[1].strip("/")) == 0:
            raise ValueError(
                "PROVENANCE_OTLP_ENDPOINT must be an http:// or https:// URL, e.g. "
                "http://localhost:6006/v1/traces or https://cloud.langfuse.com/api/public/otel"
            )
        return text

    @property
    def otlp_target(self) -> OtlpTarget | None:
        """The OTLP export target, or None when no endpoint is configured (then nothing is exported)."""
        if self.otlp_endpoint is None:
            return None
        base = self.otlp_endpoint.rstrip("/")
        url = base if base.endswith("/v1/traces") else base + "/v1/traces"
        headers = tuple(sorted((name, value.get_secret_value()) for name, value in self.otlp_headers.items()))
        return OtlpTarget(traces_url=url, headers=headers)

    @field_validator("history_sources", mode="after")
    @classmethod
    def _history_source_tenants(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each source's ``tenants``, when given, is a non-empty JSON list of tenant names (or ``"*"``): a
        malformed list is refused at startup, never read as "everyone" or quietly as "nobody"."""
        for name, entry in value.items():
            if "tenants" not in entry:
                continue
            tenants = entry["tenants"]
            if (
                not isinstance(tenants, list)
                or not tenants
                or not all(isinstance(t, str) and t.strip() and len(t) <= 128 for t in tenants)
            ):
                raise ValueError(
                    f"PROVENANCE_HISTORY_SOURCES.{name}.tenants must be a non-empty JSON list of tenant names, "
                    f'e.g. ["acme", "beta"], or ["*"] for every tenant; leave it out for the admin tenant only'
                )
        return value

    @field_validator("allowed_models", mode="before")
    @classmethod
    def _split_models(cls, value: Any) -> Any:
        return _model_list(value)

    @cached_property
    def base_params(self) -> Params:
        """The server's §7.8 constants (defaults overridden by ``PROVENANCE_PARAMS``), validated."""
        try:
            return DEFAULT_PARAMS.override(self.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise InvalidInput(
                f"PROVENANCE_PARAMS: {where or 'params'}: {first['msg']}",
                field=f"PROVENANCE_PARAMS.{where}" if where else "PROVENANCE_PARAMS",
                fix="set PROVENANCE_PARAMS to a JSON object of valid §7.8 constants",
            ) from None

    @cached_property
    def freshness_policy(self) -> FreshnessPolicy:
        """The freshness rules of ``PROVENANCE_FRESHNESS_RULES`` (none when unset); a bad file is an error naming
        the file and the field."""
        return read_freshness_rules(self.freshness_rules)

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{self.data_dir / 'provenance.db'}"

    @property
    def admin_key_file(self) -> Path:
        return self.data_dir / "admin.key"

    def ensure_data_dir(self) -> Path:
        """Create the data directory if missing and make it owner-only (0700) whatever existed before; the
        embedded databases in it are created (or tightened) to 0600 before SQLite opens them, and SQLite gives
        their ``-wal``/``-shm``/``-journal`` files the same mode. Returns the directory."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.data_dir, 0o700)
        for name in (*DATABASE_FILES, "admin.key"):
            path = self.data_dir / name
            if path.exists():
                os.chmod(path, 0o600)
        if not self.database_url:
            self.owner_only_file("provenance.db")
        for path in self.data_dir.iterdir():  # WAL and shared-memory files left by an earlier run
            if path.name.startswith(DATABASE_FILES) and path.is_file():
                os.chmod(path, 0o600)
        return self.data_dir

    def owner_only_file(self, name: str) -> Path:
        """A file of the data directory, created empty with mode 0600 if missing (SQLite accepts an empty
        file as a new database), so it is never readable by others, not even for a moment."""
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.data_dir / name
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        os.chmod(path, 0o600)
        return path
