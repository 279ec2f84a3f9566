"""Start-up: how soon each entry point a host starts answers, against the interpreter (issue 38).

Run ``.venv/bin/python bench/startup.py`` (``--quick`` for a smoke run of a few seconds).
Every workload starts a new process and is timed from ``Popen`` to the answer it exists to
give; all of them run in one interleaved loop (the order rotated every round), ``--starts``
times each (30), so a busy moment falls on every row alike:

- anchors: ``python -c pass``, ``python -S -c pass`` (no ``site``: the interpreter alone) and
  ``bash -c true`` — the floor;
- ``sessionledger --version``, the installed console script, to its exit;
- ``sessionledger hook claude-code`` on a ``PreToolUse`` of a ``Read`` (Claude Code's event,
  on stdin) to its exit, *forwarded* (a ``serve`` runs on the database, found by the
  discovery file beside it), with *no server* (the first event records itself and starts
  the hook's writer, a ``serve --hook-writer`` of its own, to which the rest are forwarded; the
  warm-up start is that first one and the writer is running when the rounds begin) and
  *direct* (``--direct``: the hook records every event itself, as the first one does);
- ``python -c "import eventlog"``: the event log and its catalog of pydantic models, which
  every append validates against — the floor of a hook that records the event itself;
- ``sessionledger mcp`` (a new session, no configuration) to its ``initialize`` answer, and to
  its ``tools/list`` answer asked right after (``notifications/initialized`` between, as
  clients do); the process is then let go and waited for outside the timing;
- ``sessionledger serve`` on a free loopback port to its first ``200`` from ``GET /healthz``
  (polled every 5 ms on a raw socket); then SIGTERM, waited for outside the timing.

Bytecode caches are written and warm (one untimed start of each first), as a user's second
start has them; ``PYTHONDONTWRITEBYTECODE`` is dropped from the children's environment. The
table shows p50 and p95 in milliseconds, each p50 over ``python -c pass``'s, and the issue's
targets. An answer that is not the expected one counts as an error. Speed is never asserted
in tests (``tests/test_bench_smoke.py`` only runs ``--quick``). See docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and holds ``eventlog.py``
# (the throughput bench): drop it so ``import eventlog`` finds the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.append(str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import selectors  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import IO  # noqa: E402

from bench.user_install import description, run_installed  # noqa: E402

ANSWER_TIMEOUT_S = 60.0
"""How long one start may take before it counts as an error (and the process is killed)."""

ROWS: tuple[tuple[str, str, str], ...] = (
    # key, label, target (p50 over python -c pass unless it says otherwise)
    ("pass", "python -c pass (anchor)", ""),
    ("pass -S", "python -S -c pass", ""),
    ("bash", "bash -c true", ""),
    ("version", "sessionledger --version", "<= 2x"),
    ("forwarded", "hook claude-code PreToolUse Read, forwarded", "<= 3x"),
    ("unserved", "hook claude-code PreToolUse Read, no server", "<= 6x"),
    ("direct", "hook claude-code PreToolUse Read, --direct", ""),
    ("catalog", "python -c 'import eventlog' (the catalog)", ""),
    ("initialize", "sessionledger mcp: initialize answered", "<= 10x"),
    ("tools/list", "sessionledger mcp: tools/list answered", "right after"),
    ("serve", "sessionledger serve: first /healthz 200", "<= 1500 ms"),
)


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)
    errors: int = 0

    def quantile(self, q: float) -> float:
        ordered = sorted(self.seconds)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --------------------------------------------------------------------------------------------
# One start of each workload.


def _sessionledger() -> str:
    """The installed ``sessionledger`` console script of this interpreter's environment."""
    return str(Path(sys.executable).parent / "sessionledger")


def _child_env() -> dict[str, str]:
    """This environment for the children, bytecode written; ``sessionledger`` as installed
    (no ``PYTHONPATH``: under a user's install the wheel's modules are the ones timed)."""
    return {k: v for k, v in os.environ.items() if k not in (
        "SESSIONLEDGER_DB", "SESSIONLEDGER_URL", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH",
        "SESSIONLEDGER_HOOK_WRITER")}  # the hook's writer as a user has it (on, 600 s)


ENV = _child_env()


def run_to_exit(command: list[str], stdin: bytes = b"", cwd: Path | None = None,
                check: Callable[[bytes], bool] = lambda _out: True) -> tuple[float, bool]:
    t0 = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=ENV, cwd=cwd,
                          timeout=ANSWER_TIMEOUT_S, check=False)
    seconds = time.perf_counter() - t0
    return seconds, done.returncode == 0 and check(done.stdout)


def read_event(cwd: Path, n: int) -> bytes:
    """Claude Code's ``PreToolUse`` of a ``Read`` in ``default`` mode."""
    return json.dumps({
        "session_id": "5e5510n0-0000-4000-8000-00000000b00c", "cwd": str(cwd),
        "transcript_path": str(cwd / "transcript.jsonl"), "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": "Read",
        "tool_input": {"file_path": str(cwd / "README.md")},
        "tool_use_id": f"toolu_startup{n:012d}",
    }).encode()


def allowed(stdout: bytes) -> bool:
    try:
        answer = json.loads(stdout)
    except ValueError:
        return False
    return bool(answer.get("hookSpecificOutput", {}).get("permissionDecision") == "allow")


def _readline(stream: IO[bytes], selector: selectors.BaseSelector, deadline: float) -> bytes:
    """One line of a child's stdout, or ``b""`` at its end or the deadline."""
    line = b""
    while not line.endswith(b"\n"):
        if not selector.select(max(0.0, deadline - time.perf_counter())):
            return b""
        chunk = stream.readline()
        if not chunk:
            return b""
        line += chunk
    return line


def mcp_start(workspace: Path, db: Path) -> tuple[float, float, bool]:
    """Seconds from start to the ``initialize`` answer and to the ``tools/list`` answer."""
    command = [_sessionledger(), "mcp", "--db", f"sqlite:///{db}", "--workspace", str(workspace)]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "bench", "version": "0"}}}
    then = [{"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    t0 = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=ENV, cwd=workspace)
    assert process.stdin is not None and process.stdout is not None
    answered: dict[int, float] = {}
    ok = True
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = t0 + ANSWER_TIMEOUT_S
            process.stdin.write(json.dumps(initialize).encode() + b"\n")
            process.stdin.flush()
            while len(answered) < 2:
                line = _readline(process.stdout, selector, deadline)
                if not line:
                    ok = False
                    break
                message = json.loads(line)
                if message.get("id") in (1, 2):
                    answered[message["id"]] = time.perf_counter() - t0
                    ok = ok and "result" in message
                    if message["id"] == 1:
                        process.stdin.write(b"".join(json.dumps(m).encode() + b"\n"
                                                     for m in then))
                        process.stdin.flush()
    finally:
        process.stdin.close()
        try:
            ok = process.wait(timeout=ANSWER_TIMEOUT_S) == 0 and ok
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            ok = False
        process.stdout.close()
    return answered.get(1, float("nan")), answered.get(2, float("nan")), ok


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthz(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                         "Connection: close\r\n\r\n".encode())
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


@contextmanager
def serving(directory: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """``sessionledger serve`` on the database in ``directory`` on a free port, started now
    and stopped (SIGTERM, then SIGKILL) at the end: the process and its port."""
    port = _free_port()
    process = subprocess.Popen(
        [_sessionledger(), "serve", "--port", str(port), "--workspace", str(directory),
         "--db", f"sqlite:///{directory / 'ledger.db'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        yield process, port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=ANSWER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve_start(directory: Path) -> tuple[float, bool]:
    t0 = time.perf_counter()
    with serving(directory) as (process, port):
        while time.perf_counter() - t0 < ANSWER_TIMEOUT_S and process.poll() is None:
            if _healthz(port):
                return time.perf_counter() - t0, True
            time.sleep(0.005)
    return float("nan"), False


@contextmanager
def running_server(directory: Path) -> Iterator[Path]:
    """A ``serve`` on the database in ``directory`` (its discovery file beside it)."""
    with serving(directory) as (process, port):
        deadline = time.perf_counter() + ANSWER_TIMEOUT_S
        while not (_healthz(port) and (directory / "ledger.db.serve.json").exists()):
            if process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError("serve did not start")
            time.sleep(0.05)
        yield directory


def _writer_pid(directory: Path) -> int | None:
    try:
        record = json.loads((directory / "ledger.db.serve.json").read_text())
    except (OSError, ValueError):
        return None
    return int(record["pid"]) if record.get("writer") else None


def _wait_for_writer(directory: Path) -> None:
    deadline = time.perf_counter() + ANSWER_TIMEOUT_S
    while _writer_pid(directory) is None:
        if time.perf_counter() > deadline:
            raise RuntimeError("the hook started no writer")
        time.sleep(0.05)


@contextmanager
def hook_writer(directory: Path) -> Iterator[None]:
    """The writer a hook on ``directory``'s database starts, stopped at the end."""
    try:
        yield
    finally:
        pid = _writer_pid(directory)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.perf_counter() + ANSWER_TIMEOUT_S
            while _writer_pid(directory) == pid and time.perf_counter() < deadline:
                time.sleep(0.05)  # it removes its discovery file as it stops


# --------------------------------------------------------------------------------------------
# The interleaved run and the table.


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Samples]:
    found = {key: Samples() for key, _label, _target in ROWS}
    direct_dir, unserved_dir, served_dir, mcp_dir, serve_dir = (
        tmp / n for n in ("direct", "unserved", "served", "mcp", "serve"))
    for directory in (direct_dir, unserved_dir, served_dir, mcp_dir, serve_dir):
        (directory / "project").mkdir(parents=True)
    py = sys.executable
    counter = iter(range(10**9))

    def hook(directory: Path, *options: str) -> tuple[float, bool]:
        command = [_sessionledger(), "hook", "claude-code", "--db",
                   f"sqlite:///{directory / 'ledger.db'}", "--workspace", str(directory),
                   *options]
        return run_to_exit(command, read_event(directory / "project", next(counter)),
                           cwd=directory / "project", check=allowed)

    def mcp() -> tuple[float, bool]:
        init, listed, ok = mcp_start(mcp_dir, mcp_dir / "ledger.db")
        found["tools/list"].seconds.append(listed)
        found["tools/list"].errors += not ok
        return init, ok

    version = b"sessionledger, version"
    workloads: dict[str, Callable[[], tuple[float, bool]]] = {
        "pass": lambda: run_to_exit([py, "-c", "pass"]),
        "pass -S": lambda: run_to_exit([py, "-S", "-c", "pass"]),
        "bash": lambda: run_to_exit(["bash", "-c", "true"]),
        "version": lambda: run_to_exit([_sessionledger(), "--version"],
                                       check=lambda out: out.startswith(version)),
        "forwarded": lambda: hook(served_dir),
        "unserved": lambda: hook(unserved_dir),
        "direct": lambda: hook(direct_dir, "--direct"),
        "catalog": lambda: run_to_exit([py, "-c", "import eventlog"]),
        "initialize": mcp,
        "serve": lambda: serve_start(serve_dir),
    }
    rng = random.Random(args.seed)
    with running_server(served_dir), hook_writer(unserved_dir):
        for workload in workloads.values():  # caches warm, databases created
            workload()
        _wait_for_writer(unserved_dir)
        for key in found:
            found[key] = Samples()
        order = list(workloads)
        for round_ in range(args.starts):
            rng.shuffle(order)
            for key in order:
                seconds, ok = workloads[key]()
                found[key].seconds.append(seconds)
                found[key].errors += not ok
            if args.verbose:
                print(f"round {round_ + 1}/{args.starts}", file=sys.stderr)
    return found


def _met(key: str, target: str, found: dict[str, Samples]) -> str:
    p50 = found[key].quantile(0.5)
    if target.startswith("<= ") and target.endswith("x"):
        met = p50 / found["pass"].quantile(0.5) <= float(target[3:-1])
    elif target.endswith(" ms"):
        met = p50 * 1e3 <= float(target[3:-3])
    elif target == "right after":
        met = p50 - found["initialize"].quantile(0.5) <= 0.05  # within 50 ms
    else:
        return ""
    return "PASS" if met else "MISS"


def render(args: argparse.Namespace, found: dict[str, Samples], load: str) -> str:
    anchor = found["pass"].quantile(0.5)
    lines = [
        f"start-up bench: {args.starts} interleaved starts of each, bytecode caches warm",
        f"  python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}, {load}",
        f"  sessionledger installed {description()}",
        "",
        f"{'workload':<46}{'n':>5}{'p50 ms':>9}{'p95 ms':>9}{'p50 / pass':>12}"
        f"{'target':>13}{'result':>8}{'errors':>8}",
        "-" * 110,
    ]
    for key, label, target in ROWS:
        row = found[key]
        lines.append(
            f"{label:<46}{len(row.seconds):>5}{row.quantile(0.5) * 1e3:>9.1f}"
            f"{row.quantile(0.95) * 1e3:>9.1f}{row.quantile(0.5) / anchor:>12.2f}"
            f"{target:>13}{_met(key, target, found):>8}{row.errors:>8}"
        )
    lines += ["targets: issue 38's acceptance (ratios of p50s; serve in milliseconds; "
              "tools/list within 50 ms of initialize)"]
    return "\n".join(lines)


def _load() -> str:
    try:
        return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load n/a"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--starts", type=int, default=30, help="starts of each workload")
    p.add_argument("--seed", type=int, default=1, help="seed of the rotation")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the files (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="three starts each: a smoke test, numbers meaningless")
    p.add_argument("--install", choices=("wheel", "this"), default="wheel",
                   help="time a user's install (a wheel of this checkout in a new virtual "
                   "environment, the default) or this interpreter's environment as it is")
    p.add_argument("-v", "--verbose", action="store_true", help="progress to stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.starts = 3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.install == "wheel":  # run again under a user's install (bench/user_install.py)
        rest = list(sys.argv[1:] if argv is None else argv)
        return run_installed(__file__, [*rest, "--install", "this"])
    if shutil.which("bash") is None:
        print("bash is needed for its anchor row", file=sys.stderr)
        return 2
    before = _load()
    with tempfile.TemporaryDirectory(prefix="sl-bench-startup-", dir=args.tmp) as tmp_name:
        found = measure(args, Path(tmp_name))
    print(render(args, found, f"{before} before, {_load()} after"))
    return 1 if any(row.errors for row in found.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
