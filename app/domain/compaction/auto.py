"""Automatic compaction settings (``config.auto_compact``) and when they fire.

Shape (every key but ``policy`` and ``trigger`` optional)::

    {"policy": "structured",                 # window | structured | llm
     "trigger": {"items": 500},              # and/or {"tokens": 100000}: either reached fires
     "keep_last_items": 50, "keep_last_tokens": 8000, "pinned_prefix_items": 1,
     "instructions": "...", "model": "...",  # llm only
     "enabled": true}

Invariants:
- ``parse_auto_compact`` accepts exactly the documented keys and raises ``InvalidInput`` with
  field-level ``errors`` (``loc`` starting ``["config", "auto_compact", ...]``) otherwise;
- a trigger always names at least one positive threshold;
- a keep minimum is strictly below the trigger on the same measure (a compaction that must keep
  500 items can never bring 500 items below a 500-item trigger, and would re-fire forever);
- ``auto_compact_due`` is a pure comparison of counters, cheap enough to run after every append.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.domain.compaction.result import CompactPolicy
from app.domain.errors import InvalidInput

__all__ = ["AutoCompactConfig", "AutoCompactTrigger", "auto_compact_due", "parse_auto_compact"]


class AutoCompactTrigger(BaseModel):
    """Compact once working memory holds at least ``items`` items or ``tokens`` tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    items: int | None = Field(None, ge=1, description="item count of working memory")
    tokens: int | None = Field(None, ge=1, description="token count of working memory")

    @model_validator(mode="after")
    def _one_threshold(self) -> Self:
        if self.items is None and self.tokens is None:
            raise ValueError("a trigger needs `items` or `tokens` (or both)")
        return self


class AutoCompactConfig(BaseModel):
    """``config.auto_compact``: which policy runs in the background, and when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    policy: CompactPolicy
    trigger: AutoCompactTrigger
    keep_last_items: int | None = Field(None, ge=0)
    keep_last_tokens: int | None = Field(None, ge=0)
    pinned_prefix_items: int = Field(0, ge=0)
    instructions: str | None = Field(None, max_length=4000)
    model: str | None = Field(None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _keep_below_trigger(self) -> Self:
        trigger = self.trigger
        if (
            trigger.items is not None
            and self.keep_last_items is not None
            and self.keep_last_items >= trigger.items
        ):
            raise ValueError("keep_last_items must be below trigger.items, or it would re-fire")
        if (
            trigger.tokens is not None
            and self.keep_last_tokens is not None
            and self.keep_last_tokens >= trigger.tokens
        ):
            raise ValueError("keep_last_tokens must be below trigger.tokens, or it would re-fire")
        return self


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
