"""Paging by seq (``/items``, ``/history``, ``/events``): every list takes ``cursor``, the
``next_cursor`` of the page before, as ``/v1/sessions`` and the searches do; ``after_seq`` is
kept as an alias (the same position: entries with a greater seq)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

from app.domain.errors import InvalidInput
from app.domain.items import MAX_SAFE_INTEGER


def seq_position(
    cursor: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_SAFE_INTEGER,
            description="`next_cursor` of the previous page: entries with a greater seq",
        ),
    ] = None,
    after_seq: Annotated[
        int | None,
        Query(
            ge=0,
            le=MAX_SAFE_INTEGER,
            description="Alias of `cursor` (entries with seq > after_seq)",
        ),
    ] = None,
) -> int | None:
    """The seq a page starts after, from ``cursor`` or its alias ``after_seq``."""
    if cursor is not None and after_seq is not None and cursor != after_seq:
        raise InvalidInput(
            "cursor and after_seq name the same position; send one of them",
            errors=[
                {
                    "loc": ["query", "after_seq"],
                    "msg": f"differs from cursor ({cursor} != {after_seq})",
                    "type": "conflicting_alias",
                }
            ],
        )
    return cursor if cursor is not None else after_seq


SeqPosition = Annotated[int | None, Depends(seq_position)]
