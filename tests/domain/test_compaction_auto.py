"""``config.auto_compact``: validation (field-level errors) and the trigger comparison."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.compaction.auto import AutoCompactConfig, auto_compact_due, parse_auto_compact
from app.domain.errors import InvalidInput
from app.domain.sessions import check_config


def test_a_minimal_config_gets_defaults() -> None:
    config = parse_auto_compact({"policy": "llm", "trigger": {"tokens": 1000}})
    assert config.enabled and config.pinned_prefix_items == 0 and config.keep_last_items is None
    assert config.trigger.items is None and config.trigger.tokens == 1000


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        ({"trigger": {"items": 3}}, ["config", "auto_compact", "policy"]),
        ({"policy": "window"}, ["config", "auto_compact", "trigger"]),
        ({"policy": "window", "trigger": {}}, ["config", "auto_compact", "trigger"]),
        (
            {"policy": "window", "trigger": {"items": -1}},
            ["config", "auto_compact", "trigger", "items"],
        ),
        (
            {"policy": "window", "trigger": {"turns": 3}},
            ["config", "auto_compact", "trigger", "turns"],
        ),
        (
            {"policy": "window", "trigger": {"items": None, "tokens": 9}},
            ["config", "auto_compact", "trigger", "items"],
        ),
        (
            {"policy": "window", "trigger": {"items": 3}, "keep_last_items": 1_000_001},
            ["config", "auto_compact", "keep_last_items"],
        ),
        (
            {"policy": "window", "trigger": {"items": 3}, "model": ""},
            ["config", "auto_compact", "model"],
        ),
        ("structured", ["config", "auto_compact"]),
    ],
)
def test_bad_configs_name_the_field(raw: Any, loc: list[str]) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_auto_compact(raw)
    assert caught.value.errors and caught.value.errors[0]["loc"] == loc


@pytest.mark.parametrize(
    ("raw", "effective"),
    [
        ({"trigger": {"items": 10}, "keep_last_items": 10}, (5, None)),
        ({"trigger": {"items": 10}, "keep_last_items": 50, "keep_last_tokens": 99}, (5, 99)),
        ({"trigger": {"tokens": 9}, "keep_last_tokens": 10}, (None, 4)),
        (
            {"trigger": {"items": 10, "tokens": 100}, "keep_last_items": 9, "keep_last_tokens": 99},
            (9, 99),
        ),
        ({"trigger": {"items": 1}, "keep_last_items": 1}, (0, None)),
    ],
)
def test_a_keep_minimum_at_or_above_the_trigger_is_halved_not_refused(
    raw: dict[str, Any], effective: tuple[int | None, int | None]
) -> None:
    # JSON Schema cannot compare two fields, so the OpenAPI document accepts these; the stored
    # config stays as sent and each compaction keeps half the trigger, so it always makes room.
    config = parse_auto_compact({"policy": "window", **raw})
    assert config.keep_last_items == raw.get("keep_last_items")
    assert config.effective_keep() == effective


def test_check_config_validates_auto_compact() -> None:
    with pytest.raises(InvalidInput):
        check_config({"auto_compact": {"policy": "window", "trigger": {}}})
    good = {"auto_compact": {"policy": "window", "trigger": {"items": 5}}}
    assert check_config(good) == good
    assert check_config({"auto_compact": None}) == {"auto_compact": None}


@pytest.mark.parametrize(
    ("trigger", "items", "tokens", "due"),
    [
        ({"items": 10}, 9, 10**9, False),
        ({"items": 10}, 10, 0, True),
        ({"tokens": 500}, 10**6, 499, False),
        ({"tokens": 500}, 0, 500, True),
        ({"items": 10, "tokens": 500}, 10, 0, True),
        ({"items": 10, "tokens": 500}, 0, 501, True),
        ({"items": 10, "tokens": 500}, 9, 499, False),
    ],
)
def test_trigger_fires_on_either_threshold(
    trigger: dict[str, int], items: int, tokens: int, due: bool
) -> None:
    config = AutoCompactConfig.model_validate({"policy": "structured", "trigger": trigger})
    assert auto_compact_due(config, item_count=items, token_count=tokens) is due
    disabled = config.model_copy(update={"enabled": False})
    assert auto_compact_due(disabled, item_count=items, token_count=tokens) is False
