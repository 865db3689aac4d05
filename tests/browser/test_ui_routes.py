"""The inspector's and the reference pages' routes, in process: packaged files only, nothing
outside the static folder, no CDN, and none of it in the API contract."""

from __future__ import annotations

import re

import httpx

from app.api.routes.ui import static_root


async def test_the_inspector_page_is_served_for_its_addresses(client: httpx.AsyncClient) -> None:
    for path in ("/ui/", "/ui/sessions/agent-42", "/ui/search"):
        r = await client.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert '<script type="module" src="/ui/static/js/app.js">' in r.text
    r = await client.get("/ui")
    assert r.status_code == 307 and r.headers["location"] == "/ui/"


async def test_static_files_and_nothing_else(client: httpx.AsyncClient) -> None:
    r = await client.get("/ui/static/js/app.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert r.text == (static_root() / "js" / "app.js").read_text()
    r = await client.get("/ui/static/vendor/swagger-ui/swagger-ui.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")
    for path in (
        "/ui/static/../routes/ui.py",
        "/ui/static/%2e%2e/%2e%2e/main.py",
        "/ui/static/js/../../../main.py",
        "/ui/static/",
        "/ui/static/js",
        "/ui/static/.hidden",
        "/ui/static/nope.js",
    ):
        r = await client.get(path)
        assert r.status_code == 404, (path, r.status_code)
        assert "create_app" not in r.text


async def test_every_asset_the_pages_name_is_local_and_present(client: httpx.AsyncClient) -> None:
    for page in ("/docs", "/redoc", "/ui/"):
        r = await client.get(page)
        assert r.status_code == 200, page
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", r.text)
        urls += re.findall(r"""url: ?['"]([^'"]+)['"]""", r.text)
        assets = [u for u in urls if not u.startswith("#")]
        assert assets, page
        for url in assets:
            assert url.startswith("/"), (page, url)  # no other host
            if url.startswith("/ui/static/"):
                assert (await client.get(url)).status_code == 200, url
        assert "fonts.googleapis" not in r.text and "cdn." not in r.text


async def test_the_pages_are_not_part_of_the_api_contract(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert "/v1/whoami" in paths
    assert not [p for p in paths if p.startswith(("/ui", "/docs", "/redoc"))]


def test_vendored_bundles_load_nothing_from_a_cdn() -> None:
    vendor = static_root() / "vendor"
    for name in (
        "swagger-ui/swagger-ui-bundle.js",
        "swagger-ui/swagger-ui.css",
        "redoc/redoc.standalone.js",
    ):
        text = (vendor / name).read_text(encoding="utf-8")
        assert len(text) > 100_000, name
        assert "https://cdn" not in text, name


async def test_the_root_points_a_browser_to_the_inspector_and_a_client_to_an_index(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/", headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
    for accept in (None, "application/json", "*/*"):
        r = await client.get("/", headers={"accept": accept} if accept else {})
        assert r.status_code == 200, accept
        assert r.headers["content-type"].startswith("application/json")
        links = r.json()["links"]
        assert {links["inspector"], links["docs"], links["openapi"], links["health"]} == {
            "/ui/", "/docs", "/openapi.json", "/healthz"
        }
        assert links["api"] == "/v1"
    assert r.headers["vary"] == "Accept"
    assert "/" not in (await client.get("/openapi.json")).json()["paths"]
