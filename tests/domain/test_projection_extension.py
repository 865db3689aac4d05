"""The cut search tells a candidate's measure from a later one's without building it
(``Builder.extended``, openai-chat): the bounds hold, and the projection is the same as when
every candidate is built.

The search's usual probe is the candidate one unit before the one that fits; in openai-chat
its payload is the later payload with that unit rendered into it, so items and chars add up
exactly and tokens to within ``EXTENSION_SLACK`` (messages that join across the two new
junctions, and the one old junction that goes). Every extension the search uses is checked
here against the real build of the same selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings

from app.domain.formats import FORMAT_NAMES, ingest
from app.domain.projection import Budget, project_context
from app.domain.projection import render as render_module
from app.domain.projection.render import Builder, Extension, Render
from tests.domain.strategies import Session, budgets, sessions, store
from tests.domain.test_projection_properties import PROPS

MANY = settings(PROPS, max_examples=250)


class Checked:
    """Wraps ``Builder.extended``: every extension is compared with the build it stands for."""

    def __init__(self) -> None:
        self.count = 0
        self.original = Builder.extended

    def __call__(self, builder: Builder, base: Render, added: Sequence[int]) -> Extension | None:
        extension = self.original(builder, base, added)
        if extension is None:
            return None
        actual = builder.build(sorted([*base.rendered, *added]))
        assert (extension.items, extension.chars) == (actual.items, actual.chars)
        assert extension.min_tokens <= actual.tokens <= extension.max_tokens, (
            extension,
            actual.tokens,
            actual.payload,
        )
        self.count += 1
        return extension

    def install(self, patch: pytest.MonkeyPatch) -> None:
        def extended(builder: Builder, base: Render, added: Sequence[int]) -> Extension | None:
            return self(builder, base, added)

        patch.setattr(Builder, "extended", extended)


def _project(session: Session, budget: Budget, fmt: str) -> Any:
    return project_context(session.source(), budget, format=fmt)  # type: ignore[arg-type]


@MANY
@given(session=sessions(faithful=True, max_turns=8), budget=budgets())
def test_every_extension_the_search_uses_measures_what_the_build_would(
    session: Session, budget: Budget
) -> None:
    """The drawn budget, and token budgets at every tenth of the whole memory's count (with
    and without ``start_on: user``), so that the search probes cuts all along the memory:
    merges across the new junctions (the count falls short of the sum) and an old junction
    undone (it exceeds the sum) both occur among them."""
    whole = _project(session, Budget(), "openai-chat").report.projected_tokens
    with pytest.MonkeyPatch.context() as patch:
        Checked().install(patch)
        _project(session, budget, "openai-chat")
        for tenth in range(1, 10):
            for start_on in ("any", "user"):
                swept = Budget(max_tokens=max(1, whole * tenth // 10), start_on=start_on)
                _project(session, swept, "openai-chat")


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@MANY
@given(session=sessions(faithful=True), budget=budgets())
def test_the_projection_is_the_one_every_candidate_built_gives(
    fmt: str, session: Session, budget: Budget
) -> None:
    told = _project(session, budget, fmt)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render_module, "extension_slack", lambda _format: None)
        built = _project(session, budget, fmt)
    assert told.payload == built.payload
    assert told.report == built.report


def _turns(count: int) -> Session:
    """A chat agent's turns: a question, a call, its answer, a reply (whole units each)."""
    items: list[dict[str, Any]] = []
    for n in range(count):
        items += [
            {"role": "user", "content": f"step {n}: what does module_{n}.py do?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "read", "arguments": f'{{"path": "m{n}.py"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"def f{n}(): return {n}"},
            {"role": "assistant", "content": f"module_{n}.py defines f{n}, which returns {n}."},
        ]
    return Session(items=store(ingest("openai-chat", items)), summary=None)


def test_the_usual_read_builds_one_candidate_and_tells_its_neighbour() -> None:
    """An agent's read: the estimate lands on the candidate that fits, and the one before it
    (over the budget) is told from it instead of built. (The bounds themselves: above.)"""
    session = _turns(60)
    full = _project(session, Budget(), "openai-chat")
    budget = Budget(max_tokens=full.report.projected_tokens // 3)
    builds: list[int] = []
    told: list[int] = []
    original_build, original_extended = Builder.build, Builder.extended

    def build(self: Builder, selected: Sequence[int], *, summary: bool = True) -> Render:
        if summary:  # (a build of the added units alone has no summary)
            builds.append(len(selected))
        return original_build(self, selected, summary=summary)

    def extended(self: Builder, base: Render, added: Sequence[int]) -> Extension | None:
        told.append(len(added))
        return original_extended(self, base, added)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Builder, "build", build)
        patch.setattr(Builder, "extended", extended)
        result = _project(session, budget, "openai-chat")
    assert len(builds) == 1, builds  # only the payload sent
    assert told, "the candidate before it was not told from it"
    assert result.report.limits_applied == ["max_tokens"]
    assert result.report.projected_tokens <= budget.max_tokens  # type: ignore[operator]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render_module, "extension_slack", lambda _format: None)
        assert _project(session, budget, "openai-chat") == result
