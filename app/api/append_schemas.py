"""The published shape of an append request (``POST /v1/sessions/{id}/items``), one per format.

The body is a ``oneOf`` chosen by ``format``: ``canonical`` (the default, so ``format`` may be
omitted) lists canonical items with their envelope (``id``, ``pinned``, ``metadata``); each
provider format lists that provider's own input items or messages: every one its SDK can build
and any newer one, each stored exactly as sent (DESIGN §1 "Faithful storage").

These models exist for the OpenAPI document and the clients generated from it; the server
validates with the ingest of ``app.domain.formats``, and the two agree
(``tests/clients/test_spec_for_generators.py``):

- **Every body the ingest accepts is valid here.** Provider items, messages, content parts
  and blocks are open objects (``additionalProperties: true``: every provider field, present
  or future, is kept), and each union ends with a catch-all member, an object with a string
  ``type`` (an input item, part or block of any other type). A field the ingest does not read
  is provider data, any JSON value, its provider's type given in its description (``id``,
  ``status``, ``phase``, ``annotations``, ``logprobs``, ``namespace``, ``name``, ``refusal``,
  ``audio``, ``cache_control``, ``citations``, ...). In the provider formats ``id`` is the
  provider's item id, data that comes back as sent, and the only envelope keys are ``pinned``
  and ``metadata``; only a canonical item's ``id`` is the service's item id.
- **Every body valid here is accepted** (within the size limits, canonical ids distinct):
  what the ingest reads to build the canonical view (roles, call ids, tool names, arguments,
  texts, image sources, reasoning texts) is declared with the ingest's own rules, down to the
  empty values it reads as absent (``"tool_calls": false``, an ``input_image`` without a
  source, ...).
- **The known shapes are documented.** Every type of the SDKs' unions has a member of its
  own: the Responses input items, the Chat Completions messages and content parts, the
  Anthropic messages (``user``, ``assistant``, ``system``) and content blocks. Members that
  the catch-all also covers document; they constrain nothing.

Not advertised: booleans the canonical model reads (``is_error``, ``redacted``) are read as
pydantic reads them, so ``0``, ``1``, ``"true"`` and the like are taken as well.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, WithJsonSchema

from app.api.gemini_schemas import GeminiAppend
from app.domain.items import CORE_TYPES, ID_PATTERN, Role

MAX_ITEMS_PER_APPEND = 1000  # the default of LIMITS__MAX_ITEMS_PER_APPEND

CallId = Annotated[str, Field(min_length=1, max_length=256)]
ToolName = Annotated[str, Field(min_length=1, max_length=256)]
# A Chat ``function_call`` / ``function`` message pairs by ``function:NAME`` (a call id of at
# most 256 characters), so its name has at most 247.
LegacyFunctionName = Annotated[str, Field(max_length=247)]

_CORE_TYPES = sorted(CORE_TYPES)


def _data(description: str) -> Any:
    """A provider field the ingest does not read: any JSON value, kept as sent."""
    return Field(None, description=f"Provider data, kept as sent: {description}")


# Values the ingest takes as absent where it reads a field only when it is truthy (Python's
# ``value or default``), as union members: ``null``, ``""`` and ``[]`` are declared with the
# field's own types, these are the others. Spelled without ``const``: openapi-python-client
# parses a ``const`` member of a union without guarding it, so the union never gets past it.
_FALSE = Annotated[Any, WithJsonSchema({"type": "boolean", "enum": [False]})]
_ZERO = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 0, "maximum": 0})]
_EMPTY_OBJECT = Annotated[Any, WithJsonSchema({"type": "object", "maxProperties": 0})]
_EMPTY_STRING = Annotated[Any, WithJsonSchema({"type": "string", "maxLength": 0})]
_EMPTY_ARRAY = Annotated[Any, WithJsonSchema({"type": "array", "items": {}, "maxItems": 0})]
_NOT_AN_OBJECT = Annotated[Any, WithJsonSchema({"not": {"type": "object"}})]


def _needs_one_of(first: str, second: str, *, extra: Literal["allow", "forbid"]) -> ConfigDict:
    """An object that needs ``first`` or ``second`` as a string. Under ``allOf`` (same meaning
    as a bare ``anyOf``) so that generators such as openapi-python-client read the object's
    properties instead of failing on the union."""
    either = [
        {"required": [key], "properties": {key: {"type": "string"}}} for key in (first, second)
    ]
    return ConfigDict(extra=extra, json_schema_extra={"allOf": [{"anyOf": either}]})


def _other_type(*known: str, bounded: bool = True) -> Any:
    """The ``type`` of a catch-all member: any string but the types with members of their own
    that the ingest reads (those are held to their member's rules)."""
    extra: dict[str, Any] = {"not": {"enum": sorted(known)}}
    if bounded:
        return Field(min_length=1, max_length=64, json_schema_extra=extra)
    return Field(json_schema_extra=extra)


class _Shape(BaseModel):
    """A closed object: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """An open object: any other field is allowed and kept verbatim."""

    model_config = ConfigDict(extra="allow")


class _Envelope(_Shape):
    id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="The service's item id; generated when omitted (409 if taken)",
    )
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


class _ProviderEnvelope(_Open):
    """The envelope keys a provider item or message may carry (taken off before storing)."""

    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


# -- canonical ---------------------------------------------------------------------------------


class TextPartCreate(_Shape):
    type: Literal["text"]
    text: str


class ImagePartCreate(_Shape):
    """An image by URL or by a provider's file id (at least one of them)."""

    model_config = _needs_one_of("url", "file_id", extra="forbid")

    type: Literal["image"]
    url: str | None = Field(None, min_length=1, description="https URL or data: URL")
    file_id: str | None = Field(None, min_length=1, description="A provider's file id")
    detail: str | None = Field(None, description="`auto`, `low`, `high` (or a provider's own)")


class OtherPartCreate(_Open):
    """A content part of any other type (files, documents, audio, search results, refusals,
    ...): kept verbatim."""

    type: str = _other_type("text", "image")


CanonicalPart = Annotated[
    TextPartCreate | ImagePartCreate | OtherPartCreate, Field(union_mode="left_to_right")
]


class MessageCreate(_Envelope):
    type: Literal["message"]
    role: Role
    content: str | list[CanonicalPart]


class FunctionCallCreate(_Envelope):
    type: Literal["function_call"]
    call_id: CallId
    name: ToolName
    arguments: str = ""


class FunctionCallOutputCreate(_Envelope):
    type: Literal["function_call_output"]
    call_id: CallId
    output: str | list[CanonicalPart] = Field(description="A string, or content parts")
    is_error: StrictBool | None = None


class ReasoningCreate(_Envelope):
    type: Literal["reasoning"]
    summary: list[str] = Field(default_factory=list)
    content: str | None = None
    encrypted_content: str | None = None
    signature: str | None = Field(None, description="Anthropic thinking signature")
    redacted: StrictBool | None = Field(None, description="Anthropic redacted_thinking")


class OpaqueItemCreate(_Open):
    """An item of any other type (hosted tool calls such as `web_search_call`, client tool
    pairs such as `computer_call` / `computer_call_output`, `compaction`, `item_reference`,
    anything newer; the shapes of the Responses input items): stored whole, exactly as sent.
    `pinned` and `metadata` are the envelope, as on every canonical item; `id` is part of the
    item (a provider's own id, such as a `web_search_call`'s), kept as sent."""

    type: str = _other_type(*_CORE_TYPES)
    id: JsonValue = Field(
        None,
        description="Part of the item, kept as sent (a provider's own id); the stored item "
        "gets an id of the service's",
    )
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


class IncompleteCallCreate(_Open):
    """A `function_call` or `function_call_output` whose `call_id` is missing, `null` or `""`
    (the SDKs' own session stores keep them): stored whole, exactly as sent, and listed back
    so; it pairs with nothing and no prompt carries it (the projection leaves it out with a
    note). `id`, `pinned` and `metadata` are the envelope, as on every canonical item."""

    type: Literal["function_call", "function_call_output"]
    call_id: Literal[""] | None = Field(None, description='Missing, `null` or `""`')
    id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="The service's item id; generated when omitted (409 if taken)",
    )
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


class RolelessMessageCreate(_Open):
    """A `message` without a `role` (missing or `null`; the SDKs' own session stores keep
    them): stored whole, exactly as sent, and listed back so; no prompt carries it (the
    projection leaves it out with a note). `id`, `pinned` and `metadata` are the envelope, as
    on every canonical item."""

    type: Literal["message"]
    role: None = Field(None, description="Missing or `null`")
    id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="The service's item id; generated when omitted (409 if taken)",
    )
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


# What makes an object an untyped item: neither a usable ``type`` nor a ``role``.
_TYPED_OR_MESSAGE = {
    "anyOf": [
        {
            "required": ["type"],
            "properties": {"type": {"type": "string", "minLength": 1, "maxLength": 64}},
        },
        {"required": ["role"]},
    ]
}


class UntypedItemCreate(_ProviderEnvelope):
    """Any other JSON object, without a usable `type` (missing, not a string, empty or longer
    than 64 characters) and without a `role` (which makes an object a message, held to a
    message's rules): an SDK wrapper's encrypted envelope, say. Stored whole, exactly as sent,
    and listed back so; no prompt carries it (the projection leaves it out with a note)."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"not": _TYPED_OR_MESSAGE})


CanonicalItemCreate = Annotated[
    MessageCreate
    | FunctionCallCreate
    | FunctionCallOutputCreate
    | ReasoningCreate
    | IncompleteCallCreate
    | RolelessMessageCreate
    | OpaqueItemCreate
    | UntypedItemCreate,
    Field(union_mode="left_to_right"),
]


class CanonicalAppend(_Shape):
    """Canonical items (the default format)."""

    format: Literal["canonical"] = "canonical"
    items: list[CanonicalItemCreate] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)


# -- openai-chat -------------------------------------------------------------------------------


class ChatTextPart(_Open):
    type: Literal["text"]
    text: str


class ChatImageUrl(_Open):
    url: str = Field(min_length=1, description="https URL or data: URL")
    detail: str | None = Field(None, description="`auto`, `low` or `high`")


class ChatImagePart(_Open):
    type: Literal["image_url"]
    image_url: ChatImageUrl


class ChatImagePartWithoutUrl(_Open):
    """An `image_url` part whose `image_url` is missing or not an object: kept verbatim."""

    type: Literal["image_url"]
    image_url: _NOT_AN_OBJECT = None


class ChatInputAudioPart(_Open):
    """Audio input (kept verbatim)."""

    type: Literal["input_audio"]
    input_audio: JsonValue = Field(description="`{data: base64, format: wav|mp3}`")


class ChatFilePart(_Open):
    """A file (kept verbatim)."""

    type: Literal["file"]
    file: JsonValue = Field(description="`{file_data?, file_id?, filename?}`")


class ChatRefusalPart(_Open):
    """An assistant refusal part (kept verbatim)."""

    type: Literal["refusal"]
    refusal: str


class ChatOtherPart(_Open):
    """A content part of any other type: kept verbatim."""

    type: str = _other_type("text", "image_url", bounded=False)


ChatPart = Annotated[
    ChatTextPart
    | ChatImagePart
    | ChatImagePartWithoutUrl
    | ChatInputAudioPart
    | ChatFilePart
    | ChatRefusalPart
    | ChatOtherPart,
    Field(union_mode="left_to_right"),
]
ChatContent = str | list[ChatPart]


class ChatSystemMessage(_ProviderEnvelope):
    role: Literal["system", "developer"]
    content: ChatContent
    name: JsonValue = _data("a string, the participant's name")


class ChatUserMessage(_ProviderEnvelope):
    role: Literal["user"]
    content: ChatContent
    name: JsonValue = _data("a string, the participant's name")


class ChatFunction(_Open):
    name: ToolName
    arguments: str = Field("", description="JSON text")


class ChatToolCall(_Open):
    """A function tool call."""

    id: CallId
    type: Literal["function"] = "function"
    function: ChatFunction


class ChatCustom(_Open):
    name: ToolName
    input: str = ""


class ChatCustomToolCall(_Open):
    """A custom tool call (its `input` is the call's arguments)."""

    id: CallId
    type: Literal["custom"]
    custom: ChatCustom


class ChatAssistantMessage(_ProviderEnvelope):
    """An assistant message: its `content` (or, without content, its `refusal`), then its
    tool calls; one with neither is an empty assistant message."""

    role: Literal["assistant"]
    content: ChatContent | None = None
    tool_calls: (
        list[Annotated[ChatToolCall | ChatCustomToolCall, Field(union_mode="left_to_right")]]
        | None
        | _EMPTY_STRING
        | _FALSE
        | _ZERO
        | _EMPTY_OBJECT
    ) = Field(None, description='Tool calls; `null` (or `false`, `0`, `""`, `{}`): none')
    refusal: JsonValue = _data("a string or null, the model's refusal")
    name: JsonValue = _data("a string, the participant's name")
    audio: JsonValue = _data("`{id}`, a previous audio response")
    function_call: _NOT_AN_OBJECT = Field(
        None, description="Not an object here (see `ChatAssistantFunctionCallMessage`)"
    )


class ChatLegacyFunctionCall(_Open):
    name: Annotated[str, Field(min_length=1, max_length=247)]
    arguments: str = Field("", description="JSON text")


class ChatAssistantFunctionCallMessage(_ProviderEnvelope):
    """An assistant message with the deprecated `function_call`: it is that one call (paired
    with the `function` message of the same name); its other fields are kept as sent."""

    role: Literal["assistant"]
    function_call: ChatLegacyFunctionCall


_NO_CONTENT = "The output; `null` (or `false`, `0`, `{}`): empty"


class ChatToolMessage(_ProviderEnvelope):
    role: Literal["tool"]
    tool_call_id: CallId
    content: ChatContent | None | _FALSE | _ZERO | _EMPTY_OBJECT = Field(
        None, description=_NO_CONTENT
    )


class ChatFunctionMessage(_ProviderEnvelope):
    """The deprecated answer to a `function_call` (paired by `name`)."""

    role: Literal["function"]
    name: LegacyFunctionName
    content: ChatContent | None | _FALSE | _ZERO | _EMPTY_OBJECT = Field(
        None, description=_NO_CONTENT
    )


ChatMessage = Annotated[
    ChatSystemMessage
    | ChatUserMessage
    | ChatAssistantMessage
    | ChatAssistantFunctionCallMessage
    | ChatToolMessage
    | ChatFunctionMessage,
    Field(union_mode="left_to_right"),
]


class OpenAIChatAppend(_Shape):
    """Chat Completions messages (every member of the SDK's `ChatCompletionMessageParam`)."""

    format: Literal["openai-chat"]
    items: list[ChatMessage] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)


# -- openai-responses --------------------------------------------------------------------------


class ResponsesTextPart(_Open):
    type: Literal["input_text", "output_text"]
    text: str
    annotations: JsonValue = _data("a list of url / file citations (output_text)")
    logprobs: JsonValue = _data("a list of token log probabilities (output_text)")


class ResponsesImagePart(_Open):
    """An image by URL or file id; an `input_image` with neither is kept verbatim (see
    `ResponsesImagePartWithoutSource`)."""

    model_config = _needs_one_of("image_url", "file_id", extra="allow")

    type: Literal["input_image"]
    image_url: str | None = Field(None, min_length=1, description="https URL or data: URL")
    file_id: str | None = Field(None, min_length=1)
    detail: str | None = Field(None, description="`auto`, `low`, `high` or `original`")


_NoSource = None | _EMPTY_STRING | _FALSE | _ZERO | _EMPTY_ARRAY | _EMPTY_OBJECT


class ResponsesImagePartWithoutSource(_Open):
    """An `input_image` without an image URL or a file id (each absent, `null`, `""`, or
    another empty or false value): kept verbatim."""

    type: Literal["input_image"]
    image_url: _NoSource = None
    file_id: _NoSource = None


class ResponsesFilePart(_Open):
    """A file (kept verbatim)."""

    type: Literal["input_file"]
    file_id: JsonValue = _data("a string or null")
    file_url: JsonValue = _data("a string")
    file_data: JsonValue = _data("a string, the base64 content")
    filename: JsonValue = _data("a string")


class ResponsesRefusalPart(_Open):
    """An assistant refusal part (kept verbatim)."""

    type: Literal["refusal"]
    refusal: str


class ResponsesOtherPart(_Open):
    """A content part of any other type: kept verbatim."""

    type: str = _other_type("input_text", "output_text", "input_image", bounded=False)


ResponsesPart = Annotated[
    ResponsesTextPart
    | ResponsesImagePart
    | ResponsesImagePartWithoutSource
    | ResponsesFilePart
    | ResponsesRefusalPart
    | ResponsesOtherPart,
    Field(union_mode="left_to_right"),
]
ResponsesContent = str | list[ResponsesPart]


class ResponsesMessage(_ProviderEnvelope):
    """A message (easy input message, input message or output message)."""

    type: Literal["message"] = "message"
    role: Role
    content: ResponsesContent
    id: JsonValue = _data("a string, the provider's item id")
    status: JsonValue = _data("`in_progress`, `completed` or `incomplete`")
    phase: JsonValue = _data("`commentary` or `final_answer` (assistant)")


class ResponsesFunctionCall(_ProviderEnvelope):
    type: Literal["function_call"]
    call_id: CallId
    name: ToolName
    arguments: str = Field("", description="JSON text")
    id: JsonValue = _data("a string, the provider's item id")
    status: JsonValue = _data("`in_progress`, `completed` or `incomplete`")
    namespace: JsonValue = _data("a string, the tool's namespace")


class ResponsesFunctionCallOutput(_ProviderEnvelope):
    type: Literal["function_call_output"]
    call_id: CallId = Field(
        description="The call it answers (the SDK's type allows null, the API does not)"
    )
    output: ResponsesContent = Field(description="A string, or input parts (text, image, file)")
    id: JsonValue = _data("a string, the provider's item id")
    status: JsonValue = _data("`in_progress`, `completed` or `incomplete`")


class ResponsesIncompleteCall(_ProviderEnvelope):
    """A `function_call` or `function_call_output` whose `call_id` is missing, `null` or `""`
    (the SDKs' own session stores keep them): stored whole, exactly as sent, and listed back
    so; it pairs with nothing and no prompt carries it (the projection leaves it out with a
    note)."""

    type: Literal["function_call", "function_call_output"]
    call_id: Literal[""] | None = Field(None, description='Missing, `null` or `""`')


class ResponsesRolelessMessage(_ProviderEnvelope):
    """A `message` (its `type` given) without a `role` (missing or `null`; the SDKs' own
    session stores keep them): stored whole, exactly as sent, and listed back so; no prompt
    carries it (the projection leaves it out with a note)."""

    type: Literal["message"]
    role: None = Field(None, description="Missing or `null`")


class ResponsesSummaryText(_Open):
    type: Literal["summary_text"]
    text: str


class ResponsesReasoningText(_Open):
    type: Literal["reasoning_text"]
    text: str


class ResponsesReasoning(_ProviderEnvelope):
    type: Literal["reasoning"]
    summary: list[ResponsesSummaryText] = Field(default_factory=list)
    content: list[ResponsesReasoningText] | None = None
    encrypted_content: str | None = None
    id: JsonValue = _data("a string, the provider's item id")
    status: JsonValue = _data("`in_progress`, `completed` or `incomplete`")


# Every other input item is stored whole (an opaque item). The members below document the
# types of the SDK's input item union; the catch-all takes them (and any newer type) as well.

_Status = Literal["in_progress", "completed", "incomplete"]


class _ResponsesOpaque(_ProviderEnvelope):
    id: str | None = Field(None, description="The provider's item id (data, kept as sent)")


class ResponsesFileSearchCall(_ResponsesOpaque):
    type: Literal["file_search_call"]
    queries: list[str]
    status: str
    results: JsonValue = None


class ResponsesWebSearchCall(_ResponsesOpaque):
    type: Literal["web_search_call"]
    action: JsonValue = Field(description="`search`, `open_page` or `find_in_page`")
    status: str


class ResponsesComputerCall(_ResponsesOpaque):
    type: Literal["computer_call"]
    call_id: str
    action: JsonValue = Field(None, description="One action (click, type, screenshot, ...)")
    actions: JsonValue = Field(None, description="A list of actions")
    pending_safety_checks: list[JsonValue] = Field(default_factory=list)
    status: _Status | None = None


class ResponsesComputerCallOutput(_ResponsesOpaque):
    type: Literal["computer_call_output"]
    call_id: str
    output: JsonValue = Field(description="`{type: computer_screenshot, image_url?, file_id?}`")
    acknowledged_safety_checks: JsonValue = None
    status: _Status | None = None


class ResponsesImageGenerationCall(_ResponsesOpaque):
    type: Literal["image_generation_call"]
    result: str | None = Field(description="The base64 image")
    status: str


class ResponsesCodeInterpreterCall(_ResponsesOpaque):
    type: Literal["code_interpreter_call"]
    code: str | None
    container_id: str
    outputs: JsonValue = Field(description="Logs and images, or null")
    status: str


class ResponsesLocalShellCall(_ResponsesOpaque):
    type: Literal["local_shell_call"]
    call_id: str
    action: JsonValue = Field(description="`{type: exec, command, env, ...}`")
    status: _Status


class ResponsesLocalShellCallOutput(_ResponsesOpaque):
    """Answers the `local_shell_call` whose `call_id` is this item's `id`."""

    type: Literal["local_shell_call_output"]
    output: str
    status: _Status | None = None


class ResponsesShellCall(_ResponsesOpaque):
    type: Literal["shell_call"]
    call_id: str
    action: JsonValue = Field(description="`{commands, timeout_ms?, max_output_length?}`")
    environment: JsonValue = None
    status: _Status | None = None


class ResponsesShellCallOutput(_ResponsesOpaque):
    type: Literal["shell_call_output"]
    call_id: str
    output: list[JsonValue] = Field(description="`{stdout, stderr, outcome}` entries")
    max_output_length: int | None = None
    status: _Status | None = None


class ResponsesApplyPatchCall(_ResponsesOpaque):
    type: Literal["apply_patch_call"]
    call_id: str
    operation: JsonValue = Field(description="`create_file`, `update_file` or `delete_file`")
    status: Literal["in_progress", "completed"]


class ResponsesApplyPatchCallOutput(_ResponsesOpaque):
    type: Literal["apply_patch_call_output"]
    call_id: str
    status: Literal["completed", "failed"]
    output: str | None = None


class ResponsesMcpListTools(_ResponsesOpaque):
    type: Literal["mcp_list_tools"]
    server_label: str
    tools: list[JsonValue]
    error: str | None = None


class ResponsesMcpApprovalRequest(_ResponsesOpaque):
    """Answered by the `mcp_approval_response` whose `approval_request_id` is its `id`."""

    type: Literal["mcp_approval_request"]
    server_label: str
    name: str
    arguments: str


class ResponsesMcpApprovalResponse(_ResponsesOpaque):
    type: Literal["mcp_approval_response"]
    approval_request_id: str
    approve: bool
    reason: str | None = None


class ResponsesMcpCall(_ResponsesOpaque):
    type: Literal["mcp_call"]
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: JsonValue = None
    approval_request_id: str | None = None
    status: str | None = None


class ResponsesCustomToolCall(_ResponsesOpaque):
    type: Literal["custom_tool_call"]
    call_id: str
    name: str
    input: str
    namespace: str | None = None


class ResponsesCustomToolCallOutput(_ResponsesOpaque):
    type: Literal["custom_tool_call_output"]
    call_id: str
    output: JsonValue = Field(description="A string, or input parts (text, image, file)")


class ResponsesToolSearchCall(_ResponsesOpaque):
    type: Literal["tool_search_call"]
    call_id: str | None = None
    arguments: JsonValue
    execution: Literal["server", "client"] | None = None
    status: _Status | None = None


class ResponsesToolSearchOutput(_ResponsesOpaque):
    type: Literal["tool_search_output"]
    call_id: str | None = None
    tools: list[JsonValue]
    execution: Literal["server", "client"] | None = None
    status: _Status | None = None


class ResponsesAdditionalTools(_ResponsesOpaque):
    type: Literal["additional_tools"]
    role: Literal["developer"]
    tools: list[JsonValue]


class ResponsesConfigurationUpdate(_ResponsesOpaque):
    type: Literal["configuration_update"]
    reasoning: JsonValue = None
    text: JsonValue = None


class ResponsesCompaction(_ResponsesOpaque):
    """A compaction item (opaque to every other provider)."""

    type: Literal["compaction"]
    encrypted_content: str


class ResponsesCompactionTrigger(_ResponsesOpaque):
    type: Literal["compaction_trigger"]


class ResponsesItemReference(_ProviderEnvelope):
    """A reference to an item of a stored response, by its id; without a `type` (the SDK makes
    it optional) it holds nothing else. (With its `type`, any other field is kept as well.)"""

    model_config = ConfigDict(extra="forbid")

    type: Literal["item_reference"] | None = None
    id: str = Field(description="The referenced item's id")


class ResponsesProgram(_ResponsesOpaque):
    type: Literal["program"]
    call_id: str
    code: str
    fingerprint: str


class ResponsesProgramOutput(_ResponsesOpaque):
    type: Literal["program_output"]
    call_id: str
    result: str
    status: Literal["completed", "incomplete"]


class ResponsesOtherItem(_ProviderEnvelope):
    """An input item of any other type (the ones above and anything newer): stored whole,
    exactly as sent."""

    type: str = _other_type(*_CORE_TYPES)


ResponsesItem = Annotated[
    ResponsesMessage
    | ResponsesFunctionCall
    | ResponsesFunctionCallOutput
    | ResponsesIncompleteCall
    | ResponsesRolelessMessage
    | ResponsesReasoning
    | ResponsesFileSearchCall
    | ResponsesWebSearchCall
    | ResponsesComputerCall
    | ResponsesComputerCallOutput
    | ResponsesImageGenerationCall
    | ResponsesCodeInterpreterCall
    | ResponsesLocalShellCall
    | ResponsesLocalShellCallOutput
    | ResponsesShellCall
    | ResponsesShellCallOutput
    | ResponsesApplyPatchCall
    | ResponsesApplyPatchCallOutput
    | ResponsesMcpListTools
    | ResponsesMcpApprovalRequest
    | ResponsesMcpApprovalResponse
    | ResponsesMcpCall
    | ResponsesCustomToolCall
    | ResponsesCustomToolCallOutput
    | ResponsesToolSearchCall
    | ResponsesToolSearchOutput
    | ResponsesAdditionalTools
    | ResponsesConfigurationUpdate
    | ResponsesCompaction
    | ResponsesCompactionTrigger
    | ResponsesItemReference
    | ResponsesProgram
    | ResponsesProgramOutput
    | ResponsesOtherItem
    | UntypedItemCreate,
    Field(union_mode="left_to_right"),
]


class OpenAIResponsesAppend(_Shape):
    """Responses API input items (every member of the SDK's input item union, and any
    newer type)."""

    format: Literal["openai-responses"]
    items: list[ResponsesItem] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)


# -- anthropic ---------------------------------------------------------------------------------

# Blocks that become canonical items of their own; the ingest reads them (and checks their role).
_ITEM_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")


class AnthropicTextBlock(_Open):
    type: Literal["text"]
    text: str
    cache_control: JsonValue = _data("`{type: ephemeral, ttl?}`")
    citations: JsonValue = _data("a list of citations")


class AnthropicInnerBlock(_Open):
    """A block of any other type inside `system` or a `tool_result` (images, documents, search
    results, ...): kept verbatim."""

    type: str = _other_type("text", bounded=False)


InnerBlocks = list[
    Annotated[AnthropicTextBlock | AnthropicInnerBlock, Field(union_mode="left_to_right")]
]


class AnthropicBase64Source(_Open):
    type: Literal["base64"]
    media_type: str
    data: str


class AnthropicUrlSource(_Open):
    type: Literal["url"]
    url: str = Field(min_length=1)


class AnthropicFileSource(_Open):
    type: Literal["file"]
    file_id: str = Field(min_length=1)


class AnthropicImageBlock(_Open):
    """An image: `source` base64 (`media_type`, `data`), `url` or `file` (`file_id`)."""

    type: Literal["image"]
    source: Annotated[
        AnthropicBase64Source | AnthropicUrlSource | AnthropicFileSource,
        Field(discriminator="type"),
    ]
    cache_control: JsonValue = _data("`{type: ephemeral, ttl?}`")


class AnthropicDocumentBlock(_Open):
    type: Literal["document"]
    source: JsonValue = Field(description="base64 PDF, plain text, content blocks, URL or file")
    title: str | None = None
    context: str | None = None
    citations: JsonValue = None


class AnthropicSearchResultBlock(_Open):
    type: Literal["search_result"]
    source: str
    title: str
    content: list[AnthropicTextBlock]
    citations: JsonValue = None


class AnthropicServerToolUseBlock(_Open):
    """A server tool's use (web search, web fetch, code execution, ...); it and its result
    stay together in one message item."""

    type: Literal["server_tool_use"]
    id: str
    name: str
    input: dict[str, JsonValue]


class _AnthropicServerToolResult(_Open):
    tool_use_id: str
    content: JsonValue = Field(description="The result, or an error object")


class AnthropicWebSearchToolResultBlock(_AnthropicServerToolResult):
    type: Literal["web_search_tool_result"]


class AnthropicWebFetchToolResultBlock(_AnthropicServerToolResult):
    type: Literal["web_fetch_tool_result"]


class AnthropicCodeExecutionToolResultBlock(_AnthropicServerToolResult):
    type: Literal["code_execution_tool_result"]


class AnthropicBashCodeExecutionToolResultBlock(_AnthropicServerToolResult):
    type: Literal["bash_code_execution_tool_result"]


class AnthropicTextEditorCodeExecutionToolResultBlock(_AnthropicServerToolResult):
    type: Literal["text_editor_code_execution_tool_result"]


class AnthropicToolSearchToolResultBlock(_AnthropicServerToolResult):
    type: Literal["tool_search_tool_result"]


class AnthropicContainerUploadBlock(_Open):
    type: Literal["container_upload"]
    file_id: str


class AnthropicOtherBlock(_Open):
    """A content block of any other type (the ones above and anything newer): kept verbatim."""

    type: str = _other_type(*_ITEM_BLOCKS, "text", bounded=False)


class AnthropicToolResultBlock(_Open):
    type: Literal["tool_result"]
    tool_use_id: CallId
    content: str | InnerBlocks | None = None
    is_error: StrictBool | None = None


class AnthropicToolUseBlock(_Open):
    type: Literal["tool_use"]
    id: CallId
    name: ToolName
    input: dict[str, JsonValue] = Field(default_factory=dict)


class AnthropicThinkingBlock(_Open):
    type: Literal["thinking"]
    thinking: str | None = None
    signature: str | None = None


class AnthropicRedactedThinkingBlock(_Open):
    type: Literal["redacted_thinking"]
    data: str | None = None


_DOCUMENTED_BLOCKS = (
    AnthropicImageBlock
    | AnthropicDocumentBlock
    | AnthropicSearchResultBlock
    | AnthropicServerToolUseBlock
    | AnthropicWebSearchToolResultBlock
    | AnthropicWebFetchToolResultBlock
    | AnthropicCodeExecutionToolResultBlock
    | AnthropicBashCodeExecutionToolResultBlock
    | AnthropicTextEditorCodeExecutionToolResultBlock
    | AnthropicToolSearchToolResultBlock
    | AnthropicContainerUploadBlock
)


class AnthropicUserMessage(_ProviderEnvelope):
    role: Literal["user"]
    content: (
        str
        | Annotated[
            list[
                Annotated[
                    AnthropicTextBlock
                    | AnthropicToolResultBlock
                    | _DOCUMENTED_BLOCKS
                    | AnthropicOtherBlock,
                    Field(union_mode="left_to_right"),
                ]
            ],
            Field(min_length=1),
        ]
    )


class AnthropicAssistantMessage(_ProviderEnvelope):
    role: Literal["assistant"]
    content: (
        str
        | Annotated[
            list[
                Annotated[
                    AnthropicTextBlock
                    | AnthropicToolUseBlock
                    | AnthropicThinkingBlock
                    | AnthropicRedactedThinkingBlock
                    | _DOCUMENTED_BLOCKS
                    | AnthropicOtherBlock,
                    Field(union_mode="left_to_right"),
                ]
            ],
            Field(min_length=1),
        ]
    )


class AnthropicSystemMessage(_ProviderEnvelope):
    """A system message among the messages (as the SDK's `SystemMessageParam`)."""

    role: Literal["system"]
    content: str | InnerBlocks


AnthropicMessage = Annotated[
    AnthropicUserMessage | AnthropicAssistantMessage | AnthropicSystemMessage,
    Field(discriminator="role"),
]


class AnthropicAppend(_Shape):
    """Messages API messages, with the optional top-level `system`."""

    format: Literal["anthropic"]
    items: list[AnthropicMessage] = Field(min_length=1, max_length=MAX_ITEMS_PER_APPEND)
    system: str | InnerBlocks | None = Field(
        None, description="Stored as one system item, first; comes back as sent"
    )


AppendRequest = Annotated[
    CanonicalAppend | OpenAIChatAppend | OpenAIResponsesAppend | AnthropicAppend | GeminiAppend,
    Field(union_mode="left_to_right"),
]
