"""The erasure audit: a record of each erasure (who asked, when, rows per table, a digest of the
id) that holds none of the erased data, and reading those records back."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.domain.retention import ErasedCounts, subject_digest
from app.store.retention.base import RetentionBase
from app.store.tables import api_keys, erasures


class ErasureAudit(RetentionBase):
    """Writing and reading the erasure audit trail."""

    async def record_erasures(
        self, records: Sequence[tuple[str, str, ErasedCounts]], *, reason: str, now: datetime
    ) -> None:
        """Audit records of session erasures by the sweep (no key asked), in one statement."""
        if not records:
            return
        await self.db.execute(
            sa.insert(erasures),
            [
                {
                    "id": "era_" + secrets.token_hex(12),
                    "kind": "session",
                    "reason": reason,
                    "tenant_id": tenant_id,
                    "subject_digest": subject_digest(tenant_id, session_id),
                    "key_id": None,
                    "key_name": None,
                    "row_counts": dict(sorted(counts.rows.items())),
                    "created_at": now,
                }
                for tenant_id, session_id, counts in records
            ],
        )

    async def record_erasure(
        self,
        *,
        kind: str,
        reason: str,
        tenant_id: str,
        subject_id: str,
        key_id: str | None,
        key_name: str | None,
        counts: ErasedCounts,
        now: datetime,
    ) -> str:
        """The audit record of one erasure: who, when, rows per table, a digest of the id."""
        record_id = "era_" + secrets.token_hex(12)
        await self.db.execute(
            sa.insert(erasures).values(
                id=record_id,
                kind=kind,
                reason=reason,
                tenant_id=tenant_id if kind == "session" else None,
                subject_digest=subject_digest(tenant_id, subject_id),
                key_id=key_id or None,
                key_name=key_name,
                row_counts=dict(sorted(counts.rows.items())),
                created_at=now,
            )
        )
        return record_id

    async def erasure_records(
        self,
        *,
        digest: str | None = None,
        tenant_id: str | None = None,
        asked_within: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Erasure records, newest first, each with ``key_prefix``: the session prefix of the
        key that asked (None: an unconfined key, the bootstrap key, the sweep, or a key no
        longer stored). ``asked_within``: only those asked by a key confined to that prefix or
        a longer one (so of sessions under it)."""
        e, key = erasures.c, api_keys.c
        # Keys are never deleted apart from their tenant, and their prefix never changes.
        joined = erasures.outerjoin(api_keys, (key.id == e.key_id) & (key.tenant_id == e.tenant_id))
        stmt = sa.select(erasures, key.session_prefix.label("key_prefix")).select_from(joined)
        if digest is not None:
            stmt = stmt.where(e.subject_digest == digest)
        if tenant_id is not None:
            stmt = stmt.where(e.tenant_id == tenant_id)
        if asked_within is not None:
            stmt = stmt.where(key.session_prefix.startswith(asked_within, autoescape=True))
        rows = await self.db.execute(stmt.order_by(e.created_at.desc()).limit(limit))
        return [{str(k): v for k, v in r._mapping.items()} for r in rows.all()]
