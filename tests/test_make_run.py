"""A newcomer's first command (issue 42, acceptance 1): ``make run`` from a clean clone, in a
real terminal (tmux), and what ``serve`` says while it starts, serves and fails to listen.

The clean-clone run installs the runtime from the package index into a fresh ``.venv`` (a
minute or two), so it runs in ``make verify``; the rest runs ``serve`` itself.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from host_support import Terminal
from server_support import free_port, sessionledger_command

from sessionledger.logs import HumanLineFormatter, configure_logging, log_event

ROOT = Path(__file__).resolve().parents[1]
URL_LINE = "sessionledger serving http://127.0.0.1:{port}/ — open it in a browser"
TERMINAL_ENV = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
                "LANG": "C.UTF-8", "TERM": "tmux-256color"}


def _needs_tmux() -> None:
    if shutil.which("tmux") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("tmux must be installed on CI", pytrace=False)
        pytest.skip("tmux is not installed")


@contextmanager
def busy_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def url_line_lag(term: Terminal, port: int, *, timeout_s: float) -> float:
    """Seconds from the port first accepting a connection to the URL line on the screen."""
    line = URL_LINE.format(port=port)
    deadline = time.monotonic() + timeout_s
    listening_at: float | None = None
    while time.monotonic() < deadline:
        if listening_at is None and accepts(port):
            listening_at = time.monotonic()
        if line in term.screen(history=2000):
            assert listening_at is not None or accepts(port), "the URL line came before listening"
            return time.monotonic() - (listening_at or time.monotonic())
        time.sleep(0.05)
    raise AssertionError(f"no URL line within {timeout_s} s:\n{term.screen(history=2000)}")


# -- serve -------------------------------------------------------------------------------------


def test_a_busy_port_is_one_line_naming_port(tmp_path: Path) -> None:
    with busy_port() as port:
        done = subprocess.run(
            [*sessionledger_command(), "serve", "--port", str(port), "--db",
             f"sqlite:///{tmp_path}/ledger.db", "--workspace", str(tmp_path)],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: another program is listening there "
        "(another sessionledger serve?). Choose another port with --port N (make run PORT=N)"]


def test_the_socket_listens_before_the_server_starts() -> None:
    """Two servers starting at once on one port: the second is told at its bind, not with a
    traceback once the first listens (the socket listens as soon as it is bound)."""
    from sessionledger.errors import AddressUnavailable, ConfigurationError
    from sessionledger.http.server import listening_socket

    with socket.socket() as early:  # bound, as a starting server's is, not yet listening
        early.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        early.bind(("127.0.0.1", 0))
        port = int(early.getsockname()[1])
        with listening_socket("127.0.0.1", port) as ours:
            assert accepts(port) and ours.getsockname()[1] == port
            with pytest.raises(OSError):
                early.listen()
            with pytest.raises(AddressUnavailable, match="--port N"):
                listening_socket("127.0.0.1", port)
    with pytest.raises(ConfigurationError, match=r"--host 'no-such-host\.invalid'"):
        listening_socket("no-such-host.invalid", 0)


def test_serve_prints_the_url_line_once_it_listens_and_logs_json_to_a_pipe(
    tmp_path: Path,
) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*sessionledger_command(), "serve", "--port", str(port), "--db",
         f"sqlite:///{tmp_path}/ledger.db", "--workspace", str(tmp_path)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first == URL_LINE.format(port=port) + "\n"
        assert accepts(port)  # the line comes once it listens
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=30)
    lines = err.splitlines()
    assert lines[0] == f"created a new event store at {tmp_path}/ledger.db"
    assert lines[1:] and all(line.startswith("{") for line in lines[1:]), err


def test_human_lines_leave_out_the_routine_below_debug() -> None:
    record = logging.LogRecord("sessionledger.http", logging.WARNING, __file__, 1, "slow",
                               (), None)
    record.sessionledger_fields = {"path": "/v1/sessions", "note": "two words"}
    line = HumanLineFormatter().format(record)
    assert re.fullmatch(r'\d\d:\d\d:\d\d warning slow  path=/v1/sessions note="two words"',
                        line), line
    record.sessionledger_fields = {"path": "/\x1b]0;owned\x07", "place": "/v1/é"}
    line = HumanLineFormatter().format(record)  # a client's escape never steers the terminal
    assert "\x1b" not in line and "\x07" not in line
    assert line.endswith('path="/\\u001b]0;owned\\u0007" place=/v1/é'), line

    class Lines(list[str]):
        def write(self, text: str) -> None:
            self.append(text)

        def flush(self) -> None:
            pass

    target = logging.getLogger("sessionledger.test_make_run")
    for level, expected in ((logging.INFO, ["hello"]), (logging.DEBUG, ["request", "hello"])):
        seen = Lines()
        configure_logging(names=(target.name,), level=level, human=True, stream=seen)  # type: ignore[arg-type]
        log_event(target, "request", method="GET", path="/healthz", status=200)
        log_event(target, "hello")
        said = [re.sub(r"^\d\d:\d\d:\d\d ", "", line).split("  ")[0]
                for line in "".join(seen).splitlines()]
        assert said == expected
        for handler in list(target.handlers):
            target.removeHandler(handler)


def test_serve_on_a_terminal_speaks_to_a_person(tmp_path: Path) -> None:
    """In a real terminal: the URL line, no JSON, no line per request at info; at debug a
    line per request, in words."""
    _needs_tmux()
    import httpx

    for level in ("info", "debug"):
        port = free_port()
        command = [*sessionledger_command(), "serve", "--port", str(port), "--log-level", level,
                   "--db", f"sqlite:///{tmp_path}/ledger.db", "--workspace", str(tmp_path)]
        with Terminal(command, cwd=tmp_path, env=TERMINAL_ENV) as term:
            term.wait_for(URL_LINE.format(port=port), timeout_s=60)
            for _ in range(3):
                assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            if level == "debug":
                term.wait_for(lambda text: text.count(" request ") >= 3, timeout_s=30)
            else:  # what would have shown by now (it shows at once at debug)
                time.sleep(0.5)
            screen = term.screen(history=200)
        # its terminal closed: it stopped as on Ctrl-C and took back where it listens
        assert not (tmp_path / "ledger.db.serve.json").exists()
        assert not accepts(port)
        lines = [line for line in screen.splitlines() if line.strip()]
        assert not [line for line in lines if line.lstrip().startswith("{")], screen
        requests = [line for line in lines if re.match(r"\d\d:\d\d:\d\d request ", line)]
        if level == "info":
            assert requests == [], screen
        else:
            assert len(requests) >= 3 and "path=/healthz" in requests[0], screen


# -- make run from a clean clone ---------------------------------------------------------------


@pytest.mark.slow
def test_make_run_from_a_clean_clone(tmp_path: Path) -> None:
    """The README's first command in a terminal: progress while it sets up, the URL line
    within a second of listening, words not JSON; ``PORT=`` serves there; a busy port is one
    line naming ``PORT``."""
    _needs_tmux()
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.fail("make and git are needed")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {**TERMINAL_ENV, "PYTHON": sys.executable}
    port = free_port()
    with Terminal(["make", "run", f"PORT={port}"], cwd=clone, env=env) as term:
        term.wait_for("==> creating the virtual environment", timeout_s=60)
        term.wait_for("==> installing sessionledger", timeout_s=120)
        term.wait_for(lambda s: "Collecting" in s or "Successfully installed" in s,
                      timeout_s=600)
        lag = url_line_lag(term, port, timeout_s=900)
        assert lag < 1.0, f"the URL line came {lag:.2f} s after the port listened"
        screen = term.screen(history=5000)
        assert "==> starting sessionledger" in screen
        assert f"created a new event store at {clone}/.sessionledger/ledger.db" in screen
        after = screen[screen.index("==> starting sessionledger"):]
        assert not [line for line in after.splitlines() if line.lstrip().startswith("{")], after
        term.press("C-c")
        deadline = time.monotonic() + 30
        while accepts(port) and time.monotonic() < deadline:
            time.sleep(0.1)
    other = free_port()
    with Terminal(["make", "run", f"PORT={other}"], cwd=clone, env=env) as term:
        term.wait_for(URL_LINE.format(port=other), timeout_s=120)
        assert accepts(other)
        assert "==> installing" not in term.screen(history=500)  # set up once
    # the terminal closed under it (its shell's hangup): serve stopped and said so
    assert not accepts(other)
    assert not (clone / ".sessionledger" / "ledger.db.serve.json").exists()
    with busy_port() as taken:
        done = subprocess.run(["make", "-s", "run", f"PORT={taken}"], cwd=clone, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert len(said) == 1 and "PORT=" in said[0] and str(taken) in said[0], done.stderr
