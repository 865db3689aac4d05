"""The response bodies of snapshot and restore, for the REST routes and the MCP tools alike."""

from __future__ import annotations

from app.api.encoding import dumps, session_dict
from app.services.runtime import Encoded
from app.services.snapshots import RestoreResult
from app.store.snapshots import SnapshotRecord


def snapshot_dict(record: SnapshotRecord) -> dict[str, object]:
    return {
        "id": record.id,
        "label": record.label,
        "version": record.version,
        "item_count": record.item_count,
        "created_at": record.created_at,
    }


def encode_snapshot(record: SnapshotRecord) -> Encoded:
    return Encoded(201, dumps(snapshot_dict(record)))


def encode_restore(result: RestoreResult) -> Encoded:
    body = {
        "undo_snapshot_id": result.undo_snapshot_id,
        "snapshot_id": result.snapshot_id,
        "restored_items": result.restored_items,
        "session": session_dict(result.state),
    }
    return Encoded(200, dumps(body), version=result.state.version)
