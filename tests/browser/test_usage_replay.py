"""The usage route's replay (app.services.usage.replay) against a model of working memory: any
sequence of appends, pops, clears, compactions (of any live seqs, contiguous or not) and
restores, logged as the services log them, replays to the live set and token sum the model
holds after each write."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from app.services.usage import replay
from app.store.events import EventRecord

NOW = datetime(2026, 1, 1, tzinfo=UTC)

op = st.one_of(
    st.tuples(st.just("append"), st.lists(st.integers(0, 500), min_size=1, max_size=6)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("clear"), st.none()),
    st.tuples(st.just("compact"), st.lists(st.booleans(), max_size=40)),
    st.tuples(st.just("restore"), st.integers(0, 5)),
    st.tuples(st.just("snapshot"), st.none()),
)


def _ranges(seqs: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s in sorted(seqs):
        if out and out[-1][1] == s - 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=30), st.integers(0, 3))
def test_replay_follows_every_write(ops: list[tuple[str, object]], forked: int) -> None:
    tokens: dict[int, int] = {}
    live: list[int] = []
    last_seq = 0
    events: list[EventRecord] = []
    compactions: dict[str, tuple[list[tuple[int, int]], int, int]] = {}
    want: list[tuple[int, int]] = []

    def log(kind: str, data: dict[str, object]) -> None:
        events.append(EventRecord(len(events) + 1, kind, len(events) + 1, None, None, data, NOW))
        want.append((len(live), sum(tokens[s] for s in live)))

    def add(costs: list[int]) -> tuple[int, int]:
        nonlocal last_seq
        first = last_seq + 1
        for cost in costs:
            last_seq += 1
            tokens[last_seq] = cost
            live.append(last_seq)
        return first, last_seq

    if forked:  # a fork starts with its copied items at seq 1..n
        add([7] * forked)
        log("created", {"forked_from": "origin", "items": forked})
    else:
        log("created", {})
    for kind, arg in ops:
        if kind == "append":
            assert isinstance(arg, list)
            first, last = add(arg)
            log("appended", {"count": len(arg), "first_seq": first, "last_seq": last})
        elif kind == "pop" and live:
            log("popped", {"item_id": "x", "seq": live.pop()})
        elif kind == "clear":
            n = len(live)
            live.clear()
            log("cleared", {"items": n, "summary_cleared": False})
        elif kind == "compact":
            assert isinstance(arg, list)
            gone = [s for s, g in zip(live, arg, strict=False) if g]
            if not gone:
                continue
            cid = f"cmp_{len(events)}"
            compactions[cid] = (_ranges(gone), sum(tokens[s] for s in gone), 3)
            live[:] = [s for s in live if s not in gone]
            log("compacted", {"compaction_id": cid, "policy": "window", "count": len(gone)})
        elif kind == "restore":
            assert isinstance(arg, int)
            live.clear()
            first, last = add([11] * arg)
            log("restored", {"items": arg, "first_seq": first, "last_seq": last})
        elif kind == "snapshot":
            log("snapshot_created", {"snapshot_id": "snp", "items": len(live)})

    points, marks, missing = replay(events, tokens, compactions)
    assert [(p.items, p.tokens) for p in points] == want
    assert [p.version for p in points] == [e.version for e in events]
    assert [m.compaction_id for m in marks] == list(compactions)
    assert missing == set()
    # An item the history no longer holds counts as 0 and is named.
    if live:
        gone = live[0]
        del tokens[gone]
        points, _, missing = replay(events, tokens, compactions)
        assert gone in missing
        assert points[-1].tokens == sum(tokens.get(s, 0) for s in live) < want[-1][1] + 1
