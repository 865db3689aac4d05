"""Every in-process cache has a bound from the settings (docs/operations.md, Memory): decoded
items and projected prompts by count and total chars, token counts by entries and total chars,
key lookups by count. Filled far past its bound, none holds more."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.domain.formats import _common
from app.domain.formats._common import _SharedCounts, bound_token_counts
from app.domain.items import StoredItem, parse_canonical_items
from app.domain.tokens import count_text
from app.main import create_app
from app.services.keys import KeyResolver
from app.settings import Settings
from app.store.db import Store
from app.store.item_cache import ItemCache
from app.store.prompt_cache import PromptCache
from app.store.window_sizes import WindowSize, WindowSizes


def test_token_counts_keep_at_most_their_entries_and_chars() -> None:
    counts = _SharedCounts(max_entries=100, max_chars=5_000)
    texts = [f"{n} " + "word " * (n % 40) for n in range(2_000)]
    for text in texts:
        assert counts.count("o200k_base", text) == count_text(text, "o200k_base")
        kept = counts.table("o200k_base")
        assert len(kept) <= 100
        assert sum(map(len, kept)) <= 5_000
    assert counts.count("o200k_base", texts[-1]) == count_text(texts[-1], "o200k_base")
    off = _SharedCounts(max_entries=0, max_chars=5_000)
    assert off.count("o200k_base", "hello") == count_text("hello", "o200k_base")
    assert len(off.table("o200k_base")) == 0


def test_the_process_wide_token_counts_take_their_bounds() -> None:
    before = (_common._SHARED.max_entries, _common._SHARED.max_chars)
    try:
        bound_token_counts(max_entries=10, max_chars=200)
        for n in range(100):
            _common._SHARED.count("cl100k_base", f"text number {n}")
        assert len(_common._SHARED.table("cl100k_base")) <= 10
    finally:
        bound_token_counts(max_entries=before[0], max_chars=before[1])


def _item(seq: int, text: str) -> StoredItem:
    body = parse_canonical_items([{"type": "message", "role": "user", "content": text}])[0].body
    return StoredItem(
        body=body,
        id=f"i{seq}",
        seq=seq,
        tokens=1,
        chars=len(text),
        pinned=False,
        metadata={},
        created_at=datetime.now(UTC),
    )


def test_item_and_prompt_caches_keep_at_most_their_chars() -> None:
    items = ItemCache(max_items=1_000, max_total_chars=10_000)
    created = datetime.now(UTC)
    for seq in range(500):
        items.put(("t", "s", created, seq), _item(seq, "x" * 100))
        assert items.chars <= 10_000
    assert len(items) == 100
    prompts = PromptCache(max_entries=1_000, max_total_chars=10_000)
    for n in range(500):
        prompts.put(n, object(), chars=300)
        assert prompts.chars <= 10_000
    assert len(prompts) == 10_000 // 300
    sizes = WindowSizes(max_entries=50)
    for n in range(500):
        sizes.put(n, WindowSize(n, 2 * n, include_system=True, prefix_items=0))
        assert len(sizes) <= 50
    assert sizes.get(499) == WindowSize(499, 998, True, 0) and sizes.get(0) is None


async def test_the_store_and_the_key_resolver_take_the_settings(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'bounds.db'}",
        context_cache_items=123,
        context_cache_prompts=45,
        context_cache_item_chars=6_789,
        context_cache_prompt_chars=1_234,
        context_window_sizes=89,
        auth={"cache_max_keys": 7},  # type: ignore[arg-type]
    )
    store = Store.from_url(
        settings.database_url,
        item_cache_items=settings.context_cache_items,
        prompt_cache_entries=settings.context_cache_prompts,
        item_cache_chars=settings.context_cache_item_chars,
        prompt_cache_chars=settings.context_cache_prompt_chars,
        window_sizes=settings.context_window_sizes,
    )
    try:
        assert store.window_sizes is not None and store.window_sizes.max_entries == 89
        assert store.item_cache is not None and store.prompt_cache is not None
        assert (store.item_cache.max_items, store.item_cache.max_total_chars) == (123, 6_789)
        assert (store.prompt_cache.max_entries, store.prompt_cache.max_total_chars) == (45, 1_234)
        assert KeyResolver(store, settings.auth).max_keys == 7
    finally:
        await store.dispose()
    off = Store.from_url(settings.database_url, item_cache_items=10, item_cache_chars=0)
    try:
        assert off.item_cache is None and off.window_sizes is None
    finally:
        await off.dispose()


@pytest.mark.parametrize("name", ["context_cache_item_chars", "token_cache_chars"])
def test_a_negative_bound_is_refused(name: str) -> None:
    with pytest.raises(ValueError):
        Settings(**{name: -1})  # type: ignore[arg-type]


async def test_the_app_bounds_the_token_counts_at_start(tmp_path: Path) -> None:
    before = (_common._SHARED.max_entries, _common._SHARED.max_chars)
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}",
        token_cache_entries=321,
        token_cache_chars=4_321,
        auth={"mode": "off"},  # type: ignore[arg-type]
        embeddings={"provider": "none"},  # type: ignore[arg-type]
    )
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            assert (_common._SHARED.max_entries, _common._SHARED.max_chars) == (321, 4_321)
    finally:
        bound_token_counts(max_entries=before[0], max_chars=before[1])
