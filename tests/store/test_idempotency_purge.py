"""Expired Idempotency-Keys are forgotten by the housekeeping sweep; live ones stay."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.services.housekeeping import purge_idempotency_keys
from app.services.runtime import utcnow
from app.settings import Settings
from app.store.tables import idempotency_keys
from tests.support.spec_check import ASYNC_HOOKS


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_purge_removes_only_expired_keys(
    backend: str, request: pytest.FixtureRequest, sid: str
) -> None:
    from tests.conftest import make_settings

    settings: Settings = make_settings(backend, request)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", event_hooks=ASYNC_HOOKS) as client:
            for n in range(5):
                r = await client.post(
                    "/v1/sessions", json={"id": f"{sid}-{n}"}, headers={"Idempotency-Key": f"{sid}-k{n}"}
                )
                assert r.status_code == 201
        mine = idempotency_keys.c.key.like(f"{sid}-k%")
        async with rt.store.write() as db:  # age three of the five past their expiry
            aged = [f"{sid}-k{n}" for n in range(3)]
            await db.execute(
                sa.update(idempotency_keys)
                .where(idempotency_keys.c.key.in_(aged))
                .values(expires_at=utcnow() - timedelta(seconds=1))
            )
        removed = await purge_idempotency_keys(rt, batch=2)  # several batches
        assert removed >= 3
        async with rt.store.read() as db:
            left = sorted(r[0] for r in (await db.execute(sa.select(idempotency_keys.c.key).where(mine))).all())
        assert left == [f"{sid}-k3", f"{sid}-k4"]
