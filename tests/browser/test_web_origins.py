"""Pages of other origins in a real browser cannot act on the server (SPEC EG-3; issue 19).

CSRF: a page served by a second HTTP server on another port of this machine sends what a
hostile page can send without CORS — body-less ``fetch(…, {method: "POST", mode: "no-cors"})``,
one with a ``text/plain`` body, and a plain form post — to create a session, compact it and
pause a question's countdown. Chromium sends them (the server logs each as a 403) and nothing
is appended. DNS rebinding: chromium resolves ``rebound.test`` to 127.0.0.1 (as a rebound name
would), so a page at ``http://rebound.test:<port>`` is on the server's address and port but
not one of its names: its own same-origin reads and writes are 421 and nothing is appended.
On the server's own origin the same fetches work.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from server_support import ServerProcess, create_session, running_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser

REBOUND = "rebound.test"
QUESTION = {"questions": [{
    "question": "Which database?", "header": "DB", "multiSelect": False,
    "options": [{"label": "SQLite", "description": "embedded"},
                {"label": "PostgreSQL", "description": "a server"}],
}]}
FETCHES = """async ([base, paths]) => {
    const sent = [];
    for (const path of paths) {
        await fetch(base + path, {method: "POST", mode: "no-cors"});
        await fetch(base + path, {method: "POST", mode: "no-cors", body: "{}",
                                  headers: {"Content-Type": "text/plain"}});
        sent.push(path);
    }
    return sent;
}"""
SAME_ORIGIN = """async () => {
    const read = await fetch("/v1/sessions");
    const wrote = await fetch("/v1/sessions", {method: "POST", body: "{}",
                                               headers: {"Content-Type": "application/json"}});
    return [read.status, wrote.status, (await wrote.json()).error?.code ?? null];
}"""


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><title>another site</title><p>nothing to see</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def other_site() -> Iterator[str]:
    """A second HTTP server on another port: another origin of this machine."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def web_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with running_server(tmp_path_factory.mktemp("web-origins")) as running:
        yield running


def _seeded(http: httpx.Client) -> tuple[str, str]:
    """A session with a question waiting: its id and the question's interaction id."""
    sid = create_session(http)
    asked = http.post(f"/v1/sessions/{sid}/tool-calls",
                      json={"tool": "AskUserQuestion", "input": QUESTION})
    assert asked.status_code == 202, asked.text
    return sid, str(asked.json()["interactionId"])


def _head(http: httpx.Client) -> int:
    return int(http.get("/healthz").json()["headPosition"])


def _statuses(server: ServerProcess, path: str) -> list[int]:
    """The status of every request the server logged for ``path``."""
    found = []
    for line in server.log().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == "request" \
                and entry.get("path") == path:
            found.append(int(entry["status"]))
    return found


def test_a_page_of_another_origin_cannot_create_compact_or_pause(  # EG-3
    browser: Browser, web_server: ServerProcess, other_site: str,
) -> None:
    with web_server.client() as http:
        sid, iid = _seeded(http)
        before = _head(http)
        paused = f"/v1/sessions/{sid}/interactions/{iid}/activity"
        paths = ["/v1/sessions", f"/v1/sessions/{sid}/compact", paused]
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(other_site)
            assert page.evaluate(FETCHES, [web_server.base_url, paths]) == paths
            # The classic form post, a navigation to the server.
            with page.expect_navigation() as navigated:
                page.evaluate("""base => {
                    const form = document.createElement("form");
                    form.method = "post"; form.action = base + "/v1/sessions";
                    form.enctype = "text/plain";
                    document.body.append(form); form.submit();
                }""", web_server.base_url)
            response = navigated.value
            assert response is not None and response.status == 403
        finally:
            context.close()
        assert _head(http) == before
        assert http.get(f"/v1/sessions/{sid}").json()["interactions"][0][
            "autoResolution"]["state"] != "paused"
    # Chromium did send them: each reached the server and was refused.
    assert _statuses(web_server, "/v1/sessions").count(403) == 3
    for path in paths[1:]:
        assert _statuses(web_server, path) == [403, 403]


def test_a_rebound_name_reads_and_writes_nothing_and_the_own_origin_works(  # EG-3
    launch_browser: Callable[..., Browser], web_server: ServerProcess,
) -> None:
    browser = launch_browser(f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1")
    port = int(web_server.base_url.rsplit(":", 1)[1])
    with web_server.client() as http:
        before = _head(http)
        context = browser.new_context()
        try:
            page = context.new_page()
            answer = page.goto(f"http://{REBOUND}:{port}/")
            assert answer is not None and answer.status == 421  # the page itself is refused
            assert page.evaluate(SAME_ORIGIN) == [421, 421, "misdirected_request"]
            assert _head(http) == before
            answer = page.goto(f"{web_server.base_url}/")
            assert answer is not None and answer.status == 200
            assert page.evaluate(SAME_ORIGIN) == [200, 201, None]
        finally:
            context.close()
        assert _head(http) > before
