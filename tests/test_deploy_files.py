"""The deployment files agree with the service: the proxy refuses exactly the bodies the
service refuses, with the same problem document; the image installs the pinned runtime; the
compose files mount files that exist; the documented backup command survives binary output.
(scripts/check-deploy validates the compose files and lints the Dockerfile.)"""

from __future__ import annotations

import json
import re

import yaml

from app.api.problems import PROBLEM_BASE
from app.settings import Settings
from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"


def _size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kKmMgG]?)", value).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[unit.lower()]


def test_the_proxy_refuses_the_bodies_the_service_refuses_with_its_problem() -> None:
    proxy = (DEPLOY / "proxy.conf").read_text()
    limit = re.search(r"^\s*client_max_body_size\s+(\S+);", proxy, re.M)
    assert limit, "deploy/proxy.conf sets no client_max_body_size"
    assert _size(limit.group(1)) == Settings().limits.max_body_bytes
    assert re.search(r"error_page 413 = @body_too_large;", proxy)
    body = re.search(r"return 413 '(.*)';", proxy)
    assert body, "nginx's own 413 page would be HTML"
    problem = json.loads(body.group(1).replace("\\'", "'"))
    assert problem["type"] == PROBLEM_BASE + "body-too-large" and problem["status"] == 413
    assert str(Settings().limits.max_body_bytes) in problem["detail"]
    assert "application/problem+json" in proxy
    for listener in ("server-http.conf", "server-tls.conf"):
        assert "include /etc/nginx/sm/proxy.conf;" in (DEPLOY / listener).read_text(), listener


def test_the_tls_listener_proxies_nothing_in_clear() -> None:
    tls = (DEPLOY / "server-tls.conf").read_text()
    servers = tls.split("server {")[1:]
    plain = [s for s in servers if "listen 8080" in s]
    assert len(plain) == 1 and "proxy" not in plain[0] and "return 403" in plain[0]
    assert any("listen 8443 ssl" in s and "ssl_certificate /etc/nginx/tls/" in s for s in servers)


def test_the_image_installs_the_pinned_runtime() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"COPY [^\n]*constraints\.txt", dockerfile)
    assert re.search(r"pip install [^\n]*-c constraints\.txt \.", dockerfile)
    assert "see README" not in dockerfile


def test_every_mounted_file_exists() -> None:
    for name in ("docker-compose.yml", "deploy/compose.tls.yml"):
        text = (ROOT / name).read_text()
        assert "see README" not in text
        for service in yaml.safe_load(text)["services"].values():
            for volume in service.get("volumes", []):
                source = volume.split(":", 1)[0]
                if source.startswith("./"):
                    assert (ROOT / source).exists(), (name, source)


def test_the_documented_dump_goes_through_no_pseudo_terminal() -> None:
    ops = (ROOT / "docs" / "operations.md").read_text()
    dumps = re.findall(r"docker compose exec[^\n]*pg_dump[^\n]*", ops)
    assert dumps and all(" -T " in d for d in dumps), dumps
