"""Retention rules (app.domain.retention): what applies to a session and what goes first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.errors import InvalidInput
from app.domain.retention import (
    RetentionDefaults,
    SnapshotInfo,
    effective_ttl,
    parse_retention,
    policy_for,
    seq_range,
    snapshots_to_erase,
    subject_digest,
)
from app.domain.sessions import check_config

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def snap(id: str, minutes: int, label: str | None = None) -> SnapshotInfo:
    return SnapshotInfo(id, label, T0 + timedelta(minutes=minutes))


@pytest.mark.parametrize(
    ("snapshots", "keep", "erased"),
    [
        ([], 0, []),
        ([snap("a", 1), snap("b", 2)], None, []),
        ([snap("a", 1), snap("b", 2)], 2, []),
        ([snap("a", 1), snap("b", 2), snap("c", 3)], 1, ["a", "b"]),
        # automatic ones go first, even when newer than the caller's own
        ([snap("a", 1), snap("u", 5, "pre-restore"), snap("b", 2)], 2, ["u"]),
        (
            [snap("u1", 1, "pre-restore"), snap("a", 2), snap("u2", 3, "pre-restore")],
            1,
            ["u1", "u2"],
        ),
        ([snap("u1", 1, "pre-restore"), snap("a", 2), snap("b", 3)], 0, ["u1", "a", "b"]),
    ],
)
def test_snapshots_to_erase(
    snapshots: list[SnapshotInfo], keep: int | None, erased: list[str]
) -> None:
    assert snapshots_to_erase(snapshots, keep) == erased


def test_config_wins_over_defaults_key_by_key() -> None:
    defaults = RetentionDefaults(
        session_ttl_seconds=60, history_seconds=3600, keep_snapshots=5, events_seconds=7200
    )
    config = {"ttl_seconds": 10, "retention": {"keep_snapshots": 1}}
    assert effective_ttl(config, defaults) == 10
    assert effective_ttl({}, defaults) == 60
    assert effective_ttl({"ttl_seconds": None}, defaults) == 60
    assert effective_ttl({}, RetentionDefaults()) is None
    policy = policy_for(config, defaults)
    assert (policy.history_seconds, policy.keep_snapshots, policy.events_seconds) == (3600, 1, 7200)
    assert not policy_for({}, RetentionDefaults()).prunes
    assert policy.history_cutoff(T0) == T0 - timedelta(hours=1)


@pytest.mark.parametrize(
    "config",
    [
        {"ttl_seconds": 0},
        {"ttl_seconds": True},
        {"ttl_seconds": "5"},
        {"retention": {"history_seconds": -1}},
        {"retention": {"keep": 1}},
        {"retention": []},
    ],
)
def test_invalid_configs_are_refused_with_their_location(config: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_config(config)
    assert caught.value.errors and caught.value.errors[0]["loc"][:2] == [
        "config",
        next(iter(config)),
    ]


def test_valid_retention_round_trips() -> None:
    config = {"ttl_seconds": 86400, "retention": {"history_seconds": 60, "keep_snapshots": 0}}
    assert check_config(config) == config
    assert parse_retention(None).history_seconds is None


def test_digest_separates_tenant_and_id() -> None:
    assert subject_digest("a", "b:c") != subject_digest("a:b", "c")
    assert len(subject_digest("t", "s")) == 64
    assert seq_range([]) is None
    assert seq_range([5, 2, 9]).as_dict() == {"count": 3, "first_seq": 2, "last_seq": 9}  # type: ignore[union-attr]
