"""Database URL helpers."""

from __future__ import annotations


def sync_url(url: str) -> str:
    """The synchronous driver URL for migrations (psycopg 3 is both; SQLite uses pysqlite)."""
    return url.replace("sqlite+aiosqlite://", "sqlite://")
