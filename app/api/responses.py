"""Building HTTP responses from encoded results (status, body, ETag, replay marker)."""

from __future__ import annotations

from fastapi.responses import Response

from app.services.runtime import Encoded


def etag(version: int) -> str:
    return f'"{version}"'


def json_response(encoded: Encoded) -> Response:
    headers: dict[str, str] = {}
    if encoded.version is not None:
        headers["ETag"] = etag(encoded.version)
    if encoded.replayed:
        headers["Idempotent-Replayed"] = "true"
    if encoded.status_code == 204:
        return Response(status_code=204, headers=headers)
    return Response(
        encoded.body,
        status_code=encoded.status_code,
        media_type="application/json",
        headers=headers,
    )
