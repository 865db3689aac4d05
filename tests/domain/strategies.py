"""Hypothesis strategies: random working memories shaped like real agent sessions.

Every text of item ``seq`` carries the marker ``<<seq>>`` (and call arguments carry it as
``{"m": "<<seq>>"}``), so tests can read the order and identity of what a payload carries in any
format by scanning markers. Sessions hold system/developer messages, user messages with URL and
data-URL images, assistant text, parallel tool calls with outputs in any order, OpenAI and
Anthropic reasoning, pinned items, calls still waiting for output, and (after a simulated
compaction cut) orphan outputs and stray reasoning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from hypothesis import strategies as st

from app.domain.items import (
    CanonicalItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ImagePart,
    MessageItem,
    NewItem,
    ReasoningItem,
    StoredItem,
    TextPart,
    item_chars,
)
from app.domain.projection import Budget, ContextSource
from app.domain.tokens import item_tokens

Profile = Literal["any", "canonical", "openai-chat", "openai-responses", "anthropic"]
MARKER_RE = re.compile(r"<<(\d+)>>")
CREATED = datetime(2025, 1, 1, tzinfo=UTC)

_words = st.text(alphabet="abc xyz.\né世🙂", max_size=12)
_IMAGE_URLS = ["https://example.com/cat.png", "data:image/png;base64,iVBORw0KGgo="]


@dataclass(frozen=True)
class Session:
    items: list[StoredItem]
    summary: str | None

    def source(self) -> ContextSource:
        return ContextSource(
            summary=self.summary,
            items=self.items,
            total_items=len(self.items),
            total_tokens=sum(i.tokens for i in self.items),
            total_chars=sum(i.chars for i in self.items),
        )


def store(news: list[NewItem], seqs: list[int] | None = None) -> list[StoredItem]:
    """StoredItems as the store would write them (seq defaults to 1, 2, ...)."""
    seqs = seqs or list(range(1, len(news) + 1))
    return [
        StoredItem(
            body=n.body,
            id=n.id or f"itm_{seq}",
            seq=seq,
            tokens=item_tokens(n.body),
            chars=item_chars(n.body),
            pinned=n.pinned,
            metadata=n.metadata,
            created_at=CREATED,
        )
        for n, seq in zip(news, seqs, strict=True)
    ]


@st.composite
def sessions(draw: st.DrawFn, profile: Profile = "any", max_turns: int = 4) -> Session:
    bodies: list[CanonicalItem] = []
    wild = profile == "any"

    def mark() -> str:
        return f"<<{len(bodies) + 1}>>"

    def text() -> str:
        return mark() + draw(_words)

    def content(role: str) -> str | list[TextPart | ImagePart]:
        images_ok = role == "user" or profile in ("any", "canonical")
        as_list = draw(st.booleans())
        if profile == "openai-responses" and role == "assistant":
            as_list = False
        if not as_list:
            return text()
        parts: list[TextPart | ImagePart] = [TextPart(text=text())]
        for _ in range(draw(st.integers(0, 2))):
            if images_ok and draw(st.booleans()):
                detail = draw(st.sampled_from([None, "low", "high", "auto"]))
                if profile == "openai-responses" and detail is None:
                    detail = "auto"
                parts.append(ImagePart(url=draw(st.sampled_from(_IMAGE_URLS)), detail=detail))
            else:
                parts.append(TextPart(text=text()))
        return parts

    def reasoning() -> None:
        styles = {
            "any": ["openai", "anthropic", "redacted"],
            "canonical": ["openai", "anthropic", "redacted"],
            "openai-responses": ["openai"],
            "anthropic": ["anthropic", "redacted"],
            "openai-chat": [],
        }[profile]
        if not styles or not draw(st.integers(0, 9)) < 4:
            return
        style = draw(st.sampled_from(styles))
        if style == "openai":
            bodies.append(
                ReasoningItem(
                    summary=[text() for _ in range(draw(st.integers(0, 2)))],
                    content=draw(st.one_of(st.none(), st.just(text()))),
                    encrypted_content=draw(st.one_of(st.none(), st.just("gAAAA" + mark()))),
                )
            )
        elif style == "anthropic":
            bodies.append(ReasoningItem(content=text(), signature="sig" + mark()))
        else:
            bodies.append(ReasoningItem(encrypted_content="redacted" + mark(), redacted=True))

    if draw(st.booleans()):
        bodies.append(MessageItem(role="system", content=content("system")))
    turns = draw(st.integers(1, max_turns))
    for turn in range(turns):
        if (
            profile in ("any", "canonical", "openai-chat", "openai-responses")
            and turn
            and (draw(st.integers(0, 9)) == 0)
        ):
            role = draw(st.sampled_from(["system", "developer"]))
            bodies.append(MessageItem(role=role, content=content(role)))
        bodies.append(MessageItem(role="user", content=content("user")))
        steps = draw(st.integers(0, 3))
        for step in range(steps):
            reasoning()
            has_text = draw(st.booleans())
            n_calls = draw(st.integers(0, 3))
            if not has_text and not n_calls:
                if bodies and isinstance(bodies[-1], ReasoningItem):
                    has_text = True
                else:
                    continue
            if has_text:
                bodies.append(MessageItem(role="assistant", content=content("assistant")))
            calls: list[FunctionCallItem] = []
            for _ in range(n_calls):
                m = mark()
                call = FunctionCallItem(
                    call_id=f"call_{len(bodies) + 1}",
                    name=draw(st.sampled_from(["read_file", "run", "grep"])),
                    arguments=json.dumps({"m": m, "x": draw(_words)}, ensure_ascii=False),
                )
                calls.append(call)
                bodies.append(call)
            last_step = turn == turns - 1 and step == steps - 1
            answered = [c for c in calls if not (last_step and draw(st.integers(0, 3)) == 0)]
            order = draw(st.permutations(answered)) if wild else answered
            for call in order:
                bodies.append(
                    FunctionCallOutputItem(
                        call_id=call.call_id,
                        output=text() * draw(st.integers(1, 3)),
                        is_error=draw(st.sampled_from([None, True, False]))
                        if profile in ("any", "anthropic", "canonical")
                        else None,
                    )
                )
        if draw(st.booleans()) and not (bodies and isinstance(bodies[-1], MessageItem)):
            bodies.append(MessageItem(role="assistant", content=content("assistant")))
    pinned = [wild and draw(st.integers(0, 9)) == 0 for _ in bodies]
    news = [NewItem(body=b, pinned=p) for b, p in zip(bodies, pinned, strict=True)]
    seqs = list(range(1, len(news) + 1))
    if wild and draw(st.integers(0, 3)) == 0:
        cut = draw(st.integers(0, len(news) - 1))
        news, seqs = news[cut:], seqs[cut:]
    summary = "Summary: " + draw(_words) if wild and draw(st.booleans()) else None
    return Session(items=store(news, seqs), summary=summary)


@st.composite
def budgets(draw: st.DrawFn) -> Budget:
    def limit(lo: int, hi: int) -> int | None:
        return draw(st.one_of(st.none(), st.integers(lo, hi)))

    return Budget(
        max_items=limit(1, 30),
        max_chars=limit(1, 600),
        max_tokens=limit(1, 400),
        tokenizer=draw(st.sampled_from(["o200k_base", "cl100k_base", "approx"])),
        pinned_prefix_items=draw(st.integers(0, 3)),
        keep_system=draw(st.booleans()),
        max_recent_tool_results=draw(st.one_of(st.none(), st.integers(0, 4))),
        trim_old_reasoning=draw(st.booleans()),
        start_on=draw(st.sampled_from(["any", "user"])),
        dangling_tool_calls=draw(st.sampled_from(["drop", "placeholder"])),
    )


FORMATS = ["canonical", "openai-chat", "openai-responses", "anthropic"]
