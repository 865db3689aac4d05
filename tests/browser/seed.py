"""A realistic 200-item session for the inspector's browser tests (and for trying the page by
hand: ``python -m tests.browser.seed http://127.0.0.1:8080 demo-agent``)."""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import httpx

# A 4x4 red PNG: an image the page must show inline.
RED_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000004000000040802000000269309"
        "290000001549444154789c63f8cfc0f09f811188610200e1ff0f0142f2b8e9f9"
        "0000000049454e44ae426082"
    )
).decode()
FILES = ["app/main.py", "app/domain/projection.py", "README.md", "tests/test_api.py"]


def session_items(turns: int = 40) -> list[dict[str, Any]]:
    """``1 + 5 * turns - 1`` items: a system prompt, then turns of user request, reasoning,
    tool call, tool output and assistant answer (the first user message carries an image)."""
    items: list[dict[str, Any]] = [
        {
            "type": "message",
            "role": "system",
            "content": "You are a careful coding agent. Read files before changing them.",
        }
    ]
    for t in range(turns):
        path = FILES[t % len(FILES)]
        call_id = f"call_{t:03d}"
        content: Any = f"Turn {t}: please look at {path} and tell me what it does."
        if t == 0:
            content = [
                {"type": "text", "text": content + " Here is a screenshot of the failure."},
                {"type": "image", "url": f"data:image/png;base64,{RED_PNG}", "detail": "auto"},
            ]
        items.append({"type": "message", "role": "user", "content": content})
        items.append({"type": "reasoning", "summary": [f"I should read {path} first (turn {t})."]})
        items.append(
            {
                "type": "function_call",
                "call_id": call_id,
                "name": "read_file",
                "arguments": json.dumps({"path": path}),
            }
        )
        items.append(
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": f"# {path} (turn {t})\n" + f"line {t} of a long file\n" * 30,
            }
        )
        if t < turns - 1:  # the session ends on an open request, like a live agent's
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": f"{path} wires things together; turn {t} done.",
                }
            )
    return items


def seed_session(
    base_url: str, session_id: str, *, headers: dict[str, str] | None = None, turns: int = 40
) -> int:
    """Create ``session_id`` and append the items in batches; returns the item count."""
    items = session_items(turns)
    with httpx.Client(base_url=base_url, headers=headers or {}, timeout=30) as client:
        r = client.post(
            "/v1/sessions",
            json={"id": session_id, "metadata": {"agent": "coder", "team": "inspector"}},
        )
        r.raise_for_status()
        for start in range(0, len(items), 50):
            r = client.post(
                f"/v1/sessions/{session_id}/items", json={"items": items[start : start + 50]}
            )
            r.raise_for_status()
    return len(items)


if __name__ == "__main__":
    print(seed_session(sys.argv[1], sys.argv[2]))


def trust_items() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Three batches for the inspector's trust checks: Gemini turns whose calls have no id
    (the same tool twice, so their derived call ids repeat), a Responses reasoning item, and
    canonical items (an untyped object, a tool output) that a search for "zebra" finds."""
    gemini: list[dict[str, Any]] = []
    for name, word in (("a.py", "alpha"), ("b.py", "bravo")):
        gemini += [
            {"role": "user", "parts": [{"text": f"Please read {name}."}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"name": "read_file", "args": {"path": name}}}],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "read_file",
                            "response": {"output": f"{word} zebra"},
                        }
                    }
                ],
            },
            {"role": "model", "parts": [{"text": f"{name} holds {word}."}]},
        ]
    responses = [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "The zebra question needs care."}],
        }
    ]
    canonical = [
        {"note": "an untyped zebra object", "kind": 3},
        {"type": "message", "role": "user", "content": "What did the zebra files hold?"},
    ]
    return gemini, responses, canonical


def seed_trust_session(
    base_url: str, session_id: str, *, headers: dict[str, str] | None = None
) -> None:
    gemini, responses, canonical = trust_items()
    with httpx.Client(base_url=base_url, headers=headers or {}, timeout=30) as client:
        client.post("/v1/sessions", json={"id": session_id}).raise_for_status()
        for fmt, items in (
            ("gemini", gemini),
            ("openai-responses", responses),
            ("canonical", canonical),
        ):
            r = client.post(
                f"/v1/sessions/{session_id}/items", json={"format": fmt, "items": items}
            )
            r.raise_for_status()
