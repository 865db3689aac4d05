"""Automatic compaction settings (``config.auto_compact``) and when they fire.

Shape (every key but ``policy`` and ``trigger`` optional)::

    {"policy": "structured",                 # window | structured | llm
     "trigger": {"items": 500},              # and/or {"tokens": 100000}: either reached fires
     "keep_last_items": 50, "keep_last_tokens": 8000, "pinned_prefix_items": 1,
     "instructions": "...", "model": "...",  # llm only
     "enabled": true}

Invariants:
- ``parse_auto_compact`` accepts exactly the documented keys and raises ``InvalidInput`` with
  field-level ``errors`` (``loc`` starting ``["config", "auto_compact", ...]``) otherwise; every
  rule is one the published JSON Schema states too (bounds, required keys, ``minProperties``),
  so a request valid under the OpenAPI document is never refused;
- a trigger always names at least one positive threshold (``items``/``tokens`` may be omitted,
  not ``null``);
- a compaction always makes room: a keep minimum at or above the trigger on the same measure
  (a cross-field rule JSON Schema cannot state) is accepted and stored as sent, but the
  compaction uses half the trigger instead (``effective_keep``); keeping 500 items could never
  bring 500 items below a 500-item trigger, and would re-fire after every append;
- ``auto_compact_due`` is a pure comparison of counters, cheap enough to run after every append.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonDict

from app.domain.compaction.result import CompactPolicy
from app.domain.errors import InvalidInput

__all__ = [
    "MAX_KEEP_ITEMS",
    "MAX_KEEP_TOKENS",
    "MAX_TRIGGER_ITEMS",
    "MAX_TRIGGER_TOKENS",
    "AutoCompactConfig",
    "AutoCompactTrigger",
    "auto_compact_due",
    "parse_auto_compact",
]

# Bounds: far beyond any real session, small enough for every store and JSON encoder.
MAX_TRIGGER_ITEMS = 1_000_000
MAX_TRIGGER_TOKENS = 1_000_000_000
MAX_KEEP_ITEMS = 1_000_000
MAX_KEEP_TOKENS = 100_000_000


def _absent_by_default(schema: JsonDict) -> None:
    schema.pop("default", None)  # Python's default None means "absent", not the JSON null


class AutoCompactTrigger(BaseModel):
    """Compact once working memory holds at least ``items`` items or ``tokens`` tokens.

    At least one of the two is given (JSON Schema: ``minProperties: 1``, no other keys, neither
    nullable); when both are, whichever is reached first fires.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"minProperties": 1})

    # Omitted means "no threshold on this measure"; ``null`` is refused (``_not_null``), so the
    # schema states a plain integer and ``{}`` is the only trigger without a threshold.
    items: Annotated[
        int | None, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_TRIGGER_ITEMS})
    ] = Field(
        None,
        ge=1,
        le=MAX_TRIGGER_ITEMS,
        description="item count of working memory",
        json_schema_extra=_absent_by_default,
    )
    tokens: Annotated[
        int | None, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_TRIGGER_TOKENS})
    ] = Field(
        None,
        ge=1,
        le=MAX_TRIGGER_TOKENS,
        description="token count of working memory",
        json_schema_extra=_absent_by_default,
    )

    @field_validator("items", "tokens", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("omit the key instead of sending null")
        return value

    @model_validator(mode="after")
    def _one_threshold(self) -> Self:
        if self.items is None and self.tokens is None:
            raise ValueError("a trigger needs `items` or `tokens` (or both)")
        return self


class AutoCompactConfig(BaseModel):
    """``config.auto_compact``: which policy runs in the background, and when.

    A keep minimum at or above the trigger on the same measure is not refused (JSON Schema
    cannot compare two fields, and the OpenAPI document must not promise what the server then
    refuses); it is stored as sent, and each automatic compaction keeps at most half the trigger
    on that measure instead (``effective_keep``), so it always makes room and cannot re-fire
    after every append.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    policy: CompactPolicy
    trigger: AutoCompactTrigger
    keep_last_items: int | None = Field(
        None,
        ge=0,
        le=MAX_KEEP_ITEMS,
        description="keep at least this many newest items (at most half of `trigger.items`)",
    )
    keep_last_tokens: int | None = Field(
        None,
        ge=0,
        le=MAX_KEEP_TOKENS,
        description="keep at least this many newest tokens (at most half of `trigger.tokens`)",
    )
    pinned_prefix_items: int = Field(0, ge=0, le=MAX_KEEP_ITEMS)
    instructions: str | None = Field(None, max_length=4000)
    model: str | None = Field(None, min_length=1, max_length=200)

    def effective_keep(self) -> tuple[int | None, int | None]:
        """(keep_last_items, keep_last_tokens) an automatic compaction uses: each one at or above
        the trigger on its measure becomes half the trigger (rounded down)."""
        items, tokens = self.keep_last_items, self.keep_last_tokens
        trigger = self.trigger
        if items is not None and trigger.items is not None and items >= trigger.items:
            items = trigger.items // 2
        if tokens is not None and trigger.tokens is not None and tokens >= trigger.tokens:
            tokens = trigger.tokens // 2
        return items, tokens


def parse_auto_compact(raw: Any) -> AutoCompactConfig:
    """Validate ``config.auto_compact``; ``InvalidInput`` (422) names each bad field."""
    try:
        return AutoCompactConfig.model_validate(raw)
    except ValidationError as exc:
        errors = [
            {
                "loc": ["config", "auto_compact", *err["loc"]],
                "msg": err["msg"],
                "type": err["type"],
            }
            for err in exc.errors(include_url=False)
        ]
        raise InvalidInput("invalid config.auto_compact", errors=errors) from None


def auto_compact_due(config: AutoCompactConfig, *, item_count: int, token_count: int) -> bool:
    """True when working memory has reached a threshold of an enabled trigger."""
    if not config.enabled:
        return False
    trigger = config.trigger
    return (trigger.items is not None and item_count >= trigger.items) or (
        trigger.tokens is not None and token_count >= trigger.tokens
    )
