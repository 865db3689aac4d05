"""Sessions: the state a session row holds, and the rules for its config and metadata."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import JsonValue

from app.domain.compaction.auto import parse_auto_compact
from app.domain.errors import InvalidInput
from app.domain.ids import SESSION_ID_RULE, is_valid_session_id
from app.domain.retention import check_ttl, parse_retention

CONFIG_KEYS = ("context", "auto_compact", "ttl_seconds", "retention")


@dataclass(frozen=True, slots=True)
class SessionState:
    tenant_id: str
    id: str
    version: int
    summary: str | None
    metadata: dict[str, JsonValue]
    config: dict[str, JsonValue]
    item_count: int
    token_count: int
    char_count: int
    last_seq: int
    event_seq: int
    epoch: int
    last_compaction: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    # retention (app.domain.retention): the TTL in force at the last write, and when the
    # session expires unless written to again (None: never)
    ttl_seconds: int | None = None
    expires_at: datetime | None = None


def check_session_id(value: str) -> str:
    """``value`` if it is a valid session id (``app.domain.ids``), else ``InvalidInput``."""
    if not is_valid_session_id(value):
        raise InvalidInput(
            f"invalid session id: {SESSION_ID_RULE}",
            errors=[{"loc": ["id"], "msg": SESSION_ID_RULE}],
        )
    return value


def check_config(config: dict[str, Any]) -> dict[str, Any]:
    """Unknown top-level keys are typos, not data: refuse them so a budget is never ignored."""
    unknown = sorted(set(config) - set(CONFIG_KEYS))
    if unknown:
        raise InvalidInput(
            "unknown config keys",
            errors=[
                {"loc": ["config", key], "msg": f"unknown key; allowed: {', '.join(CONFIG_KEYS)}"}
                for key in unknown
            ],
        )
    for key in ("context", "auto_compact", "retention"):
        if key in config and config[key] is not None and not isinstance(config[key], dict):
            raise InvalidInput(
                "invalid config", errors=[{"loc": ["config", key], "msg": "must be an object"}]
            )
    if config.get("auto_compact") is not None:
        parse_auto_compact(config["auto_compact"])
    if config.get("ttl_seconds") is not None:
        # a whole float (583.0) is the integer JSON Schema says it is: kept as one
        config = {**config, "ttl_seconds": check_ttl(config["ttl_seconds"])}
    if config.get("retention") is not None:
        retention = parse_retention(config["retention"])
        config = {**config, "retention": retention.model_dump(exclude_unset=True)}
    return config
