"""The inspector's and the reference pages' routes, in process: packaged files only, nothing
outside the static folder, no CDN, and none of it in the API contract."""

from __future__ import annotations

import re
from typing import Any

import httpx

from app.api.routes.ui import static_root
from app.main import create_app
from tests.browser.seed import trust_items
from tests.conftest import make_settings

KEY = "ui-routes-bootstrap-key-" + "z" * 24


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
            "/ui/",
            "/docs",
            "/openapi.json",
            "/healthz",
        }
        assert links["api"] == "/v1"
    assert r.headers["vary"] == "Accept"
    assert "/" not in (await client.get("/openapi.json")).json()["paths"]


async def _seed_trust(client: httpx.AsyncClient, sid: str, headers: dict[str, str]) -> None:
    gemini, responses, canonical = trust_items()
    r = await client.post("/v1/sessions", json={"id": sid}, headers=headers)
    assert r.status_code == 201, r.text
    for fmt, items in (
        ("gemini", gemini),
        ("openai-responses", responses),
        ("canonical", canonical),
    ):
        r = await client.post(
            f"/v1/sessions/{sid}/items", json={"format": fmt, "items": items}, headers=headers
        )
        assert r.status_code == 201, r.text


async def test_the_page_is_told_which_call_each_output_answers(
    client: httpx.AsyncClient, sid: str
) -> None:
    """Gemini calls without an id share a derived call id turn after turn: each output answers
    its own turn's call (the projection's rule), in working memory and in history."""
    await _seed_trust(client, sid, {})
    items = (await client.get(f"/v1/sessions/{sid}/items")).json()["items"]
    calls = [i for i in items if i.get("type") == "function_call"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    assert len({i["call_id"] for i in calls + outputs}) == 1  # the key repeats
    want = {str(o["seq"]): c["seq"] for c, o in zip(calls, outputs, strict=True)}
    r = await client.get(f"/ui/api/sessions/{sid}/pairs")
    assert r.status_code == 200, r.text
    assert r.json() == {"version": 4, "call_of": want}
    r = await client.post(f"/v1/sessions/{sid}/items/pop")  # the newest: a user message
    assert r.status_code == 200, r.text
    r = await client.get(f"/ui/api/sessions/{sid}/pairs", params={"archived": "true"})
    assert r.json()["call_of"] == want and r.json()["version"] == 5
    assert (await client.get(f"/ui/api/sessions/{sid}-none/pairs")).status_code == 404


async def test_the_pairs_route_takes_a_key_as_v1_does(backend: str, request: Any, sid: str) -> None:
    settings = make_settings(
        backend, request, auth={"mode": "on", "bootstrap_key": KEY, "bootstrap_tenant": "ui"}
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            await _seed_trust(c, sid, {"Authorization": f"Bearer {KEY}"})
            r = await c.get(f"/ui/api/sessions/{sid}/pairs")
            assert r.status_code == 401 and r.headers["content-type"].startswith(
                "application/problem+json"
            )
            r = await c.get(f"/ui/api/sessions/{sid}/pairs", headers={"Authorization": "Bearer x"})
            assert r.status_code == 401
            r = await c.get(
                f"/ui/api/sessions/{sid}/pairs", headers={"Authorization": f"Bearer {KEY}"}
            )
            assert r.status_code == 200 and len(r.json()["call_of"]) == 2
            # the usage read too: no key, a wrong key, the key
            r = await c.get(f"/ui/api/sessions/{sid}/usage")
            assert r.status_code == 401 and r.headers["content-type"].startswith(
                "application/problem+json"
            )
            r = await c.get(f"/ui/api/sessions/{sid}/usage", headers={"Authorization": "Bearer x"})
            assert r.status_code == 401
            r = await c.get(
                f"/ui/api/sessions/{sid}/usage", headers={"Authorization": f"Bearer {KEY}"}
            )
            held = await c.get(f"/v1/sessions/{sid}", headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 200
            assert r.json()["points"][-1]["items"] == held.json()["item_count"] == 11


async def test_the_page_is_told_working_memory_at_every_version(
    client: httpx.AsyncClient, sid: str
) -> None:
    """No /v1 figure holds the tokens of an earlier version: the usage route replays them, and
    at every version they are what GET /v1/sessions/{id} said right after that write (appends,
    a compaction, a pop, a snapshot and its restore, a clear)."""
    seen: dict[int, tuple[int, int]] = {}

    async def note() -> None:
        s = (await client.get(f"/v1/sessions/{sid}")).json()
        seen[s["version"]] = (s["item_count"], s["token_count"])

    await _seed_trust(client, sid, {})
    await note()
    for n in range(3):
        r = await client.post(
            f"/v1/sessions/{sid}/items",
            json={"items": [{"type": "message", "role": "user", "content": f"turn {n} " * 40}]},
        )
        assert r.status_code == 201, r.text
        await note()
    r = await client.post(
        f"/v1/sessions/{sid}/compact", json={"policy": "window", "keep_last_items": 2}
    )
    assert r.status_code == 200, r.text
    compaction = r.json()
    await note()
    assert (await client.post(f"/v1/sessions/{sid}/items/pop")).status_code == 200
    await note()
    r = await client.post(f"/v1/sessions/{sid}/snapshots", json={"label": "u"})
    assert r.status_code == 201, r.text
    snapshot = r.json()["id"]
    await note()
    assert (await client.delete(f"/v1/sessions/{sid}/items")).status_code == 200
    await note()
    r = await client.post(f"/v1/sessions/{sid}/restore", json={"snapshot_id": snapshot})
    assert r.status_code == 200, r.text
    await note()

    r = await client.get(f"/ui/api/sessions/{sid}/usage")
    assert r.status_code == 200, r.text
    usage = r.json()
    assert usage["complete"] is True and usage["notes"] == []
    at = {p["version"]: (p["items"], p["tokens"]) for p in usage["points"]}
    assert [p["version"] for p in usage["points"]] == sorted(at)
    assert {v: at[v] for v in seen} == seen
    assert usage["version"] == max(seen) == usage["points"][-1]["version"]
    [mark] = usage["compactions"]
    assert mark["compaction_id"] == compaction["id"] and mark["policy"] == "window"
    assert mark["compacted_tokens"] == compaction["report"]["compacted_tokens"] > 0
    before = max(v for v in seen if v < mark["version"])
    assert at[mark["version"]][1] == at[before][1] - mark["compacted_tokens"]
    assert (await client.get(f"/ui/api/sessions/{sid}-none/usage")).status_code == 404
