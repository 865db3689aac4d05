"""The published shape of a ``format: "gemini"`` append (``append_schemas.AppendRequest``).

Gemini API ``Content`` objects, in the REST API's camelCase or the Python SDK's snake_case,
held to the rules of ``app.domain.formats.gemini``'s ingest (the two agree, as every format's
schema and ingest do: ``tests/clients/test_spec_for_generators.py``):

- a part sets one of its data fields (``text``, ``inlineData``, ``fileData``, ``functionCall``,
  ``functionResponse``, ``executableCode``, ``codeExecutionResult``, ``toolCall``,
  ``toolResponse``, each in either spelling) or none; ``null`` is absent. So each part member
  names its own field and declares every other one ``null``;
- ``functionCall`` parts belong in ``model`` contents, ``functionResponse`` parts in user
  contents (``role`` ``user``, ``function`` or none);
- everything else is open and kept verbatim (``thought``, ``thoughtSignature``,
  ``videoMetadata``, ...).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    WithJsonSchema,
    create_model,
)

from app.domain.formats.gemini import DATA_FIELDS, camel

MAX_ITEMS_PER_APPEND = 1000  # the default of LIMITS__MAX_ITEMS_PER_APPEND

_NOT_NULL = Annotated[Any, WithJsonSchema({"not": {"type": "null"}})]
_Id = Annotated[str, Field(min_length=1, max_length=256)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class GeminiFunctionCall(_Open):
    """A `FunctionCall`: pairs with its response by `id`, or by name and order without one."""

    name: _Id
    id: _Id | None = None
    args: dict[str, JsonValue] | None = None


class GeminiFunctionResponse(_Open):
    """A `FunctionResponse`: `response` `{"output": ...}` or `{"error": ...}` reads as text,
    any other object as its JSON; `parts` (a multimodal result) are kept as sent."""

    name: _Id
    id: _Id | None = None
    response: dict[str, JsonValue] | None = None
    parts: list[dict[str, JsonValue]] | None = None


_VALUE: dict[str, Any] = {
    "text": str,
    "function_call": GeminiFunctionCall,
    "function_response": GeminiFunctionResponse,
}
_SPELLINGS = [key for name in DATA_FIELDS for key in dict.fromkeys((camel(name), name))]


def _part_model(key: str | None) -> type[BaseModel]:
    """The part that sets ``key`` (``None``: no data field) and no other data field."""
    if key is None:
        title = "GeminiPartWithoutData"
    else:
        base = camel(key)
        title = f"Gemini{base[0].upper()}{base[1:]}Part" + ("Snake" if "_" in key else "")
    fields: dict[str, Any] = {}
    for other in _SPELLINGS:
        if other == key:
            kind = next(n for n in DATA_FIELDS if key in (n, camel(n)))
            fields[other] = (_VALUE.get(kind, _NOT_NULL), ...)
        else:
            fields[other] = (None, None)
    doc = (
        "A part without a data field (metadata only, such as a lone `thoughtSignature`)"
        if key is None
        else f"A part holding `{key}`"
    )
    return create_model(title, __base__=_Open, __doc__=doc, **fields)  # type: ignore[call-overload,no-any-return]


_PARTS = {key: _part_model(key) for key in [*_SPELLINGS, None]}
_CALLS = {"functionCall", "function_call"}
_RESPONSES = {"functionResponse", "function_response"}

GeminiModelPart = Annotated[
    Union[tuple(m for k, m in _PARTS.items() if k not in _RESPONSES)],  # type: ignore[valid-type]  # noqa: UP007
    Field(description="A part of a model content"),
]
GeminiUserPart = Annotated[
    Union[tuple(m for k, m in _PARTS.items() if k not in _CALLS)],  # type: ignore[valid-type]  # noqa: UP007
    Field(description="A part of a user content"),
]


class _ContentEnvelope(_Open):
    pinned: StrictBool = Field(False, description="Always kept by projections and compactions")
    metadata: dict[str, JsonValue] | None = Field(None, description="Small JSON object (16 KiB)")


class GeminiModelContent(_ContentEnvelope):
    """A `Content` the model wrote: text, thoughts, function calls, code it ran, ..."""

    role: Literal["model"]
    parts: list[GeminiModelPart] = Field(min_length=1)


class GeminiUserContent(_ContentEnvelope):
    """A user `Content` (no `role` reads as `user`; `function`, the older role of function
    responses, too): text, media, function responses, ..."""

    role: Literal["user", "function"] | None = None
    parts: list[GeminiUserPart] = Field(min_length=1)


class GeminiSystemPart(_Open):
    text: str | None = None


class GeminiSystemInstruction(_Open):
    """A `Content` used as the system instruction (its `role` is ignored)."""

    parts: list[str | GeminiSystemPart]


class GeminiAppend(BaseModel):
    """Gemini API `contents`, with the optional `system_instruction` (REST camelCase, or the
    Python SDK's snake_case: each stored as sent)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["gemini"]
    items: list[GeminiModelContent | GeminiUserContent] = Field(
        min_length=1, max_length=MAX_ITEMS_PER_APPEND
    )
    system_instruction: str | GeminiSystemInstruction | list[str | GeminiSystemPart] | None = Field(
        None, description="Stored as one system item, first; comes back as sent"
    )
