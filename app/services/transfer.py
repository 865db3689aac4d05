"""Moving a whole session between databases: export it as a snapshot document, import one.

Used by the ``session-memory export`` / ``import`` commands; over HTTP the same is
``POST .../snapshots`` + ``GET .../snapshots/{id}`` and ``POST .../restore``. Both go through
the ordinary write protocol (lock, fencing, events), so an export is logged as the snapshot it
creates and an import as a restore that can be undone.
"""

from __future__ import annotations

from typing import Any

from app import jsonutil
from app.domain.errors import SessionExists
from app.domain.snapshots import parse_document
from app.services import snapshots
from app.services.runtime import Actor, Encoded, Runtime
from app.services.sessions import SessionCreateCommand, create_session

EXPORT_LABEL = "export"


async def export_session(
    rt: Runtime, actor: Actor, session_id: str, *, label: str = EXPORT_LABEL
) -> dict[str, Any]:
    """Snapshot the session now and return the snapshot's exported document."""
    created: dict[str, str] = {}

    def encode(record: Any) -> Encoded:
        created["id"] = record.id
        return Encoded(201, jsonutil.dumps({"id": record.id}))

    await snapshots.create_snapshot(rt, actor, session_id, label=label, encode=encode)
    snapshot_id = created["id"]  # no Idempotency-Key: never a replay, so encode ran
    return await snapshots.export_snapshot(rt, actor, session_id, snapshot_id)


async def import_session(
    rt: Runtime, actor: Actor, session_id: str, document: dict[str, Any], *, create: bool
) -> dict[str, Any]:
    """Restore ``document`` into the session (created first when ``create`` and missing).

    The document is checked before anything is written: a bad one creates no session."""
    snapshots.prepare(rt, parse_document(document))  # raises InvalidInput / LimitExceeded
    if create:
        try:
            await create_session(
                rt,
                actor,
                SessionCreateCommand(id=session_id, metadata={}, config={}, summary=None),
                encode=lambda state: Encoded(201, ""),
            )
        except SessionExists:
            pass

    def encode(result: snapshots.RestoreResult) -> Encoded:
        body = {
            "session_id": session_id,
            "version": result.state.version,
            "restored_items": result.restored_items,
            "undo_snapshot_id": result.undo_snapshot_id,
        }
        return Encoded(200, jsonutil.dumps(body))

    encoded = await snapshots.restore_session(
        rt, actor, session_id, snapshot_id=None, document=document, encode=encode
    )
    return dict(jsonutil.loads(encoded.body))
