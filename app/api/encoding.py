"""Fast JSON encoding of responses (orjson), shared by routes and the idempotency store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app import jsonutil
from app.domain.formats import FormatName, left_out, render_listing
from app.domain.items import StoredItem
from app.domain.sessions import SessionState
from app.services.runtime import Encoded


def dumps(value: Any) -> str:
    return jsonutil.dumps(value)


def session_dict(state: SessionState) -> dict[str, Any]:
    return {
        "id": state.id,
        "version": state.version,
        "summary": state.summary,
        "metadata": state.metadata,
        "config": state.config,
        "item_count": state.item_count,
        "token_count": state.token_count,
        "char_count": state.char_count,
        "last_seq": state.last_seq,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "expires_at": state.expires_at,
    }


def encode_session(status: int) -> Any:
    def encode(state: SessionState) -> Encoded:
        return Encoded(status, dumps(session_dict(state)), version=state.version)

    return encode


def items_dicts(items: list[StoredItem]) -> list[dict[str, Any]]:
    return [item.to_wire() for item in items]


def rendered_page(format: FormatName, items: Sequence[StoredItem]) -> dict[str, Any]:
    """``items`` (a page of working memory) in a provider format, with notes on what it left
    out: ``{"items": [...], "notes": [...]}`` (and ``system`` in anthropic, when any)."""
    payload = render_listing(format, items)
    out: dict[str, Any] = {"items": payload.get("input", payload.get("messages"))}
    if "system" in payload:
        out["system"] = payload["system"]
    out["notes"] = left_out(format, items)
    return out
