"""/v1/sessions/{id}/context: the projected next-turn prompt and its report."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, JsonValue, create_model
from pydantic.fields import FieldInfo

from app.api.deps import ActorDep, ReadInRoute, RuntimeDep, actor_of, read_all, runtime_of
from app.api.encoding import context_body, dumps
from app.api.hot_route import hot_route
from app.api.problems import problem_responses
from app.api.query_guard import GuardedRoute
from app.api.responses import json_response
from app.api.schemas import ContextItemRead, FormatName, StrictBody
from app.api.session_ids import SESSION_ID_IN_PATH, SessionIdPath
from app.domain.items import MAX_SAFE_INTEGER
from app.domain.projection.budget import (
    MAX_QUERY_CHARS,
    MAX_RECALL_ITEMS,
    MAX_RECALL_TOKENS,
    RecallScope,
    RecallSpec,
)
from app.services import context as service
from app.services.runtime import Encoded

router = APIRouter(
    prefix="/v1/sessions/{session_id}/context",
    tags=["context"],
    route_class=GuardedRoute,
)

SessionId = SessionIdPath
Tokenizer = Literal["o200k_base", "cl100k_base", "approx"]

BUDGET_FIELDS = (
    "max_items",
    "max_chars",
    "max_tokens",
    "tokenizer",
    "pinned_prefix_items",
    "keep_system",
    "max_recent_tool_results",
    "trim_old_reasoning",
    "start_on",
    "dangling_tool_calls",
    "cut",
    "cut_step",
    "cache_breakpoints",
)
CutName = Literal["tight", "stable"]


def _optional_fields(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s fields, each optional (default None) with its constraints and description:
    a request field left out takes the session's default."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        copied = FieldInfo.merge_field_infos(info, default=None)
        fields[name] = (info.annotation | None, copied)  # type: ignore[operator]
    return fields


class ContextRecall(  # the recall fields are declared once, by the domain's RecallSpec
    create_model("ContextRecallFields", __base__=StrictBody, **_optional_fields(RecallSpec))  # type: ignore[misc]
):
    """Recall: items not in the prompt (dropped by the budget, archived by compaction) that
    best match `query`, brought back as text in one message before the newest user message,
    as many as fill `max_tokens`. Every field defaults to the session's
    `config.context.recall`."""


class ContextRequest(StrictBody):
    """A budget; every field defaults to the session's `config.context`. `null` lifts a default."""

    model_config = ConfigDict(extra="forbid")

    format: FormatName = "canonical"
    max_items: int | None = Field(
        None, ge=1, le=MAX_SAFE_INTEGER, description="Canonical items in the prompt"
    )
    max_chars: int | None = Field(None, ge=1, le=MAX_SAFE_INTEGER)
    max_tokens: int | None = Field(
        None, ge=1, le=MAX_SAFE_INTEGER, description="Tokens of the rendered payload"
    )
    tokenizer: Tokenizer | None = None
    pinned_prefix_items: int | None = Field(
        None, ge=0, le=MAX_SAFE_INTEGER, description="First N items always kept"
    )
    keep_system: bool | None = None
    max_recent_tool_results: int | None = Field(
        None,
        ge=0,
        le=MAX_SAFE_INTEGER,
        description="Tier 1: older tool outputs become placeholders",
    )
    trim_old_reasoning: bool | None = Field(
        None, description="Tier 2: reasoning before the last user message loses its payload"
    )
    start_on: Literal["any", "user"] | None = None
    dangling_tool_calls: Literal["drop", "placeholder"] | None = None
    cut: CutName | None = Field(
        None,
        description="`tight` (default): the longest tail that fits; `stable`: the tail's start "
        "moves in steps, so consecutive prompts share their prefix (prompt caching)",
    )
    cut_step: float | None = Field(
        None, gt=0, le=0.5, description="With `cut: stable`: one step, as a fraction of the limit"
    )
    cache_breakpoints: bool | None = Field(
        None,
        description="`anthropic` only: `cache_control` markers on the system prompt and the "
        "end of the stable prefix",
    )
    recall: ContextRecall | None = Field(
        None, description="Recall evicted items into the prompt; `null` turns a default off"
    )


class RecalledRead(BaseModel):
    seq: int = Field(description="The entry's seq (a call's, for a call with its output)")
    session_id: str
    score: float = Field(description="Its fused rank score (higher is better)")
    tokens: int = Field(description="Tokens of its line in the recall block")


class ContextReportRead(BaseModel):
    source_items: int
    projected_items: int
    dropped_items: int
    source_tokens: int
    projected_tokens: int
    source_chars: int
    projected_chars: int
    limits_applied: list[Literal["max_items", "max_chars", "max_tokens"]]
    dropped_ranges: list[list[int]] = Field(description="[first_seq, last_seq] of dropped runs")
    notes: list[str]
    tokenizer: Tokenizer
    stable_prefix: int = Field(
        description="Leading payload messages (`items`, `messages`, `input` or `contents`) the "
        "next reads "
        "repeat byte for byte while only appends happen, until the next step of a stable cut"
    )
    recalled: list[RecalledRead] = Field(
        default_factory=list, description="The recall block's entries, oldest first"
    )
    recall_query: str | None = Field(None, description="What recall ranked by")


class ContextRead(BaseModel):
    """The payload field depends on `format`: `items` (canonical), `messages` (openai-chat),
    `input` (openai-responses), `system` + `messages` (anthropic), `system_instruction` +
    `contents` (gemini)."""

    format: FormatName
    version: int
    items: list[ContextItemRead] | None = None
    messages: list[dict[str, JsonValue]] | None = None
    input: list[dict[str, JsonValue]] | None = None
    system: JsonValue = None
    system_instruction: JsonValue = None
    contents: list[dict[str, JsonValue]] | None = None
    report: ContextReportRead


def _encode(result: service.ContextResult) -> Encoded:
    return Encoded(200, dumps(context_body(result)), version=result.version)


_RESPONSES = problem_responses(404, 422)


_MAX = {"maximum": MAX_SAFE_INTEGER}


def _query(name: str, kind: Any, schema: dict[str, Any], default: Any = None) -> ReadInRoute:
    return ReadInRoute("query", name, kind, schema, default=default)


def _count(name: str, minimum: int) -> ReadInRoute:
    kind = Annotated[int, Field(ge=minimum, le=MAX_SAFE_INTEGER)]
    return _query(name, kind, {"type": "integer", **_MAX, "minimum": minimum})


def _choice(name: str, kind: Any, default: Any = None) -> ReadInRoute:
    return _query(name, kind, {"enum": list(get_args(kind)), "type": "string"}, default)


def _flag(name: str) -> ReadInRoute:
    return _query(name, bool, {"type": "boolean"})


# The budget as query parameters, read by the route itself (``ReadInRoute``: FastAPI's
# per-request solving of 14 declared parameters was half a context read's CPU).
_FORMAT = _choice("format", FormatName, "canonical")
_BUDGET_PARAMETERS = (
    _count("max_items", 1),
    _count("max_chars", 1),
    _count("max_tokens", 1),
    _choice("tokenizer", Tokenizer),
    _count("pinned_prefix_items", 0),
    _flag("keep_system"),
    _count("max_recent_tool_results", 0),
    _flag("trim_old_reasoning"),
    _choice("start_on", Literal["any", "user"]),
    _choice("dangling_tool_calls", Literal["drop", "placeholder"]),
    _choice("cut", CutName),
    _query(
        "cut_step",
        Annotated[float, Field(gt=0, le=0.5)],
        {"type": "number", "maximum": 0.5, "exclusiveMinimum": 0},
    ),
    _flag("cache_breakpoints"),
)
_RECALL_PARAMETERS = (
    _query(
        "recall_tokens",
        Annotated[int, Field(ge=0, le=MAX_RECALL_TOKENS)],
        {"type": "integer", "minimum": 0, "maximum": MAX_RECALL_TOKENS},
    ),
    _query(
        "recall_query",
        Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)],
        {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
    ),
    _query(
        "recall_items",
        Annotated[int, Field(ge=1, le=MAX_RECALL_ITEMS)],
        {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_ITEMS},
    ),
    _query(
        "recall_min_score",
        Annotated[float, Field(ge=-1, le=1)],
        {"type": "number", "minimum": -1, "maximum": 1},
    ),
    _choice("recall_scope", RecallScope),
)
# the recall field each query parameter sets
RECALL_FIELDS = ("max_tokens", "query", "max_items", "min_score", "scope")
_GET_PARAMETERS = (SESSION_ID_IN_PATH, _FORMAT, *_BUDGET_PARAMETERS, *_RECALL_PARAMETERS)
assert tuple(p.name for p in _BUDGET_PARAMETERS) == BUDGET_FIELDS


@hot_route(
    router,
    "GET",
    "",
    response_model=ContextRead,
    operation_id="getContext",
    summary="The next-turn prompt in a provider format, within a budget",
    responses=_RESPONSES,
    openapi_extra={"parameters": [param.spec for param in _GET_PARAMETERS]},
)
async def get_context(request: Request) -> Response:
    session_id, format, *values = read_all(request, _GET_PARAMETERS)
    budget, recall = values[: len(BUDGET_FIELDS)], values[len(BUDGET_FIELDS) :]
    overrides: dict[str, object] = {
        name: value for name, value in zip(BUDGET_FIELDS, budget, strict=True) if value is not None
    }
    asked = {name: v for name, v in zip(RECALL_FIELDS, recall, strict=True) if v is not None}
    if asked:
        overrides["recall"] = asked
    result = await service.read_context(
        runtime_of(request), actor_of(request), session_id, format=format, overrides=overrides
    )
    return json_response(_encode(result))


@router.post(
    "",
    response_model=ContextRead,
    operation_id="postContext",
    summary="The next-turn prompt, with the budget as a JSON body (reads only)",
    responses=_RESPONSES,
)
async def post_context(
    session_id: SessionId, body: ContextRequest, rt: RuntimeDep, actor: ActorDep
) -> Response:
    overrides: dict[str, object] = {
        name: getattr(body, name) for name in BUDGET_FIELDS if name in body.model_fields_set
    }
    if "recall" in body.model_fields_set:
        overrides["recall"] = (
            None if body.recall is None else body.recall.model_dump(exclude_unset=True)
        )
    result = await service.read_context(
        rt, actor, session_id, format=body.format, overrides=overrides
    )
    return json_response(_encode(result))
