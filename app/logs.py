"""Logging: one JSON object per line (or plain text for people), each carrying the request id of
the request it was logged in.

``REQUEST_ID`` is set by the observability middleware for the duration of a request, so any
logger (``app.*``, uvicorn's, SQLAlchemy's) picks the id up without being handed it. Fields of a
line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``request_id`` when there is
one, the access fields ``method``, ``path``, ``status``, ``duration_ms`` when the record has
them (``extra={...}``), and ``exc_info`` for a traceback.

``log_config(level, fmt)`` is the ``dictConfig`` that ``session-memory serve`` hands to uvicorn,
so uvicorn's own lines are formatted the same way. Under that configuration with JSON lines,
the access lines skip the ``logging`` machinery (``AccessLineWriter``): the server owns its
logging configuration, so nothing a handler or filter could do is lost, and a record cost
about a tenth of an append's CPU.
"""

from __future__ import annotations

import logging
import os
import time
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


def _json_head(created: float, level: str, logger: str, message: str) -> dict[str, Any]:
    """The fields every JSON line starts with, in their order."""
    return {
        "time": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "logger": logger,
        "message": message,
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line = _json_head(record.created, record.levelname, record.name, record.getMessage())
        line.update(_fields(record))
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc_info"] = record.exc_text
        return orjson.dumps(line, default=str).decode()


class AccessLineWriter:
    """The access lines of ``session-memory serve`` with ``LOG_FORMAT=json``: the line
    ``JsonFormatter`` makes of ``app.access``'s record, written straight to the server's
    standard output (one ``write`` a line, as the logging handler's flush does), at the
    server's ``LOG_LEVEL``. A line that cannot be written goes through ``logging`` instead,
    whose handler reports the error."""

    def __init__(self, level: str, fd: int = 1) -> None:
        self.threshold = logging.getLevelName(level.upper())
        if not isinstance(self.threshold, int):
            raise ValueError(f"not a log level: {level!r}")
        self.fd = fd

    def enabled(self, level: int) -> bool:
        return level >= self.threshold

    def write(self, level: int, message: str, fields: dict[str, Any]) -> bool:
        """Write one line; False if it could not be (the caller logs it instead)."""
        line = _json_head(time.time(), logging.getLevelName(level), "app.access", message)
        request_id = REQUEST_ID.get()
        if request_id:
            line["request_id"] = request_id
        line.update(fields)
        data = orjson.dumps(line, default=str) + b"\n"
        written = 0
        try:
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError:
            return written > 0  # (a line cut short is not written twice)
        return True


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
