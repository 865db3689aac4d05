"""A server process tunes the garbage collector once it has started; an embedded app does not
touch the interpreter's settings."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from app.gc_tuning import YOUNG_THRESHOLD, tune_for_serving


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_serving_freezes_what_start_up_built_and_collects_young_objects_less_often(
    restored_gc: None,
) -> None:
    _, middle, old = gc.get_threshold()
    tune_for_serving()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)
    assert gc.get_freeze_count() > 10_000  # modules, schemas, the tokenizer


async def test_an_app_built_with_settings_leaves_the_collector_alone(
    restored_gc: None, settings: Any
) -> None:
    from app.main import create_app

    before = gc.get_threshold()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        assert gc.get_threshold() == before


async def test_the_app_an_asgi_server_builds_tunes_it_at_start_up(
    restored_gc: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from app.main import create_app
    from app.settings import get_settings

    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/gc.db")
    monkeypatch.setenv("REDIS_URL", "")
    monkeypatch.setenv("AUTH__MODE", "off")
    get_settings.cache_clear()
    try:
        app = create_app()  # as uvicorn calls the factory
        assert gc.get_threshold()[0] != YOUNG_THRESHOLD
        async with app.router.lifespan_context(app):
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    finally:
        get_settings.cache_clear()
