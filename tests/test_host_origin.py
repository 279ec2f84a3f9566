"""Host and Origin checks of the served process (SPEC EG-3; issue 19).

Against the installed ``sessionledger serve``: a ``Host`` that names no name the server answers
to is 421 ``misdirected_request`` on every route the app has (enumerated from the app itself,
so a new route is covered without editing this file: the page, the static files, the API,
both event streams, ``/mcp``, the OpenAPI document), for every method it answers; a request
that is not GET, HEAD or OPTIONS from a page of another origin is 403 ``forbidden_origin``
with or without a body, whatever its content type; neither appends anything (the store's
global position is the same after). ``--allowed-host`` and ``--allowed-origin`` admit what
they name and nothing more; a request without ``Origin`` (curl, SDK clients) still passes.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import ServerProcess, free_port, running_server, sessionledger_command
from starlette.routing import Mount, Route

from sessionledger import ServerSettings, SessionService
from sessionledger.errors import ConfigurationError
from sessionledger.http import create_app
from sessionledger.http.middleware import SAFE_METHODS
from sessionledger.web import STATIC_DIR

ALLOWED_NAME = "ledger.test"  # --allowed-host without a port: any port
ALLOWED_NAME_PORT = "proxy.test:9443"  # --allowed-host with a port: only that one
ALLOWED_ORIGIN = "https://app.test"
SERVE_ARGS = [
    "--allowed-host", ALLOWED_NAME.upper(), "--allowed-host", ALLOWED_NAME_PORT,
    "--allowed-origin", ALLOWED_ORIGIN,
]
QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
ROUTE_METHODS = ("GET", "POST", "PUT", "DELETE")
"""What a route that declares no methods (an ASGI app such as ``/mcp``) is tried with."""


def _app_routes() -> list[tuple[str, str]]:
    """``(method, path template)`` of every route and method of the app ``serve`` runs: the
    operations of its OpenAPI document (every API route is documented, the fuzz test holds it
    so) and the app's own routes outside it (``/mcp``, the document and its pages, the files)."""
    root = Path.cwd()
    service = SessionService.open("memory://", workspace_root=root)
    try:
        app = create_app(service=service, settings=ServerSettings(workspace_root=root))
        document = app.openapi()
    finally:
        service.close()
    found = [(method.upper(), path) for path, operations in document["paths"].items()
             for method in operations]
    some_file = sorted(p.name for p in STATIC_DIR.iterdir() if p.is_file())[0]
    for route in app.router.routes:
        if isinstance(route, Mount):
            found += [("GET", f"{route.path}/{some_file}"), ("HEAD", f"{route.path}/{some_file}")]
        elif isinstance(route, Route) and not route.include_in_schema:
            found += [(method, route.path) for method in sorted(route.methods or ROUTE_METHODS)]
    return sorted(set(found), key=lambda pair: (pair[1], pair[0]))


ROUTES = _app_routes()
UNSAFE_ROUTES = [(method, path) for method, path in ROUTES if method not in SAFE_METHODS]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("host-origin"), args=SERVE_ARGS) as served:
        yield served


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    """One client for the module's many requests (each new client builds an SSL context)."""
    with server.client() as client:
        yield client


@pytest.fixture(scope="module")
def ids(http: httpx.Client) -> dict[str, str]:
    """Path parameters that name real things: a refused request reaching its handler would act
    (pause, answer, delete …), so "nothing appended" says the handler never ran."""
    session_id = http.post("/v1/sessions", json={}).json()["sessionId"]
    asked = http.post(f"/v1/sessions/{session_id}/tool-calls",
                      json={"tool": "AskUserQuestion", "input": QUESTION})
    assert asked.status_code == 202, asked.text
    return {"session_id": session_id, "interaction_id": asked.json()["interactionId"],
            "call_id": asked.json()["callId"]}


def _filled(template: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: ids.get(m[1], "x"), template)


def _head(http: httpx.Client) -> int:
    """The store's global position: it moves with every event appended."""
    return int(http.get("/healthz").json()["headPosition"])


def _port(http: httpx.Client) -> int:
    return int(http.base_url.port or 0)


def _send(http: httpx.Client, method: str, path: str, headers: dict[str, str],
          body: bytes | None = None) -> httpx.Response:
    return http.request(method, path, headers=headers, content=body)


def _refused(response: httpx.Response, status: int, code: str, method: str) -> None:
    assert response.status_code == status, (method, response.request.url, response.text)
    if method != "HEAD":
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == code


def test_the_routes_tried_include_the_page_the_streams_and_mcp() -> None:  # EG-3
    paths = {path for _method, path in ROUTES}
    assert {"/", "/healthz", "/mcp", "/v1/events/stream", "/openapi.json"} <= paths
    assert any(path.startswith("/static/") for path in paths)
    assert any(path.endswith("/stream") and "{session_id}" in path for path in paths)
    assert len(UNSAFE_ROUTES) >= 15


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_a_foreign_host_is_421_on_every_route(  # EG-3
    http: httpx.Client, ids: dict[str, str], method: str, path: str,
) -> None:
    before = _head(http)
    port = _port(http)
    body = None if method in SAFE_METHODS else b"{}"
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", "localhost",
                 f"{ALLOWED_NAME}.evil.example:{port}", "proxy.test:9444", "proxy.test"):
        answer = _send(http, method, _filled(path, ids),
                       {"Host": host, "Content-Type": "application/json"}, body)
        _refused(answer, 421, "misdirected_request", method)
    assert _head(http) == before


@pytest.mark.parametrize(("method", "path"), UNSAFE_ROUTES,
                         ids=[f"{m} {p}" for m, p in UNSAFE_ROUTES])
def test_a_foreign_origin_is_403_on_every_route_that_changes_state(  # EG-3
    http: httpx.Client, ids: dict[str, str], method: str, path: str,
) -> None:
    before = _head(http)
    port = _port(http)
    own_host = f"127.0.0.1:{port}"
    cases: list[tuple[dict[str, str], bytes | None]] = [
        ({"Origin": "https://evil.example"}, None),  # fetch(url, {method, mode: "no-cors"})
        ({"Origin": "null"}, b""),  # a sandboxed frame or a file: page
        ({"Origin": f"http://127.0.0.1:{port + 1}", "Content-Type": "text/plain"}, b"{}"),
        ({"Origin": f"http://evil.example:{port}",
          "Content-Type": "application/x-www-form-urlencoded"}, b"a=1"),
        ({"Origin": "http://evil.example", "Content-Type": "application/json"},
         b'{"tool": "TodoWrite", "input": {"todos": []}}'),
        ({"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}, b"{}"),
        ({"Sec-Fetch-Site": "same-site"}, None),  # another port of this machine
        ({"Origin": f"file://{own_host}"}, None),
    ]
    for headers, body in cases:
        answer = _send(http, method, _filled(path, ids), {"Host": own_host, **headers}, body)
        _refused(answer, 403, "forbidden_origin", method)
    assert _head(http) == before


def test_requests_without_origin_or_from_the_servers_own_page_are_served(  # EG-3
    http: httpx.Client,
) -> None:
    port = _port(http)
    own = f"http://127.0.0.1:{port}"
    accepted: list[dict[str, str]] = [
        {},  # curl, an SDK client, the CLI
        {"Origin": own, "Sec-Fetch-Site": "same-origin"},
        {"Origin": own.upper()},
        {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        {"Host": f"[::1]:{port}", "Origin": f"http://[::1]:{port}"},
        {"Host": f"[0:0:0:0:0:0:0:1]:{port}"},
        {"Sec-Fetch-Site": "none"},  # typed by the user
        {"Origin": ALLOWED_ORIGIN},
    ]
    before = _head(http)
    for headers in accepted:
        created = _send(http, "POST", "/v1/sessions", headers)  # no body: all defaults
        assert created.status_code == 201, (headers, created.text)
    assert _head(http) == before + len(accepted)
    # The server's other name is not this request's origin: only the same origin passes.
    other_name = _send(http, "POST", "/v1/sessions", {"Origin": f"http://localhost:{port}"})
    _refused(other_name, 403, "forbidden_origin", "POST")


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_json_body_not_sent_as_json_is_never_parsed(  # EG-3
    http: httpx.Client, content_type: str | None,
) -> None:
    """The second layer under the Origin check: a body a page may send without a preflight
    (or one without a content type) is not taken as JSON, even from no browser."""
    before = _head(http)
    headers = {} if content_type is None else {"Content-Type": content_type}
    answer = _send(http, "POST", "/v1/sessions", headers, b'{"mode": "plan"}')
    _refused(answer, 422, "invalid_input", "POST")
    assert _head(http) == before


@pytest.mark.parametrize(("host", "origin"), [
    (f"{ALLOWED_NAME}:1234", None),  # an allowed name without a port: on any port
    ("LEDGER.test", "http://ledger.test"),  # no port: the scheme's default, any case
    (ALLOWED_NAME, f"https://{ALLOWED_NAME}"),  # behind a TLS proxy on 443
    (ALLOWED_NAME_PORT, f"https://{ALLOWED_NAME_PORT}"),
])
def test_allowed_hosts_are_answered_with_their_own_origin(  # EG-3
    http: httpx.Client, host: str, origin: str | None,
) -> None:
    headers = {"Host": host, **({"Origin": origin} if origin else {})}
    assert _send(http, "GET", "/v1/sessions", {"Host": host}).status_code == 200
    assert _send(http, "POST", "/v1/sessions", headers).status_code == 201


BAD_OPTIONS = [
    ("--allowed-host", "a b"), ("--allowed-host", "x.test:99999"), ("--allowed-host", "[::1"),
    ("--allowed-host", "x.test:"), ("--allowed-origin", "null"),
    ("--allowed-origin", "https://x.test/path"), ("--allowed-origin", "ftp://x.test"),
    ("--allowed-origin", "https://user@x.test"),
]


@pytest.mark.parametrize(("option", "value"), BAD_OPTIONS)
def test_a_bad_allowed_host_or_origin_is_a_configuration_error(  # EG-3
    tmp_path: Path, option: str, value: str,
) -> None:
    field = option.removeprefix("--").replace("-", "_") + "s"
    with pytest.raises(ConfigurationError, match=re.escape(f"{option} {value!r}")):
        ServerSettings(workspace_root=tmp_path, **{field: (value,)})


@pytest.mark.parametrize(("option", "value"), [BAD_OPTIONS[0], BAD_OPTIONS[4]])
def test_serve_given_a_bad_allowed_host_or_origin_exits_2_having_opened_nothing(  # EG-3
    tmp_path: Path, option: str, value: str,
) -> None:
    db = tmp_path / "ledger.db"
    result = subprocess.run(
        [*sessionledger_command(), "serve", "--port", str(free_port()), "--db",
         f"sqlite:///{db}", "--workspace", str(tmp_path), option, value],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{option} {value!r}" in result.stderr and not db.exists()
