"""The ``canonical`` format: stored items as clients see them (``{"items": [...]}``).

Ingest: the canonical item shapes (DESIGN §1), strictly (unknown fields of a message, call,
output or reasoning are an error); an item of any other type is an opaque item, stored as
sent. ``id`` names the service's item id.

Render: each entry from working memory is its stored-item wire dict (canonical fields plus
``id``, ``seq``, ``tokens``, ``chars``, ``pinned``, ``metadata``, ``created_at``, ``format``);
when the projection changed the body (a cleared tool result, trimmed reasoning)
``tokens``/``chars`` are those of the changed body (o200k, like every stored count). The
summary and synthetic items (placeholder outputs) are bare canonical bodies without an
envelope. Items ingested in a provider format show their canonical view here; the provider's
own form comes back in that format.

Token rule: per item ``3`` + tokens of every text a model reads from it (``items.item_texts``:
message texts, call name and arguments, output, reasoning summary and content, the texts of
opaque items and other parts) + a fixed charge per image (``tokens.IMAGE_TOKENS``; in data
kept verbatim, per ``image_url`` value: ``items.opaque_images``). The
summary is a system message item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.domain.items import (
    MessageItem,
    NewItem,
    body_from_dict,
    body_to_dict,
    item_chars,
    item_images,
    item_opaque_images,
    item_texts,
    parse_canonical_items,
)
from app.domain.tokens import item_tokens

from ._common import PER_MESSAGE_TOKENS, Entry, Usage

_WIRE_ONLY = {"id", "seq", "tokens", "chars", "pinned", "metadata", "created_at", "format"}


def ingest(items: list[Any]) -> list[NewItem]:
    return parse_canonical_items(items)


def render(summary: str | None, entries: Sequence[Entry]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    if summary is not None:
        out.append(body_to_dict(MessageItem(role="system", content=summary)))
    for entry in entries:
        if entry.stored is None:
            out.append(body_to_dict(entry.body))
            continue
        wire = entry.stored.to_wire()
        if entry.body is not entry.stored.body:
            wire = body_to_dict(entry.body)
            wire.update(
                id=entry.stored.id,
                seq=entry.stored.seq,
                tokens=item_tokens(entry.body),
                chars=item_chars(entry.body),
                pinned=entry.stored.pinned,
                metadata=entry.stored.metadata,
                created_at=entry.stored.created_at,
                format=entry.stored.format,
            )
        out.append(wire)
    return {"items": out}


def representable(body: object, origin: str) -> bool:
    del body, origin
    return True


def count(payload: dict[str, Any], usage: Usage) -> None:
    for wire in payload["items"]:
        body = body_from_dict({k: v for k, v in wire.items() if k not in _WIRE_ONLY})
        usage.overhead(PER_MESSAGE_TOKENS)
        for text in item_texts(body):
            usage.text(text)
        for image in item_images(body):
            usage.image(image.detail)
        for _ in range(item_opaque_images(body)):
            usage.image(None)
