"""Alembic environment: runs migrations with the synchronous flavour of the configured driver
(psycopg 3 serves both; SQLite uses the stdlib driver), so it works inside or outside an event
loop."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

from app.store.tables import metadata
from app.store.urls import sync_url

config = context.config


def run_migrations() -> None:
    url = config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url")
    if not url:
        from app.settings import get_settings

        url = get_settings().database_url
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = create_engine(sync_url(url), poolclass=pool.NullPool)
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; run `session-memory migrate`")
run_migrations()
