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
