"""Lock keys of two sessions never coincide (issue 16): tenant and session id both may hold
`:`, so the key states where the tenant ends."""

from __future__ import annotations

from app.locks import compaction_key


def test_a_colon_cannot_move_the_boundary_between_tenant_and_session() -> None:
    pairs = [("acme", "prod:x"), ("acme:prod", "x"), ("acme:prod:x", ""), ("a", "cme:prod:x")]
    keys = {compaction_key(tenant, session) for tenant, session in pairs}
    assert len(keys) == len(pairs), keys

