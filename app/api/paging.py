"""Paging by seq (``/items``, ``/history``, ``/events``): every list takes ``cursor``, the
``next_cursor`` of the page before, as ``/v1/sessions`` and the searches do; ``after_seq`` is
kept as an alias (the same position: entries with a greater seq); ``cursor`` wins when both
are sent."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query

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
            description="Alias of `cursor` (entries with seq > after_seq), read when no `cursor` is sent",
        ),
    ] = None,
) -> int | None:
    """The seq a page starts after: ``cursor``, or its alias ``after_seq`` when no cursor is
    sent (a client that pages by ``next_cursor`` may keep a fixed ``after_seq`` from an older
    habit in its query: the cursor it follows decides)."""
    return cursor if cursor is not None else after_seq


SeqPosition = Annotated[int | None, Depends(seq_position)]
