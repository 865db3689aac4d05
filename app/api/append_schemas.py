"""The published shape of an append request (``POST /v1/sessions/{id}/items``), one per format.

The body is a ``oneOf`` chosen by ``format``: ``canonical`` (the default, so ``format`` may be
omitted) lists canonical items with their envelope (``id``, ``pinned``, ``metadata``); the
provider formats list that provider's messages, restricted to what the canonical model can
carry. These models exist for the OpenAPI document (and the clients generated from it): the
server validates with ``app.domain.formats`` ingest, which accepts every body valid here.
Compatibility leniencies of the ingest are not advertised: provider fields tolerated only when
empty (e.g. Chat ``name: ""``), and transport hints that are dropped (``status``,
``cache_control``, ``citations``, ``annotations``, ``logprobs``) are declared with any value.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool

from app.domain.items import ID_PATTERN, ImageDetail, Role

MAX_ITEMS_PER_APPEND = 1000  # the default of LIMITS__MAX_ITEMS_PER_APPEND

CallId = Annotated[str, Field(min_length=1, max_length=256)]
ToolName = Annotated[str, Field(min_length=1, max_length=256)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Envelope(_Shape):
    id: str | None = Field(
        None, pattern=ID_PATTERN, description="Item id; generated when omitted (409 if taken)"
    )
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


# -- canonical ---------------------------------------------------------------------------------


class TextPartCreate(_Shape):
    type: Literal["text"]
    text: str


class ImagePartCreate(_Shape):
    type: Literal["image"]
    url: str = Field(min_length=1, description="https URL or data: URL")
    detail: ImageDetail | None = None


class MessageCreate(_Envelope):
    type: Literal["message"]
    role: Role
    content: str | list[Annotated[TextPartCreate | ImagePartCreate, Field(discriminator="type")]]


class FunctionCallCreate(_Envelope):
    type: Literal["function_call"]
    call_id: CallId
    name: ToolName
    arguments: str = ""


class FunctionCallOutputCreate(_Envelope):
    type: Literal["function_call_output"]
    call_id: CallId
    output: str
    is_error: StrictBool | None = None


class ReasoningCreate(_Envelope):
    type: Literal["reasoning"]
    summary: list[str] = Field(default_factory=list)
    content: str | None = None
    encrypted_content: str | None = None
    signature: str | None = Field(None, description="Anthropic thinking signature")
    redacted: StrictBool | None = Field(None, description="Anthropic redacted_thinking")


CanonicalItemCreate = Annotated[
    MessageCreate | FunctionCallCreate | FunctionCallOutputCreate | ReasoningCreate,
    Field(discriminator="type"),
]


class CanonicalAppend(_Shape):
    """Canonical items (the default format)."""

    format: Literal["canonical"] = "canonical"
    items: list[CanonicalItemCreate] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)


# -- openai-chat -------------------------------------------------------------------------------


class ChatTextPart(_Shape):
    type: Literal["text"]
    text: str


class ChatImageUrl(_Shape):
    url: str = Field(min_length=1)
    detail: ImageDetail | None = None


class ChatImagePart(_Shape):
    type: Literal["image_url"]
    image_url: ChatImageUrl


class ChatSystemMessage(_Envelope):
    role: Literal["system", "developer"]
    content: str | list[ChatTextPart]


class ChatUserMessage(_Envelope):
    role: Literal["user"]
    content: str | list[Annotated[ChatTextPart | ChatImagePart, Field(discriminator="type")]]


class ChatFunction(_Shape):
    name: ToolName
    arguments: str = ""


class ChatToolCall(_Shape):
    id: CallId
    type: Literal["function"] = "function"
    function: ChatFunction


class ChatAssistantMessage(_Envelope):
    """Needs `content` (not null) or at least one tool call."""

    # Under `allOf` (same meaning as a bare `anyOf`) so that generators such as
    # openapi-python-client read the object's properties instead of failing on the union.
    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "anyOf": [
                        {
                            "required": ["content"],
                            "properties": {"content": {"not": {"type": "null"}}},
                        },
                        {
                            "required": ["tool_calls"],
                            "properties": {"tool_calls": {"type": "array", "minItems": 1}},
                        },
                    ]
                }
            ]
        }
    )

    role: Literal["assistant"]
    content: str | list[ChatTextPart] | None = None
    tool_calls: list[ChatToolCall] | None = None


class ChatToolMessage(_Envelope):
    role: Literal["tool"]
    tool_call_id: CallId
    content: str | list[ChatTextPart]


ChatMessage = Annotated[
    ChatSystemMessage | ChatUserMessage | ChatAssistantMessage | ChatToolMessage,
    Field(union_mode="left_to_right"),
]


class OpenAIChatAppend(_Shape):
    """Chat Completions messages."""

    format: Literal["openai-chat"]
    items: list[ChatMessage] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)


# -- openai-responses --------------------------------------------------------------------------


class ResponsesTextPart(_Shape):
    type: Literal["input_text", "output_text"]
    text: str
    annotations: JsonValue = Field(None, description="Dropped")
    logprobs: JsonValue = Field(None, description="Dropped")


class ResponsesImagePart(_Shape):
    type: Literal["input_image"]
    image_url: str = Field(min_length=1)
    detail: ImageDetail | None = None


class ResponsesMessage(_Envelope):
    type: Literal["message"] = "message"
    role: Role
    content: (
        str | list[Annotated[ResponsesTextPart | ResponsesImagePart, Field(discriminator="type")]]
    )
    status: JsonValue = Field(None, description="Ignored")


class ResponsesInputText(_Shape):
    type: Literal["input_text"]
    text: str


class ResponsesFunctionCall(_Envelope):
    type: Literal["function_call"]
    call_id: CallId
    name: ToolName
    arguments: str = ""
    status: JsonValue = Field(None, description="Ignored")


class ResponsesFunctionCallOutput(_Envelope):
    type: Literal["function_call_output"]
    call_id: CallId
    output: str | list[ResponsesInputText]
    status: JsonValue = Field(None, description="Ignored")


class ResponsesSummaryText(_Shape):
    type: Literal["summary_text"]
    text: str


class ResponsesReasoningText(_Shape):
    type: Literal["reasoning_text"]
    text: str


class ResponsesReasoning(_Envelope):
    type: Literal["reasoning"]
    summary: list[ResponsesSummaryText] = Field(default_factory=list)
    content: list[ResponsesReasoningText] | None = None
    encrypted_content: str | None = None
    status: JsonValue = Field(None, description="Ignored")


ResponsesItem = Annotated[
    ResponsesMessage | ResponsesFunctionCall | ResponsesFunctionCallOutput | ResponsesReasoning,
    Field(union_mode="left_to_right"),
]


class OpenAIResponsesAppend(_Shape):
    """Responses API input items."""

    format: Literal["openai-responses"]
    items: list[ResponsesItem] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)


# -- anthropic ---------------------------------------------------------------------------------


class AnthropicTextBlock(_Shape):
    type: Literal["text"]
    text: str
    cache_control: JsonValue = Field(None, description="Dropped")
    citations: JsonValue = Field(None, description="Dropped")


class AnthropicBase64Source(_Shape):
    type: Literal["base64"]
    media_type: str
    data: str


class AnthropicUrlSource(_Shape):
    type: Literal["url"]
    url: str = Field(min_length=1)


class AnthropicImageBlock(_Shape):
    type: Literal["image"]
    source: Annotated[AnthropicBase64Source | AnthropicUrlSource, Field(discriminator="type")]
    cache_control: JsonValue = Field(None, description="Dropped")
    citations: JsonValue = Field(None, description="Dropped")


class AnthropicToolResultBlock(_Shape):
    type: Literal["tool_result"]
    tool_use_id: CallId
    content: str | list[AnthropicTextBlock] | None = None
    is_error: StrictBool | None = None
    cache_control: JsonValue = Field(None, description="Dropped")
    citations: JsonValue = Field(None, description="Dropped")


class AnthropicToolUseBlock(_Shape):
    type: Literal["tool_use"]
    id: CallId
    name: ToolName
    input: dict[str, JsonValue] = Field(default_factory=dict)
    cache_control: JsonValue = Field(None, description="Dropped")
    citations: JsonValue = Field(None, description="Dropped")


class AnthropicThinkingBlock(_Shape):
    type: Literal["thinking"]
    thinking: str | None = None
    signature: str | None = None


class AnthropicRedactedThinkingBlock(_Shape):
    type: Literal["redacted_thinking"]
    data: str | None = None


class AnthropicUserMessage(_Envelope):
    role: Literal["user"]
    content: (
        str
        | Annotated[
            list[
                Annotated[
                    AnthropicTextBlock | AnthropicImageBlock | AnthropicToolResultBlock,
                    Field(discriminator="type"),
                ]
            ],
            Field(min_length=1),
        ]
    )


class AnthropicAssistantMessage(_Envelope):
    role: Literal["assistant"]
    content: (
        str
        | Annotated[
            list[
                Annotated[
                    AnthropicTextBlock
                    | AnthropicToolUseBlock
                    | AnthropicThinkingBlock
                    | AnthropicRedactedThinkingBlock,
                    Field(discriminator="type"),
                ]
            ],
            Field(min_length=1),
        ]
    )


AnthropicMessage = Annotated[
    AnthropicUserMessage | AnthropicAssistantMessage, Field(discriminator="role")
]


class AnthropicAppend(_Shape):
    """Messages API messages, with the optional top-level `system`."""

    format: Literal["anthropic"]
    items: list[AnthropicMessage] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)
    system: str | list[AnthropicTextBlock] | None = Field(
        None, description="Becomes a canonical system message, first"
    )


AppendRequest = Annotated[
    CanonicalAppend | OpenAIChatAppend | OpenAIResponsesAppend | AnthropicAppend,
    Field(union_mode="left_to_right"),
]
