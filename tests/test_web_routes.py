"""The web client's routes without a browser (SPEC §11 ``GET /``; issue 9).

``GET /`` answers the page with a Content-Security-Policy that allows no inline script and
nothing from another origin; every file of the client is served from the package with its
content type and ``no-cache``; the files name no external resource (no CDN, no fonts) and
import only each other; ``GET /v1/event-types`` lists the catalog the page listens for; the
files are declared as package data, so a plain install ships them.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import TestClient, in_process_client

from eventlog import CATALOG
from sessionledger.web import STATIC_DIR

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(p for p in STATIC_DIR.iterdir() if p.is_file())
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css",
         ".svg": "image/svg+xml"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with in_process_client(tmp_path) as (test_client, _service):
        yield test_client


def test_root_serves_the_page_with_a_strict_content_security_policy(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert response.headers["cache-control"] == "no-cache"
    assert '<script type="module" src="/static/app.js"></script>' in response.text


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_client_file_is_served_with_its_type_and_revalidated(
    client: TestClient, path: Path
) -> None:
    response = client.get(f"/static/{path.name}")
    assert response.status_code == 200
    assert response.content == path.read_bytes()
    assert response.headers["content-type"].startswith(TYPES[path.suffix])
    assert response.headers["cache-control"] == "no-cache"
    again = client.get(f"/static/{path.name}", headers={"if-none-match": response.headers["etag"]})
    assert again.status_code == 304


@pytest.mark.parametrize("path", ["/static/missing.js", "/static/../pyproject.toml",
                                  "/static/%2e%2e/routes.py"])
def test_unknown_client_files_are_json_404s(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_event_types_lists_the_catalog_in_order(client: TestClient) -> None:  # EG-1
    response = client.get("/v1/event-types")
    assert response.status_code == 200
    assert response.json() == {"eventTypes": [*CATALOG, "Undecodable"]}


def test_client_files_name_no_external_resource_and_import_only_each_other() -> None:
    names = {p.name for p in FILES}
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text), path.name
        assert "@import" not in text and "url(" not in text, path.name
        assert not re.search(r"fonts\.(googleapis|gstatic)|cdn", text, re.I), path.name
        if path.suffix == ".js":
            for target in re.findall(r"^import .* from '([^']+)';$", text, re.M):
                assert target.startswith("./") and target[2:] in names, (path.name, target)
    page = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    referenced = re.findall(r'(?:src|href)="/static/([^"]+)"', page)
    assert {"app.js", "app.css"} <= set(referenced) <= names


def test_client_files_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["sessionledger.web"]
    for path in FILES:
        relative = path.relative_to(STATIC_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_browser_artifacts_are_ignored_by_git() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "test-artifacts/" in ignored
