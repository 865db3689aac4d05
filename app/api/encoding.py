"""Fast JSON encoding of responses (orjson), shared by routes and the idempotency store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app import jsonutil
from app.domain.formats import FormatName, left_out, render_listing
from app.domain.items import StoredItem
from app.domain.sessions import SessionState
from app.services.context import ContextResult
from app.services.items import AppendResult
from app.services.runtime import Encoded
from app.store.search import SearchHit


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
    """``items`` (a page of working memory) in a format (canonical included), with notes on
    what it left out: ``{"items": [...], "notes": [...]}`` (and ``system`` in anthropic, when any)."""
    payload = render_listing(format, items)
    # Each format names its list after its own API: canonical ``items``, Responses ``input``,
    # Chat and Anthropic ``messages``.
    listed = next(
        payload[key] for key in ("items", "input", "messages", "contents") if key in payload
    )
    out: dict[str, Any] = {"items": listed}
    for key in ("system", "system_instruction"):  # anthropic's, gemini's
        if key in payload:
            out[key] = payload[key]
    out["notes"] = left_out(format, items)
    return out


# -- bodies shared by the REST routes and the MCP tools (app.mcp.tools) -------------------------


def append_body(result: AppendResult) -> dict[str, Any]:
    """``POST /v1/sessions/{id}/items``: the stored items and the new version."""
    return {"items": items_dicts(result.items), "version": result.version}


def encode_append(result: AppendResult) -> Encoded:
    return Encoded(201, dumps(append_body(result)), version=result.version)


def context_body(result: ContextResult) -> dict[str, Any]:
    """``GET``/``POST /v1/sessions/{id}/context``: the payload fields of its format, and the
    report."""
    body: dict[str, Any] = {"format": result.format, "version": result.version}
    body.update(result.projected.payload)
    body["report"] = result.projected.report.model_dump(mode="json")
    return body


def search_body(
    hits: Sequence[SearchHit],
    next_cursor: str | None,
    *,
    scores: Sequence[tuple[float | None, float | None]] | None = None,
    mode: str = "fulltext",
) -> dict[str, Any]:
    """``GET /v1/search`` and ``GET /v1/sessions/{id}/search``: one page of hits, each with
    what each ranker scored it (``scores``: full text, semantic; default: full text only)."""
    pairs = scores if scores is not None else [(h.score, None) for h in hits]
    items = [
        {
            "session_id": h.session_id,
            "seq": h.item.seq,
            "item": h.item.to_wire(),
            "score": h.score,
            "snippet": h.snippet,
            "archived": h.archived,
            "archived_reason": h.archived_reason,
            "scores": {"fulltext": ft, "semantic": sem},
        }
        for h, (ft, sem) in zip(hits, pairs, strict=True)
    ]
    return {"items": items, "next_cursor": next_cursor, "mode": mode}
