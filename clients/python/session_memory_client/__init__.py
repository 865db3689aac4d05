"""Python client of the Session Memory Service: typed sync and async clients over httpx, an
OpenAI Agents SDK session backed by the service (``session_memory_client.agents_sdk``), and
message histories for LangChain (``session_memory_client.langchain``) and Pydantic AI
(``session_memory_client.pydantic_ai``), imported from their modules (each needs its
framework)."""

from session_memory_client._core import UNSET, RetryPolicy
from session_memory_client.agents_sdk import ServiceSession
from session_memory_client.client import AsyncSessionMemoryClient, SessionMemoryClient
from session_memory_client.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    ProblemError,
    SessionMemoryError,
    UnavailableError,
    UpstreamError,
)

__version__ = "0.1.0"

__all__ = [
    "UNSET",
    "AsyncSessionMemoryClient",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "InvalidInputError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "ProblemError",
    "RetryPolicy",
    "ServiceSession",
    "SessionMemoryClient",
    "SessionMemoryError",
    "UnavailableError",
    "UpstreamError",
]
