"""Session ids and session prefixes as the HTTP API takes them: in a body and in a URL path.

The rule is ``app.domain.ids``; here it becomes one pydantic type per use, validated by the
domain function (so a refused id gets a 422 whose message states the rule in words, not a
1 kB regex) and published with the equivalent ``pattern`` and lengths.

In a path the id is one segment, percent-encoded by the client (``user%40example.com``,
``user%2017``); the server decodes it once. An encoded slash (``%2F``) never reaches a route:
``app.api.body_guard`` refuses it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import AfterValidator, TypeAdapter, WithJsonSchema

from app.api.deps import ReadInRoute
from app.domain.ids import (
    SESSION_ID_MAX,
    SESSION_ID_PATTERN,
    SESSION_ID_RULE,
    SESSION_PREFIX_MAX,
    SESSION_PREFIX_PATTERN,
    SESSION_PREFIX_RULE,
    is_valid_session_id,
    is_valid_session_prefix,
)


def _session_id(value: str) -> str:
    if not is_valid_session_id(value):
        raise ValueError(SESSION_ID_RULE)
    return value


def _session_prefix(value: str) -> str:
    if not is_valid_session_prefix(value):
        raise ValueError(SESSION_PREFIX_RULE)
    return value


SESSION_ID_DESCRIPTION = (
    f"1-{SESSION_ID_MAX} characters: any but '/' and control or invisible format characters "
    "(Unicode Cc, Cf, Cs, Zl, Zp), not '.' or '..'; compared exactly. Percent-encoded in a "
    "URL path."
)

SessionIdValue = Annotated[
    str,
    AfterValidator(_session_id),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": SESSION_ID_MAX,
            "pattern": SESSION_ID_PATTERN,
        }
    ),
]
"""A session id in a body (``SessionCreate.id``, ``ForkCreate.new_session_id``)."""

SessionPrefixValue = Annotated[
    str,
    AfterValidator(_session_prefix),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": SESSION_PREFIX_MAX,
            "pattern": SESSION_PREFIX_PATTERN,
        }
    ),
]
"""A key's session prefix: the start of a session id."""

SessionIdPath = Annotated[SessionIdValue, Path(description=SESSION_ID_DESCRIPTION)]
"""The ``{session_id}`` of every /v1/sessions/{session_id}/... route."""

SESSION_ID_IN_PATH = ReadInRoute(
    "path",
    "session_id",
    SessionIdValue,
    TypeAdapter(SessionIdValue).json_schema(),
    description=SESSION_ID_DESCRIPTION,
)
"""The same, for the hot routes that read their parameters themselves (``ReadInRoute``)."""

__all__ = [
    "SESSION_ID_DESCRIPTION",
    "SESSION_ID_IN_PATH",
    "SessionIdPath",
    "SessionIdValue",
    "SessionPrefixValue",
]
