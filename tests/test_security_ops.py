"""Security and operations of the served process (SPEC §11; issue 10).

What ``tests/test_http_sessions.py`` already proves in process — the token middleware, the
settings refusing a non-loopback host without a token, workspaces confined to the root, one
log line per request, ``/healthz`` — is proven here against the installed ``sessionledger
serve``: it binds loopback by default; off loopback without a token it exits 2 with a clear
message, having opened no store and bound no port; with a token (``--token`` or
``SESSIONLEDGER_TOKEN``) every path but ``/healthz``, streams included, needs the bearer, the
token never reaches the log, and refused requests are logged with their request id. CORS is
closed: no answer carries ``Access-Control-Allow-Origin``.
"""

from __future__ import annotations

import hmac
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import (
    ServerProcess,
    TestClient,
    free_port,
    in_process_client,
    running_server,
    sessionledger_command,
)

from sessionledger import ServerSettings

TOKEN = "s3cret-token-for-tests"
EVIL = "https://evil.example"


def _environment(**extra: str) -> dict[str, str]:
    drop = {"SESSIONLEDGER_DB", "SESSIONLEDGER_TOKEN"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def _request_line(server: ServerProcess, request_id: str) -> dict[str, Any]:
    """The server's log line for ``request_id`` (it is written once the answer is sent; the
    bound only stops a hang)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in server.log_records():
            if line.get("event") == "request" and line.get("requestId") == request_id:
                return line
        time.sleep(0.05)
    raise AssertionError(f"no log line for request {request_id}\n{server.log()}")


def _outward_address() -> str | None:
    """This machine's address on its outward interface, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: connecting a UDP socket sends nothing
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def _accepts(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


# -- binding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "token_env"), [("0.0.0.0", None), ("::", "")])
def test_off_loopback_without_a_token_exits_2_and_never_binds(
    tmp_path: Path, host: str, token_env: str | None
) -> None:
    port = free_port()
    db = tmp_path / "ledger.db"
    env = _environment() if token_env is None else _environment(SESSIONLEDGER_TOKEN=token_env)
    result = subprocess.run(
        [*sessionledger_command(), "serve", "--host", host, "--port", str(port),
         "--db", f"sqlite:///{db}", "--workspace", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    message = result.stderr.strip()
    assert message.startswith("error: ") and message.count("\n") == 0
    assert "not loopback" in message and "--token" in message
    assert "SESSIONLEDGER_TOKEN" in message
    assert not db.exists()  # refused before the store was opened
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))  # nothing ever listened there


@pytest.mark.parametrize(("token", "why", "way"), [
    (" s3cret", "whitespace", "option"), ("s3cret\n", "whitespace", "environment"),
    ("s3c\x01ret", "control character", "option"), ("s3crét", "not ASCII", "environment"),
])
def test_a_token_no_client_could_send_is_refused_at_start(  # issue 41, finding 6
    tmp_path: Path, token: str, why: str, way: str
) -> None:
    port = free_port()
    db = tmp_path / "ledger.db"
    given = ["--token", token] if way == "option" else []
    env = _environment(SESSIONLEDGER_TOKEN=token) if way == "environment" else _environment()
    result = subprocess.run(
        [*sessionledger_command(), "serve", "--port", str(port), "--db", f"sqlite:///{db}",
         "--workspace", str(tmp_path), *given],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    message = result.stderr.strip()
    assert message.startswith("error: ") and message.count("\n") == 0, message
    assert "bearer token" in message and why in message, message
    assert token not in message  # the secret is not echoed
    assert not db.exists()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))  # nothing ever listened there


def test_serve_binds_loopback_by_default(tmp_path: Path) -> None:
    with running_server(tmp_path) as server, server.client() as http:
        assert http.get("/v1/sessions").status_code == 200  # no token needed on loopback
        started = next(line for line in server.log_records() if line.get("event") == "starting")
        assert started["host"] == "127.0.0.1"
        port = int(server.base_url.rsplit(":", 1)[1])
        outward = _outward_address()
        if outward is not None:
            assert not _accepts(outward, port), f"reachable on {outward}"
        # Session workspaces stay inside the root the server was given (SPEC §11).
        for outside in ("/", str(server.workspace.parent), "../x"):
            answer = http.post("/v1/sessions", json={"workspace": outside})
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"]["code"] == "workspace_outside_root"


# -- the bearer token ------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["environment", "option"])
def guarded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """``serve --host 0.0.0.0`` with the token from SESSIONLEDGER_TOKEN or ``--token``.

    One server per token source for the tests of this module (starting one takes a second).
    """
    tmp_path = tmp_path_factory.mktemp(f"guarded-{request.param}")
    if request.param == "environment":
        options: dict[str, Any] = {"env": {"SESSIONLEDGER_TOKEN": TOKEN}}
    else:
        options = {"args": ["--token", TOKEN]}
    args = ["--host", "0.0.0.0", *options.pop("args", [])]
    with running_server(tmp_path, args=args, **options) as server:
        yield server


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


BAD_AUTHORIZATION = [
    None, "", "Bearer", "Bearer wrong", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x",
    f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}", f"Bearers {TOKEN}",
    f"Bearer {TOKEN.upper()}",
]
GOOD_AUTHORIZATION = [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}",
                      f"Bearer  {TOKEN}"]
"""The scheme is case-insensitive and one or more spaces may follow it (RFC 7235 section
2.1); the token is compared exactly."""


def test_off_loopback_every_request_needs_the_bearer_token(guarded: ServerProcess) -> None:
    with guarded.client() as http:
        for authorization in BAD_AUTHORIZATION:
            headers = {} if authorization is None else {"Authorization": authorization}
            for path in ("/v1/sessions", "/v1/events/stream", "/openapi.json",
                         "/v1/event-types"):
                _refused(http.get(path, headers=headers))
            _refused(http.post("/v1/sessions", json={}, headers=headers))
        assert http.get("/healthz").status_code == 200  # probes need no secret
        for path in ("/", "/static/app.js", "/v1/login"):  # the page and its login form
            assert http.get(path).status_code == 200, path
        probe = http.head("/healthz")  # uvicorn itself: status and headers, no body
        assert probe.status_code == 200 and probe.content == b""
        assert probe.headers["content-length"] == http.get("/healthz").headers["content-length"]
        _refused_head = http.head("/v1/sessions")
        assert _refused_head.status_code == 401 and _refused_head.content == b""
        for authorization in GOOD_AUTHORIZATION:
            answer = http.get("/v1/sessions", headers={"Authorization": authorization})
            assert answer.status_code == 200, (authorization, answer.text)
        right = {"Authorization": f"Bearer {TOKEN}"}
        created = http.post("/v1/sessions", json={}, headers=right)
        assert created.status_code == 201, created.text
        sid = created.json()["sessionId"]
        _refused(http.get(f"/v1/sessions/{sid}"))
        assert http.get(f"/v1/sessions/{sid}", headers=right).json()["sessionId"] == sid
        listed = http.get("/v1/sessions", headers=right).json()["sessions"]
        assert sid in [s["sessionId"] for s in listed]
    outward = _outward_address()
    if outward is not None:  # 0.0.0.0 is reachable from outside, which is why it needs a token
        port = int(guarded.base_url.rsplit(":", 1)[1])
        assert _accepts(outward, port)


def test_the_served_document_names_the_bearer_scheme_and_401_wherever_it_applies(
    guarded: ServerProcess,
) -> None:
    with guarded.client() as http:
        document = http.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            guarded_here = path not in {"/healthz", "/", "/v1/login", "/v1/logout"}
            own_401 = (method, path) == ("post", "/v1/login")  # a wrong token
            assert ("401" in operation["responses"]) == (guarded_here or own_401), (method, path)
            assert ("security" in operation) == guarded_here, (method, path)
            checked += 1
    assert checked > 20


def test_without_a_token_the_document_names_no_401_and_every_store_route_a_503(
    tmp_path: Path,
) -> None:
    with in_process_client(tmp_path) as (client, _service):
        document = client.get("/openapi.json").json()
    assert "securitySchemes" not in document.get("components", {})
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            answers = operation["responses"]
            assert "security" not in operation, (method, path)
            # the login's own 401 (a wrong token) is documented whatever the server's settings
            assert ("401" in answers) == ((method, path) == ("post", "/v1/login")), (method, path)
            assert ("503" in answers) == (path not in {"/", "/v1/login", "/v1/logout"}), \
                (method, path)
            if "503" in answers:
                schema = answers["503"]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorResponse"}


def test_refused_requests_are_logged_with_their_id_and_the_token_never(
    guarded: ServerProcess,
) -> None:
    with guarded.client() as http:
        refused = http.get("/v1/sessions", headers={"X-Request-ID": "probe-1",
                                                    "Authorization": "Bearer guess"})
        allowed = http.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 401 and refused.headers["x-request-id"] == "probe-1"
    line = _request_line(guarded, "probe-1")
    assert line["status"] == 401 and line["path"] == "/v1/sessions" and line["method"] == "GET"
    generated = allowed.headers["x-request-id"]
    assert generated.startswith("req_") and _request_line(guarded, generated)["status"] == 200
    assert TOKEN not in guarded.log()


def test_the_token_is_compared_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    settings = ServerSettings(host="0.0.0.0", token=TOKEN, workspace_root=tmp_path)
    with in_process_client(tmp_path, settings=settings) as (client, _service):
        assert client.get("/v1/sessions", headers={"Authorization": "Bearer no"}).status_code \
            == 401
        assert client.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"}) \
            .status_code == 200
    assert compared == [(b"no", TOKEN.encode()), (TOKEN.encode(), TOKEN.encode())]


# -- CORS --------------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with in_process_client(tmp_path) as (test_client, _service):
        yield test_client


@pytest.mark.parametrize("path", ["/v1/sessions", "/v1/events/stream", "/healthz", "/"])
def test_cors_is_closed_by_default(client: TestClient, path: str) -> None:
    preflight = client.options(path, headers={
        "Origin": EVIL, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    })
    assert preflight.status_code >= 400  # no route answers a preflight
    headers = {name.lower() for name in preflight.headers}
    assert not any(name.startswith("access-control-") for name in headers), preflight.headers
    if path != "/v1/events/stream":  # a stream would not end; its headers are the same app's
        plain = client.get(path, headers={"Origin": EVIL})
        assert plain.status_code == 200
        assert "access-control-allow-origin" not in plain.headers


def test_cors_is_closed_on_the_served_process(guarded: ServerProcess) -> None:
    with guarded.client() as http:
        for headers in ({"Origin": EVIL, "Access-Control-Request-Method": "GET"},
                        {"Origin": EVIL, "Access-Control-Request-Method": "GET",
                         "Authorization": f"Bearer {TOKEN}"}):
            preflight = http.options("/v1/sessions", headers=headers)
            assert preflight.status_code in (401, 405)
            assert "access-control-allow-origin" not in preflight.headers
        answer = http.get("/healthz", headers={"Origin": EVIL})
        assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers
