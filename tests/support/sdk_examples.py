"""A corpus of real provider items, one or more for every member of the installed SDKs' unions.

Three transcripts, each in an order its provider accepts (pairs adjacent, outputs after their
calls, a user turn first for Anthropic):

- ``RESPONSES_CORPUS``: OpenAI Responses input items, each tagged with the member of
  ``openai.types.responses.response_input_item_param.ResponseInputItemParam`` it is an example of;
- ``CHAT_CORPUS``: Chat Completions messages, tagged with their ``ChatCompletionMessageParam``
  member;
- ``ANTHROPIC_EXCHANGES``: Anthropic Messages exchanges (each starts with a user turn and ends
  with an assistant turn, so they concatenate into a valid conversation), plus
  ``ANTHROPIC_SYSTEM`` (top-level ``system`` blocks with ``cache_control``) and, apart because
  where the API puts them is not settled, ``ANTHROPIC_SYSTEM_ROLE_EXCHANGES`` (``role: system``
  messages, a member of the SDK's ``MessageParam`` union).

``RESPONSES_EXAMPLES`` / ``CHAT_EXAMPLES`` / ``ANTHROPIC_EXAMPLES`` key the examples by SDK type
name. The member lists are derived from the unions at import time, and importing this module
fails (``MissingExample``) when a member has no example: a new SDK release that adds a type fails
the tests instead of users. ``NESTED_*`` name the nested unions (content parts, annotations,
actions, block contents, ...) whose every member must appear somewhere in the examples.

One computer-use screenshot is a real ~1.2 MB PNG as a base64 data URL (``BIG_SCREENSHOT_URL``).
"""

from __future__ import annotations

import base64
import io
import json
import random
import struct
import wave
import zlib
from collections.abc import Iterator
from functools import cache
from typing import Any

import anthropic.types as at
import openai.types.chat as oc
import openai.types.responses as orr
from anthropic.types import content_block_source_param as at_cbs
from google.genai import types as gt
from openai.types.chat import chat_completion_assistant_message_param as oc_assistant
from openai.types.chat import chat_completion_user_message_param as oc_user
from openai.types.responses import response_input_item_param as rip
from openai.types.responses import response_output_text_param as rot

from tests.support.provider_validation import (
    ANTHROPIC_BLOCK_MEMBERS,
    ANTHROPIC_MESSAGE_MEMBERS,
    CHAT_MEMBERS,
    RESPONSES_MEMBERS,
    PayloadError,
    field_members,
    literal_values,
    strict_validate_eager,
    validate_anthropic_message,
    validate_chat_message,
    validate_responses_item,
)

Item = dict[str, Any]


class MissingExample(AssertionError):
    """A member of an SDK union has no example in this corpus."""


# -- binary payloads --------------------------------------------------------------------------


def _png(width: int, height: int, *, seed: int) -> bytes:
    """A valid RGB PNG of noise (noise does not compress, so the size is predictable)."""
    rng = random.Random(seed)
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )


@cache
def big_screenshot_url() -> str:
    """A 640x480 screenshot as a data URL: ~1.23 MB of base64, like a computer-use turn's."""
    return "data:image/png;base64," + base64.b64encode(_png(640, 480, seed=13)).decode()


BIG_SCREENSHOT_URL = big_screenshot_url()
SMALL_PNG_B64 = base64.b64encode(_png(4, 4, seed=1)).decode()
SMALL_PNG_URL = "data:image/png;base64," + SMALL_PNG_B64
PDF_B64 = base64.b64encode(
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 612 792]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
).decode()
CSV_B64 = base64.b64encode(b"endpoint,p50_ms,p95_ms\n/checkout,310,2310\n/cart,40,95\n").decode()


def _wav_b64() -> str:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * 800)
    return base64.b64encode(buf.getvalue()).decode()


WAV_B64 = _wav_b64()


def encrypted(seed: int) -> str:
    """A blob shaped like OpenAI's ``encrypted_content`` (each item's own)."""
    rng = random.Random(seed)
    return "gAAAAABo" + base64.urlsafe_b64encode(rng.randbytes(180)).decode()


# -- OpenAI Responses -------------------------------------------------------------------------

_PARAMETERS = {
    "type": "object",
    "properties": {"sql": {"type": "string"}},
    "required": ["sql"],
    "additionalProperties": False,
}

RESPONSES_CORPUS: list[tuple[Any, Item]] = [
    (
        orr.EasyInputMessageParam,
        {
            "type": "message",
            "role": "developer",
            "content": "You are a coding agent in the repository at /srv/shop. Prefer small diffs.",
        },
    ),
    (
        orr.ResponseCompactionItemParamParam,
        {
            "type": "compaction",
            "id": "cmp_68a1f0c2b3e4819f",
            "encrypted_content": encrypted(1),
        },
    ),
    # The Agents SDK's shape for user input: no ``type``.
    (
        orr.EasyInputMessageParam,
        {
            "content": "The checkout page got slow after Tuesday's deploy. Can you find out why?",
            "role": "user",
        },
    ),
    (
        rip.Message,
        {
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [
                {
                    "type": "input_text",
                    "text": "Here is the dashboard, the runbook and the profile.",
                },
                {
                    "type": "input_image",
                    "image_url": "https://grafana.example.com/render/checkout.png",
                    "detail": "high",
                },
                {"type": "input_image", "file_id": "file-6F2ksmvXxt4VdoqmHRw6kL", "detail": "auto"},
                {"type": "input_file", "file_id": "file-1xQm3YtVbWkQ9rT5Zp8aLc"},
                {
                    "type": "input_file",
                    "filename": "profile.pdf",
                    "file_data": "data:application/pdf;base64," + PDF_B64,
                },
                {
                    "type": "input_file",
                    "file_url": "https://docs.example.com/runbooks/checkout.pdf",
                    "detail": "low",
                },
            ],
        },
    ),
    (
        rip.Message,
        {
            "type": "message",
            "role": "system",
            "content": [
                {
                    "type": "input_text",
                    "text": "Production database access is read-only.",
                    "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "30m"},
                }
            ],
        },
    ),
    (
        orr.EasyInputMessageParam,
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "And this screenshot from a customer:"},
                {"type": "input_image", "image_url": SMALL_PNG_URL, "detail": "original"},
            ],
        },
    ),
    (
        rip.AdditionalTools,
        {
            "type": "additional_tools",
            "id": "at_68a1f0c2b3e4819f",
            "role": "developer",
            "tools": [
                {
                    "type": "function",
                    "name": "query_db",
                    "description": "Run a read-only SQL query against the replica.",
                    "parameters": _PARAMETERS,
                    "strict": True,
                }
            ],
        },
    ),
    (
        orr.ResponseConfigurationUpdateItemParamParam,
        {
            "type": "configuration_update",
            "id": "cfg_68a1f0c2b3e4819f",
            "reasoning": {"effort": "high"},
            "text": {"format": {"type": "text"}},
        },
    ),
    (
        orr.ResponseReasoningItemParam,
        {
            "type": "reasoning",
            "id": "rs_68a1f0d91c5c8190a6c3",
            "summary": [
                {"type": "summary_text", "text": "**Planning the investigation**\n\nProfile first."}
            ],
            "content": [
                {"type": "reasoning_text", "text": "The deploy touched checkout.py; read it."}
            ],
            "encrypted_content": encrypted(2),
            "status": "completed",
        },
    ),
    (
        orr.ResponseOutputMessageParam,
        {
            "id": "msg_68a1f0dc4e7c8190b1d2",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "phase": "commentary",
            "content": [
                {
                    "type": "output_text",
                    "text": "I'll start with the checkout handler.",
                    "annotations": [],
                }
            ],
        },
    ),
    (
        orr.ResponseFunctionToolCallParam,
        {
            "type": "function_call",
            "id": "fc_68a1f0dd0a2c8190",
            "call_id": "call_rPq2d4NcX1bZt8Hm",
            "namespace": "repo",
            "name": "read_file",
            "arguments": '{"path": "shop/checkout.py"}',
            "status": "completed",
            "caller": {"type": "direct"},
        },
    ),
    (
        rip.FunctionCallOutput,
        {
            "type": "function_call_output",
            "id": "fco_68a1f0de7b1c8190",
            "call_id": "call_rPq2d4NcX1bZt8Hm",
            "output": "def checkout(cart):\n    items = Item.objects.order_by('?')\n    ...\n",
            "status": "completed",
        },
    ),
    # The Agents SDK's plain shape, and a tool that returns an image and a file (ToolOutputImage).
    (
        orr.ResponseFunctionToolCallParam,
        {
            "type": "function_call",
            "call_id": "call_Fm8Lq0Wc3Tz9Yb2K",
            "name": "render_flamegraph",
            "arguments": "{}",
        },
    ),
    (
        rip.FunctionCallOutput,
        {
            "type": "function_call_output",
            "call_id": "call_Fm8Lq0Wc3Tz9Yb2K",
            "output": [
                {"type": "input_text", "text": "Flamegraph of /checkout, 60 s sample."},
                {"type": "input_image", "image_url": SMALL_PNG_URL, "detail": "high"},
                {"type": "input_image", "file_id": "file-Ab12Cd34Ef56Gh78Ij90Kl"},
                {
                    "type": "input_file",
                    "file_data": "data:text/csv;base64," + CSV_B64,
                    "filename": "profile.csv",
                },
            ],
        },
    ),
    (
        orr.ResponseReasoningItemParam,
        {
            "type": "reasoning",
            "id": "rs_68a1f0e1aa408190b77e",
            "summary": [],
            "encrypted_content": encrypted(3),
        },
    ),
    (
        orr.ResponseFunctionWebSearchParam,
        {
            "type": "web_search_call",
            "id": "ws_68a1f0e3c7d88190",
            "status": "completed",
            "action": {
                "type": "search",
                "query": "postgres ORDER BY random() slow large table",
                "queries": ["postgres ORDER BY random() slow", "postgres TABLESAMPLE"],
                "sources": [
                    {
                        "type": "url",
                        "url": "https://www.postgresql.org/docs/current/sql-select.html",
                    }
                ],
            },
        },
    ),
    (
        orr.ResponseFunctionWebSearchParam,
        {
            "type": "web_search_call",
            "id": "ws_68a1f0e4d1e08190",
            "status": "completed",
            "action": {
                "type": "open_page",
                "url": "https://www.postgresql.org/docs/current/sql-select.html",
            },
        },
    ),
    (
        orr.ResponseFunctionWebSearchParam,
        {
            "type": "web_search_call",
            "id": "ws_68a1f0e5e2f18190",
            "status": "completed",
            "action": {
                "type": "find_in_page",
                "url": "https://www.postgresql.org/docs/current/sql-select.html",
                "pattern": "TABLESAMPLE",
            },
        },
    ),
    (
        orr.ResponseFileSearchToolCallParam,
        {
            "type": "file_search_call",
            "id": "fs_68a1f0e6f3028190",
            "status": "completed",
            "queries": ["checkout latency runbook"],
            "results": [
                {
                    "file_id": "file-1xQm3YtVbWkQ9rT5Zp8aLc",
                    "filename": "checkout-runbook.md",
                    "score": 0.8731,
                    "text": "If p95 exceeds 1 s, check for full table scans first.",
                    "attributes": {"team": "payments", "revision": 3, "public": False},
                }
            ],
        },
    ),
    (
        orr.ResponseCodeInterpreterToolCallParam,
        {
            "type": "code_interpreter_call",
            "id": "ci_68a1f0e804138190",
            "status": "completed",
            "container_id": "cntr_68a1f0c0e1f48190a2b3",
            "code": "import pandas as pd\ndf = pd.read_csv('/mnt/data/profile.csv')\nprint(df.p95_ms.max())",
            "outputs": [
                {"type": "logs", "logs": "2310\n"},
                {"type": "image", "url": "https://files.example.com/cntr/plot.png"},
            ],
        },
    ),
    (
        rip.ImageGenerationCall,
        {
            "type": "image_generation_call",
            "id": "ig_68a1f0e915248190",
            "status": "completed",
            "result": SMALL_PNG_B64,
            "revised_prompt": "A bar chart of checkout p95 latency per day, flat design.",
            "action": "generate",
            "background": "opaque",
            "output_format": "png",
            "quality": "low",
            "size": "1024x1024",
        },
    ),
    (
        orr.ResponseOutputMessageParam,
        {
            "id": "msg_68a1f0ea26358190c3e4",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "The handler sorts the whole catalogue with ORDER BY random() [1].",
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url": "https://www.postgresql.org/docs/current/sql-select.html",
                            "title": "PostgreSQL: SELECT",
                            "start_index": 53,
                            "end_index": 56,
                        },
                        {
                            "type": "file_citation",
                            "file_id": "file-1xQm3YtVbWkQ9rT5Zp8aLc",
                            "filename": "checkout-runbook.md",
                            "index": 10,
                        },
                        {
                            "type": "container_file_citation",
                            "container_id": "cntr_68a1f0c0e1f48190a2b3",
                            "file_id": "cfile_68a1f0eb3746",
                            "filename": "plot.png",
                            "start_index": 0,
                            "end_index": 11,
                        },
                        {"type": "file_path", "file_id": "cfile_68a1f0eb3746", "index": 20},
                    ],
                    "logprobs": [
                        {
                            "token": "The",
                            "bytes": [84, 104, 101],
                            "logprob": -0.0012,
                            "top_logprobs": [
                                {"token": "The", "bytes": [84, 104, 101], "logprob": -0.0012}
                            ],
                        }
                    ],
                }
            ],
        },
    ),
    (
        orr.EasyInputMessageParam,
        {"role": "user", "content": "Can you confirm it in the staging admin UI?"},
    ),
    (
        orr.ResponseReasoningItemParam,
        {
            "type": "reasoning",
            "id": "rs_68a1f0ec48578190d5f6",
            "summary": [
                {"type": "summary_text", "text": "Open the admin UI and take a screenshot."}
            ],
        },
    ),
    (
        orr.ResponseComputerToolCallParam,
        {
            "type": "computer_call",
            "id": "cu_68a1f0ed59688190",
            "call_id": "call_Cu7Vb3Nm1Qw5Er9T",
            "status": "completed",
            "pending_safety_checks": [],
            "action": {"type": "screenshot"},
        },
    ),
    (
        rip.ComputerCallOutput,
        {
            "type": "computer_call_output",
            "call_id": "call_Cu7Vb3Nm1Qw5Er9T",
            "output": {"type": "computer_screenshot", "image_url": BIG_SCREENSHOT_URL},
        },
    ),
    (
        orr.ResponseComputerToolCallParam,
        {
            "type": "computer_call",
            "id": "cu_68a1f0ee6a798190",
            "call_id": "call_Cu2Xc8Lk4Jh6Gf0D",
            "status": "completed",
            "pending_safety_checks": [
                {
                    "id": "cu_sc_68a1f0ee",
                    "code": "malicious_instructions",
                    "message": "The page asks the agent to log in elsewhere.",
                }
            ],
            "actions": [
                {"type": "click", "button": "left", "x": 412, "y": 318},
                {"type": "double_click", "x": 412, "y": 318, "keys": None},
                {"type": "type", "text": "order 1234"},
                {"type": "keypress", "keys": ["ENTER"]},
                {"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": 600},
                {"type": "move", "x": 100, "y": 200},
                {"type": "drag", "path": [{"x": 100, "y": 200}, {"x": 300, "y": 200}]},
                {"type": "wait"},
                {"type": "screenshot"},
            ],
        },
    ),
    (
        rip.ComputerCallOutput,
        {
            "type": "computer_call_output",
            "id": "cuo_68a1f0ef7b8a8190",
            "call_id": "call_Cu2Xc8Lk4Jh6Gf0D",
            "acknowledged_safety_checks": [
                {
                    "id": "cu_sc_68a1f0ee",
                    "code": "malicious_instructions",
                    "message": "The page asks the agent to log in elsewhere.",
                }
            ],
            "output": {"type": "computer_screenshot", "file_id": "file-Sc4Rn5Tm6Uo7Vp8Wq9Xr0Y"},
            "status": "completed",
        },
    ),
    (
        orr.ResponseCustomToolCallParam,
        {
            "type": "custom_tool_call",
            "id": "ctc_68a1f0f08c9b8190",
            "call_id": "call_Ct5Yh2Bn7Mk0Lp3Q",
            "namespace": "db",
            "name": "run_sql",
            "input": "SELECT count(*) FROM orders WHERE created_at > now() - interval '1 day';",
        },
    ),
    (
        orr.ResponseCustomToolCallOutputParam,
        {
            "type": "custom_tool_call_output",
            "call_id": "call_Ct5Yh2Bn7Mk0Lp3Q",
            "output": " count\n-------\n 48213\n(1 row)\n",
        },
    ),
    (
        orr.ResponseCustomToolCallParam,
        {
            "type": "custom_tool_call",
            "call_id": "call_Ct9Gf4Ds1Az6Xc8V",
            "name": "chart",
            "input": "bar: day -> p95_ms from last 7 days",
            "caller": {"type": "direct"},
        },
    ),
    (
        orr.ResponseCustomToolCallOutputParam,
        {
            "type": "custom_tool_call_output",
            "id": "ctco_68a1f0f19dac8190",
            "call_id": "call_Ct9Gf4Ds1Az6Xc8V",
            "output": [
                {"type": "input_text", "text": "Chart rendered."},
                {"type": "input_image", "image_url": SMALL_PNG_URL, "detail": "low"},
                {"type": "input_file", "file_id": "file-Ch4rtP4ng00000000001"},
            ],
        },
    ),
    (
        rip.LocalShellCall,
        {
            "type": "local_shell_call",
            "id": "lsh_68a1f0f2aebd8190",
            "call_id": "call_Ls3Kj8Hg2Fd7Sa1Z",
            "status": "completed",
            "action": {
                "type": "exec",
                "command": ["bash", "-lc", "grep -rn 'order_by(.?.)' shop/"],
                "env": {"LANG": "C.UTF-8"},
                "timeout_ms": 10000,
                "working_directory": "/srv/shop",
                "user": "agent",
            },
        },
    ),
    # The SDK's type names the call by ``id`` (the call's call_id); it has no ``call_id`` field.
    (
        rip.LocalShellCallOutput,
        {
            "type": "local_shell_call_output",
            "id": "call_Ls3Kj8Hg2Fd7Sa1Z",
            "output": json.dumps(
                {
                    "output": "shop/checkout.py:2: items = Item.objects.order_by('?')\n",
                    "metadata": {"exit_code": 0},
                }
            ),
            "status": "completed",
        },
    ),
    (
        rip.ShellCall,
        {
            "type": "shell_call",
            "id": "sh_68a1f0f3bfce8190",
            "call_id": "call_Sh6Tr1Ew4Qa9Zx2C",
            "status": "completed",
            "action": {
                "commands": ["pytest -q tests/test_checkout.py"],
                "timeout_ms": 120000,
                "max_output_length": 4096,
            },
            "environment": {"type": "local"},
            "caller": {"type": "direct"},
        },
    ),
    (
        rip.ShellCallOutput,
        {
            "type": "shell_call_output",
            "id": "sho_68a1f0f4c0df8190",
            "call_id": "call_Sh6Tr1Ew4Qa9Zx2C",
            "max_output_length": 4096,
            "status": "completed",
            "output": [
                {
                    "stdout": "....\n4 passed in 1.21s\n",
                    "stderr": "",
                    "outcome": {"type": "exit", "exit_code": 0},
                }
            ],
        },
    ),
    (
        rip.ShellCall,
        {
            "type": "shell_call",
            "call_id": "call_Sh0Pl5Ok8Ij3Uh6Y",
            "action": {"commands": ["python bench/checkout.py --minutes 10"]},
            "environment": {
                "type": "container_reference",
                "container_id": "cntr_68a1f0c0e1f48190a2b3",
            },
        },
    ),
    (
        rip.ShellCallOutput,
        {
            "type": "shell_call_output",
            "call_id": "call_Sh0Pl5Ok8Ij3Uh6Y",
            "output": [{"stdout": "warming up...\n", "stderr": "", "outcome": {"type": "timeout"}}],
        },
    ),
    (
        rip.ApplyPatchCall,
        {
            "type": "apply_patch_call",
            "id": "ap_68a1f0f5d1e08190",
            "call_id": "call_Ap1Mn4Bv7Cx0Zl3K",
            "status": "completed",
            "operation": {
                "type": "update_file",
                "path": "shop/checkout.py",
                "diff": "@@ -1,3 +1,3 @@\n def checkout(cart):\n-    items = Item.objects.order_by('?')\n+    items = Item.objects.filter(id__in=cart.ids)\n",
            },
        },
    ),
    (
        rip.ApplyPatchCallOutput,
        {
            "type": "apply_patch_call_output",
            "id": "apo_68a1f0f6e2f18190",
            "call_id": "call_Ap1Mn4Bv7Cx0Zl3K",
            "status": "completed",
            "output": "Updated shop/checkout.py",
        },
    ),
    (
        rip.ApplyPatchCall,
        {
            "type": "apply_patch_call",
            "call_id": "call_Ap5Rt8Yu1Io4Pa7S",
            "status": "completed",
            "operation": {
                "type": "create_file",
                "path": "tests/test_checkout_perf.py",
                "diff": "+def test_fast():\n+    assert True\n",
            },
            "caller": {"type": "direct"},
        },
    ),
    (
        rip.ApplyPatchCallOutput,
        {
            "type": "apply_patch_call_output",
            "call_id": "call_Ap5Rt8Yu1Io4Pa7S",
            "status": "completed",
        },
    ),
    (
        rip.ApplyPatchCall,
        {
            "type": "apply_patch_call",
            "call_id": "call_Ap9Df2Gh5Jk8Lz1X",
            "status": "completed",
            "operation": {"type": "delete_file", "path": "shop/legacy_random.py"},
        },
    ),
    (
        rip.ApplyPatchCallOutput,
        {
            "type": "apply_patch_call_output",
            "call_id": "call_Ap9Df2Gh5Jk8Lz1X",
            "status": "failed",
            "output": "shop/legacy_random.py: no such file",
        },
    ),
    (
        rip.McpListTools,
        {
            "type": "mcp_list_tools",
            "id": "mcpl_68a1f0f7f4028190",
            "server_label": "stripe",
            "tools": [
                {
                    "name": "refund_charge",
                    "description": "Refund a charge.",
                    "input_schema": {
                        "type": "object",
                        "properties": {"charge": {"type": "string"}},
                        "required": ["charge"],
                    },
                    "annotations": {"readOnlyHint": False, "destructiveHint": True},
                },
                {
                    "name": "list_charges",
                    "input_schema": {"type": "object", "properties": {}},
                    "annotations": None,
                },
            ],
        },
    ),
    (
        rip.McpListTools,
        {
            "type": "mcp_list_tools",
            "id": "mcpl_68a1f0f805138190",
            "server_label": "flaky",
            "tools": [],
            "error": "connection refused",
        },
    ),
    (
        rip.McpApprovalRequest,
        {
            "type": "mcp_approval_request",
            "id": "mcpr_68a1f0f916248190",
            "server_label": "stripe",
            "name": "refund_charge",
            "arguments": '{"charge": "ch_3PqR2sT4uV5wX6yZ"}',
        },
    ),
    (
        rip.McpApprovalResponse,
        {
            "type": "mcp_approval_response",
            "id": "mcpa_68a1f0fa27358190",
            "approval_request_id": "mcpr_68a1f0f916248190",
            "approve": True,
            "reason": "The customer confirmed by phone.",
        },
    ),
    (
        rip.McpCall,
        {
            "type": "mcp_call",
            "id": "mcp_68a1f0fb38468190",
            "server_label": "stripe",
            "name": "refund_charge",
            "arguments": '{"charge": "ch_3PqR2sT4uV5wX6yZ"}',
            "approval_request_id": "mcpr_68a1f0f916248190",
            "output": '{"refund": "re_1Ab2Cd3Ef4", "status": "succeeded"}',
            "error": None,
            "status": "completed",
        },
    ),
    (
        rip.McpCall,
        {
            "type": "mcp_call",
            "id": "mcp_68a1f0fc49578190",
            "server_label": "stripe",
            "name": "list_charges",
            "arguments": '{"limit": -1}',
            "error": {
                "type": "mcp_protocol_error",
                "code": -32602,
                "message": "limit must be positive",
            },
            "status": "failed",
        },
    ),
    (
        rip.McpCall,
        {
            "type": "mcp_call",
            "id": "mcp_68a1f0fd5a688190",
            "server_label": "stripe",
            "name": "list_charges",
            "arguments": "{}",
            "error": {"type": "http_error", "code": 503, "message": "Service Unavailable"},
            "status": "failed",
        },
    ),
    (
        rip.McpCall,
        {
            "type": "mcp_call",
            "id": "mcp_68a1f0fe6b798190",
            "server_label": "stripe",
            "name": "list_charges",
            "arguments": "{}",
            "error": {
                "type": "mcp_tool_execution_error",
                "content": [{"type": "text", "text": "rate limited"}],
            },
            "status": "failed",
        },
    ),
    (
        rip.ToolSearchCall,
        {
            "type": "tool_search_call",
            "id": "tsc_68a1f0ff7c8a8190",
            "call_id": "call_Ts4Wq7Er0Ty3Ui6O",
            "execution": "client",
            "arguments": {"query": "issue a refund"},
            "status": "completed",
        },
    ),
    (
        orr.ResponseToolSearchOutputItemParamParam,
        {
            "type": "tool_search_output",
            "id": "tso_68a1f1008d9b8190",
            "call_id": "call_Ts4Wq7Er0Ty3Ui6O",
            "execution": "client",
            "status": "completed",
            "tools": [
                {
                    "type": "function",
                    "name": "issue_refund",
                    "description": "Refund an order.",
                    "parameters": {
                        "type": "object",
                        "properties": {"order": {"type": "string"}},
                        "required": ["order"],
                    },
                    "strict": True,
                }
            ],
        },
    ),
    (
        rip.Program,
        {
            "type": "program",
            "id": "prg_68a1f1019eac8190",
            "call_id": "call_Pg8Hj1Kl4Zx7Cv0B",
            "code": "const r = await tools.read_file({path: 'shop/checkout.py'});\nreturn r.split('\\n').length;",
            "fingerprint": "fp_v1_9c1e5b7a3d",
        },
    ),
    (
        orr.ResponseFunctionToolCallParam,
        {
            "type": "function_call",
            "call_id": "call_Rf2Tg5Yh8Uj1Ik4L",
            "name": "read_file",
            "arguments": '{"path": "shop/checkout.py"}',
            "caller": {"type": "program", "caller_id": "call_Pg8Hj1Kl4Zx7Cv0B"},
        },
    ),
    (
        rip.FunctionCallOutput,
        {
            "type": "function_call_output",
            "call_id": "call_Rf2Tg5Yh8Uj1Ik4L",
            "output": "def checkout(cart):\n    items = Item.objects.filter(id__in=cart.ids)\n",
            "caller": {"type": "program", "caller_id": "call_Pg8Hj1Kl4Zx7Cv0B"},
            "name": "read_file",
        },
    ),
    (
        rip.ProgramOutput,
        {
            "type": "program_output",
            "id": "prgo_68a1f102afbd8190",
            "call_id": "call_Pg8Hj1Kl4Zx7Cv0B",
            "result": "3",
            "status": "completed",
        },
    ),
    (
        orr.ResponseOutputMessageParam,
        {
            "id": "msg_68a1f103c0ce8190e7f8",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "refusal",
                    "refusal": "I can't refund more than $500 without a manager's approval.",
                }
            ],
        },
    ),
    (
        orr.ResponseOutputMessageParam,
        {
            "id": "msg_68a1f104d1df8190f9a0",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "phase": "final_answer",
            "content": [
                {
                    "type": "output_text",
                    "text": "Fixed: checkout no longer sorts the catalogue; p95 is back to 300 ms.",
                    "annotations": [],
                    "logprobs": [],
                },
                {"type": "refusal", "refusal": "I won't deploy to production myself."},
            ],
        },
    ),
    (rip.ItemReference, {"type": "item_reference", "id": "msg_68a1f0dc4e7c8190b1d2"}),
    (rip.ItemReference, {"id": "msg_68a1f0ea26358190c3e4"}),  # ``type`` is optional in the SDK
    (
        orr.EasyInputMessageParam,
        {"type": "message", "role": "user", "content": "Thanks. Compact the context, please."},
    ),
    (
        orr.EasyInputMessageParam,
        {
            "type": "message",
            "role": "assistant",
            "content": "Compacting now.",
            "phase": "final_answer",
        },
    ),
    # "Compacts the current context. Must be the final input item."
    (rip.CompactionTrigger, {"type": "compaction_trigger", "id": "ctr_68a1f105e2f08190"}),
]


# -- OpenAI Chat Completions ------------------------------------------------------------------

CHAT_CORPUS: list[tuple[Any, Item]] = [
    (
        oc.ChatCompletionDeveloperMessageParam,
        {
            "role": "developer",
            "content": "You are Acme's support agent. Be concise.",
            "name": "policy",
        },
    ),
    (
        oc.ChatCompletionDeveloperMessageParam,
        {
            "role": "developer",
            "content": [{"type": "text", "text": "Never promise delivery dates."}],
        },
    ),
    (oc.ChatCompletionSystemMessageParam, {"role": "system", "content": "Today is 2025-06-01."}),
    (
        oc.ChatCompletionSystemMessageParam,
        {
            "role": "system",
            "content": [
                {
                    "type": "text",
                    "text": "The customer is on the Pro plan.",
                    "prompt_cache_breakpoint": {"mode": "explicit", "ttl": "12h"},
                }
            ],
            "name": "crm",
        },
    ),
    (
        oc.ChatCompletionUserMessageParam,
        {"role": "user", "content": "Hi, my order hasn't arrived.", "name": "customer_42"},
    ),
    (
        oc.ChatCompletionAssistantMessageParam,
        {
            "role": "assistant",
            "content": "Sorry to hear that! Could you share the order number?",
            "name": "acme_bot",
        },
    ),
    (
        oc.ChatCompletionUserMessageParam,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Order A-1234. Here's the receipt and a voice note."},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://files.example.com/receipt.jpg", "detail": "high"},
                },
                {"type": "image_url", "image_url": {"url": SMALL_PNG_URL}},
                {"type": "input_audio", "input_audio": {"data": WAV_B64, "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-Rc4Pt7Qw1Er4Ty7U"}},
                {
                    "type": "file",
                    "file": {
                        "file_data": "data:application/pdf;base64," + PDF_B64,
                        "filename": "receipt.pdf",
                    },
                },
            ],
        },
    ),
    (
        oc.ChatCompletionAssistantMessageParam,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_Lk3Jh6Gf9Ds2Ap5O",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order": "A-1234"}'},
                },
                {
                    "id": "call_Qw8Er1Ty4Ui7Op0A",
                    "type": "custom",
                    "custom": {
                        "name": "sql",
                        "input": "SELECT status FROM shipments WHERE order_id = 'A-1234'",
                    },
                },
            ],
        },
    ),
    (
        oc.ChatCompletionToolMessageParam,
        {
            "role": "tool",
            "tool_call_id": "call_Lk3Jh6Gf9Ds2Ap5O",
            "content": '{"status": "in_transit", "carrier": "DHL"}',
        },
    ),
    (
        oc.ChatCompletionToolMessageParam,
        {
            "role": "tool",
            "tool_call_id": "call_Qw8Er1Ty4Ui7Op0A",
            "content": [{"type": "text", "text": "status\n----------\nin_transit\n(1 row)"}],
        },
    ),
    (
        oc.ChatCompletionAssistantMessageParam,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Your order is in transit with DHL."},
                {"type": "refusal", "refusal": "I can't share the courier's phone number."},
            ],
        },
    ),
    (oc.ChatCompletionUserMessageParam, {"role": "user", "content": "Just refund me."}),
    (
        oc.ChatCompletionAssistantMessageParam,
        {
            "role": "assistant",
            "content": None,
            "refusal": "I can't refund an order that is still in transit.",
        },
    ),
    (
        oc.ChatCompletionUserMessageParam,
        {"role": "user", "content": [{"type": "text", "text": "Say it out loud, please."}]},
    ),
    (
        oc.ChatCompletionAssistantMessageParam,
        {"role": "assistant", "content": None, "audio": {"id": "audio_6830a1f2c4e88190"}},
    ),
    (
        oc.ChatCompletionUserMessageParam,
        {"role": "user", "content": "What's the weather where it's going?"},
    ),
    (
        oc.ChatCompletionAssistantMessageParam,
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_weather", "arguments": '{"city": "Lyon"}'},
        },
    ),
    (
        oc.ChatCompletionFunctionMessageParam,
        {"role": "function", "name": "get_weather", "content": '{"temp_c": 21, "sky": "clear"}'},
    ),
    (
        oc.ChatCompletionAssistantMessageParam,
        {"role": "assistant", "content": "It's 21 °C and clear in Lyon."},
    ),
]


# -- Anthropic Messages -----------------------------------------------------------------------

ANTHROPIC_SYSTEM: list[Item] = [
    {
        "type": "text",
        "text": "You are a research assistant for the finance team. Cite your sources.",
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
    },
    {"type": "text", "text": "Answer in British English."},
]
ANTHROPIC_SYSTEM_STRING = "You are a research assistant for the finance team."

_SIGNATURE = "EqQBCkYIBRgCKkDw" + "3d9Kc1Zf" * 12
_B64_IMAGE = {"type": "base64", "media_type": "image/png", "data": SMALL_PNG_B64}

ANTHROPIC_EXCHANGES: list[list[Item]] = [
    # Documents, images and search results in a user turn; thinking and citations in the answer.
    [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Here are the Q2 materials."},
                {"type": "image", "source": _B64_IMAGE},
                {
                    "type": "image",
                    "source": {"type": "url", "url": "https://files.example.com/q2-chart.png"},
                    "cache_control": {"type": "ephemeral"},
                },
                {
                    "type": "image",
                    "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
                },
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": PDF_B64},
                    "title": "Q2 report",
                    "context": "Internal, not audited.",
                    "citations": {"enabled": True},
                    "cache_control": {"type": "ephemeral", "ttl": "5m"},
                },
                {
                    "type": "document",
                    "source": {
                        "type": "text",
                        "media_type": "text/plain",
                        "data": "Revenue grew 12% to $4.1M.",
                    },
                    "title": "notes.txt",
                    "citations": {"enabled": True},
                },
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://files.example.com/q2-board.pdf"},
                },
                {
                    "type": "document",
                    "source": {
                        "type": "content",
                        "content": [
                            {"type": "text", "text": "Slide 1: EMEA up 20%."},
                            {"type": "image", "source": _B64_IMAGE},
                        ],
                    },
                    "title": "Board slides",
                },
                {
                    "type": "document",
                    "source": {"type": "file", "file_id": "file_011CPMxVD3fHLUhvTqtsQA5w"},
                },
                {
                    "type": "search_result",
                    "source": "https://kb.example.com/finance/q2",
                    "title": "Q2 summary (knowledge base)",
                    "content": [
                        {"type": "text", "text": "Q2 revenue: $4.1M, up 12% year on year."}
                    ],
                    "citations": {"enabled": True},
                },
                {"type": "text", "text": "Summarise revenue growth."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "The notes and the KB agree on 12%.",
                    "signature": _SIGNATURE,
                },
                {
                    "type": "text",
                    "text": "Revenue grew 12%",
                    "citations": [
                        {
                            "type": "char_location",
                            "cited_text": "Revenue grew 12% to $4.1M.",
                            "document_index": 4,
                            "document_title": "notes.txt",
                            "start_char_index": 0,
                            "end_char_index": 26,
                        },
                        {
                            "type": "page_location",
                            "cited_text": "Revenue: $4.1M",
                            "document_index": 3,
                            "document_title": "Q2 report",
                            "start_page_number": 1,
                            "end_page_number": 2,
                        },
                        {
                            "type": "content_block_location",
                            "cited_text": "Slide 1: EMEA up 20%.",
                            "document_index": 6,
                            "document_title": None,
                            "start_block_index": 0,
                            "end_block_index": 1,
                        },
                        {
                            "type": "search_result_location",
                            "cited_text": "Q2 revenue: $4.1M, up 12% year on year.",
                            "search_result_index": 0,
                            "source": "https://kb.example.com/finance/q2",
                            "title": "Q2 summary (knowledge base)",
                            "start_block_index": 0,
                            "end_block_index": 1,
                        },
                    ],
                },
                {"type": "text", "text": ", to $4.1M, led by EMEA."},
            ],
        },
    ],
    # Client tools: a tool_use turn answered by tool_result blocks first in the next user turn.
    [
        {"role": "user", "content": "What's in config.yaml? And check the dashboard."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look at both."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "read_file",
                    "input": {"path": "config.yaml"},
                    "cache_control": {"type": "ephemeral"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01B5kP3zQ8wV2nM7xR4tY6uI",
                    "name": "dashboard",
                    "input": {},
                    "caller": {"type": "direct"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                    "content": "port: 8080\nworkers: 4\n",
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B5kP3zQ8wV2nM7xR4tY6uI",
                    "content": [
                        {"type": "text", "text": "Dashboard for the last hour:"},
                        {"type": "image", "source": _B64_IMAGE},
                        {
                            "type": "document",
                            "source": {
                                "type": "text",
                                "media_type": "text/plain",
                                "data": "p95 2.3 s at 14:05",
                            },
                            "title": "alerts.txt",
                        },
                        {
                            "type": "search_result",
                            "source": "https://status.example.com",
                            "title": "Status page",
                            "content": [{"type": "text", "text": "All systems operational."}],
                        },
                    ],
                    "is_error": False,
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "Anything odd?"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Port 8080 is fine; p95 spiked to 2.3 s at 14:05."}
            ],
        },
    ],
    # A failing client tool, with redacted thinking.
    [
        {"role": "user", "content": [{"type": "text", "text": "Deploy the fix to production."}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "redacted_thinking",
                    "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01C8nB4vX2zL6kJ0hG3fD9sA",
                    "name": "deploy",
                    "input": {"env": "production"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01C8nB4vX2zL6kJ0hG3fD9sA",
                    "content": "permission denied: deploy requires the release role",
                    "is_error": True,
                },
            ],
        },
        {"role": "assistant", "content": "I don't have permission to deploy to production."},
    ],
    # Server tools: each server_tool_use answered in the same assistant turn by its result type.
    [
        {
            "role": "user",
            "content": "When was PostgreSQL 17 released, and how many days ago is that?",
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                    "name": "web_search",
                    "input": {"query": "PostgreSQL 17 release date"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://www.postgresql.org/about/news/postgresql-17-released-2936/",
                            "title": "PostgreSQL 17 Released!",
                            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1" + "ab" * 30,
                            "page_age": "September 26, 2024",
                        },
                    ],
                },
                {
                    "type": "text",
                    "text": "PostgreSQL 17 was released on 26 September 2024.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "https://www.postgresql.org/about/news/postgresql-17-released-2936/",
                            "title": "PostgreSQL 17 Released!",
                            "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1",
                            "cited_text": "The PostgreSQL Global Development Group today announced the release of PostgreSQL 17",
                        },
                    ],
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01Fq2Wd9Xz3Lm6Kp8Rt1Yv4N",
                    "name": "web_fetch",
                    "input": {
                        "url": "https://www.postgresql.org/about/news/postgresql-17-released-2936/"
                    },
                },
                {
                    "type": "web_fetch_tool_result",
                    "tool_use_id": "srvtoolu_01Fq2Wd9Xz3Lm6Kp8Rt1Yv4N",
                    "content": {
                        "type": "web_fetch_result",
                        "url": "https://www.postgresql.org/about/news/postgresql-17-released-2936/",
                        "retrieved_at": "2025-06-01T10:00:00Z",
                        "content": {
                            "type": "document",
                            "source": {
                                "type": "text",
                                "media_type": "text/plain",
                                "data": "September 26, 2024 - PostgreSQL 17 Released!",
                            },
                            "title": "PostgreSQL 17 Released!",
                            "citations": {"enabled": True},
                        },
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01Ce3Rx7Vb0Nm4Kl8Jh2Gf6D",
                    "name": "code_execution",
                    "input": {
                        "code": "from datetime import date\nprint((date(2025, 6, 1) - date(2024, 9, 26)).days)"
                    },
                },
                {
                    "type": "code_execution_tool_result",
                    "tool_use_id": "srvtoolu_01Ce3Rx7Vb0Nm4Kl8Jh2Gf6D",
                    "content": {
                        "type": "code_execution_result",
                        "stdout": "248\n",
                        "stderr": "",
                        "return_code": 0,
                        "content": [
                            {
                                "type": "code_execution_output",
                                "file_id": "file_011CRsY3Xw7Gh2Lk9Mp4Qn6T",
                            }
                        ],
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01Bs5Hx8Ck2Vn6Lm0Qw3Er7T",
                    "name": "bash_code_execution",
                    "input": {"command": "ls -la /tmp/outputs"},
                },
                {
                    "type": "bash_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_01Bs5Hx8Ck2Vn6Lm0Qw3Er7T",
                    "content": {
                        "type": "bash_code_execution_result",
                        "stdout": "days.txt\n",
                        "stderr": "",
                        "return_code": 0,
                        "content": [
                            {
                                "type": "bash_code_execution_output",
                                "file_id": "file_011CRsY9Za1Bc2De3Fg4Hi5J",
                            }
                        ],
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01Te4Dx9Vb1Nm5Kl7Jh3Gf8S",
                    "name": "text_editor_code_execution",
                    "input": {"command": "view", "path": "/tmp/outputs/days.txt"},
                },
                {
                    "type": "text_editor_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_01Te4Dx9Vb1Nm5Kl7Jh3Gf8S",
                    "content": {
                        "type": "text_editor_code_execution_view_result",
                        "content": "248\n",
                        "file_type": "text",
                        "num_lines": 1,
                        "start_line": 1,
                        "total_lines": 1,
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01Ts6Rx2Vb4Nm8Kl0Jh5Gf1R",
                    "name": "tool_search_tool_regex",
                    "input": {"pattern": "calendar"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_01Ts6Rx2Vb4Nm8Kl0Jh5Gf1R",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [
                            {"type": "tool_reference", "tool_name": "add_calendar_event"}
                        ],
                    },
                },
                {"type": "text", "text": "That was 248 days ago."},
            ],
        },
    ],
    # Server tools that fail, and the other result variants.
    [
        {"role": "user", "content": "Look it up again and save the number to a file."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02WsE1rR2tT3yY4uU5iI6oO7",
                    "name": "web_search",
                    "input": {"query": "PostgreSQL 17 release"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_02WsE1rR2tT3yY4uU5iI6oO7",
                    "content": {
                        "type": "web_search_tool_result_error",
                        "error_code": "max_uses_exceeded",
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02WfA1sS2dD3fF4gG5hH6jJ7",
                    "name": "web_fetch",
                    "input": {"url": "https://intranet.example.com/"},
                },
                {
                    "type": "web_fetch_tool_result",
                    "tool_use_id": "srvtoolu_02WfA1sS2dD3fF4gG5hH6jJ7",
                    "content": {
                        "type": "web_fetch_tool_result_error",
                        "error_code": "url_not_accessible",
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02CeZ1xX2cC3vV4bB5nN6mM7",
                    "name": "code_execution",
                    "input": {"code": "while True: pass"},
                },
                {
                    "type": "code_execution_tool_result",
                    "tool_use_id": "srvtoolu_02CeZ1xX2cC3vV4bB5nN6mM7",
                    "content": {
                        "type": "code_execution_tool_result_error",
                        "error_code": "execution_time_exceeded",
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02CeQ1wW2eE3rR4tT5yY6uU7",
                    "name": "code_execution",
                    "input": {"code": "print(248)"},
                },
                {
                    "type": "code_execution_tool_result",
                    "tool_use_id": "srvtoolu_02CeQ1wW2eE3rR4tT5yY6uU7",
                    "content": {
                        "type": "encrypted_code_execution_result",
                        "encrypted_stdout": "EuYBCioIAhgBIiQ0",
                        "stderr": "",
                        "return_code": 0,
                        "content": [],
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02BsP1oO2iI3uU4yY5tT6rR7",
                    "name": "bash_code_execution",
                    "input": {"command": "dd if=/dev/zero of=/tmp/big bs=1G count=10"},
                },
                {
                    "type": "bash_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_02BsP1oO2iI3uU4yY5tT6rR7",
                    "content": {
                        "type": "bash_code_execution_tool_result_error",
                        "error_code": "output_file_too_large",
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02TeL1kK2jJ3hH4gG5fF6dD7",
                    "name": "text_editor_code_execution",
                    "input": {
                        "command": "create",
                        "path": "/tmp/outputs/days.txt",
                        "file_text": "248\n",
                    },
                },
                {
                    "type": "text_editor_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_02TeL1kK2jJ3hH4gG5fF6dD7",
                    "content": {
                        "type": "text_editor_code_execution_create_result",
                        "is_file_update": True,
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02TeM1nN2bB3vV4cC5xX6zZ7",
                    "name": "text_editor_code_execution",
                    "input": {
                        "command": "str_replace",
                        "path": "/tmp/outputs/days.txt",
                        "old_str": "248",
                        "new_str": "248 days",
                    },
                },
                {
                    "type": "text_editor_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_02TeM1nN2bB3vV4cC5xX6zZ7",
                    "content": {
                        "type": "text_editor_code_execution_str_replace_result",
                        "lines": ["248 days"],
                        "new_lines": 1,
                        "new_start": 1,
                        "old_lines": 1,
                        "old_start": 1,
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02TeP1qQ2wW3eE4rR5tT6yY7",
                    "name": "text_editor_code_execution",
                    "input": {"command": "view", "path": "/tmp/missing.txt"},
                },
                {
                    "type": "text_editor_code_execution_tool_result",
                    "tool_use_id": "srvtoolu_02TeP1qQ2wW3eE4rR5tT6yY7",
                    "content": {
                        "type": "text_editor_code_execution_tool_result_error",
                        "error_code": "file_not_found",
                        "error_message": "/tmp/missing.txt does not exist",
                    },
                },
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_02TsB1mM2nN3bB4vV5cC6xX7",
                    "name": "tool_search_tool_bm25",
                    "input": {"query": "spreadsheet export"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_02TsB1mM2nN3bB4vV5cC6xX7",
                    "content": {
                        "type": "tool_search_tool_result_error",
                        "error_code": "unavailable",
                        "error_message": None,
                    },
                },
                {
                    "type": "text",
                    "text": "Search is over its limit, but /tmp/outputs/days.txt now says 248 days.",
                },
            ],
        },
    ],
    # A file uploaded to the code execution container.
    [
        {
            "role": "user",
            "content": [
                {
                    "type": "container_upload",
                    "file_id": "file_011CNha8iCJcU1wXNR6q4V8w",
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "Total the amounts in this CSV."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_03CeA1bB2cC3dD4eE5fF6gG7",
                    "name": "code_execution",
                    "input": {
                        "code": "import pandas as pd\nprint(pd.read_csv('/mnt/user/orders.csv').amount.sum())"
                    },
                },
                {
                    "type": "code_execution_tool_result",
                    "tool_use_id": "srvtoolu_03CeA1bB2cC3dD4eE5fF6gG7",
                    "content": {
                        "type": "code_execution_result",
                        "stdout": "41873.50\n",
                        "stderr": "",
                        "return_code": 0,
                        "content": [],
                    },
                },
                {"type": "text", "text": "The amounts total $41,873.50."},
            ],
        },
    ],
    # Programmatic tool calling: code execution calls a client tool; its result comes a turn later.
    [
        {"role": "user", "content": "Sum the sizes of all log files."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_04CeH1iI2jJ3kK4lL5mM6nN7",
                    "name": "code_execution",
                    "input": {
                        "code": "files = await list_logs()\nprint(sum(f['size'] for f in files))"
                    },
                },
                {
                    "type": "tool_use",
                    "id": "toolu_04Lg1Hh2Jj3Kk4Ll5Mm6Nn7",
                    "name": "list_logs",
                    "input": {},
                    "caller": {
                        "type": "code_execution_20250825",
                        "tool_id": "srvtoolu_04CeH1iI2jJ3kK4lL5mM6nN7",
                    },
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_04Lg1Hh2Jj3Kk4Ll5Mm6Nn7",
                    "content": '[{"name": "a.log", "size": 120}, {"name": "b.log", "size": 80}]',
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "code_execution_tool_result",
                    "tool_use_id": "srvtoolu_04CeH1iI2jJ3kK4lL5mM6nN7",
                    "content": {
                        "type": "code_execution_result",
                        "stdout": "200\n",
                        "stderr": "",
                        "return_code": 0,
                        "content": [],
                    },
                },
                {"type": "text", "text": "The log files hold 200 bytes in all."},
            ],
        },
    ],
    # Client-side tool search (tool_reference results) and a browser tool (browser_state results).
    [
        {"role": "user", "content": "Find a tool for the weather, then open the forecast site."},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_05Ts1Aa2Ss3Dd4Ff5Gg6Hh7",
                    "name": "find_tools",
                    "input": {"query": "weather"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_05Ts1Aa2Ss3Dd4Ff5Gg6Hh7",
                    "content": [
                        {
                            "type": "tool_reference",
                            "tool_name": "get_weather",
                            "cache_control": {"type": "ephemeral"},
                        },
                    ],
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_05Br1Qq2Ww3Ee4Rr5Tt6Yy7",
                    "name": "browser",
                    "input": {"action": "navigate", "url": "https://weather.example.com"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_05Br1Qq2Ww3Ee4Rr5Tt6Yy7",
                    "content": [
                        {
                            "type": "browser_state",
                            "tabs": [
                                {
                                    "tab_id": "1",
                                    "title": "Inbox",
                                    "url": "https://mail.example.com",
                                    "active": False,
                                },
                                {
                                    "tab_id": "2",
                                    "title": "Forecast",
                                    "url": "https://weather.example.com",
                                    "active": True,
                                },
                            ],
                            "state_changes": [
                                {"type": "tab_opened", "tab_id": "2"},
                                {
                                    "type": "download_started",
                                    "download_id": "d1",
                                    "url": "https://weather.example.com/week.pdf",
                                },
                                {
                                    "type": "download_completed",
                                    "download_id": "d1",
                                    "url": "https://weather.example.com/week.pdf",
                                    "path": "/downloads/week.pdf",
                                    "size_bytes": 48213,
                                },
                                {
                                    "type": "download_failed",
                                    "download_id": "d2",
                                    "url": "https://weather.example.com/radar.gif",
                                    "error": "blocked",
                                },
                            ],
                        },
                        {"type": "image", "source": _B64_IMAGE},
                    ],
                },
            ],
        },
        {
            "role": "assistant",
            "content": "get_weather is available, and the forecast site is open in tab 2.",
        },
    ],
    [
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You're welcome."},
    ],
]

# ``role: "system"`` messages inside ``messages`` (a member of the SDK's MessageParam union).
ANTHROPIC_SYSTEM_ROLE_EXCHANGES: list[list[Item]] = [
    [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "system", "content": [{"type": "text", "text": "From now on, answer in French."}]},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Très bien, merci !"},
        {"role": "system", "content": "Keep answers under 20 words."},
        {"role": "user", "content": "And the weather?"},
        {"role": "assistant", "content": "Il fait beau."},
    ]
]


def anthropic_messages(exchanges: list[list[Item]] = ANTHROPIC_EXCHANGES) -> list[Item]:
    return [message for exchange in exchanges for message in exchange]


# -- Gemini (google-genai) ---------------------------------------------------------------------
#
# Built with the installed SDK's own types and dumped as a client sends them: the REST API's
# camelCase (``_rest``), or the Python SDK's snake_case (``_sdk``, ``model_dump`` of a
# ``Content``). Bytes (inline data, thought signatures) come out as the SDK encodes them.


def _rest(content: gt.Content) -> Item:
    return content.model_dump(mode="json", exclude_none=True, by_alias=True)


def _sdk(content: gt.Content) -> Item:
    return content.model_dump(mode="json", exclude_none=True)


_THOUGHT_SIGNATURE = base64.b64decode("CiQBcsjafFWsmAB2xXlqvbOHUcrKtZ" + "wQdq4eNXyL" * 4 + "cA==")
GEMINI_SYSTEM_INSTRUCTION: Item = _rest(
    gt.Content(
        parts=[
            gt.Part(text="You are a data analyst for the sales team. Show your numbers."),
            gt.Part(text="Answer in English."),
        ]
    )
)
GEMINI_CONTENTS: list[Item] = [
    # a user turn with media: an image, a PDF's pages, a video clip, a sheet, an audio clip
    _rest(
        gt.Content(
            role="user",
            parts=[
                gt.Part(text="Q3 sales are attached. What drove the drop in September?"),
                gt.Part(
                    inline_data=gt.Blob(
                        mime_type="image/png",
                        data=base64.b64decode(SMALL_PNG_B64),
                        display_name="dashboard.png",
                    ),
                    media_resolution=gt.PartMediaResolution(
                        level=gt.PartMediaResolutionLevel.MEDIA_RESOLUTION_HIGH
                    ),
                ),
                gt.Part(
                    file_data=gt.FileData(
                        file_uri="https://generativelanguage.googleapis.com/v1beta/files/q3-report",
                        mime_type="application/pdf",
                        display_name="q3-report.pdf",
                    ),
                    document_metadata=gt.DocumentMetadata(start_page=2, end_page=4),
                ),
                gt.Part(
                    file_data=gt.FileData(
                        file_uri="gs://sales-reviews/q3-review.mp4", mime_type="video/mp4"
                    ),
                    video_metadata=gt.VideoMetadata(start_offset="30s", end_offset="95s", fps=0.5),
                    media_processing=gt.MediaProcessing.STATIC,
                ),
                gt.Part(
                    file_data=gt.FileData(
                        file_uri="https://generativelanguage.googleapis.com/v1beta/files/q3-sheet",
                        mime_type="application/vnd.google-apps.spreadsheet",
                    ),
                    spreadsheet_metadata=gt.SpreadsheetMetadata(
                        visible_cells="A1:F40", sheet_index=0
                    ),
                ),
                gt.Part(
                    inline_data=gt.Blob(mime_type="audio/wav", data=base64.b64decode(WAV_B64)),
                    audio_metadata=gt.AudioMetadata(start_offset="0s", end_offset="0.1s"),
                    part_metadata={"source": "voice-memo"},
                ),
            ],
        )
    ),
    # the model thinks, says so, and calls two functions (with ids), the first one signed;
    # the second streamed its arguments
    _rest(
        gt.Content(
            role="model",
            parts=[
                gt.Part(
                    text="The drop is in one region; break revenue down by region and week.",
                    thought=True,
                    thought_signature=_THOUGHT_SIGNATURE,
                ),
                gt.Part(text="Let me break September down by region."),
                gt.Part(
                    function_call=gt.FunctionCall(
                        id="fc_9a1e2b",
                        name="run_query",
                        args={"sql": "SELECT region, SUM(amount) FROM sales GROUP BY region"},
                    ),
                    thought_signature=_THOUGHT_SIGNATURE,
                ),
                gt.Part(
                    function_call=gt.FunctionCall(
                        id="fc_9a1e2c",
                        name="chart",
                        args={"kind": "bar", "series": "region"},
                        partial_args=[
                            gt.PartialArg(json_path="$.kind", string_value="bar"),
                            gt.PartialArg(json_path="$.stacked", bool_value=False),
                            gt.PartialArg(json_path="$.limit", number_value=12),
                            gt.PartialArg(json_path="$.title", null_value="NULL_VALUE"),
                        ],
                        will_continue=False,
                    )
                ),
            ],
        )
    ),
    # the answers, by id: rows; a chart as media (FunctionResponsePart), sent without waiting
    _rest(
        gt.Content(
            role="user",
            parts=[
                gt.Part(
                    function_response=gt.FunctionResponse(
                        id="fc_9a1e2b",
                        name="run_query",
                        response={"output": "EMEA 1.2M\nAPAC 0.4M\nAMER 2.9M"},
                    )
                ),
                gt.Part(
                    function_response=gt.FunctionResponse(
                        id="fc_9a1e2c",
                        name="chart",
                        response={"output": {"rendered": True, "bars": 3}},
                        parts=[
                            gt.FunctionResponsePart(
                                inline_data=gt.FunctionResponseBlob(
                                    mime_type="image/png",
                                    data=base64.b64decode(SMALL_PNG_B64),
                                    display_name="chart.png",
                                ),
                                media_resolution=gt.PartMediaResolution(num_tokens=258),
                                media_processing=gt.MediaProcessing.STATIC,
                            ),
                            gt.FunctionResponsePart(
                                file_data=gt.FunctionResponseFileData(
                                    file_uri="gs://sales-reviews/chart-notes.pdf",
                                    mime_type="application/pdf",
                                    display_name="chart-notes.pdf",
                                ),
                                document_metadata=gt.DocumentMetadata(start_page=1, end_page=1),
                            ),
                            gt.FunctionResponsePart(
                                file_data=gt.FunctionResponseFileData(
                                    file_uri="gs://sales-reviews/walkthrough.mp4",
                                    mime_type="video/mp4",
                                ),
                                video_metadata=gt.VideoMetadata(fps=1.0),
                            ),
                            gt.FunctionResponsePart(
                                file_data=gt.FunctionResponseFileData(
                                    file_uri="gs://sales-reviews/regions.xlsx",
                                    mime_type="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                                ),
                                spreadsheet_metadata=gt.SpreadsheetMetadata(sheet_index=1),
                            ),
                            gt.FunctionResponsePart(
                                inline_data=gt.FunctionResponseBlob(
                                    mime_type="audio/wav", data=base64.b64decode(WAV_B64)
                                ),
                                audio_metadata=gt.AudioMetadata(end_offset="0.1s"),
                            ),
                        ],
                        will_continue=False,
                        scheduling=gt.FunctionResponseScheduling.WHEN_IDLE,
                    )
                ),
            ],
        )
    ),
    # code the model ran itself, and Google Search it called server-side, then its answer
    _rest(
        gt.Content(
            role="model",
            parts=[
                gt.Part(
                    executable_code=gt.ExecutableCode(
                        id="exec_1",
                        language=gt.Language.PYTHON,
                        code="share = 0.4 / (1.2 + 0.4 + 2.9)\nprint(round(share, 3))",
                    )
                ),
                gt.Part(
                    code_execution_result=gt.CodeExecutionResult(
                        id="exec_1", outcome=gt.Outcome.OUTCOME_OK, output="0.089\n"
                    )
                ),
                gt.Part(
                    tool_call=gt.ToolCall(
                        id="tc_search_1",
                        tool_type=gt.ToolType.GOOGLE_SEARCH_WEB,
                        args={"queries": ["APAC retail September 2025 slowdown"]},
                    )
                ),
                gt.Part(
                    tool_response=gt.ToolResponse(
                        id="tc_search_1",
                        tool_type=gt.ToolType.GOOGLE_SEARCH_WEB,
                        response={
                            "results": [
                                {
                                    "title": "APAC retail cools",
                                    "url": "https://news.example.com/apac",
                                }
                            ]
                        },
                    )
                ),
                gt.Part(
                    text="APAC fell to 8.9% of revenue; a regional slowdown explains most of it."
                ),
            ],
        )
    ),
    # the user speaks (a Live session's transcription, and who said it) without a role
    _rest(
        gt.Content(
            parts=[
                gt.Part(
                    audio_transcription=gt.Transcription(
                        text="Can you check the week-by-week numbers for APAC?",
                        finished=True,
                        language_code="en-US",
                        speaker_label="spk_1",
                        words=[gt.WordInfo(word="Can", start_offset="0s", end_offset="0.2s")],
                        start_offset="0s",
                        end_offset="2.4s",
                    )
                ),
                gt.Part(
                    text="Can you check the week-by-week numbers for APAC?",
                    speech_metadata=gt.SpeechMetadata(speaker="Dana", style="calm"),
                ),
            ]
        )
    ),
    # the Python SDK's own spelling from here on: calls without ids, one name twice
    _sdk(
        gt.Content(
            role="model",
            parts=[
                gt.Part(
                    function_call=gt.FunctionCall(
                        name="run_query", args={"sql": "SELECT week, SUM(amount) FROM apac"}
                    )
                ),
                gt.Part(
                    function_call=gt.FunctionCall(
                        name="run_query", args={"sql": "SELECT week, COUNT(*) FROM apac_orders"}
                    )
                ),
                gt.Part(function_call=gt.FunctionCall(name="get_targets", args={})),
            ],
        )
    ),
    # answered by name and order, in the older ``function`` role; one of them failed
    _sdk(
        gt.Content(
            role="function",
            parts=[
                gt.Part(
                    function_response=gt.FunctionResponse(
                        name="run_query", response={"output": "w36 0.12M\nw37 0.09M\nw38 0.08M"}
                    )
                ),
                gt.Part(
                    function_response=gt.FunctionResponse(
                        name="run_query", response={"error": "relation apac_orders does not exist"}
                    )
                ),
                gt.Part(
                    function_response=gt.FunctionResponse(
                        name="get_targets", response={"q3": {"apac": 0.45, "unit": "M"}}
                    )
                ),
            ],
        )
    ),
    _sdk(
        gt.Content(
            role="model",
            parts=[
                gt.Part(
                    text="APAC slid three weeks running, below its 0.45M target.",
                    thought_signature=_THOUGHT_SIGNATURE,
                )
            ],
        )
    ),
    _sdk(gt.Content(role="user", parts=[gt.Part(text="Two lines for the review, please.")])),
    _sdk(
        gt.Content(
            role="model",
            parts=[
                gt.Part(text="APAC: 8.9% of Q3 revenue, three weeks below target."),
                gt.Part(text="Cause: a regional retail slowdown, not our pricing."),
            ],
        )
    ),
]
GEMINI_PART_FIELDS: tuple[str, ...] = tuple(gt.Part.model_fields)
# ``Content.role`` is a plain string in the SDK: the roles the API reads (none reads as user)
GEMINI_ROLES = ("user", "model", "function", None)
# Nested fields whose every member must appear: (owner type, the field of a part that holds
# it, snake_case); the members are the owner type's fields.
NESTED_GEMINI: dict[str, tuple[Any, str]] = {
    "functionCall fields": (gt.FunctionCall, "function_call"),
    "functionResponse fields": (gt.FunctionResponse, "function_response"),
    "functionResponse parts (FunctionResponsePart fields)": (gt.FunctionResponsePart, "parts"),
    "inlineData fields": (gt.Blob, "inline_data"),
    "fileData fields": (gt.FileData, "file_data"),
    "executableCode fields": (gt.ExecutableCode, "executable_code"),
    "codeExecutionResult fields": (gt.CodeExecutionResult, "code_execution_result"),
    "toolCall fields": (gt.ToolCall, "tool_call"),
    "toolResponse fields": (gt.ToolResponse, "tool_response"),
}


def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.title() for word in rest)


def _gemini_get(d: dict[str, Any], snake: str) -> Any:
    value = d.get(_camel(snake))
    return d.get(snake) if value is None else value


def _gemini_parts(content: Item) -> list[dict[str, Any]]:
    return list(content.get("parts") or [])


def _gemini_examples() -> dict[str, list[Item]]:
    """Part field (snake_case, the SDK's name) -> the contents holding a part that sets it;
    ``role:<role>`` -> the contents of that role (``role:None``: no role)."""
    out: dict[str, list[Item]] = {}
    for content in GEMINI_CONTENTS:
        out.setdefault(f"role:{content.get('role')}", []).append(content)
        for part in _gemini_parts(content):
            for field in GEMINI_PART_FIELDS:
                if _gemini_get(part, field) is not None and content not in out.get(field, []):
                    out.setdefault(field, []).append(content)
    return out


GEMINI_EXAMPLES: dict[str, list[Item]] = _gemini_examples()


def gemini_nested_missing(contents: list[Item] = GEMINI_CONTENTS) -> dict[str, list[str]]:
    """For each nested type: its fields never set (in either spelling) where it occurs."""
    out: dict[str, list[str]] = {}
    for name, (owner, field) in NESTED_GEMINI.items():
        values: list[dict[str, Any]] = []
        for content in contents:
            for part in _gemini_parts(content):
                if owner is gt.FunctionResponsePart:
                    response = _gemini_get(part, "function_response") or {}
                    values += list(_gemini_get(response, "parts") or [])
                elif _gemini_get(part, field) is not None:
                    values.append(_gemini_get(part, field))
        wanted = set(owner.model_fields)
        seen = {f for f in wanted for v in values if _gemini_get(v, f) is not None}
        if wanted - seen:
            out[name] = sorted(wanted - seen)
    return out


# -- keyed by SDK type name, derived from the unions -------------------------------------------


def _by_name(corpus: list[tuple[Any, Item]]) -> dict[str, list[Item]]:
    out: dict[str, list[Item]] = {}
    for member, item in corpus:
        out.setdefault(member.__name__, []).append(item)
    return out


RESPONSES_ITEMS: list[Item] = [item for _, item in RESPONSES_CORPUS]
CHAT_MESSAGES: list[Item] = [item for _, item in CHAT_CORPUS]
RESPONSES_EXAMPLES: dict[str, list[Item]] = _by_name(RESPONSES_CORPUS)
CHAT_EXAMPLES: dict[str, list[Item]] = _by_name(CHAT_CORPUS)

RESPONSES_TYPE_NAMES: dict[str, tuple[str, ...]] = {
    m.__name__: literal_values(m) for m in RESPONSES_MEMBERS
}
CHAT_ROLE_NAMES: dict[str, tuple[str, ...]] = {
    m.__name__: literal_values(m, "role") for m in CHAT_MEMBERS
}
ANTHROPIC_BLOCK_NAMES: dict[str, tuple[str, ...]] = {
    m.__name__: literal_values(m) for m in ANTHROPIC_BLOCK_MEMBERS
}
ANTHROPIC_MESSAGE_NAMES: dict[str, tuple[str, ...]] = {
    m.__name__: literal_values(m, "role") for m in ANTHROPIC_MESSAGE_MEMBERS
}


def _anthropic_examples() -> dict[str, list[list[Item]]]:
    """SDK type name (block param or message param) -> the exchanges that hold one."""
    block_name = {lit: name for name, lits in ANTHROPIC_BLOCK_NAMES.items() for lit in lits}
    role_name = {lit: name for name, lits in ANTHROPIC_MESSAGE_NAMES.items() for lit in lits}
    out: dict[str, list[list[Item]]] = {}
    for exchange in ANTHROPIC_EXCHANGES + ANTHROPIC_SYSTEM_ROLE_EXCHANGES:
        names: list[str] = []
        for message in exchange:
            names.append(role_name.get(message["role"], "?" + message["role"]))
            if isinstance(message["content"], list):
                names.extend(
                    block_name.get(b.get("type"), "?" + str(b.get("type")))
                    for b in message["content"]
                )
        for name in dict.fromkeys(names):
            out.setdefault(name, []).append(exchange)
    return out


ANTHROPIC_EXAMPLES: dict[str, list[list[Item]]] = _anthropic_examples()


def missing_examples() -> dict[str, list[str]]:
    """Union members with no example, per SDK (empty lists when the corpus covers the SDKs)."""
    return {
        "openai-responses": sorted(set(RESPONSES_TYPE_NAMES) - set(RESPONSES_EXAMPLES)),
        "openai-chat": sorted(set(CHAT_ROLE_NAMES) - set(CHAT_EXAMPLES)),
        "anthropic": sorted(
            (set(ANTHROPIC_BLOCK_NAMES) | set(ANTHROPIC_MESSAGE_NAMES)) - set(ANTHROPIC_EXAMPLES)
        ),
        "gemini": sorted(
            ({*GEMINI_PART_FIELDS} | {f"role:{r}" for r in GEMINI_ROLES}) - set(GEMINI_EXAMPLES)
        ),
    }


# -- nested unions whose every member must appear ---------------------------------------------

NESTED_RESPONSES: dict[str, tuple[Any, str]] = {
    # name: (owner TypedDict, field); the members are field_members(owner, field)
    "message content parts": (orr.EasyInputMessageParam, "content"),
    "output message parts": (orr.ResponseOutputMessageParam, "content"),
    "output_text annotations": (rot.ResponseOutputTextParam, "annotations"),
    "function_call_output parts": (rip.FunctionCallOutput, "output"),
    "custom_tool_call_output parts": (orr.ResponseCustomToolCallOutputParam, "output"),
    "computer actions": (orr.ResponseComputerToolCallParam, "actions"),
    "web search action": (orr.ResponseFunctionWebSearchParam, "action"),
    "code interpreter outputs": (orr.ResponseCodeInterpreterToolCallParam, "outputs"),
    "apply_patch operation": (rip.ApplyPatchCall, "operation"),
    "mcp_call error": (rip.McpCall, "error"),
    "shell environment": (rip.ShellCall, "environment"),
    "shell output outcome": (orr.ResponseFunctionShellCallOutputContentParam, "outcome"),
    "function_call caller": (orr.ResponseFunctionToolCallParam, "caller"),
    "reasoning summary": (orr.ResponseReasoningItemParam, "summary"),
    "reasoning content": (orr.ResponseReasoningItemParam, "content"),
}
NESTED_ANTHROPIC: dict[str, tuple[Any, str]] = {
    "tool_result content": (at.ToolResultBlockParam, "content"),
    "text citations": (at.TextBlockParam, "citations"),
    "image source": (at.ImageBlockParam, "source"),
    "document source": (at.DocumentBlockParam, "source"),
    "document content source": (at_cbs.ContentBlockSourceParam, "content"),
    "web_search_tool_result content": (at.WebSearchToolResultBlockParam, "content"),
    "web_fetch_tool_result content": (at.WebFetchToolResultBlockParam, "content"),
    "code_execution_tool_result content": (at.CodeExecutionToolResultBlockParam, "content"),
    "bash_code_execution_tool_result content": (
        at.BashCodeExecutionToolResultBlockParam,
        "content",
    ),
    "text_editor_code_execution_tool_result content": (
        at.TextEditorCodeExecutionToolResultBlockParam,
        "content",
    ),
    "tool_search_tool_result content": (at.ToolSearchToolResultBlockParam, "content"),
    "browser_state changes": (at.BrowserStateBlockParam, "state_changes"),
}
NESTED_CHAT: dict[str, tuple[Any, str]] = {
    "user content parts": (oc_user.ChatCompletionUserMessageParam, "content"),
    "assistant content parts": (oc_assistant.ChatCompletionAssistantMessageParam, "content"),
    "assistant tool_calls": (oc_assistant.ChatCompletionAssistantMessageParam, "tool_calls"),
}


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _dicts(v)
    elif isinstance(value, list):
        for v in value:
            yield from _dicts(v)


def _owner_matches(owner: Any, field: str, d: dict[str, Any], discriminator: str) -> bool:
    if field not in d:
        return False
    own = literal_values(owner, discriminator)
    return not own or d.get(discriminator) in own


def nested_missing(
    nested: dict[str, tuple[Any, str]], corpus: Any, *, discriminator: str = "type"
) -> dict[str, list[str]]:
    """For each nested union: the ``type`` literals of its members never seen in the corpus at
    that field of a value of its owner type."""
    out: dict[str, list[str]] = {}
    for name, (owner, field) in nested.items():
        wanted = {lit for member in field_members(owner, field) for lit in literal_values(member)}
        seen: set[str] = set()
        for d in _dicts(corpus):
            if _owner_matches(owner, field, d, discriminator):
                seen.update(str(v.get("type")) for v in _dicts(d[field]) if "type" in v)
        if not wanted:
            out[name] = ["<no members derived: the SDK moved this field>"]
        elif wanted - seen:
            out[name] = sorted(wanted - seen)
    return out


# -- validation of the corpus itself ----------------------------------------------------------


def validate_example(format: str, member: Any, example: Item, *, where: str) -> None:
    """An example validates, strictly, against the member it is filed under and against the
    union, and validation changed nothing (no lax coercion hid a wrong value)."""
    validated = strict_validate_eager(member, example, where=where)
    if validated != example:
        raise PayloadError(f"{where}: validation changed the value: {validated!r:.300}")
    if format == "openai-responses":
        validate_responses_item(example, where=where)
    elif format == "openai-chat":
        validate_chat_message(example, where=where)
    else:
        validate_anthropic_message(example, where=where)


def validate_gemini_example(content: Item, *, where: str) -> None:
    """A Gemini example validates against the SDK's ``Content`` (``extra="forbid"``) and the
    SDK writes it back as it is, in one spelling (camelCase or snake_case): no value was
    coerced, no key unknown to it."""
    try:
        model = gt.Content.model_validate(content)
    except ValueError as exc:
        raise PayloadError(f"{where}: {exc}") from exc
    dumps = [model.model_dump(mode="json", exclude_none=True, by_alias=a) for a in (True, False)]
    if content not in dumps:
        raise PayloadError(f"{where}: the SDK writes it otherwise: {dumps[0]!r:.300}")


def check_coverage() -> None:
    missing = {sdk: names for sdk, names in missing_examples().items() if names}
    if missing:
        raise MissingExample(
            f"SDK union members without an example in tests/support/sdk_examples.py: {missing}"
        )


check_coverage()
