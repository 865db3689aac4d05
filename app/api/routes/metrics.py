"""/metrics: Prometheus text exposition (outside the OpenAPI document: it is for scrapers, not
API clients)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from app import metrics

router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
async def metrics_endpoint() -> Response:
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)
