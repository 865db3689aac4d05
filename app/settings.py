"""Settings: the one place configuration is read from the environment.

Flat names for the common variables (``DATABASE_URL``, ``REDIS_URL``, ``HOST``, ``PORT``), nested
groups with ``__`` for the rest (``LIMITS__MAX_ITEMS_PER_APPEND=500``, ``LLM__BASE_URL=...``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_SQLITE_URL = "sqlite+aiosqlite:///./data/session-memory.db"


class Limits(BaseModel):
    # Sized for computer-use agents: a 5 MB base64 screenshot is one item, and an append holds
    # it with the rest of its turn.
    max_body_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="request body size (413 above)"
    )
    max_items_per_append: int = Field(1000, ge=1)
    max_item_bytes: int = Field(8 * 1024 * 1024, ge=256, description="one item's JSON size")
    max_metadata_bytes: int = Field(16 * 1024, ge=16, description="metadata object's JSON size")
    max_config_bytes: int = Field(64 * 1024, ge=256)
    max_summary_chars: int = Field(200_000, ge=1)
    max_json_depth: int = Field(
        64, ge=4, le=512, description="nesting depth of a JSON body (422 above)"
    )


class LockSettings(BaseModel):
    wait_seconds: float = Field(
        10.0,
        gt=0,
        description="how long a write waits for another write to the same session (the session "
        "row's lock) before a 503 with Retry-After; also how long an LLM compaction waits for "
        "another one of the same session",
    )
    ttl_seconds: float = Field(15.0, gt=0.05, description="Redis lock expiry, renewed while held")
    redis_timeout_seconds: float = Field(1.0, gt=0, description="socket timeout to Redis")


class AuthSettings(BaseModel):
    """API keys. ``mode``: ``on`` (every /v1 request needs a key), ``off`` (no keys: every caller
    is ``default_tenant`` with every scope; refused unless the host is loopback), ``auto``
    (default: ``off`` on a loopback host with no bootstrap key when ``session-memory serve`` runs
    the server, ``on`` otherwise: see ``services.keys.auth_required``)."""

    mode: Literal["auto", "on", "off"] = "auto"
    bootstrap_key: SecretStr | None = Field(
        None, description="an admin key taken from the environment (never stored), >= 32 chars"
    )
    bootstrap_tenant: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
    default_tenant: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
    cache_seconds: float = Field(
        5.0, ge=0, description="how long a key lookup is cached; revocation shows within it"
    )
    cache_max_keys: int = Field(
        10_000, ge=1, description="key lookups cached per process, at most (then it starts over)"
    )

    @field_validator("bootstrap_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or value.get_secret_value() == "":
            return None
        secret = value.get_secret_value()
        if (
            len(secret) < 32
            or len(secret) > 256
            or not secret.isascii()
            or not secret.isprintable()
        ):
            raise ValueError("AUTH__BOOTSTRAP_KEY must be 32-256 printable ASCII characters")
        return value


class LLMSettings(BaseModel):
    base_url: str | None = Field(
        None, description="OpenAI-compatible base URL, e.g. http://host/v1"
    )
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    timeout_seconds: float = Field(60.0, gt=0)
    retries: int = Field(2, ge=0)
    json_mode: bool = True


class AutoCompactSettings(BaseModel):
    """Background compaction (``config.auto_compact``): retry pacing after a failure."""

    enabled: bool = Field(True, description="off: auto_compact configs are kept but never run")
    backoff_seconds: float = Field(
        30.0, gt=0, description="wait before the first retry; doubles after each failure"
    )
    max_backoff_seconds: float = Field(1800.0, gt=0)


class RetentionSettings(BaseModel):
    """Server defaults for retention (docs/retention.md); a session's ``config`` may override
    each. ``None``: kept for ever (the default)."""

    session_ttl_seconds: int | None = Field(
        None, ge=1, description="a session idle this long expires and is erased (None: never)"
    )
    history_seconds: int | None = Field(
        None, ge=1, description="archived items older than this are erased (None: kept)"
    )
    keep_snapshots: int | None = Field(
        None, ge=0, description="snapshots kept per session, newest first (None: all)"
    )
    events_seconds: int | None = Field(
        None, ge=1, description="events older than this are erased (None: kept)"
    )
    sweep_interval_seconds: float = Field(
        60.0, gt=0, description="how often the retention sweep runs (once across replicas)"
    )
    sweep_batch_rows: int = Field(
        500, ge=1, description="rows erased per sweep transaction at most (keeps them short)"
    )
    sweep_enabled: bool = Field(
        True,
        description="off: no background sweep (expired sessions still answer 404 at once)",
    )


class EmbeddingsSettings(BaseModel):
    """The embedder behind semantic search (docs/semantic-search.md). ``builtin``: the model
    shipped in a pinned package, run on CPU in-process, never downloaded; ``openai``: any
    OpenAI-compatible ``/v1/embeddings`` endpoint; ``none``: semantic search off."""

    provider: Literal["builtin", "openai", "none"] = "builtin"
    base_url: str | None = Field(
        None, description="openai: OpenAI-compatible base URL, e.g. http://host/v1"
    )
    model: str | None = Field(
        None, description="openai: the model name sent (builtin: its own model, fixed)"
    )
    api_key: SecretStr | None = None
    dimensions: int | None = Field(
        None, ge=1, le=8192, description="openai: vector size asked for and checked"
    )
    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="builtin: CPU threads inference may use, at most (a bounded share, so an "
        "indexing backlog never starves requests)",
    )
    batch_size: int = Field(32, ge=1, le=2048, description="texts per inference or request")
    timeout_seconds: float = Field(30.0, gt=0, description="openai: one request's time limit")
    retries: int = Field(2, ge=0, description="openai: retries after a 429, 5xx or timeout")
    max_chars: int = Field(
        2000, ge=16, description="characters of a text embedded, at most (the rest is cut)"
    )
    cache_mb: int = Field(
        256,
        ge=0,
        description="memory a process may keep of searched sessions' vectors, in MB "
        "(0: read them on every search)",
    )


class ServeSettings(BaseModel):
    """Internal: how the process was started, not an operator setting."""

    via_cli: bool = Field(
        False,
        description="internal: set by `session-memory serve` in the environment of the server it "
        "starts; only then may AUTH__MODE=auto resolve to off (never set it yourself)",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_nested_delimiter="__",
        env_file=None,
        extra="ignore",
        case_sensitive=False,
    )

    database_url: str = Field(DEFAULT_SQLITE_URL, description="SQLAlchemy async URL")
    redis_url: str | None = Field(None, description="unset: in-process lock (single process)")
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    # NoDecode: the value is parsed by _host_list (comma-separated, or a JSON list), not as JSON.
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="with auth off, host names a request may use besides localhost, 127.0.0.1 "
        "and [::1] (`name`: any port, `name:port`: that port); others get 421",
    )
    auto_migrate: bool = Field(True, description="`serve` runs migrations first")
    # Overflow connections are closed whenever they come back to a full pool, so under load
    # above the pool size they are opened and closed all the time (a Postgres backend start
    # each: bench/RESULTS.md, session 6). The default pool is as large as the old maximum,
    # and kept.
    db_pool_size: int = Field(20, ge=1, description="Postgres connections each process keeps")
    db_max_overflow: int = Field(
        0, ge=0, description="extra connections opened under load, closed once they are idle"
    )
    idempotency_ttl_seconds: int = Field(24 * 3600, ge=60)
    context_cache_items: int = Field(
        20_000, ge=0, description="decoded items kept per process for context reads (0: off)"
    )
    context_cache_prompts: int = Field(
        256,
        ge=0,
        description="projected prompts kept per process by session version and budget (0: off)",
    )
    # Every in-process cache is bounded by count and by size (docs/operations.md, Memory):
    # a worker's memory levels off whatever its sessions hold (bench/RESULTS.md, soak).
    context_cache_item_chars: int = Field(
        32 * 1024 * 1024, ge=0, description="total chars of the decoded items kept per process"
    )
    context_cache_prompt_chars: int = Field(
        16 * 1024 * 1024, ge=0, description="total chars of the projected prompts kept per process"
    )
    context_window_sizes: int = Field(
        10_000,
        ge=0,
        description="sessions whose last context read's window size each process remembers, "
        "to size the next read's first statement (0: off)",
    )
    token_cache_entries: int = Field(
        50_000, ge=0, description="token counts of texts kept per process (0: off)"
    )
    token_cache_chars: int = Field(
        16 * 1024 * 1024, ge=0, description="total chars of the texts whose counts are kept"
    )
    idempotency_purge_seconds: float = Field(
        600.0, gt=0, description="how often expired Idempotency-Keys are deleted"
    )
    log_level: str = "info"
    log_format: Literal["json", "text"] = Field(
        "json", description="json: one object per line; text: for reading in a terminal"
    )
    prometheus_multiproc_dir: str | None = Field(
        None, description="metrics shared by worker processes (`serve --workers N` sets it)"
    )
    limits: Limits = Field(default_factory=Limits)
    lock: LockSettings = Field(default_factory=LockSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    auto_compact: AutoCompactSettings = Field(default_factory=AutoCompactSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    embeddings: EmbeddingsSettings = Field(default_factory=EmbeddingsSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_list(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            parsed: object = None
            if text.startswith("["):  # a JSON list (or a bracketed IPv6 host: not JSON)
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
            value = parsed if isinstance(parsed, list) else text.split(",")
        if isinstance(value, list):
            hosts = [str(h).strip().lower() for h in value if str(h).strip()]
            for host in hosts:
                if any(c in host for c in " /\\@?#*") or host.startswith((":", ".")):
                    raise ValueError(
                        f"ALLOWED_HOSTS: {host!r} is not a host name (write `name` or "
                        "`name:port`, comma-separated or as a JSON list)"
                    )
            return hosts
        return value

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        # Accept the usual spellings and pick the async driver we ship.
        if value.startswith("postgres://"):
            value = "postgresql://" + value[len("postgres://") :]
        if value.startswith("postgresql://"):
            value = "postgresql+psycopg://" + value[len("postgresql://") :]
        if value.startswith("sqlite:///"):
            value = "sqlite+aiosqlite:///" + value[len("sqlite:///") :]
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
