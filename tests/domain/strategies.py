"""Hypothesis strategies: random working memories shaped like real agent sessions.

Every text of item ``seq`` carries the marker ``<<seq>>`` (and call arguments carry it as
``{"m": "<<seq>>"}``), so tests can read the order and identity of what a payload carries in any
format by scanning markers. Sessions hold system/developer messages, user messages with URL and
data-URL images, assistant text, parallel tool calls with outputs in any order, OpenAI and
Anthropic reasoning, pinned items, calls still waiting for output, and (after a simulated
compaction cut) orphan outputs and stray reasoning.

``sessions(faithful=True)`` (see ``faithful_sessions``) draws what real agents store since
faithful items (issue 13): items ingested in every provider format through
``app.domain.formats.ingest`` (so they carry their ``record`` and ``format``), opaque call/output
pairs of every family, hosted items, other content parts, tool outputs holding images.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from hypothesis import strategies as st

from app.domain.formats import ingest
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
    record_of,
)
from app.domain.projection import Budget, ContextSource
from app.domain.tokens import item_tokens

Profile = Literal["any", "canonical", "openai-chat", "openai-responses", "anthropic", "gemini"]
MARKER_RE = re.compile(r"<<(\d+)>>")
CREATED = datetime(2025, 1, 1, tzinfo=UTC)

_words = st.text(alphabet="abc xyz.\né世🙂", max_size=12)
_IMAGE_URLS = ["https://example.com/cat.png", "data:image/png;base64,iVBORw0KGgo="]


@dataclass(frozen=True)
class Session:
    items: list[StoredItem]
    summary: str | None
    # For a well-formed session written wholly in one provider format: the payload it was
    # written as (``{"input": [...]}``, ``{"messages": [...]}``, ``{"system": ..., "messages":
    # [...]}``), which a projection in that format with no budget must give back byte for byte.
    native: dict[str, Any] | None = None
    native_format: str | None = None

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
            format=n.format,
            record=n.record,
        )
        for n, seq in zip(news, seqs, strict=True)
    ]


@st.composite
def sessions(
    draw: st.DrawFn, profile: Profile = "any", max_turns: int = 4, *, faithful: bool = False
) -> Session:
    """Canonical sessions shaped so that ``profile`` can carry every item natively (the
    ``test_formats`` round trips rely on that); with ``faithful``, ``faithful_sessions``."""
    if faithful:
        return draw(faithful_sessions(profile, max_turns))
    bodies: list[CanonicalItem] = []
    ids: dict[int, str] = {}  # index in bodies -> the item id named at append
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
            # OpenAI reasoning under the id OpenAI issued (``rs_...``, which openai-responses
            # needs to send it), or, outside that profile, now and then under our own id
            # (chosen without a draw, so that the sessions drawn stay those drawn before)
            if profile == "openai-responses" or len(bodies) % 2:
                ids[len(bodies)] = f"rs_{len(bodies) + 1}"
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
    news = [
        NewItem(body=b, pinned=p, id=ids.get(k))
        for k, (b, p) in enumerate(zip(bodies, pinned, strict=True))
    ]
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

    def tokens() -> int | None:
        # images cost 765 tokens (85 at low detail): some budgets must fit a few
        return draw(st.one_of(st.none(), st.integers(1, 400), st.integers(400, 4000)))

    return Budget(
        max_items=limit(1, 30),
        max_chars=limit(1, 600),
        max_tokens=tokens(),
        tokenizer=draw(st.sampled_from(["o200k_base", "cl100k_base", "approx"])),
        pinned_prefix_items=draw(st.integers(0, 3)),
        keep_system=draw(st.booleans()),
        max_recent_tool_results=draw(st.one_of(st.none(), st.integers(0, 4))),
        trim_old_reasoning=draw(st.booleans()),
        start_on=draw(st.sampled_from(["any", "user"])),
        dangling_tool_calls=draw(st.sampled_from(["drop", "placeholder"])),
    )


FORMATS = ["canonical", "openai-chat", "openai-responses", "anthropic", "gemini"]


# == Faithful sessions =========================================================================
#
# What real agents store since faithful items (issue 13), ingested through
# ``app.domain.formats.ingest`` in the format each turn was written in, so every item carries
# the ``record`` and ``format`` the store keeps. Every item still carries its ``<<seq>>``
# marker (in a text, or where an item has none in a field a model does not read, such as an
# encrypted payload), and never another item's: pairing keys are ``call_N`` / ``mcpr_N``.

# Opaque call/output families of the Responses API: family -> (call type, output type, key
# field on the call, key field on the output). Derived from the spec (the SDK's pairs), not
# from ``app.domain.items``.
OPAQUE_FAMILIES: dict[str, tuple[str, str, str, str]] = {
    "computer": ("computer_call", "computer_call_output", "call_id", "call_id"),
    "custom": ("custom_tool_call", "custom_tool_call_output", "call_id", "call_id"),
    # the SDK's local_shell_call_output names its call by ``id`` (the call's ``call_id``)
    "local_shell": ("local_shell_call", "local_shell_call_output", "call_id", "id"),
    "shell": ("shell_call", "shell_call_output", "call_id", "call_id"),
    "apply_patch": ("apply_patch_call", "apply_patch_call_output", "call_id", "call_id"),
    "mcp_approval": ("mcp_approval_request", "mcp_approval_response", "id", "approval_request_id"),
    "tool_search": ("tool_search_call", "tool_search_output", "call_id", "call_id"),
    "program": ("program", "program_output", "call_id", "call_id"),
}
# Standalone items the model produces (hosted tools): they may follow reasoning.
HOSTED_TYPES = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
)

# In the canonical format ``id`` names the service's item id, so an opaque item written there
# has no provider ``id``: only the types whose SDK shape needs none, and whose pairing does not
# go through ``id``, are valid canonical opaque items today. Set to True once a canonical opaque
# item keeps (or gets back) its provider id: see
# test_faithful_properties.py::test_canonical_opaque_items_keep_their_provider_id.
CANONICAL_OPAQUE_IDS = True
_CANONICAL_FAMILIES = ("custom", "shell", "apply_patch", "tool_search")
# A Chat Completions ``function_call`` (deprecated) whose answer the projection makes up or
# clears is answered by a ``tool`` message, which does not answer it. Until that is fixed wild
# sessions (whose budgets clear outputs and add placeholders) leave such calls out:
# test_faithful_properties.py::test_chat_function_call_keeps_a_function_answer.
CHAT_FUNCTION_CALL_FIXED = True
# When a call in the middle of a Chat assistant message with content is left out (no output),
# the calls after it are sent in a second assistant message, and the first message's calls are
# not answered right after it. Until that is fixed, the calls of a Chat message left without
# output are its last ones: test_faithful_properties.py::test_chat_message_keeps_its_other_calls.
CHAT_SPLIT_MESSAGE_FIXED = True

_SMALL_PNG_B64 = "iVBORw0KGgo="
_SMALL_PNG_URL = "data:image/png;base64," + _SMALL_PNG_B64
# Gemini turns in wild faithful sessions (``_gemini_step`` and friends).
GEMINI_TURNS = True
_FORMATS_MIXED = ("canonical", "openai-responses", "anthropic", "openai-chat") + (
    ("gemini",) if GEMINI_TURNS else ()
)


class _Writer:
    """Appends provider messages to a session being drawn, one ``ingest`` per message."""

    def __init__(self, draw: st.DrawFn, *, wild: bool, native: str | None) -> None:
        self.draw = draw
        self.wild = wild
        self.news: list[NewItem] = []
        self.native_format = native
        self.native: list[dict[str, Any]] = []
        self.system: Any = None
        # anthropic: blocks waiting to become one message, (is an item of its own, make)
        self.a_role: str | None = None
        self.a_blocks: list[tuple[bool, Any]] = []

    # -- markers and texts -----------------------------------------------------------------

    def mark(self, k: int = 0) -> str:
        return f"<<{len(self.news) + 1 + k}>>"

    def words(self) -> str:
        return self.draw(_words)

    def text(self, k: int = 0) -> str:
        return self.mark(k) + self.words()

    def chance(self, n: int, of: int) -> bool:
        return self.draw(st.integers(0, of - 1)) < n

    # -- appending -------------------------------------------------------------------------

    def envelope(self) -> dict[str, Any]:
        env: dict[str, Any] = {}
        if self.wild and self.chance(1, 10):
            env["pinned"] = True
        if self.wild and self.chance(1, 10):
            env["metadata"] = {"source": "test"}
        return env

    def add(self, fmt: str, raw: dict[str, Any], n: int) -> None:
        """Ingest one provider message (or canonical item) that yields ``n`` items."""
        news = ingest(fmt, [{**raw, **self.envelope()}])  # type: ignore[arg-type]
        assert len(news) == n, (fmt, raw, [x.body for x in news], n)
        for k, x in enumerate(news):  # each item holds its own marker
            assert x.format == fmt
            assert self.mark(k) in json.dumps(record_of(x), ensure_ascii=False), (k, raw)
        self.news += news
        if fmt == self.native_format:
            self.native.append(raw)

    def add_gemini_system(self, system: Any) -> None:
        news = ingest("gemini", [], system_instruction=system)
        assert len(news) == 1 and news[0].record == {"system_instruction": system}
        self.news += news
        self.system = system

    def add_anthropic_system(self, system: Any) -> None:
        news = ingest("anthropic", [], system=system)
        assert len(news) == 1 and news[0].record == {"system": system}
        self.news += news
        self.system = system

    # anthropic messages alternate: blocks of one role are gathered, then ingested as one
    # message, each block made once its item's position (hence its marker) is known
    def a_push(self, role: str, own_item: bool, make: Any) -> None:
        if self.a_role != role:
            self.a_flush()
        self.a_role = role
        self.a_blocks.append((own_item, make))

    def a_flush(self) -> None:
        if not self.a_blocks:
            return
        blocks: list[dict[str, Any]] = []
        k = -1
        in_run = False
        for own_item, make in self.a_blocks:
            if own_item or not in_run:
                k += 1
            in_run = not own_item
            blocks.append(make(self.mark(k)))
        role = self.a_role
        self.a_role, self.a_blocks = None, []
        assert role is not None
        content: Any = blocks
        if len(blocks) == 1 and blocks[0]["type"] == "text" and self.chance(1, 2):
            content = blocks[0]["text"]
        self.add("anthropic", {"role": role, "content": content}, k + 1)


def _images(w: _Writer) -> str:
    return w.draw(st.sampled_from(_IMAGE_URLS))


# -- opaque items of the Responses API --------------------------------------------------------


def _opaque_call(w: _Writer, family: str, key: str, *, with_id: bool) -> dict[str, Any]:
    m, n = w.mark(), len(w.news) + 1
    if family == "computer":
        item: dict[str, Any] = {"type": "computer_call", "id": f"cu_{n}", "call_id": key}
        item |= {"status": "completed", "pending_safety_checks": []}
        item["action"] = {"type": "type", "text": m + w.words()}
    elif family == "custom":
        item = {"type": "custom_tool_call", "call_id": key, "name": "run_sql", "input": m}
    elif family == "local_shell":
        item = {"type": "local_shell_call", "id": f"lsh_{n}", "call_id": key}
        item |= {
            "status": "completed",
            "action": {"type": "exec", "command": ["echo", m], "env": {}},
        }
    elif family == "shell":
        item = {"type": "shell_call", "call_id": key, "action": {"commands": [f"echo {m}"]}}
    elif family == "apply_patch":
        item = {"type": "apply_patch_call", "call_id": key, "status": "completed"}
        item["operation"] = {"type": "update_file", "path": "a.py", "diff": f"+{m}"}
    elif family == "mcp_approval":
        item = {"type": "mcp_approval_request", "id": key, "server_label": "stripe"}
        item |= {"name": "refund", "arguments": json.dumps({"m": m})}
    elif family == "tool_search":
        item = {"type": "tool_search_call", "call_id": key, "execution": "client"}
        item |= {"arguments": {"query": m}, "status": "completed"}
    else:
        item = {"type": "program", "id": f"prg_{n}", "call_id": key, "code": m, "fingerprint": "fp"}
    if with_id and "id" not in item and w.chance(1, 2):
        item = {"type": item["type"], "id": f"x_{n}", **item}
    return item


def _opaque_output(w: _Writer, family: str, key: str, *, with_id: bool) -> dict[str, Any]:
    m, n = w.mark(), len(w.news) + 1
    if family == "computer":
        item: dict[str, Any] = {"type": "computer_call_output", "call_id": key}
        item["output"] = {"type": "computer_screenshot", "image_url": _SMALL_PNG_URL}
        item["acknowledged_safety_checks"] = [{"id": f"sc_{n}", "code": "c", "message": m}]
    elif family == "custom":
        output: Any = m + w.words()
        if w.chance(1, 2):
            output = [
                {"type": "input_text", "text": output},
                {"type": "input_image", "image_url": _SMALL_PNG_URL, "detail": "low"},
            ]
        item = {"type": "custom_tool_call_output", "call_id": key, "output": output}
    elif family == "local_shell":
        item = {"type": "local_shell_call_output", "id": key, "output": m + w.words()}
    elif family == "shell":
        item = {"type": "shell_call_output", "call_id": key}
        item["output"] = [{"stdout": m, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    elif family == "apply_patch":
        item = {"type": "apply_patch_call_output", "call_id": key, "status": "completed"}
        item["output"] = m
    elif family == "mcp_approval":
        item = {"type": "mcp_approval_response", "approval_request_id": key}
        item |= {"approve": w.draw(st.booleans()), "reason": m}
    elif family == "tool_search":
        item = {"type": "tool_search_output", "call_id": key, "execution": "client"}
        item["status"] = "completed"
        item["tools"] = [
            {
                "type": "function",
                "name": "lookup",
                "description": m,
                "parameters": {"type": "object", "properties": {}},
                "strict": True,
            }
        ]
    else:
        item = {"type": "program_output", "id": f"prgo_{n}", "call_id": key}
        item |= {"result": m, "status": "completed"}
    if with_id and "id" not in item and w.chance(1, 2):
        item = {"type": item["type"], "id": f"x_{n}", **item}
    return item


def _standalone(w: _Writer, kind: str, *, with_id: bool) -> dict[str, Any]:
    m, n = w.mark(), len(w.news) + 1
    items: dict[str, dict[str, Any]] = {
        "web_search_call": {
            "type": "web_search_call",
            "id": f"ws_{n}",
            "status": "completed",
            "action": {"type": "search", "query": m + w.words()},
        },
        "file_search_call": {
            "type": "file_search_call",
            "id": f"fs_{n}",
            "status": "completed",
            "queries": [m],
        },
        "code_interpreter_call": {
            "type": "code_interpreter_call",
            "id": f"ci_{n}",
            "status": "completed",
            "container_id": "cntr_1",
            "code": m,
            "outputs": [{"type": "logs", "logs": "ok"}],
        },
        "image_generation_call": {
            "type": "image_generation_call",
            "id": f"ig_{n}",
            "status": "completed",
            "result": _SMALL_PNG_B64,
            "revised_prompt": m,
        },
        "mcp_call": {
            "type": "mcp_call",
            "id": f"mcp_{n}",
            "server_label": "stripe",
            "name": "list_charges",
            "arguments": json.dumps({"m": m}),
            "output": "[]",
            "status": "completed",
        },
        "mcp_list_tools": {
            "type": "mcp_list_tools",
            "id": f"mcpl_{n}",
            "server_label": "stripe",
            "tools": [{"name": "refund", "description": m, "input_schema": {"type": "object"}}],
        },
        "additional_tools": {
            "type": "additional_tools",
            "role": "developer",
            "tools": [
                {
                    "type": "function",
                    "name": "query_db",
                    "description": m,
                    "parameters": {"type": "object", "properties": {}},
                    "strict": True,
                }
            ],
        },
        "item_reference": {"type": "item_reference", "id": f"msg_{m}"},
        "compaction": {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": "gAAAA" + m},
        # an SDK wrapper's encrypted envelope: no type at all (an untyped opaque item)
        "untyped": {"__enc__": 1, "v": 1, "kid": "hkdf-1", "payload": "gAAAA" + m},
        # incomplete items, which the SDKs' own stores keep (items.incomplete_kind)
        "call_without_id": {
            "type": "function_call",
            "call_id": "",
            "name": "read",
            "arguments": json.dumps({"m": m}),
        },
        "output_without_id": {"type": "function_call_output", "call_id": "", "output": m},
        "message_without_role": {"type": "message", "content": m + w.words()},
    }
    item = items[kind]
    if kind == "call_without_id":  # its call_id missing, null or empty
        missing = w.draw(st.sampled_from(["", None, "absent"]))
        item = {k: (missing if k == "call_id" else v) for k, v in item.items()}
        if missing == "absent":
            del item["call_id"]
    if not with_id and "id" in item:
        item = {k: v for k, v in item.items() if k != "id"}
    return item


# Items only their writer reads (``items.is_unsendable``), besides ``untyped``.
INCOMPLETE_KINDS = ("call_without_id", "output_without_id", "message_without_role")


def _opaque_ok(fmt: str, kind: str) -> bool:
    """Whether an opaque item of ``kind`` (a family or a standalone type) is valid in ``fmt``."""
    if fmt == "openai-responses":
        return True
    if fmt == "canonical":  # where ``id`` is our item id, a reference to a provider's is moot
        if kind == "item_reference":
            return False
        return CANONICAL_OPAQUE_IDS or kind in (*_CANONICAL_FAMILIES, "compaction")
    return False


def _standalone_ids(fmt: str) -> bool:
    """Whether standalone items carry their provider ``id`` in ``fmt``."""
    return fmt == "openai-responses" or (fmt == "canonical" and CANONICAL_OPAQUE_IDS)


# -- content ---------------------------------------------------------------------------------


def _content(w: _Writer, fmt: str, role: str) -> Any:
    """Message content in ``fmt`` (not anthropic): a string or parts, some of them other parts."""
    if not w.chance(1, 2):
        return w.text()
    draw = w.draw
    user = role == "user"
    parts: list[dict[str, Any]] = []
    if fmt == "canonical":
        parts.append({"type": "text", "text": w.text()})
        for _ in range(draw(st.integers(0, 2))):
            pick = draw(st.integers(0, 3))
            if pick == 0:
                parts.append({"type": "text", "text": w.text()})
            elif pick == 1:
                image: dict[str, Any] = {"type": "image", "url": _images(w)}
                detail = draw(st.sampled_from([None, "low", "high", "auto"]))
                if detail is not None:
                    image["detail"] = detail
                parts.append(image)
            elif pick == 2:
                parts.append({"type": "input_file", "file_id": "file-1", "filename": w.text()})
            else:
                parts.append(
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": w.text()},
                    }
                )
    elif fmt == "openai-responses":
        if role == "assistant":  # an output message: output_text and refusal parts
            part: dict[str, Any] = {"type": "output_text", "text": w.text(), "annotations": []}
            if w.chance(1, 3):
                part["annotations"] = [
                    {
                        "type": "url_citation",
                        "url": "https://example.com/doc",
                        "title": "doc",
                        "start_index": 0,
                        "end_index": 2,
                    }
                ]
            if w.chance(1, 4):
                part["logprobs"] = [
                    {"token": "a", "bytes": [97], "logprob": -0.1, "top_logprobs": []}
                ]
            parts.append(part)
            if w.chance(1, 3):
                parts.append({"type": "refusal", "refusal": w.text()})
            return parts
        parts.append({"type": "input_text", "text": w.text()})
        for _ in range(draw(st.integers(0, 2))):
            pick = draw(st.integers(0, 3))
            if pick == 0:
                parts.append({"type": "input_text", "text": w.text()})
            elif pick == 1 and user:
                detail = draw(st.sampled_from(["low", "high", "auto"]))
                parts.append({"type": "input_image", "image_url": _images(w), "detail": detail})
            elif pick == 2 and user:
                parts.append({"type": "input_image", "file_id": "file-img", "detail": "auto"})
            else:
                parts.append({"type": "input_file", "file_id": "file-1", "filename": w.text()})
    else:  # openai-chat
        parts.append({"type": "text", "text": w.text()})
        for _ in range(draw(st.integers(0, 2))):
            pick = draw(st.integers(0, 2))
            if role == "assistant":
                parts.append(
                    {"type": "refusal", "refusal": w.text()}
                    if pick
                    else {"type": "text", "text": w.text()}
                )
            elif pick == 1 and user:
                image = {"url": _images(w)}
                if w.chance(1, 2):
                    image["detail"] = draw(st.sampled_from(["low", "high", "auto"]))
                parts.append({"type": "image_url", "image_url": image})
            elif pick == 2 and user:
                parts.append({"type": "file", "file": {"file_id": "file-1", "filename": w.text()}})
            else:
                parts.append({"type": "text", "text": w.text()})
    return parts


def _anthropic_user_block(w: _Writer) -> Any:
    pick = w.draw(st.integers(0, 4))
    if pick == 0:
        return lambda m: {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": _SMALL_PNG_B64},
        }
    if pick == 1:
        return lambda m: {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/cat.png"},
        }
    words = w.words()
    if pick == 2:
        return lambda m: {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": m + words},
            "title": "notes.txt",
        }
    if pick == 3:
        return lambda m: {
            "type": "search_result",
            "source": "https://kb.example.com",
            "title": "kb",
            "content": [{"type": "text", "text": m + words}],
        }
    return lambda m: {"type": "text", "text": m + words}


def _function_output(w: _Writer, fmt: str) -> Any:
    """A tool output: a string, or (every format but chat) text and image parts."""
    text = w.text() * w.draw(st.integers(1, 3))
    if fmt == "openai-chat" or w.chance(2, 3):
        return text
    if fmt == "canonical":
        return [{"type": "text", "text": text}, {"type": "image", "url": _images(w)}]
    return [
        {"type": "input_text", "text": text},
        {"type": "input_image", "image_url": _images(w), "detail": "auto"},
    ]


# -- one turn ------------------------------------------------------------------------------


def _reasoning(w: _Writer, fmt: str) -> bool:
    """Maybe add reasoning (in the styles ``fmt`` can carry); whether it did."""
    if fmt == "openai-chat" or not w.chance(2, 5):
        return False
    if fmt == "anthropic":
        if w.chance(2, 3):
            sig = f"sig_{len(w.news) + 1}"
            w.a_push(
                "assistant", True, lambda m: {"type": "thinking", "thinking": m, "signature": sig}
            )
        else:
            w.a_push(
                "assistant", True, lambda m: {"type": "redacted_thinking", "data": "redacted" + m}
            )
        return True
    if fmt == "gemini":  # a model content holding only a thought
        w.add(fmt, {"role": "model", "parts": [_gemini_thought(w, 0)]}, 1)
        return True
    styles = ["openai"] if fmt == "openai-responses" else ["openai", "anthropic", "redacted"]
    style = w.draw(st.sampled_from(styles))
    m = w.mark()
    if fmt == "openai-responses":
        item: dict[str, Any] = {"type": "reasoning", "id": f"rs_{len(w.news) + 1}"}
        item["summary"] = [
            {"type": "summary_text", "text": w.text()} for _ in range(w.draw(st.integers(0, 2)))
        ]
        if w.chance(1, 3):
            item["content"] = [{"type": "reasoning_text", "text": w.text()}]
        if not item["summary"] or w.chance(1, 2):
            item["encrypted_content"] = "gAAAA" + m
    elif style == "openai":
        item = {"type": "reasoning", "summary": [w.text()], "encrypted_content": "gAAAA" + m}
        if len(w.news) % 2:
            # under the id OpenAI issued (openai-responses sends it with that id), else under
            # ours (itm_...: openai-responses leaves it out). Chosen without a draw, so that
            # every other test keeps drawing the sessions it drew before.
            item = {"id": f"rs_{len(w.news) + 1}", **item}
    elif style == "anthropic":
        item = {"type": "reasoning", "content": w.text(), "signature": "sig" + m}
    else:
        item = {"type": "reasoning", "encrypted_content": "redacted" + m, "redacted": True}
    w.add(fmt, item, 1)
    return True


def _system_message(w: _Writer, fmt: str, role: str) -> None:
    if fmt == "gemini":  # only the request's systemInstruction, first
        if not w.news:
            text = w.text()
            w.add_gemini_system(
                text if w.chance(1, 2) else {"parts": [{"text": text}, {"text": w.words()}]}
            )
        return
    if fmt == "anthropic":
        if w.a_role == "user" and not (w.wild and w.chance(1, 2)):
            # between two user turns (the turn so far has no reply): only wild sessions write
            # that, since the projection then moves the message into ``system``
            return
        w.a_flush()
        text = w.text()
        content: Any = text if w.chance(1, 2) else [{"type": "text", "text": text}]
        w.add("anthropic", {"role": "system", "content": content}, 1)
    elif fmt == "canonical":
        w.add(fmt, {"type": "message", "role": role, "content": _content(w, fmt, role)}, 1)
    elif fmt == "openai-responses":
        message: dict[str, Any] = {
            "type": "message",
            "role": role,
            "content": _content(w, fmt, role),
        }
        if w.chance(1, 3):
            message = {k: v for k, v in message.items() if k != "type"}
        w.add(fmt, message, 1)
    else:
        message = {"role": role, "content": _content(w, fmt, role)}
        if w.chance(1, 3):
            message["name"] = "policy"
        w.add(fmt, message, 1)


def _user_message(w: _Writer, fmt: str) -> None:
    if fmt == "gemini":
        parts: list[dict[str, Any]] = [{"text": w.text()}]
        for _ in range(w.draw(st.integers(0, 2))):
            pick = w.draw(st.integers(0, 2))
            if pick == 0:
                parts.append({"inlineData": {"mimeType": "image/png", "data": _SMALL_PNG_B64}})
            elif pick == 1:
                uri = "https://example.com/cat.png"
                parts.append({"fileData": {"mimeType": "image/png", "fileUri": uri}})
            else:
                parts.append({"text": w.words()})
        content: dict[str, Any] = {"role": "user", "parts": parts}
        if w.wild and w.chance(1, 4):
            content = {"parts": parts}  # no role: the API reads it as user
        w.add(fmt, content, 1)
        return
    if fmt == "anthropic":
        words = w.words()
        cached = w.chance(1, 4)
        w.a_push(
            "user",
            False,
            lambda m: (
                {"type": "text", "text": m + words}
                | ({"cache_control": {"type": "ephemeral"}} if cached else {})
            ),
        )
        for _ in range(w.draw(st.integers(0, 2))):
            w.a_push("user", False, _anthropic_user_block(w))
    elif fmt == "openai-responses":
        message: dict[str, Any] = {"role": "user", "content": _content(w, fmt, "user")}
        if w.chance(1, 2):
            message = {"type": "message", **message}
        w.add(fmt, message, 1)
    elif fmt == "openai-chat":
        message = {"role": "user", "content": _content(w, fmt, "user")}
        if w.chance(1, 4):
            message["name"] = "customer_42"
        w.add(fmt, message, 1)
    else:
        w.add(fmt, {"type": "message", "role": "user", "content": _content(w, fmt, "user")}, 1)


def _assistant_message(w: _Writer, fmt: str) -> None:
    if fmt == "gemini":
        parts = [{"text": w.text()}] + [
            {"text": w.words()} for _ in range(w.draw(st.integers(0, 1)))
        ]
        w.add(fmt, {"role": "model", "parts": parts}, 1)
        return
    if fmt == "anthropic":
        words = w.words()
        cited = w.chance(1, 4)

        def make(m: str) -> dict[str, Any]:
            block: dict[str, Any] = {"type": "text", "text": m + words}
            if cited:
                block["citations"] = [
                    {
                        "type": "char_location",
                        "cited_text": "notes",
                        "document_index": 0,
                        "document_title": "notes.txt",
                        "start_char_index": 0,
                        "end_char_index": 5,
                    }
                ]
            return block

        w.a_push("assistant", False, make)
    elif fmt == "openai-responses":
        content = _content(w, fmt, "assistant")
        n = len(w.news) + 1
        if isinstance(content, str):
            message: dict[str, Any] = {"type": "message", "role": "assistant", "content": content}
        else:
            message = {"id": f"msg_{n}", "type": "message", "role": "assistant"}
            message |= {"status": "completed", "content": content}
        if w.chance(1, 3):
            message["phase"] = w.draw(st.sampled_from(["commentary", "final_answer"]))
        w.add(fmt, message, 1)
    elif fmt == "openai-chat":
        if w.chance(1, 6):
            w.add(fmt, {"role": "assistant", "content": None, "refusal": w.text()}, 1)
        elif w.native_format == "openai-chat" and w.chance(1, 8):
            # audio carries no text: only a session read back in chat shows its marker
            w.add(
                fmt, {"role": "assistant", "content": None, "audio": {"id": f"audio_{w.mark()}"}}, 1
            )
        else:
            w.add(fmt, {"role": "assistant", "content": _content(w, fmt, "assistant")}, 1)
    else:
        w.add(
            fmt,
            {"type": "message", "role": "assistant", "content": _content(w, fmt, "assistant")},
            1,
        )


def _step(w: _Writer, fmt: str, *, may_dangle: bool) -> None:
    """One model response (reasoning, hosted tools, text, calls) and the client's outputs."""
    if fmt == "gemini":
        _gemini_step(w, may_dangle=may_dangle)
        return
    draw = w.draw
    reasoned = _reasoning(w, fmt)
    hosted = [
        kind
        for kind in draw(st.lists(st.sampled_from(HOSTED_TYPES), max_size=2))
        if _opaque_ok(fmt, kind)
    ]
    server_tool = fmt == "anthropic" and w.chance(1, 4)
    has_text = w.draw(st.booleans())
    n_calls = draw(st.integers(0, 3))
    families = [
        f
        for f in draw(st.lists(st.sampled_from(sorted(OPAQUE_FAMILIES)), max_size=2))
        if _opaque_ok(fmt, f)
    ]
    legacy = (
        fmt == "openai-chat"
        and (CHAT_FUNCTION_CALL_FIXED or not w.wild)
        and not n_calls
        and w.chance(1, 8)
    )
    # what Claude writes after a server tool's result (and what carries it into other formats,
    # where the server tool blocks themselves are left out)
    has_text = has_text or server_tool
    if not (hosted or server_tool or has_text or n_calls or families or legacy):
        if not reasoned:
            return
        has_text = True
    with_id = _standalone_ids(fmt)
    for kind in hosted:
        w.add(fmt, _standalone(w, kind, with_id=with_id), 1)
    if server_tool:
        use_id, words = f"srvtoolu_{len(w.news) + 1}_{len(w.a_blocks)}", w.words()
        w.a_push(
            "assistant",
            False,
            lambda m: {
                "type": "server_tool_use",
                "id": use_id,
                "name": "web_search",
                "input": {"query": m + words},
            },
        )
        w.a_push(
            "assistant",
            False,
            lambda m: {
                "type": "web_search_tool_result",
                "tool_use_id": use_id,
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://example.com",
                        "title": m,
                        "encrypted_content": "enc",
                    }
                ],
            },
        )
    # calls: (family, key, function name) in the order the model wrote them
    calls: list[tuple[str, str, str]] = []
    if fmt == "openai-chat":
        _chat_assistant_turn(w, has_text, n_calls, legacy, calls)
    else:
        if has_text:
            _assistant_message(w, fmt)
        order = ["function"] * n_calls + families
        if w.wild:
            order = draw(st.permutations(order))
        for family in order:
            _call(w, fmt, family, calls)
    if fmt == "anthropic" and calls:
        w.a_flush()
    # the outputs: some missing (dangling calls), in any order in wild sessions
    dangling = [may_dangle and w.chance(1, 4) for _ in calls]
    if fmt == "openai-chat" and not CHAT_SPLIT_MESSAGE_FIXED:
        dangling = [any(dangling[: k + 1]) for k in range(len(calls))]
    answered = [c for c, d in zip(calls, dangling, strict=True) if not d]
    if w.wild:
        answered = draw(st.permutations(answered))
    for family, key, name in answered:
        _output(w, fmt, family, key, name)
    if w.wild and w.chance(1, 12):  # an output whose call is not in working memory
        family = draw(st.sampled_from(["function", *sorted(OPAQUE_FAMILIES)]))
        if family == "function" or _opaque_ok(fmt, family):
            _output(w, fmt, family, f"call_gone_{len(w.news) + 1}", "read_file")


def _gemini_thought(w: _Writer, k: int) -> dict[str, Any]:
    part: dict[str, Any] = {"text": w.mark(k) + w.words(), "thought": True}
    if w.chance(1, 2):
        part["thoughtSignature"] = "c2lnbmF0dXJl"
    return part


def _gemini_step(w: _Writer, *, may_dangle: bool) -> None:
    """One model content (thoughts, text, function calls: an item each, a text run one) and
    the user content answering its calls (by ``id``, or by name and order without one)."""
    draw = w.draw
    parts: list[dict[str, Any]] = []
    k = 0
    for _ in range(draw(st.integers(0, 2)) if w.chance(2, 5) else 0):
        parts.append(_gemini_thought(w, k))
        k += 1
    has_text = draw(st.booleans())
    n_calls = draw(st.integers(0, 3))
    if not has_text and not n_calls:
        if not parts:
            return
        has_text = True
    if has_text:
        parts.append({"text": w.mark(k) + w.words()})
        if w.chance(1, 3):
            parts.append({"text": w.words()})
        k += 1
    with_ids = w.chance(1, 2)
    calls: list[dict[str, Any]] = []
    for _ in range(n_calls):
        call: dict[str, Any] = {
            "name": draw(st.sampled_from(["read_file", "run", "grep"])),
            "args": {"m": w.mark(k), "x": w.words()},
        }
        if with_ids:
            call = {"id": f"call_{len(w.news) + 1 + k}", **call}
        parts.append({"functionCall": call})
        calls.append(call)
        k += 1
    w.add("gemini", {"role": "model", "parts": parts}, k)
    # without ids a response answers by name and order: all of them, in order
    answered = [c for c in calls if not (with_ids and may_dangle and w.chance(1, 4))]
    if w.wild and with_ids:
        answered = draw(st.permutations(answered))
    if w.wild and w.chance(1, 12):  # a response whose call is not in working memory
        answered = [*answered, {"id": f"call_gone_{len(w.news) + 1}", "name": "read_file"}]
    responses = []
    for j, call in enumerate(answered):
        text = w.mark(j) + w.words() * draw(st.integers(1, 3))
        pick = draw(st.integers(0, 5))
        if pick == 0:
            response: dict[str, Any] = {"error": text}
        elif pick == 1:
            response = {"result": {"m": text, "lines": 3}}
        else:
            response = {"output": text}
        spec = {k2: v for k2, v in call.items() if k2 != "args"} | {"response": response}
        responses.append({"functionResponse": spec})
    if responses:
        w.add("gemini", {"role": "user", "parts": responses}, len(responses))


def _call(w: _Writer, fmt: str, family: str, calls: list[tuple[str, str, str]]) -> None:
    n = len(w.news) + 1
    key = f"mcpr_{n}" if family == "mcp_approval" else f"call_{n}"
    if fmt == "anthropic":  # the seq is known once the message is complete: unique all the same
        key = f"call_{n}_{len(w.a_blocks)}"
    name = w.draw(st.sampled_from(["read_file", "run", "grep"]))
    calls.append((family, key, name))
    if family != "function":
        w.add(fmt, _opaque_call(w, family, key, with_id=fmt == "openai-responses"), 1)
        return
    x = w.words()
    if fmt == "anthropic":
        w.a_push(
            "assistant",
            True,
            lambda m: {"type": "tool_use", "id": key, "name": name, "input": {"m": m, "x": x}},
        )
        return
    arguments = json.dumps({"m": w.mark(), "x": x}, ensure_ascii=False)
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": key,
        "name": name,
        "arguments": arguments,
    }
    if fmt == "openai-responses" and w.chance(1, 2):
        item = {"type": "function_call", "id": f"fc_{n}", **item, "status": "completed"}
        if w.chance(1, 2):
            item["namespace"] = "repo"
    w.add(fmt, item, 1)


def _output(w: _Writer, fmt: str, family: str, key: str, name: str) -> None:
    if family != "function":
        w.add(fmt, _opaque_output(w, family, key, with_id=fmt == "openai-responses"), 1)
        return
    if fmt == "anthropic":
        output = w.words() * w.draw(st.integers(1, 3))
        is_error = w.draw(st.sampled_from([None, True, False]))
        rich = w.chance(1, 3)
        cached = w.chance(1, 6)

        def make(m: str) -> dict[str, Any]:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": key}
            text = m + output
            block["content"] = (
                [
                    {"type": "text", "text": text},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": _SMALL_PNG_B64,
                        },
                    },
                ]
                if rich
                else text
            )
            if is_error is not None:
                block["is_error"] = is_error
            if cached:
                block["cache_control"] = {"type": "ephemeral"}
            return block

        w.a_push("user", True, make)
    elif fmt == "openai-chat":
        if key.startswith("function:"):
            w.add(
                fmt,
                {"role": "function", "name": key.removeprefix("function:"), "content": w.text()},
                1,
            )
        else:
            w.add(
                fmt,
                {
                    "role": "tool",
                    "tool_call_id": key,
                    "content": _content(w, "openai-chat", "tool"),
                },
                1,
            )
    elif fmt == "openai-responses":
        item = {"type": "function_call_output", "call_id": key, "output": _function_output(w, fmt)}
        if w.chance(1, 3):
            item = {"type": "function_call_output", "id": f"fco_{len(w.news) + 1}", **item}
        w.add(fmt, item, 1)
    else:
        item = {"type": "function_call_output", "call_id": key, "output": _function_output(w, fmt)}
        if w.chance(1, 3):
            item["is_error"] = w.draw(st.booleans())
        w.add(fmt, item, 1)


def _chat_assistant_turn(
    w: _Writer, has_text: bool, n_calls: int, legacy: bool, calls: list[tuple[str, str, str]]
) -> None:
    """One assistant message: content (or a refusal) and ``tool_calls`` (function or custom),
    or a deprecated ``function_call``."""
    if legacy:
        name = f"legacy_{len(w.news) + 1}"
        call = {"name": name, "arguments": json.dumps({"m": w.mark()})}
        w.add("openai-chat", {"role": "assistant", "content": None, "function_call": call}, 1)
        calls.append(("function", f"function:{name}", name))
        return
    if not n_calls:
        _assistant_message(w, "openai-chat")
        return
    message: dict[str, Any] = {"role": "assistant"}
    k = 0
    if has_text:
        if w.chance(1, 4):
            message["content"], message["refusal"] = None, w.text()
        else:
            message["content"] = _content(w, "openai-chat", "assistant")
        k = 1
    else:
        message["content"] = None
    entries = []
    for _ in range(n_calls):
        key = f"call_{len(w.news) + 1 + k}"
        name = w.draw(st.sampled_from(["read_file", "run", "grep"]))
        if w.chance(1, 4):
            entries.append(
                {"id": key, "type": "custom", "custom": {"name": name, "input": w.mark(k)}}
            )
        else:
            arguments = json.dumps({"m": w.mark(k), "x": w.words()}, ensure_ascii=False)
            entries.append(
                {"id": key, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
        calls.append(("function", key, name))
        k += 1
    message["tool_calls"] = entries
    w.add("openai-chat", message, k)


def _standalone_client(w: _Writer, fmt: str) -> None:
    """Items a client puts after a user message: extra tools, a reference to an earlier item,
    an object only the client reads."""
    kinds = ["additional_tools", "item_reference"]
    if w.native_format is None:  # a native session comes back whole in a prompt; these would not
        kinds += ["untyped", *INCOMPLETE_KINDS]
    kind = w.draw(st.sampled_from(kinds))
    if _opaque_ok(fmt, kind):
        w.add(fmt, _standalone(w, kind, with_id=_standalone_ids(fmt)), 1)


@st.composite
def faithful_sessions(draw: st.DrawFn, profile: Profile = "any", max_turns: int = 4) -> Session:
    """Sessions as real agents write them, each turn in one format.

    ``profile="any"``: wild sessions (turns in any mix of formats, or all in one; pinned items,
    metadata, outputs in any order, calls without output anywhere, outputs whose call is gone,
    a compaction cut, a summary). A provider ``profile``: a well-formed session written wholly
    in that format (every call answered, anthropic turns alternating), with ``native`` set to
    the payload it was written as."""
    wild = profile == "any"
    if wild:
        pool = draw(st.sampled_from([_FORMATS_MIXED, *((f,) for f in _FORMATS_MIXED)]))
    else:
        pool = (profile,)
    native = None if wild or profile == "canonical" else profile
    w = _Writer(draw, wild=wild, native=native)
    turns = draw(st.integers(1, max_turns))
    formats = [draw(st.sampled_from(pool)) for _ in range(turns)]
    first = formats[0]
    if first == "anthropic" and draw(st.booleans()):
        text = w.text()
        w.add_anthropic_system(text if draw(st.booleans()) else [{"type": "text", "text": text}])
    elif first != "anthropic" and draw(st.booleans()):
        _system_message(w, first, "system")
    if _opaque_ok(first, "compaction") and w.chance(1, 6):
        w.add(first, _standalone(w, "compaction", with_id=_standalone_ids(first)), 1)
    for turn, fmt in enumerate(formats):
        if turn and w.chance(1, 10):
            _system_message(w, fmt, draw(st.sampled_from(["system", "developer"])))
        _user_message(w, fmt)
        if w.chance(1, 8):
            _standalone_client(w, fmt)
        steps = draw(st.integers(0, 3))
        for step in range(steps):
            last = turn == turns - 1 and step == steps - 1
            _step(w, fmt, may_dangle=wild and (last or w.chance(1, 12)))
            if wild and w.chance(1, 20) and fmt != "anthropic" and fmt != "openai-chat":
                _reasoning(w, fmt)  # reasoning whose model output was never stored
        final = draw(st.booleans())
        if fmt == "anthropic":
            # native anthropic turns alternate: a turn ends with the model's answer
            if (final or not wild) and w.a_role != "assistant":
                _assistant_message(w, fmt)
        elif final and not (w.news and isinstance(w.news[-1].body, MessageItem)):
            _assistant_message(w, fmt)
        if fmt == "anthropic" and (turn == turns - 1 or formats[turn + 1] != "anthropic"):
            w.a_flush()
    w.a_flush()
    news = w.news
    seqs = list(range(1, len(news) + 1))
    if wild and news and draw(st.integers(0, 3)) == 0:
        cut = draw(st.integers(0, len(news) - 1))
        news, seqs = news[cut:], seqs[cut:]
    summary = "Summary: " + draw(_words) if wild and draw(st.booleans()) else None
    payload: dict[str, Any] | None = None
    if native == "openai-responses":
        payload = {"input": w.native}
    elif native == "gemini":
        payload = {} if w.system is None else {"system_instruction": w.system}
        payload["contents"] = w.native
    elif native is not None:
        payload = {} if w.system is None else {"system": w.system}
        payload["messages"] = w.native
    return Session(items=store(news, seqs), summary=summary, native=payload, native_format=native)


@st.composite
def repeated_call_sessions(draw: st.DrawFn) -> Session:
    """Sessions of an agent that calls the same few tools with the same few arguments again
    and again (the same file read twice, the same tests run again), in the canonical format:
    where outputs go stale (``tiers.stale_outputs``). Arguments differ at times only in key
    order or spacing (the same call all the same); some calls are still waiting for their
    output; every output holds its ``<<seq>>`` marker."""
    news: list[NewItem] = []

    def add(body: CanonicalItem) -> None:
        news.append(NewItem(body=body))

    add(MessageItem(role="user", content=f"<<1>> {draw(_words)}"))
    for turn in range(draw(st.integers(1, 6))):
        if turn and draw(st.booleans()):
            add(MessageItem(role="user", content=f"<<{len(news) + 1}>> {draw(_words)}"))
        calls: list[FunctionCallItem] = []
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(["a.py", "b.py"]))
            arguments = draw(
                st.sampled_from(
                    [json.dumps({"path": path, "n": 1}), f'{{ "n": 1, "path": "{path}" }}']
                )
            )
            call = FunctionCallItem(
                call_id=f"call_{len(news) + 1}",
                name=draw(st.sampled_from(["read_file", "run"])),
                arguments=arguments,
            )
            calls.append(call)
            add(call)
        for call in calls:
            if draw(st.integers(0, 5)):  # now and then a call waits for its output
                add(FunctionCallOutputItem(call_id=call.call_id, output=f"<<{len(news) + 1}>>"))
        if draw(st.booleans()):
            add(MessageItem(role="assistant", content=f"<<{len(news) + 1}>> {draw(_words)}"))
    return Session(items=store(news), summary=None)
