"""Run the Alembic migrations programmatically (used by `session-memory migrate` and `serve`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["database_url"] = database_url
    return cfg


def ensure_sqlite_dir(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        path = database_url.split(":///", 1)[1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)


def upgrade(database_url: str, revision: str = "head") -> None:
    ensure_sqlite_dir(database_url)
    command.upgrade(alembic_config(database_url), revision)
