"""Faithful storage (issue 13, DESIGN §1): every item the installed SDKs can put in a
conversation is accepted and comes back exactly as sent, in its own format, through
``GET /items?format=F`` (every page, ``last=N``) and through the projection with no budget;
read in another format it is rendered validly or left out with a note naming it.

The corpus is tests/support/sdk_examples.py (one or more examples of every union member, derived
from the SDK types). "Exactly" is ``json.dumps`` equality: same values, same key order. Every
test runs on both backends, against an app with the default limits (what real agents get).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.main import create_app
from tests.api.helpers import create
from tests.conftest import make_settings
from tests.support import sdk_examples as se
from tests.support.provider_validation import (
    PayloadError,
    validate_item_faithful,
    validate_payload_faithful,
)
from tests.support.spec_check import ASYNC_HOOKS

PROVIDER_FORMATS = ("openai-responses", "openai-chat", "anthropic", "gemini")
PAYLOAD_KEY = {
    "openai-responses": "input",
    "openai-chat": "messages",
    "anthropic": "messages",
    "gemini": "contents",
}
# the system prompt a format takes beside its list (a key of the append body, of a listed page
# and of the context payload alike)
SYSTEM_KEY = {"anthropic": "system", "gemini": "system_instruction"}


@pytest.fixture(scope="module")
async def agent_client(
    backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with the default limits (the shared ``client`` has small ones)."""
    app = create_app(make_settings(backend, request))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS, timeout=60
        ) as client:
            yield client


# -- the corpora, as appends -------------------------------------------------------------------


def corpus(fmt: str) -> dict[str, Any]:
    """The append body of one format's whole corpus (``items`` and, for anthropic, ``system``;
    for gemini, ``system_instruction``)."""
    if fmt == "openai-responses":
        return {"items": copy.deepcopy(se.RESPONSES_ITEMS)}
    if fmt == "openai-chat":
        return {"items": copy.deepcopy(se.CHAT_MESSAGES)}
    if fmt == "gemini":
        return {
            "items": copy.deepcopy(se.GEMINI_CONTENTS),
            "system_instruction": copy.deepcopy(se.GEMINI_SYSTEM_INSTRUCTION),
        }
    return {
        "items": se.anthropic_messages(copy.deepcopy(se.ANTHROPIC_EXCHANGES)),
        "system": copy.deepcopy(se.ANTHROPIC_SYSTEM),
    }


async def append_in(
    client: httpx.AsyncClient, sid: str, fmt: str, body: dict[str, Any]
) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/items", json={"format": fmt, **body})
    assert r.status_code == 201, f"append in {fmt}: {r.status_code} {r.text[:3000]}"
    return r.json()


async def read_items(
    client: httpx.AsyncClient, sid: str, fmt: str, *, limit: int = 1000, **params: Any
) -> dict[str, Any]:
    """Every page of ``GET /items?format=fmt``: the items, each page's ``system`` (or
    ``system_instruction``), the notes."""
    items: list[Any] = []
    systems: list[Any] = []
    notes: list[str] = []
    cursor = None
    for _ in range(10_000):
        query: dict[str, Any] = {"format": fmt, "limit": limit, **params}
        if cursor is not None:
            query["after_seq"] = cursor
        r = await client.get(f"/v1/sessions/{sid}/items", params=query)
        assert r.status_code == 200, r.text[:3000]
        page = r.json()
        if fmt != "canonical":
            assert page["format"] == fmt, page.keys()
            assert isinstance(page["notes"], list) and all(
                isinstance(n, str) for n in page["notes"]
            )
            notes.extend(page["notes"])
            for key in ("system", "system_instruction"):
                if page.get(key) is not None:
                    systems.append(page[key])
        items.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None or "last" in params:
            break
    return {"items": items, "systems": systems, "notes": notes}


async def context_in(client: httpx.AsyncClient, sid: str, fmt: str) -> dict[str, Any]:
    r = await client.post(f"/v1/sessions/{sid}/context", json={"format": fmt})
    assert r.status_code == 200, r.text[:3000]
    body = r.json()
    assert body["format"] == fmt
    return body


def payload_of(body: dict[str, Any]) -> dict[str, Any]:
    return {
        k: body[k]
        for k in ("input", "messages", "system", "contents", "system_instruction")
        if k in body
    }


def _label(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type") or value.get("role") or sorted(value)[:3])
    return type(value).__name__


def assert_same_json(got: Any, want: Any, *, what: str) -> None:
    """``json.dumps`` equality (key order included), failing with the items that differ."""
    if json.dumps(got) == json.dumps(want):
        return
    if isinstance(got, list) and isinstance(want, list):
        n = max(len(got), len(want))
        bad = [
            k
            for k in range(n)
            if k >= len(got) or k >= len(want) or json.dumps(got[k]) != json.dumps(want[k])
        ]
        shown = []
        for k in bad[:6]:
            sent = json.dumps(want[k])[:400] if k < len(want) else "<nothing>"
            back = json.dumps(got[k])[:400] if k < len(got) else "<nothing>"
            shown.append(
                f"\n  [{k}] {_label(want[k]) if k < len(want) else '-'}\n    sent: {sent}\n    back: {back}"
            )
        kinds = sorted({_label(want[k]) for k in bad if k < len(want)})
        pytest.fail(
            f"{what}: {len(got)} back for {len(want)} sent; {len(bad)} differ ({kinds}):{''.join(shown)}"
        )
    pytest.fail(f"{what}: sent {json.dumps(want)[:600]}\n back {json.dumps(got)[:600]}")


# -- round trip in the ingest format ----------------------------------------------------------


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
async def test_every_example_round_trips_in_its_format(
    agent_client: httpx.AsyncClient, sid: str, fmt: str
) -> None:
    """One session holding every example of ``fmt``: back byte-identical from GET /items (one
    page, small pages, ``last=N``) and from the projection with no budget, which validates."""
    await create(agent_client, sid)
    body = corpus(fmt)
    sent = body["items"]
    appended = await append_in(agent_client, sid, fmt, body)
    stored = appended["items"]
    assert stored and all(i["format"] == fmt for i in stored), {i.get("format") for i in stored}
    assert all(i["id"].startswith("itm_") for i in stored), [i["id"] for i in stored][:5]
    assert len({i["id"] for i in stored}) == len(stored)

    system_key = SYSTEM_KEY.get(fmt)
    whole = await read_items(agent_client, sid, fmt)
    assert_same_json(whole["items"], sent, what=f"GET /items?format={fmt}")
    if system_key is not None:
        assert len(whole["systems"]) == 1, whole["systems"]
        assert_same_json(whole["systems"][0], body[system_key], what="GET /items system")
    paged = await read_items(agent_client, sid, fmt, limit=7)
    assert_same_json(paged["items"], sent, what=f"GET /items?format={fmt}&limit=7, all pages")
    if fmt == "anthropic":
        assert_same_json(
            [b for s in paged["systems"] for b in s], body["system"], what="paged system"
        )
    elif fmt == "gemini":  # one item, first: on the first page
        assert_same_json(paged["systems"], [body[system_key]], what="paged system_instruction")
    last = await read_items(agent_client, sid, fmt, last=3)
    assert_same_json(
        last["items"], sent[-len(last["items"]) :], what=f"GET /items?format={fmt}&last=3"
    )
    assert 1 <= len(last["items"]) <= 3

    canonical = await read_items(agent_client, sid, "canonical")
    assert [i["id"] for i in canonical["items"]] == [i["id"] for i in stored]

    served = await context_in(agent_client, sid, fmt)
    payload = payload_of(served)
    assert_same_json(payload[PAYLOAD_KEY[fmt]], sent, what=f"POST /context {fmt}")
    for key in ("system", "system_instruction"):
        if key == system_key:
            assert_same_json(payload.get(key), body[key], what=f"POST /context {key}")
        else:
            assert key not in payload
    validate_payload_faithful(fmt, payload)
    assert served["report"]["dropped_items"] == 0, served["report"]


async def test_anthropic_system_as_a_string_round_trips(
    agent_client: httpx.AsyncClient, sid: str
) -> None:
    await create(agent_client, sid)
    messages = copy.deepcopy(se.ANTHROPIC_EXCHANGES[1])
    await append_in(
        agent_client, sid, "anthropic", {"items": messages, "system": se.ANTHROPIC_SYSTEM_STRING}
    )
    back = await read_items(agent_client, sid, "anthropic")
    assert_same_json(back["items"], messages, what="GET /items")
    assert back["systems"] == [se.ANTHROPIC_SYSTEM_STRING]
    payload = payload_of(await context_in(agent_client, sid, "anthropic"))
    assert_same_json(
        payload, {"messages": messages, "system": se.ANTHROPIC_SYSTEM_STRING}, what="POST /context"
    )
    validate_payload_faithful("anthropic", payload)


async def test_anthropic_system_role_messages_stay_where_they_were(
    agent_client: httpx.AsyncClient, sid: str
) -> None:
    """``role: "system"`` messages (a member of the SDK's MessageParam union) inside
    ``messages`` are messages like the others: kept in place, byte-identical."""
    await create(agent_client, sid)
    messages = se.anthropic_messages(copy.deepcopy(se.ANTHROPIC_SYSTEM_ROLE_EXCHANGES))
    await append_in(agent_client, sid, "anthropic", {"items": messages})
    assert_same_json(
        (await read_items(agent_client, sid, "anthropic"))["items"], messages, what="GET /items"
    )
    payload = payload_of(await context_in(agent_client, sid, "anthropic"))
    assert_same_json(payload.get("messages"), messages, what="POST /context")
    validate_payload_faithful("anthropic", payload)


async def test_examples_appended_one_by_one_round_trip(
    agent_client: httpx.AsyncClient, sid: str
) -> None:
    """The same Responses corpus appended an item per request (how an agent writes): the
    stored order and bytes do not depend on how the appends were cut."""
    await create(agent_client, sid)
    sent = copy.deepcopy(se.RESPONSES_ITEMS)
    for item in sent:
        await append_in(agent_client, sid, "openai-responses", {"items": [item]})
    assert_same_json(
        (await read_items(agent_client, sid, "openai-responses"))["items"], sent, what="GET /items"
    )
    payload = payload_of(await context_in(agent_client, sid, "openai-responses"))
    assert_same_json(payload["input"], sent, what="POST /context")


# -- provider ids are data ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
async def test_repeated_provider_ids_never_conflict(
    agent_client: httpx.AsyncClient, sid: str, fmt: str
) -> None:
    """The same items (same ``id``s, call ids, tool_use ids) appended twice, in two appends
    (the Agents SDK's scripted models repeat ids across runs): both succeed and both copies
    come back, in the items view and in the projection."""
    await create(agent_client, sid)
    body = corpus(fmt)
    if fmt == "openai-responses":  # "must be the final input item": not in the middle
        body["items"] = [i for i in body["items"] if i.get("type") != "compaction_trigger"]
    first = await append_in(agent_client, sid, fmt, copy.deepcopy(body))
    second_body = copy.deepcopy(body)
    second_body.pop("system", None)
    second_body.pop("system_instruction", None)
    second = await append_in(agent_client, sid, fmt, second_body)
    assert not {i["id"] for i in first["items"]} & {i["id"] for i in second["items"]}
    twice = body["items"] + body["items"]
    assert_same_json(
        (await read_items(agent_client, sid, fmt))["items"], twice, what="GET /items, two copies"
    )
    payload = payload_of(await context_in(agent_client, sid, fmt))
    assert_same_json(payload[PAYLOAD_KEY[fmt]], twice, what="POST /context, two copies")


async def test_envelope_keys_leave_the_provider_item(
    agent_client: httpx.AsyncClient, sid: str
) -> None:
    """``pinned`` and ``metadata`` stay envelope keys in a provider format: taken off the stored
    item (which comes back as the SDK shape) and kept on the canonical item."""
    await create(agent_client, sid)
    item = copy.deepcopy(se.RESPONSES_EXAMPLES["ResponseOutputMessageParam"][0])
    appended = await append_in(
        agent_client,
        sid,
        "openai-responses",
        {"items": [{**item, "pinned": True, "metadata": {"turn": 3}}]},
    )
    assert appended["items"][0]["pinned"] is True and appended["items"][0]["metadata"] == {
        "turn": 3
    }
    assert_same_json(
        (await read_items(agent_client, sid, "openai-responses"))["items"],
        [item],
        what="GET /items",
    )


async def test_pop_renders_the_item_it_removed(agent_client: httpx.AsyncClient, sid: str) -> None:
    await create(agent_client, sid)
    sent = [
        copy.deepcopy(se.RESPONSES_EXAMPLES["ItemReference"][0]),
        {"type": "message", "role": "user", "content": "Thanks."},
        copy.deepcopy(se.RESPONSES_EXAMPLES["ResponseOutputMessageParam"][-1]),
    ]
    await append_in(agent_client, sid, "openai-responses", {"items": sent})
    r = await agent_client.post(
        f"/v1/sessions/{sid}/items/pop", params={"format": "openai-responses"}
    )
    assert r.status_code == 200, r.text
    assert_same_json(r.json()["rendered"], sent[-1], what="pop rendered")
    assert_same_json(
        (await read_items(agent_client, sid, "openai-responses"))["items"],
        sent[:-1],
        what="after pop",
    )


# -- limits that fit agents --------------------------------------------------------------------


async def test_a_1_2_mb_screenshot_is_accepted_with_default_limits(
    agent_client: httpx.AsyncClient, sid: str
) -> None:
    await create(agent_client, sid)
    call = copy.deepcopy(se.RESPONSES_EXAMPLES["ResponseComputerToolCallParam"][0])
    output = next(
        o
        for o in se.RESPONSES_EXAMPLES["ComputerCallOutput"]
        if o["output"].get("image_url") == se.BIG_SCREENSHOT_URL
    )
    assert len(json.dumps(output)) > 1_200_000
    sent = [{"role": "user", "content": "Take a screenshot."}, call, copy.deepcopy(output)]
    appended = await append_in(agent_client, sid, "openai-responses", {"items": sent})
    assert appended["items"][2]["chars"] < 1000, "a screenshot's base64 is not text"
    assert_same_json(
        (await read_items(agent_client, sid, "openai-responses"))["items"], sent, what="GET /items"
    )
    payload = payload_of(await context_in(agent_client, sid, "openai-responses"))
    assert_same_json(payload["input"], sent, what="POST /context")


# -- what real SDKs send beyond their own types -------------------------------------------------


async def test_the_agents_sdk_local_shell_output_pairs_by_call_id(
    agent_client: httpx.AsyncClient, sid: str
) -> None:
    """The SDK type of ``local_shell_call_output`` names its call by ``id``; the Agents SDK
    sends ``call_id`` instead (agents/run_internal/tool_actions.py). Either way the output
    answers its call: nothing is dropped as dangling, both come back as sent."""
    await create(agent_client, sid)
    call = copy.deepcopy(se.RESPONSES_EXAMPLES["LocalShellCall"][0])
    sent = [
        {"role": "user", "content": "grep for random ordering"},
        call,
        {
            "type": "local_shell_call_output",
            "call_id": call["call_id"],
            "output": '{"output": "", "metadata": {"exit_code": 1}}',
        },
        {"type": "message", "role": "assistant", "content": "No matches."},
    ]
    await append_in(agent_client, sid, "openai-responses", {"items": sent})
    assert_same_json(
        (await read_items(agent_client, sid, "openai-responses"))["items"], sent, what="GET /items"
    )
    served = await context_in(agent_client, sid, "openai-responses")
    assert_same_json(served["input"], sent, what="POST /context")


# -- rendering into another format -------------------------------------------------------------

NOT_NEEDLES = {
    "type",
    "role",
    "status",
    "detail",
    "phase",
    "media_type",
    "format",
    "execution",
    "button",
}
# Keys whose values name another item (pairing ids): flattened renderings rarely keep them.
ID_KEYS = {
    "id",
    "call_id",
    "tool_use_id",
    "tool_call_id",
    "approval_request_id",
    "caller_id",
    "tool_id",
}
# Fields that annotate a unit rather than hold content: lost silently in another format, fine.
METADATA = {
    "citations",
    "annotations",
    "logprobs",
    "cache_control",
    "caller",
    "prompt_cache_breakpoint",
}
# What a note may call a unit by, besides its own type: the canonical names.
ALIASES = {
    "thinking": ("reasoning",),
    "redacted_thinking": ("reasoning",),
    "tool_use": ("function_call",),
    "tool_result": ("function_call_output",),
    "tool_calls": ("function_call",),
    # the canonical name notes use for every image part
    "input_image": ("image",),
    "image_url": ("image",),
}


def _leaves(value: Any, key: str | None = None) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _leaves(v, k)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v, key)]
    if isinstance(value, str) and key not in NOT_NEEDLES:
        return [value]
    return []


def _pairs(value: Any) -> list[tuple[str, Any]]:
    """Every (key, value) pair in a JSON value, at any depth."""
    if isinstance(value, dict):
        return [(k, v) for k, v in value.items()] + [p for v in value.values() for p in _pairs(v)]
    if isinstance(value, list):
        return [p for v in value for p in _pairs(v)]
    return []


def _variants(needle: str) -> list[str]:
    """A source string and the forms another format may carry it in."""
    out = [needle.strip()]
    if needle.startswith("data:") and ";base64," in needle:
        out.append(needle.split(",", 1)[1])
    try:
        parsed = json.loads(needle)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict | list):
        out.extend(s for s in _leaves(parsed) if len(s) >= 3)
    return [v for v in out if len(v) >= 3]


def left_out(source: list[Any], rendered: Any) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The outermost source units (top-level items and messages, and any object with a
    ``type`` inside them: blocks, parts, results) none of whose own strings reach the rendered
    payload, each as the names a note may call it by (its type and the canonical name, the key
    it sits under; for a message without a type its role and fields).

    A unit's needles are its string leaves of 3 characters or more, not enumerations such as
    ``type`` or ``status``: those that are not pairing ids and occur in no other top-level
    source item; failing those, its other non-id strings; failing those, its ids. A unit is
    carried when a needle, or a form another format may carry it in (a data URL's base64, a
    JSON string's values), occurs in the rendered strings. A carried unit's typed children are checked in
    turn; metadata fields (citations, annotations, ...) are not."""
    haystack = "\n".join(_leaves(rendered))
    owners: dict[str, set[int]] = {}
    for k, item in enumerate(source):
        for s in _leaves(item):
            owners.setdefault(s, set()).add(k)
    missing: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def names(unit: dict[str, Any], key: Any) -> tuple[str, ...]:
        out = [str(unit["type"])] if "type" in unit else []
        if isinstance(key, str):
            out.append(key)
        if "type" not in unit:
            if set(unit) == {"id"}:
                out.append("item_reference")  # the SDK makes its ``type`` optional
            out += [str(unit.get("role", "message"))] + [
                k for k, v in unit.items() if v and k != "role"
            ]
        out += [alias for name in list(out) for alias in ALIASES.get(name, ())]
        return tuple(out) or ("item",)

    def visit(unit: dict[str, Any], key: Any, k: int, outer: tuple[str, ...] = ()) -> None:
        # a part inside a part the notes name (a document's source) is named by it too
        strings = [s for s in _leaves(unit) if len(s.strip()) >= 3]
        ids = set(_leaves({key: v for key, v in _pairs(unit) if key in ID_KEYS}))
        content = [s for s in strings if s not in ids]
        owned = [s for s in content if owners[s] == {k}]
        needles = owned or content or strings
        if needles and not any(v in haystack for s in needles for v in _variants(s)):
            missing.append((names(unit, key) + outer, unit))
            return
        inner = outer + names(unit, key)
        for child_key, child in unit.items():
            if child_key not in METADATA:
                for grandchild in child if isinstance(child, list) else [child]:
                    if isinstance(grandchild, dict) and "type" in grandchild:
                        visit(grandchild, child_key, k, inner)
                    elif isinstance(grandchild, dict):
                        for v in grandchild.values():  # an untyped wrapper: look inside
                            for g in v if isinstance(v, list) else [v]:
                                if isinstance(g, dict) and "type" in g:
                                    visit(g, child_key, k, inner)

    for k, item in enumerate(source):
        visit(item, None, k)
    return missing


def assert_left_out_named(source: list[Any], rendered: Any, notes: list[str], *, what: str) -> None:
    unnamed = [
        (names, unit)
        for names, unit in left_out(source, rendered)
        if not any(n in note for n in names for note in notes)
    ]
    shown = "".join(f"\n  {names[0]}: {json.dumps(unit)[:240]}" for names, unit in unnamed[:12])
    assert not unnamed, (
        f"{what}: left out without a note naming them: {sorted({n[0] for n, _ in unnamed})}; "
        f"notes: {notes}{shown}"
    )


CROSS = [(src, dst) for src in PROVIDER_FORMATS for dst in PROVIDER_FORMATS if src != dst]


@pytest.mark.parametrize(("src", "dst"), CROSS, ids=[f"{s}-as-{d}" for s, d in CROSS])
async def test_a_corpus_read_in_another_format_is_valid_and_names_what_it_left_out(
    agent_client: httpx.AsyncClient, sid: str, src: str, dst: str
) -> None:
    await create(agent_client, sid)
    body = corpus(src)
    await append_in(agent_client, sid, src, body)
    source = body["items"] + [
        {"type": "system", "content": body[key]}
        for key in ("system", "system_instruction")
        if key in body
    ]

    page = await read_items(agent_client, sid, dst)
    problems = []
    for k, item in enumerate(page["items"]):
        try:
            validate_item_faithful(dst, item, where=f"items[{k}]")
        except PayloadError as exc:
            problems.append(str(exc)[:600])
    assert not problems, f"GET /items?format={dst} of {src} items:\n" + "\n".join(problems[:5])
    rendered_items = {"items": page["items"], "system": page["systems"]}
    assert_left_out_named(source, rendered_items, page["notes"], what=f"GET /items?format={dst}")

    served = await context_in(agent_client, sid, dst)
    payload = payload_of(served)
    validate_payload_faithful(dst, payload)
    notes = served["report"]["notes"]
    assert isinstance(notes, list) and all(isinstance(n, str) for n in notes)
    assert_left_out_named(source, payload, notes, what=f"POST /context {dst}")


def test_the_left_out_check_notices_a_dropped_item() -> None:
    """The heuristic the cross-format test stands on: a dropped item (and a dropped part of a
    kept item) is found, a carried one is not, a data URL carried as bare base64 counts."""
    source = [
        {
            "type": "web_search_call",
            "id": "ws_68a1f0e3c7d88190",
            "status": "completed",
            "action": {"type": "search", "query": "postgres slow order by"},
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Here is the screenshot you asked for."},
                {"type": "input_image", "image_url": se.SMALL_PNG_URL, "detail": "auto"},
                {"type": "input_file", "file_id": "file-1xQm3YtVbWkQ9rT5Zp8aLc"},
            ],
        },
    ]
    rendered = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is the screenshot you asked for."},
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": se.SMALL_PNG_B64,
                        },
                    },
                ],
            }
        ]
    }
    assert [names[0] for names, _ in left_out(source, rendered)] == [
        "web_search_call",
        "input_file",
    ]
    assert_left_out_named(
        source,
        rendered,
        ["left out 1 web_search_call (hosted tool)", "input_file parts dropped"],
        what="ok",
    )
    with pytest.raises(AssertionError, match="input_file"):
        assert_left_out_named(
            source, rendered, ["left out 1 web_search_call (hosted tool)"], what="unnamed"
        )
