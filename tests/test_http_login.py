"""Token login for browsers (issue 23.7): the token exchanged for an HttpOnly login cookie.

Over one real ``sessionledger serve --token …`` on loopback: ``POST /v1/login`` with the right
token answers a ``Set-Cookie`` that is ``HttpOnly``, ``SameSite=Strict``, ``Path=/`` with a
bounded ``Max-Age`` and a value that is not the token; that cookie is accepted on a JSON route
and on an SSE stream; a wrong token sets nothing; an unknown cookie is 401; a login from a
page of another origin is 403 (EG-3); logout ends the login on the server, so the old cookie
stops working; neither the token nor a cookie value reaches the server's log. In process: an
expired login is 401, and a server without a token has nothing to log in to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import ServerProcess, create_session, in_process_client, running_server

from sessionledger import ServerSettings
from sessionledger.http.login import LOGIN_MAX_AGE_S, LoginSessions

TOKEN = "login-token-for-tests-5f1c"
EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("login"), args=["--token", TOKEN]) as running:
        yield running


COOKIE_NAME = LoginSessions(TOKEN).name


def _cookie_name(server: ServerProcess) -> str:
    return COOKIE_NAME


def _login(http: httpx.Client, token: str = TOKEN, **headers: str) -> httpx.Response:
    return http.post("/v1/login", json={"token": token}, headers=headers)


def _attributes(set_cookie: str) -> tuple[str, str, dict[str, str]]:
    """A ``Set-Cookie`` value as (name, value, {attribute in lower case: value})."""
    pair, *rest = [part.strip() for part in set_cookie.split(";")]
    name, _, value = pair.partition("=")
    attributes = {}
    for part in rest:
        key, _, given = part.partition("=")
        attributes[key.lower()] = given
    return name, value, attributes


def _with_cookie(server: ServerProcess, value: str) -> httpx.Client:
    return server.client(headers={"Cookie": f"{_cookie_name(server)}={value}"})


def _first_stream_id(http: httpx.Client, path: str) -> str:
    with http.stream("GET", path) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("id:"):
                return line[3:].strip()
    raise AssertionError("the stream ended before its first event")


def test_login_sets_an_httponly_strict_cookie_that_routes_and_streams_accept(  # issue 23.7
    server: ServerProcess,
) -> None:
    with server.client() as http:
        assert http.get("/v1/login").json() == {
            "tokenRequired": True, "authenticated": False, "via": None, "expiresAt": None}
        assert http.get("/v1/sessions").status_code == 401
        answer = _login(http)
    with server.client(headers={"Authorization": f"Bearer {TOKEN}"}) as bearer:
        sid = create_session(bearer)
    assert answer.status_code == 200, answer.text
    assert answer.json()["via"] == "cookie" and answer.json()["authenticated"] is True
    name, value, attributes = _attributes(answer.headers["set-cookie"])
    assert name == _cookie_name(server)
    assert value and TOKEN not in value
    assert "httponly" in attributes and attributes["samesite"].lower() == "strict"
    assert attributes["path"] == "/" and int(attributes["max-age"]) == LOGIN_MAX_AGE_S
    assert "secure" not in attributes  # plain http here; over https the cookie is Secure
    with _with_cookie(server, value) as http:
        assert http.get("/v1/login").json()["via"] == "cookie"
        listed = http.get("/v1/sessions")
        assert listed.status_code == 200, listed.text
        assert sid in [s["sessionId"] for s in listed.json()["sessions"]]
        changed = http.post(f"/v1/sessions/{sid}/mode", json={"mode": "plan"},
                            headers={"Origin": server.base_url})
        assert changed.status_code == 200, changed.text
        assert _first_stream_id(http, f"/v1/sessions/{sid}/events/stream") == "1"
    log = server.log()
    assert TOKEN not in log and value not in log


def test_a_wrong_token_sets_nothing_and_unknown_cookies_are_refused(  # issue 23.7
    server: ServerProcess,
) -> None:
    with server.client() as http:
        for token in ("wrong", TOKEN[:-1], f"{TOKEN} ", TOKEN.upper()):
            refused = _login(http, token)
            assert refused.status_code == 401, refused.text
            assert refused.json()["error"]["code"] == "unauthorized"
            assert "set-cookie" not in refused.headers
        for body in ({}, {"token": ""}, {"token": 1}, {"token": TOKEN, "extra": 1}):
            invalid = http.post("/v1/login", json=body)
            assert invalid.status_code == 422 and "set-cookie" not in invalid.headers, body
    for value in ("not-a-login", TOKEN, ""):
        with _with_cookie(server, value) as http:
            assert http.get("/v1/sessions").status_code == 401, value
            with http.stream("GET", "/v1/events/stream") as stream:
                assert stream.status_code == 401
    assert TOKEN not in server.log()


def test_a_login_from_another_origin_is_403_and_sets_nothing(  # issue 23.7, EG-3
    server: ServerProcess,
) -> None:
    with server.client() as http:
        for headers in ({"Origin": EVIL}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}):
            refused = _login(http, **headers)
            assert refused.status_code == 403, (headers, refused.text)
            assert refused.json()["error"]["code"] == "forbidden_origin"
            assert "set-cookie" not in refused.headers
        own = _login(http, Origin=server.base_url, **{"Sec-Fetch-Site": "same-origin"})
        assert own.status_code == 200 and "set-cookie" in own.headers


def test_logout_ends_the_login_on_the_server(server: ServerProcess) -> None:  # issue 23.7
    with server.client() as http:
        value = _attributes(_login(http).headers["set-cookie"])[1]
    with _with_cookie(server, value) as http:
        assert http.get("/v1/sessions").status_code == 200
        out = http.post("/v1/logout", headers={"Origin": server.base_url})
        assert out.status_code == 200, out.text
        assert out.json() == {"tokenRequired": True, "authenticated": False, "via": None,
                              "expiresAt": None}
        name, cleared, attributes = _attributes(out.headers["set-cookie"])
        assert name == _cookie_name(server) and cleared in ("", '""')
        assert attributes["max-age"] == "0"
        assert http.get("/v1/sessions").status_code == 401  # a copy of the cookie is dead too
        assert http.post("/v1/logout", headers={"Origin": EVIL}).status_code == 403
    assert value not in server.log()


def test_an_expired_login_is_refused_and_no_token_means_no_login(  # issue 23.7
    tmp_path: Path,
) -> None:
    settings = ServerSettings(token=TOKEN, workspace_root=tmp_path)
    with in_process_client(tmp_path, settings=settings) as (client, _service):
        answer = client.post("/v1/login", json={"token": TOKEN})
        assert answer.status_code == 200
        assert client.get("/v1/sessions").status_code == 200  # the client keeps the cookie
        logins = client.app.state.logins  # type: ignore[attr-defined]
        started = logins.clock()
        logins.clock = lambda: started + LOGIN_MAX_AGE_S + 1
        refused = client.get("/v1/sessions")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert client.get("/v1/login").json()["authenticated"] is False
    with in_process_client(tmp_path) as (client, _service):
        assert client.get("/v1/login").json() == {
            "tokenRequired": False, "authenticated": True, "via": None, "expiresAt": None}
        refused = client.post("/v1/login", json={"token": TOKEN})
        assert refused.status_code == 409 and "set-cookie" not in refused.headers
        assert client.post("/v1/logout").status_code == 200


def test_a_login_is_signed_so_every_process_with_the_token_takes_it() -> None:  # issue 41
    """Replicas and restarts: another process with the same token takes the cookie (same
    name); another token, a changed expiry, nonce or signature, or an expired one is refused;
    a logout ends it where it was made."""
    here, there, other = LoginSessions(TOKEN), LoginSessions(TOKEN), LoginSessions(TOKEN + "x")
    assert here.name == there.name != other.name
    value, expires = here.open()
    assert TOKEN not in value
    assert there.expiry(value) == expires and other.expiry(value) is None
    stamp, nonce, signature = value.split(".")
    for forged in (f"{int(stamp) + 3600}.{nonce}.{signature}", f"{stamp}.{nonce}x.{signature}",
                   f"{stamp}.{nonce}.{signature[:-1]}", f"{stamp}.{nonce}", "", "..", "é.1.2"):
        assert there.expiry(forged) is None, forged
    there.clock = lambda: expires + 1
    assert there.expiry(value) is None
    here.close(value)
    assert here.expiry(value) is None and LoginSessions(TOKEN).expiry(value) == expires
