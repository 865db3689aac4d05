"""Logging: one JSON object per line (or plain text for people), each carrying the request id of
the request it was logged in.

``REQUEST_ID`` is set by the observability middleware for the duration of a request, so any
logger (``app.*``, uvicorn's, SQLAlchemy's) picks the id up without being handed it. Fields of a
line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``request_id`` when there is
one, the access fields ``method``, ``path``, ``status``, ``duration_ms`` when the record has
them (``extra={...}``), and ``exc_info`` for a traceback.

``log_config(level, fmt)`` is the ``dictConfig`` that ``session-memory serve`` hands to uvicorn,
so uvicorn's own lines are formatted the same way.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)

ACCESS_FIELDS = ("method", "path", "status", "duration_ms", "client")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
    if request_id:
        out["request_id"] = request_id
    for name in ACCESS_FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            out[name] = value
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc_info"] = record.exc_text
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """``time level logger message key=value ...`` for reading in a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        if not extra:
            return text
        head, sep, tail = text.partition("\n")  # keep a traceback below the line
        return f"{head} {extra}{sep}{tail}"


def log_config(level: str, fmt: str = "json") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for the server (uvicorn's loggers included)."""
    level = level.upper()
    formatter = "json" if fmt == "json" else "text"
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {"()": "app.logs.JsonFormatter"},
            "text": {"()": "app.logs.TextFormatter"},
        },
        "handlers": {
            "stdout": {
                "class": "logging.StreamHandler",
                "formatter": formatter,
                "stream": "ext://sys.stdout",
            },
        },
        "loggers": {
            "uvicorn": {"handlers": ["stdout"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["stdout"], "level": level, "propagate": False},
        },
        "root": {"handlers": ["stdout"], "level": level},
    }
