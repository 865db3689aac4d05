"""DNS-rebinding protection for a server running without authentication: with auth off, every
request on every route (``/v1``, ``/mcp``, ``/ui/``, ``/docs``, ``/healthz``, ...) must name
the server by a loopback host name, or one the operator listed in ``ALLOWED_HOSTS``.

Why: a key-less server on 127.0.0.1 is reachable by any web page the user opens. The browser's
same-origin policy keeps that page from reading the answers, unless the page's own name
(``attacker.example``) is re-pointed at 127.0.0.1 once it has loaded: its requests are then
same-origin for the browser, but still carry ``Host: attacker.example``. Refusing a foreign
``Host`` closes that (421 ``misdirected-request``); a browser request also carries an
``Origin``, refused the same way when its host is foreign (403 ``origin-not-allowed``: a page
of another site, whatever name it used for the server).

Accepted hosts: ``localhost``, ``127.0.0.1`` and ``[::1]`` (and any other loopback address
literal), with any port or none, plus each ``ALLOWED_HOSTS`` entry (``name``: any port; ``name:port``: that port only). The check is a set
lookup on the ``Host`` header or two, in a pure ASGI middleware installed only when auth is off
(with auth on, a key is what a request needs, and nothing here runs).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import problem_response
from app.services.keys import is_loopback

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def _without_port(host: str) -> str:
    """``name:port`` → ``name``; ``[v6]:port`` → ``[v6]``; anything else unchanged."""
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    name, colon, _port = host.rpartition(":")
    return name if colon else host


class HostAllowList:
    """The host names a request may use to name this server (see module doc)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        entries = {h.strip().lower() for h in (*LOOPBACK_HOSTS, *extra) if h.strip()}
        self.exact = frozenset(entries)  # names and name:port entries, as listed
        self.any_port = frozenset(e for e in entries if _without_port(e) == e)

    def allows(self, host: str) -> bool:
        host = host.lower()
        if host in self.exact:
            return True
        name = _without_port(host)
        # A loopback address literal (127.0.0.2, [::ffff:127.0.0.1]) cannot be rebound either.
        return name in self.any_port or is_loopback(name)

    def allows_origin(self, origin: str) -> bool:
        """An ``Origin`` (``scheme://host[:port]``) whose host is allowed; ``null`` (a
        sandboxed or opaque origin) is not."""
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme.lower() in ("http", "https") and self.allows(rest)


class LoopbackHostGuard:
    """Refuse a request whose ``Host`` (or ``Origin``) names another server (module doc)."""

    def __init__(self, app: ASGIApp, *, allowed: HostAllowList) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        if host is None or not self.allowed.allows(host):
            response = problem_response(
                status=421,
                code="misdirected-request",
                title="Misdirected request",
                detail=f"this server runs without authentication and answers only to a "
                f"loopback host name (localhost, 127.0.0.1, [::1]) or one in ALLOWED_HOSTS; "
                f"the request named {host!r}",
                instance=scope.get("path"),
            )
            await response(scope, receive, send)
            return
        if origin is not None and not self.allowed.allows_origin(origin):
            response = problem_response(
                status=403,
                code="origin-not-allowed",
                title="Origin not allowed",
                detail=f"this server runs without authentication and answers only to pages "
                f"served from a loopback host name or one in ALLOWED_HOSTS; the request came "
                f"from {origin!r}",
                instance=scope.get("path"),
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
