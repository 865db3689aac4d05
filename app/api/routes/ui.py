"""The inspector (``/ui/``) and the API reference pages (``/docs``, ``/redoc``), served from the
package's own files (``app/ui/static``): nothing is fetched from another host at run time, so
both work on an air-gapped deployment.

The inspector is one HTML page with ES modules; it reads and writes through the public ``/v1``
API with the caller's key, so it has exactly the key's tenant and scopes. What the API does not
answer and the page must not work out itself (which call a tool output answers: the
projection's rule; working memory at each version, replayed from the event log) comes from
``/ui/api/...``, authenticated and scoped like ``/v1`` (``app.api.auth``). These routes are not part of the API contract and stay out of the OpenAPI
document.
"""

from __future__ import annotations

import mimetypes
from functools import cache, lru_cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from app.api.deps import ActorDep, RuntimeDep
from app.api.session_ids import SessionIdPath
from app.services import pairing, usage

router = APIRouter(include_in_schema=False)

STATIC_URL = "/ui/static"
VENDOR_URL = f"{STATIC_URL}/vendor"
# The page loads nothing but its own files; images in items are shown inline only when they
# are data: URLs (a remote image URL is shown as a link, so opening a session never calls out).
UI_CSP = (
    "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'"
)
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}


def static_root() -> Traversable:
    return files("app") / "ui" / "static"


@cache
def _static_files() -> frozenset[str]:
    """Every packaged static file, as a ``/``-separated path below the static root: the only
    names ever served (no path from a request reaches the file system)."""
    found: set[str] = set()

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.name.startswith("."):
                continue
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.is_file():
                found.add(prefix + child.name)

    walk(static_root(), "")
    return frozenset(found)


@lru_cache(maxsize=64)
def _read_known(path: str) -> bytes:
    node = static_root()
    for part in path.split("/"):
        node = node / part
    return node.read_bytes()


def _read(path: str) -> bytes | None:
    """The bytes of a packaged static file, or None for any other name."""
    if path not in _static_files():
        return None
    return _read_known(path)


def _media_type(path: str) -> str:
    for suffix, media in _TYPES.items():
        if path.endswith(suffix):
            return media
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def _index() -> HTMLResponse:
    body = _read("index.html")
    if body is None:  # a broken install, not a client error
        raise HTTPException(status_code=500, detail="the inspector's files are not installed")
    return HTMLResponse(
        body,
        headers={
            "Content-Security-Policy": UI_CSP,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


# What `GET /` names for a client that does not ask for HTML (curl, scripts, probes).
ROOT_INDEX = {
    "service": "Session Memory Service",
    "links": {
        "api": "/v1",
        "inspector": "/ui/",
        "docs": "/docs",
        "redoc": "/redoc",
        "openapi": "/openapi.json",
        "health": "/healthz",
        "ready": "/readyz",
        "mcp": "/mcp",
    },
}


@router.get("/")
async def root(request: Request) -> Response:
    # A browser asks for text/html by name: send it to the inspector. Anything else (curl's
    # */*, JSON clients) gets a small index of where things are, rather than a 404.
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse("/ui/", status_code=307, headers={"Vary": "Accept"})
    return JSONResponse(ROOT_INDEX, headers={"Vary": "Accept"})


@router.get("/ui")
async def ui_redirect() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
async def ui_index() -> HTMLResponse:
    return _index()


@router.get("/ui/sessions/{session_id:path}")
async def ui_session(session_id: str) -> HTMLResponse:
    # The page routes itself from the address; every session address serves the same page.
    return _index()


@router.get("/ui/search")
async def ui_search() -> HTMLResponse:
    return _index()


@router.get("/ui/api/sessions/{session_id}/pairs")
async def ui_pairs(
    session_id: SessionIdPath,
    rt: RuntimeDep,
    actor: ActorDep,
    archived: bool = Query(False),
) -> JSONResponse:
    """Which call each tool output answers (``call_of``: output seq -> call seq), by the
    projection's rule, over working memory (``archived``: every item ever appended)."""
    call_of, version = await pairing.paired_calls(rt, actor, session_id, archived=archived)
    return JSONResponse(
        {"version": version, "call_of": {str(o): c for o, c in call_of.items()}},
        headers={"Cache-Control": "no-store"},
    )


@router.get("/ui/api/sessions/{session_id}/usage")
async def ui_usage(session_id: SessionIdPath, rt: RuntimeDep, actor: ActorDep) -> JSONResponse:
    """Working memory at each version (items, stored tokens) and the compactions, replayed
    from the event log over the item history (``app.services.usage``): no /v1 figure holds
    it."""
    found = await usage.usage_over_versions(rt, actor, session_id)
    return JSONResponse(
        {
            "version": found.version,
            "complete": found.complete,
            "notes": found.notes,
            "points": [
                {
                    "version": p.version,
                    "event": p.event,
                    "at": p.at.isoformat(),
                    "items": p.items,
                    "tokens": p.tokens,
                }
                for p in found.points
            ],
            "compactions": [
                {
                    "version": c.version,
                    "compaction_id": c.compaction_id,
                    "policy": c.policy,
                    "automatic": c.automatic,
                    "compacted_items": c.compacted_items,
                    "compacted_tokens": c.compacted_tokens,
                    "summary_tokens": c.summary_tokens,
                }
                for c in found.compactions
            ],
        },
        headers={"Cache-Control": "no-store"},
    )


@router.get(STATIC_URL + "/{path:path}")
async def ui_static(path: str) -> Response:
    body = _read(path)
    if body is None:
        raise HTTPException(status_code=404, detail="no such file")
    # Vendored files never change under one name within a release; the page's own files are
    # revalidated so an upgrade is seen at once.
    cache_control = "public, max-age=86400" if path.startswith("vendor/") else "no-cache"
    return Response(
        body,
        media_type=_media_type(path),
        headers={"Cache-Control": cache_control, "X-Content-Type-Options": "nosniff"},
    )


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Session Memory Service - API reference",
        swagger_js_url=f"{VENDOR_URL}/swagger-ui/swagger-ui-bundle.js",
        swagger_css_url=f"{VENDOR_URL}/swagger-ui/swagger-ui.css",
        swagger_favicon_url=f"{STATIC_URL}/favicon.svg",
        # No online validator badge: it would send the spec's address to another host.
        swagger_ui_parameters={"validatorUrl": None},
    )


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="Session Memory Service - API reference",
        redoc_js_url=f"{VENDOR_URL}/redoc/redoc.standalone.js",
        redoc_favicon_url=f"{STATIC_URL}/favicon.svg",
        with_google_fonts=False,
    )
