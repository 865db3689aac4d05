"""Auth ``auto`` is off only where it is safe (issue 16, security): in a server started by
``session-memory serve`` on loopback, never in one an ASGI server built from the environment
(``uvicorn --factory app.main:create_app``), and never for a request that reached the server on
a non-loopback address, whatever HOST says."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from app.main import create_app
from app.settings import Settings, get_settings
from tests.api.helpers import assert_problem
from tests.support.services import ROOT, free_port, running_server


def default_env(database_url: str) -> dict[str, str]:
    """The test process's environment without any setting that decides auth, plus a database."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(("AUTH__", "SERVE__")) and k.upper() != "HOST"
    }
    env["DATABASE_URL"] = database_url
    return env


@pytest.fixture
def plain_uvicorn(sqlite_url: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "app.main:create_app",
         "--host", "127.0.0.1", "--port", str(port)],
        env=default_env(sqlite_url),
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"uvicorn exited with {proc.returncode}"
            assert time.monotonic() < deadline, "uvicorn did not become healthy"
            try:
                if httpx.get(url + "/healthz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_plain_uvicorn_factory_needs_a_key_even_on_loopback(plain_uvicorn: str) -> None:
    r = httpx.get(plain_uvicorn + "/v1/sessions", timeout=10)
    assert_problem(r, 401, "api-key-required")
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = httpx.post(plain_uvicorn + "/v1/sessions", json={"id": "intruder"}, timeout=10)
    assert_problem(r, 401, "api-key-required")


def test_session_memory_serve_on_loopback_needs_no_key(sqlite_url: str) -> None:
    with running_server(default_env(sqlite_url)) as server:
        r = httpx.get(server.url + "/v1/sessions", timeout=10)
        assert r.status_code == 200, r.text
        assert isinstance(r.json()["items"], list)


async def test_auth_off_refuses_a_request_received_off_loopback(sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, redis_url=None, auth={"mode": "off"})  # type: ignore[arg-type]
    app = create_app(settings)
    assert app.state.auth_required is False
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        # ASGITransport puts the URL's host and port in scope["server"].
        async with httpx.AsyncClient(transport=transport, base_url="http://10.1.2.3:8080") as c:
            r = await c.get("/v1/sessions")
            body = assert_problem(r, 401, "api-key-required")
            assert "loopback" in body["detail"]
            r = await c.post("/v1/sessions", json={"id": "intruder"})
            assert_problem(r, 401, "api-key-required")
        async with httpx.AsyncClient(transport=transport, base_url="http://[::ffff:10.1.2.3]:80") as c:
            assert_problem(await c.get("/v1/sessions"), 401, "api-key-required")
        for base in ("http://127.0.0.1:8080", "http://[::1]:8080", "http://[::ffff:127.0.0.1]:80"):
            async with httpx.AsyncClient(transport=transport, base_url=base) as c:
                r = await c.get("/v1/sessions")
                assert r.status_code == 200, (base, r.text)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
            r = await c.get("/v1/sessions/intruder")
            assert r.status_code == 404, r.text  # the refused POST above created nothing


def test_only_the_factory_form_ignores_a_loopback_host(monkeypatch: pytest.MonkeyPatch) -> None:
    # Built with explicit settings, `auto` on loopback is off, as the settings say.
    assert create_app(Settings(serve={"via_cli": False})).state.auth_required is False  # type: ignore[arg-type]
    # Built from the environment by an ASGI server: on, unless `serve` started that server.
    for name in ("AUTH__MODE", "AUTH__BOOTSTRAP_KEY", "HOST", "SERVE__VIA_CLI"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    try:
        assert create_app().state.auth_required is True
        monkeypatch.setenv("SERVE__VIA_CLI", "true")
        get_settings.cache_clear()
        assert create_app().state.auth_required is False
        monkeypatch.setenv("HOST", "0.0.0.0")
        get_settings.cache_clear()
        assert create_app().state.auth_required is True
    finally:
        get_settings.cache_clear()


# -- DNS rebinding (issue 31, item 14) -----------------------------------------------------------


def test_with_auth_off_a_foreign_host_name_is_refused_on_every_route(sqlite_url: str) -> None:
    """A page on attacker.example whose name was re-pointed at 127.0.0.1 sends
    ``Host: attacker.example``: a key-less server must not answer it, on any route."""
    env = {**default_env(sqlite_url), "ALLOWED_HOSTS": "memory.internal, pinned.internal:1"}
    with running_server(env) as server:
        port = server.url.rsplit(":", 1)[1]
        with httpx.Client(base_url=server.url, timeout=10) as c:
            for method, path in (
                ("GET", "/v1/sessions"),
                ("POST", "/v1/sessions"),
                ("DELETE", "/v1/sessions/victim"),
                ("GET", "/ui/"),
                ("GET", "/docs"),
                ("GET", "/healthz"),
                ("GET", "/openapi.json"),
                ("POST", "/mcp"),
            ):
                for host in ("attacker.example", f"attacker.example:{port}", "pinned.internal"):
                    r = c.request(method, path, headers={"Host": host}, json={"id": "victim"})
                    body = assert_problem(r, 421, "misdirected-request")
                    assert "ALLOWED_HOSTS" in body["detail"], body
            r = c.post("/v1/sessions", json={"id": "rebound"}, headers={"Origin": "http://attacker.example"})
            assert_problem(r, 403, "origin-not-allowed")
            for host in (f"localhost:{port}", "localhost", f"127.0.0.1:{port}", f"[::1]:{port}",
                         "LOCALHOST", "memory.internal", f"memory.internal:{port}",
                         "pinned.internal:1"):
                r = c.get("/v1/sessions", headers={"Host": host})
                assert r.status_code == 200, (host, r.text)
                assert c.get("/healthz", headers={"Host": host}).status_code == 200
                assert c.get("/ui/", headers={"Host": host}).status_code == 200
            r = c.post(
                "/v1/sessions",
                json={"id": "local"},
                headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
            )
            assert r.status_code == 201, r.text
            # nothing the refused requests asked for happened
            assert c.get("/v1/sessions/victim").status_code == 404
            assert c.get("/v1/sessions/rebound").status_code == 404


async def test_with_auth_on_any_host_name_is_served(sqlite_url: str) -> None:
    """Behind a proxy the Host is the public name: with keys, the key is the guard."""
    settings = Settings(database_url=sqlite_url, redis_url=None, auth={"mode": "on"})  # type: ignore[arg-type]
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memory.example.com") as c:
            assert (await c.get("/healthz")).status_code == 200
            assert_problem(await c.get("/v1/sessions"), 401, "api-key-required")


def test_allowed_hosts_reads_a_comma_separated_or_json_list(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (
        ("a.example, B.example:8080,", ["a.example", "b.example:8080"]),
        ('["a.example", "[::1]:9"]', ["a.example", "[::1]:9"]),
        ("[fe80::1]:80", ["[fe80::1]:80"]),
        ("", []),
    ):
        monkeypatch.setenv("ALLOWED_HOSTS", value)
        assert Settings().allowed_hosts == expected, value
    monkeypatch.setenv("ALLOWED_HOSTS", "http://a.example")
    with pytest.raises(ValueError, match="ALLOWED_HOSTS"):
        Settings()
