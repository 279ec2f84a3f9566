"""The HTTP stack's cost (issue 24, acceptance 2): the same calls over HTTP and in process.

Run ``.venv/bin/python bench/http.py`` (``--quick`` for a smoke run of a few seconds, numbers
meaningless). The script starts a real ``sessionledger serve`` on 127.0.0.1 over a fresh
SQLite file (``synchronous=FULL``, the default) and measures, interleaved
(``for run: for workload`` in an order rotated each run):

* **sequential** — one keep-alive connection sending one request after another: p50 and p99
  of each request's round trip, beside the same service call made in this process on a
  :class:`~sessionledger.service.sessions.SessionService` of its own (the synchronous face:
  no HTTP, no event loop) over its own SQLite file, the two alternating call by call, so a
  neighbour's load or a slow fsync hits both alike (``HTTP-proc`` is the difference of the
  two p50s: what the HTTP stack adds);
* **throughput** — 8 and 32 keep-alive connections, each sending its next request as soon as
  the last one was answered, for ``--seconds``: requests answered per second, and the p99.

The operations: ``GET /healthz`` (the no-op route: the store's head position), ``TodoWrite``
of 5 items (statuses moving call by call, as a model re-sends its list), ``AskUserQuestion``
(each question denied right after it was asked, so no queue grows; the answer is not timed
in the sequential rows, and is a request of its own in the throughput rows, which count
questions asked) and ``permission-check`` of ``Bash git status`` (a recorded decision). Each
connection has a session of its own.

The clients are raw asyncio HTTP/1.1 keep-alive connections (uvloop when installed), in this
one process: the machine may have 2 cores, and httpx's client costs several times the CPU per
request that the server then lacks. The clients check each answer's status.

The script runs the code beside it (the server's ``PYTHONPATH`` is this checkout), so an older
build is measured by copying the script into its checkout and running it there. Speed is
never asserted in tests. See docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and this file is itself
# called ``http`` (the standard library's package): drop the directory so imports find the
# real ones, and put the checkout first.
_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from typing import Any  # noqa: E402

OPS = ("noop", "todo", "ask", "check")
LABELS = {
    "noop": "no-op GET /healthz",
    "todo": "TodoWrite(5)",
    "ask": "AskUserQuestion",
    "check": "permission-check",
}
STATUS = {"noop": 200, "todo": 200, "ask": 202, "check": 200}
_STATES = ("pending", "in_progress", "completed")
QUESTION = {"questions": [{
    "question": "Which database?", "header": "Database", "multiSelect": False,
    "options": [{"label": "SQLite", "description": "one file"},
                {"label": "Postgres", "description": "a server"}]}]}
CHECK = {"tool": "Bash", "input": {"command": "git status"}}
STARTUP_TIMEOUT_S = 30.0


def todos(client: int, call: int) -> dict[str, Any]:
    """Five items as a model re-sends its list: statuses move forward call by call."""
    done = call % 6
    return {"todos": [
        {"content": f"Step {j + 1} of client {client}: write the part and its test",
         "status": _STATES[2] if j < done else _STATES[1] if j == done else _STATES[0],
         "priority": ("high", "medium", "low")[j % 3]}
        for j in range(5)
    ]}


# --------------------------------------------------------------------------------------------
# The server: this checkout's ``sessionledger serve``.


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(directory: Path) -> Iterator[tuple[int, int]]:
    """``sessionledger serve`` of this checkout on a free loopback port; its port and pid."""
    port = _free_port()
    workspace = directory / "workspace"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    log_path = directory / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sessionledger", "serve", "--port", str(port),
             "--db", f"sqlite:///{directory / 'server.db'}", "--workspace", str(workspace)],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=directory,
        )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not start:\n{log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                 "Connection: close\r\n\r\n".encode())
                    if sock.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            time.sleep(0.05)
        yield port, process.pid
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --------------------------------------------------------------------------------------------
# The clients: raw HTTP/1.1 keep-alive connections.


class Connection(asyncio.Protocol):
    """One keep-alive connection; :meth:`send` answers ``(status, body)``."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.buffer = b""
        self.waiting: asyncio.Future[tuple[int, bytes]] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = self.buffer[:end].lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            raise RuntimeError(f"no content-length: {head[:200]!r}")
        stop = head.find(b"\r\n", at + 2)
        length = int(head[at + 17:stop if stop > 0 else len(head)])
        if len(self.buffer) < end + 4 + length:
            return
        status = int(self.buffer[9:12])
        body = self.buffer[end + 4:end + 4 + length]
        self.buffer = self.buffer[end + 4 + length:]
        waiting, self.waiting = self.waiting, None
        if waiting is not None and not waiting.done():
            waiting.set_result((status, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(ConnectionError(f"connection lost: {exc}"))

    async def send(self, request: bytes) -> tuple[int, bytes]:
        assert self.transport is not None
        self.waiting = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiting


def _get(port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


def _post(port: int, path: str, body: Any) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            ).encode() + data


@dataclass
class Client:
    """One connection with a session of its own, and how many calls it made."""

    port: int
    index: int
    conn: Connection
    session: str = ""
    calls: int = 0
    latencies: list[float] = field(default_factory=list)

    async def create_session(self) -> None:
        status, body = await self.conn.send(_post(self.port, "/v1/sessions", {}))
        if status != 201:
            raise RuntimeError(f"create session: {status} {body[:200]!r}")
        self.session = json.loads(body)["sessionId"]

    def request(self, op: str) -> bytes:
        base = f"/v1/sessions/{self.session}"
        if op == "noop":
            return _get(self.port, "/healthz")
        if op == "todo":
            self.calls += 1
            return _post(self.port, f"{base}/tool-calls",
                         {"tool": "TodoWrite", "input": todos(self.index, self.calls)})
        if op == "ask":
            return _post(self.port, f"{base}/tool-calls",
                         {"tool": "AskUserQuestion", "input": QUESTION})
        return _post(self.port, f"{base}/permission-check", CHECK)

    async def one(self, op: str, *, timed: bool = True) -> None:
        """One operation; its round trip noted. A question is then denied (not timed)."""
        request = self.request(op)
        start = time.perf_counter()
        status, body = await self.conn.send(request)
        elapsed = time.perf_counter() - start
        if status != STATUS[op]:
            raise RuntimeError(f"{op}: {status} {body[:300]!r}")
        if timed:
            self.latencies.append(elapsed)
        if op == "ask":
            iid = json.loads(body)["interactionId"]
            status, body = await self.conn.send(_post(
                self.port, f"/v1/sessions/{self.session}/interactions/{iid}/respond",
                {"decision": "deny"}))
            if status != 200:
                raise RuntimeError(f"respond: {status} {body[:300]!r}")


async def _clients(port: int, count: int, start: int) -> list[Client]:
    loop = asyncio.get_running_loop()
    clients = []
    for i in range(count):
        _transport, conn = await loop.create_connection(Connection, "127.0.0.1", port)
        client = Client(port, start + i, conn)
        await client.create_session()
        clients.append(client)
    return clients


def _close(clients: Sequence[Client]) -> None:
    for client in clients:
        if client.conn.transport is not None:
            client.conn.transport.close()


def _cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system), in seconds."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def sequential(
    port: int, local: InProcess, op: str, count: int, tag: int
) -> tuple[list[float], list[float], float, float]:
    """One connection's round trips and the same call in this process, alternating call by
    call (so the machine's drift hits both alike): both latency lists, and the CPU seconds
    per call of the server and of this thread's in-process calls."""
    (client,) = await _clients(port, 1, tag * 1000)
    sid = local.service.create_session()["sessionId"]
    calls = [0]
    try:
        warm = min(20, count)
        for _ in range(warm):  # the session's first reads, both sides
            await client.one(op, timed=False)
            local.one(op, sid, tag, calls)
        local_latencies = []
        local_cpu = 0.0
        server_cpu = _cpu_s(local.server_pid)
        for _ in range(count):
            await client.one(op)
            cpu = time.thread_time()
            local_latencies.append(local.one(op, sid, tag, calls))
            local_cpu += time.thread_time() - cpu
        server_cpu = _cpu_s(local.server_pid) - server_cpu
        return client.latencies, local_latencies, server_cpu / count, local_cpu / count
    finally:
        _close([client])


async def http_throughput(
    port: int, op: str, clients: int, seconds: float, tag: int
) -> tuple[float, list[float]]:
    """Operations answered per second by ``clients`` connections, and every latency."""
    opened = await _clients(port, clients, tag * 1000)
    stop_at = 0.0
    done = 0

    async def run(client: Client) -> None:
        nonlocal done
        await client.one(op, timed=False)  # warm-up
        while time.perf_counter() < stop_at:
            await client.one(op)
            done += 1

    try:
        start = time.perf_counter()
        stop_at = start + seconds
        await asyncio.gather(*(run(c) for c in opened))
        elapsed = time.perf_counter() - start
        return done / elapsed, [x for c in opened for x in c.latencies]
    finally:
        _close(opened)


# --------------------------------------------------------------------------------------------
# In process: the same calls on a SessionService of this process (the synchronous face).


class InProcess:
    """A :class:`~sessionledger.service.sessions.SessionService` of this process over its own
    SQLite file, for the whole bench (as the server's is), called on this thread."""

    def __init__(self, directory: Path) -> None:
        from sessionledger.service.sessions import SessionService

        directory.mkdir()
        self.service = SessionService.open(f"sqlite:///{directory / 'ledger.db'}",
                                           workspace_root=directory)
        self.server_pid = 0

    def one(self, op: str, sid: str, tag: int, calls: list[int]) -> float:
        """One call's duration; a question is then denied (not timed), as over HTTP."""
        tools = self.service.tools
        asked = None
        start = time.perf_counter()
        if op == "noop":
            self.service.store.head_position()
        elif op == "todo":
            calls[0] += 1
            tools.call(sid, "TodoWrite", todos(tag, calls[0]))
        elif op == "ask":
            answer = tools.call(sid, "AskUserQuestion", QUESTION)
            asked = str(answer.document["interactionId"])
        else:
            tools.permission_check(sid, "Bash", CHECK["input"])
        elapsed = time.perf_counter() - start
        if asked is not None:
            tools.respond(sid, asked, "deny")
        return elapsed

    def close(self) -> None:
        self.service.close()


# --------------------------------------------------------------------------------------------
# The interleaved runs and the table.


@dataclass(frozen=True)
class Workload:
    key: str
    run: Callable[[int, InProcess, int], Any]


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def workloads(args: argparse.Namespace) -> list[Workload]:
    found: list[Workload] = []
    for op in args.ops:
        found.append(Workload(f"seq:{op}", lambda port, local, tag, op=op: _run(
            sequential(port, local, op, args.sequential, tag))))
        for clients in args.clients:
            found.append(Workload(f"c{clients}:{op}", lambda port, _l, tag, op=op,
                                  clients=clients: _run(http_throughput(
                                      port, op, clients, args.seconds, tag))))
    return found


def _run(coro: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, list[Any]]:
    samples: dict[str, list[Any]] = {}
    tag = 0
    local = InProcess(tmp / "in-process")
    try:
        with serving(tmp) as (port, pid):
            local.server_pid = pid
            every = workloads(args)
            for run in range(args.runs):
                shift = (run * 5) % len(every)
                for wl in every[shift:] + every[:shift]:
                    tag += 1
                    result = wl.run(port, local, tag)
                    if wl.key.startswith("seq:"):
                        http, here, server_cpu, local_cpu = result
                        samples.setdefault(wl.key, []).append(http)
                        samples.setdefault(f"proc:{wl.key[4:]}", []).append(here)
                        samples.setdefault(f"cpu:{wl.key[4:]}", []).append(
                            (server_cpu, local_cpu))
                        result = http
                    else:
                        samples.setdefault(wl.key, []).append(result)
                    if args.verbose:
                        print(f"  run {run + 1} {wl.key:10} {_brief(result)}",
                              file=sys.stderr, flush=True)
    finally:
        local.close()
    return samples


def _brief(result: Any) -> str:
    if isinstance(result, tuple):
        return f"{result[0]:,.0f}/s p99 {_percentile(result[1], 0.99) * 1000:.2f} ms"
    return (f"p50 {_percentile(result, 0.5) * 1000:.3f} ms "
            f"p99 {_percentile(result, 0.99) * 1000:.3f} ms")


def render(args: argparse.Namespace, samples: dict[str, list[Any]], load: str) -> str:
    def p(key: str, q: float) -> float:  # median over runs of each run's percentile, in ms
        return statistics.median(_percentile(s, q) for s in samples[key]) * 1000

    def rate(key: str) -> float:
        return statistics.median(s[0] for s in samples[key])

    def tail(key: str) -> float:
        return statistics.median(_percentile(s[1], 0.99) for s in samples[key]) * 1000

    lines = [
        f"HTTP bench: median of {args.runs} interleaved run(s); sequential: {args.sequential} "
        f"requests on one keep-alive connection; throughput: {args.seconds:g} s per "
        "concurrency, each connection its own session; synchronous=FULL",
        f"  python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}",
        f"  {load}",
        "",
    ]
    def cpu(key: str, side: int) -> float:  # median over runs, ms of CPU per call
        return statistics.median(s[side] for s in samples[key]) * 1000

    head = (f"{'operation':<20}{'proc p50':>9}{'p99':>8}{'HTTP p50':>10}{'p99':>8}"
            f"{'HTTP-proc':>10}{'CPU proc':>9}{'server':>8}")
    for c in args.clients:
        head += f"{f'{c} cl./s':>10}{'p99 ms':>8}"
    lines += [head, "-" * len(head)]
    for op in args.ops:
        proc = f"proc:{op}"
        row = f"{LABELS[op]:<20}"
        if proc in samples:
            row += f"{p(proc, 0.5):>9.3f}{p(proc, 0.99):>8.2f}"
        else:
            row += f"{'-':>9}{'-':>8}"
        row += f"{p(f'seq:{op}', 0.5):>10.3f}{p(f'seq:{op}', 0.99):>8.2f}"
        row += (f"{p(f'seq:{op}', 0.5) - p(proc, 0.5):>10.3f}" if proc in samples
                else f"{'-':>10}")
        row += f"{cpu(f'cpu:{op}', 1):>9.3f}{cpu(f'cpu:{op}', 0):>8.3f}"
        for c in args.clients:
            row += f"{rate(f'c{c}:{op}'):>10,.0f}{tail(f'c{c}:{op}'):>8.1f}"
        lines.append(row)
    lines += ["", "ms. CPU proc / server: CPU ms per sequential call in this process and of "
              "the whole server process per request (all its threads; noise of the machine "
              "weighs less on it than on the latencies). AskUserQuestion rows: each question "
              "is denied right after it is asked (untimed in the sequential latency columns; "
              "counted on both sides in the CPU columns; a request of its own in the "
              "throughput columns, which count questions)."]

    top = max(args.clients)
    if not {"noop", "todo"} <= set(args.ops):
        return "\n".join(lines)
    gap_runs = [_percentile(h, 0.5) * 1000 - _percentile(i, 0.5) * 1000
                for h, i in zip(samples["seq:todo"], samples["proc:todo"], strict=True)]
    share_runs = [a[0] / b[0] for a, b in zip(samples[f"c{top}:todo"],
                                              samples[f"c{top}:noop"], strict=True)]
    gap = p("seq:todo", 0.5) - p("proc:todo", 0.5)
    share = rate(f"c{top}:todo") / rate(f"c{top}:noop")
    lines += ["", f"{'ratio (of the medians above)':<52}{'measured':>10}{'per-run range':>16}"
                  f"{'target':>10}{'result':>8}", "-" * 96]
    lines.append(f"{'HTTP TodoWrite(5) p50 - in-process p50 (ms)':<52}{gap:>10.3f}"
                 f"{f'{min(gap_runs):.3f}-{max(gap_runs):.3f}':>16}{'<= 0.30':>10}"
                 f"{'PASS' if gap <= 0.3 else 'MISS':>8}")
    lines.append(f"{f'{top}-client TodoWrite/s / no-op/s':<52}{share:>10.3f}"
                 f"{f'{min(share_runs):.2f}-{max(share_runs):.2f}':>16}{'>= 0.50':>10}"
                 f"{'PASS' if share >= 0.5 else 'MISS':>8}")
    return "\n".join(lines)


def _loadavg() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="interleaved runs (median is shown)")
    p.add_argument("--sequential", type=int, default=2000,
                   help="requests per sequential sample")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="duration of each throughput sample")
    p.add_argument("--clients", default="8,32", help="concurrencies, comma-separated")
    p.add_argument("--ops", default=",".join(OPS),
                   help=f"operations, comma-separated (of {', '.join(OPS)}; the ratios need "
                   "noop and todo)")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the database files (default: system temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="tiny counts and one run: a smoke test, numbers meaningless")
    p.add_argument("-v", "--verbose", action="store_true", help="every sample to stderr")
    args = p.parse_args(argv)
    args.clients = [int(c) for c in args.clients.split(",")]
    args.ops = [op for op in OPS if op in args.ops.split(",")]
    if args.quick:
        args.runs, args.sequential, args.seconds = 1, 30, 0.3
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    load_before = _loadavg()
    with tempfile.TemporaryDirectory(prefix="sl-bench-", dir=args.tmp) as tmp:
        samples = measure(args, Path(tmp))
    print(render(args, samples, f"1-min load average {load_before} before, {_loadavg()} after"))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
