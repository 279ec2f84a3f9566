"""Load over HTTP: concurrent writers and 100 SSE subscribers against a real server (issue 10).

Run ``.venv/bin/python bench/load.py`` (``--quick`` for a smoke run of a few seconds). It
starts the installed ``sessionledger serve`` on a free loopback port over a fresh SQLite file
(the default ``synchronous=FULL``) and a temporary workspace, then runs two phases, each step
with fresh sessions and freshly connected subscribers (the target run first, on a fresh log;
the table shows it second):

(a) throughput sweep: for N in ``--clients`` (1, 8, 32, 64), N closed-loop clients, each with
    its own session, alternate a ``TodoWrite`` of 10 items (four events) and a mode cycle (one
    event) for ``--duration`` seconds while ``--subscribers`` (100) clients follow
    ``/v1/events/stream``;
(b) SSE target: the same writes paced open-loop at ``--rate`` (100) *events* per second (a
    TodoWrite counts four, a mode change one) by ``--rate-clients`` (8) clients, against the
    target of p99 delivery under 100 ms.

Three kinds of process share the machine with the server: one writer process (asyncio and
httpx), ``--subscriber-procs`` (2) subscriber processes (asyncio protocols on raw connections
that only read each frame's ``id:``), and this orchestrator, idle while a step runs. Their
CPU is printed beside the server's.

Delivery latency is the time a subscriber received an event minus the time the client sent the
request that appended it (the same host's wall clock in two processes). After a step the
orchestrator reads each session's events back over HTTP and matches them, in ``seq`` order, to
that session's acknowledged requests (a TodoWrite's four by its ``callId``, a mode change's one
by the version it answered with): a mismatch, a lost or an extra event counts as an error.
Sending, not acknowledging, is the reference, so the figure includes the request's own time on
the server and is an upper bound on the delivery itself; the table also shows the part after
the commit (receive minus the event's ``recordedAt``, which is in milliseconds, truncated).
Every subscriber must receive every event of the step; one it did not is ``undelivered``.
See docs/performance.md and docs/decisions.md D97 to D99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path and holds ``http.py``, which
# would shadow the standard library's ``http`` package (httpx imports ``http.client``).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import httpx  # noqa: E402
import psutil  # noqa: E402

TARGET_MS = 100.0
TODO_EVENTS = 4  # ToolCallRequested, PermissionDecided, TodosWritten, ToolCallCompleted
MODE_EVENTS = 1  # SessionModeChanged
EVENTS = {"todo": TODO_EVENTS, "mode": MODE_EVENTS}
ITEMS = 10
STARTUP_TIMEOUT_S = 20.0
_PRIORITIES = ("high", "medium", "low")


# --------------------------------------------------------------------------------------------
# The server.


@contextmanager
def running_server(directory: Path) -> Iterator[tuple[str, psutil.Process]]:
    """The installed ``sessionledger serve`` on a free loopback port; SIGTERM on exit."""
    script = Path(sys.executable).parent / "sessionledger"
    workspace = directory / "workspace"
    workspace.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "SESSIONLEDGER_DB"}
    command = [str(script), "serve", "--port", str(port), "--workspace", str(workspace),
               "--db", f"sqlite:///{directory / 'ledger.db'}"]
    log_path = directory / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url, process, log_path)
        yield base_url, psutil.Process(process.pid)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server did not start:\n{log.read_text(errors='replace')}")


# --------------------------------------------------------------------------------------------
# Subscribers (their own processes): every frame's id and the wall-clock time it arrived.


_FRAME_ID = re.compile(rb"\nid: (\d+)\n")


class _Subscriber(asyncio.Protocol):
    """One ``GET /v1/events/stream`` on a raw connection: notes when each ``id:`` arrived.

    Lean, as a browser's native EventSource is (a third of the CPU that reading the same
    streams with httpx took, which then delayed the receipts it measured): the chunked
    framing between pages stays in the buffer, since no line of an event but its ``id:``
    line starts with ``id:``, and JSON data has no bare newline.
    """

    def __init__(self, got: dict[int, float]) -> None:
        self.got = got
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.buffer = b""
        self.headers_done = False

    def data_received(self, data: bytes) -> None:
        now = time.time()
        buffer = self.buffer + data
        if not self.headers_done:
            if self.ready.done():  # refused: the error is reported already
                return
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 200 "):
                self.ready.set_exception(RuntimeError(buffer[:200].decode(errors="replace")))
                return
            self.headers_done = True
            self.ready.set_result(None)
            buffer = buffer[end + 4:]
        cut = buffer.rfind(b"\n\n") + 2  # after the last whole frame (0: none yet)
        for match in _FRAME_ID.finditer(buffer, 0, max(cut - 1, 0)):
            self.got[int(match[1])] = now
        self.buffer = buffer[cut:] if cut > 1 else buffer

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"stream closed: {exc}"))


async def _subscribe(base_url: str, count: int, after: int, conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    host, port = base_url.removeprefix("http://").split(":")
    request = (f"GET /v1/events/stream?after={after} HTTP/1.1\r\nHost: {host}:{port}\r\n"
               "Accept: text/event-stream\r\n\r\n").encode()
    received: list[dict[int, float]] = [{} for _ in range(count)]
    streams = []
    for got in received:
        transport, stream = await loop.create_connection(
            lambda got=got: _Subscriber(got), host, int(port))
        transport.write(request)
        streams.append((transport, stream))
    try:
        await asyncio.gather(*(stream.ready for _t, stream in streams))
        conn.send("ready")
        cpu = time.process_time()
        last, wait_s = await loop.run_in_executor(None, conn.recv)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and not all(last in got for got in received):
            await asyncio.sleep(0.02)
    finally:
        for transport, _stream in streams:
            transport.close()
    conn.send((time.process_time() - cpu, received))


def subscriber_process(base_url: str, count: int, after: int, conn: Connection) -> None:
    """Entry point of a subscriber process: ``ready``, then its receipts once told to stop."""
    asyncio.run(_subscribe(base_url, count, after, conn))


# --------------------------------------------------------------------------------------------
# Writers (one process): N clients, each with its own session.


def todo_list(client: int, call: int) -> list[dict[str, str]]:
    """A 10-item list as a model re-sends it: statuses move forward call by call."""
    done = call % (ITEMS + 1)
    return [{"content": f"Step {j + 1} of the load plan for client {client}: check the stream",
             "status": "completed" if j < done else "in_progress" if j == done else "pending",
             "priority": _PRIORITIES[j % 3]} for j in range(ITEMS)]


@dataclass
class Client:
    """One writer: its session, its next request, and what each request did."""

    index: int
    http: httpx.AsyncClient
    session: str
    calls: int = 0
    records: list[tuple[Any, ...]] = field(default_factory=list)

    def next_kind(self) -> str:
        return "todo" if self.calls % 2 == 0 else "mode"

    async def step(self) -> None:
        kind = self.next_kind()
        self.calls += 1
        base = f"/v1/sessions/{self.session}"
        if kind == "todo":
            url, body = f"{base}/tool-calls", {
                "tool": "TodoWrite", "input": {"todos": todo_list(self.index, self.calls)}}
        else:
            url, body = f"{base}/mode", {"cycle": True}
        sent = time.time()
        started = time.perf_counter()
        try:
            response = await self.http.post(url, json=body)
            elapsed = time.perf_counter() - started
            answer = response.json() if response.status_code == 200 else {}
            key = answer.get("callId") if kind == "todo" else answer.get("version")
            ok = response.status_code == 200 and key is not None
            note = "" if ok else f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            elapsed, key, ok, note = time.perf_counter() - started, None, False, repr(exc)
        self.records.append((kind, sent, elapsed, ok, key, note))


async def _closed_loop(clients: list[Client], duration: float) -> None:
    end = time.monotonic() + duration

    async def run(client: Client) -> None:
        while time.monotonic() < end:
            await client.step()

    await asyncio.gather(*(run(c) for c in clients))


async def _paced(clients: list[Client], duration: float, rate: float) -> None:
    """Open loop: the next request starts when its events are due at ``rate`` events/s."""
    idle: asyncio.Queue[Client] = asyncio.Queue()
    for client in clients:
        idle.put_nowait(client)
    running: set[asyncio.Task[None]] = set()

    async def run(client: Client) -> None:
        await client.step()
        idle.put_nowait(client)

    due = start = time.monotonic()
    while due < start + duration:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        client = await idle.get()
        due += EVENTS[client.next_kind()] / rate
        task = asyncio.create_task(run(client))
        running.add(task)
        task.add_done_callback(running.discard)
    await asyncio.gather(*running)


async def _write(base_url: str, count: int, duration: float, rate: float | None
                 ) -> dict[str, Any]:
    # One connection per client, each its own httpx client: a shared pool of 64 connections
    # made the writer process, not the server, the bottleneck (D99).
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with AsyncExitStack() as stack:
        clients = []
        for i in range(count):
            http = await stack.enter_async_context(
                httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60.0))
            response = await http.post("/v1/sessions", json={})
            response.raise_for_status()
            clients.append(Client(i, http, response.json()["sessionId"]))
        cpu, started = time.process_time(), time.perf_counter()
        if rate is None:
            await _closed_loop(clients, duration)
        else:
            await _paced(clients, duration, rate)
        wall = time.perf_counter() - started
    return {"sessions": [c.session for c in clients], "records": [c.records for c in clients],
            "wall": wall, "cpu": time.process_time() - cpu}


def writer_process(base_url: str, count: int, duration: float, rate: float | None,
                   conn: Connection) -> None:
    """Entry point of the writer process: sends what every client did."""
    conn.send(asyncio.run(_write(base_url, count, duration, rate)))


# --------------------------------------------------------------------------------------------
# One step: subscribers attach, writers write, the log is matched to the requests.


@dataclass
class Step:
    """What one step measured (milliseconds, per second)."""

    clients: int
    paced: bool
    requests: int = 0
    seconds: float = 0.0
    req_per_s: float = 0.0
    events_per_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    errors: int = 0
    deliveries: int = 0
    undelivered: int = 0
    delivery_p50_ms: float = 0.0
    delivery_p99_ms: float = 0.0
    delivery_max_ms: float = 0.0
    after_commit_p99_ms: float = 0.0
    server_cpu_pct: float = 0.0
    writers_cpu_pct: float = 0.0
    subscribers_cpu_pct: float = 0.0
    error_samples: list[str] = field(default_factory=list)


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def session_events(base_url: str, session: str) -> list[dict[str, Any]]:
    """Every event of one session, read back over HTTP page by page."""
    events: list[dict[str, Any]] = []
    with httpx.Client(base_url=base_url, timeout=60.0) as http:
        while True:
            page = http.get(f"/v1/sessions/{session}/events",
                            params={"after": len(events), "limit": 1000})
            page.raise_for_status()
            body = page.json()
            events += body["events"]
            if len(events) >= body["version"] or not body["events"]:
                return events


def match(records: list[tuple[Any, ...]], events: list[dict[str, Any]]
          ) -> tuple[dict[int, tuple[float, float]], list[str]]:
    """Position → (request sent, recordedAt) for one session; and what did not match."""
    sent: dict[int, tuple[float, float]] = {}
    problems = [f"{kind} after {elapsed * 1e3:.1f} ms: {note}"
                for kind, _at, elapsed, ok, _key, note in records if not ok]
    rest = events[1:]  # after SessionCreated
    for kind, at, _elapsed, ok, key, _note in records:
        if not ok:
            continue
        mine, rest = rest[:EVENTS[kind]], rest[EVENTS[kind]:]
        expected = (mine and mine[-1]["seq"] == key and mine[0]["type"] == "SessionModeChanged"
                    if kind == "mode" else
                    len(mine) == TODO_EVENTS
                    and all(e["data"].get("callId") == key for e in (mine[0], mine[-1]))
                    and mine[-1]["type"] == "ToolCallCompleted")
        if not expected:
            problems.append(f"{kind} {key}: events {[e['type'] for e in mine]} do not match")
            continue
        for event in mine:
            recorded = datetime.fromisoformat(event["recordedAt"]).timestamp()
            sent[event["globalPosition"]] = (at, recorded)
    problems += [f"unexpected {e['type']} seq {e['seq']}" for e in rest]
    return sent, problems


def run_step(base_url: str, server: psutil.Process, args: argparse.Namespace,
             clients: int, after: int, rate: float | None) -> tuple[Step, int]:
    """One step; returns its figures and the last global position it wrote."""
    ctx = multiprocessing.get_context("spawn")
    shares = [args.subscribers // args.subscriber_procs + (i < args.subscribers
              % args.subscriber_procs) for i in range(args.subscriber_procs)]
    subs = []
    for share in (s for s in shares if s):
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=subscriber_process, args=(base_url, share, after, theirs))
        proc.start()
        subs.append((proc, mine))
    try:
        for _proc, conn in subs:
            if not conn.poll(60) or conn.recv() != "ready":
                raise RuntimeError("subscribers did not connect")
        mine, theirs = ctx.Pipe()
        writer = ctx.Process(target=writer_process,
                             args=(base_url, clients, args.duration, rate, theirs))
        cpu_before = sum(server.cpu_times()[:2])
        writer.start()
        written = mine.recv()
        server_cpu = sum(server.cpu_times()[:2]) - cpu_before
        writer.join()
        step, sent = _account(base_url, clients, rate is not None, written)
        last = max(sent, default=after)
        for _proc, conn in subs:
            conn.send((last, args.catch_up))
        answers = [conn.recv() for _proc, conn in subs]
    finally:
        for proc, _conn in subs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    _deliveries(step, sent, [got for _cpu, received in answers for got in received])
    # Subscribers' CPU counts until the last of them got the last event (catch-up included).
    wall = written["wall"]
    step.server_cpu_pct = 100 * server_cpu / wall
    step.writers_cpu_pct = 100 * written["cpu"] / wall
    step.subscribers_cpu_pct = 100 * sum(cpu for cpu, _received in answers) / wall
    return step, last


def _account(base_url: str, clients: int, paced: bool, written: dict[str, Any]
             ) -> tuple[Step, dict[int, tuple[float, float]]]:
    step = Step(clients=clients, paced=paced)
    sent: dict[int, tuple[float, float]] = {}
    problems: list[str] = []
    latencies: list[float] = []
    for session, records in zip(written["sessions"], written["records"], strict=True):
        matched, wrong = match(records, session_events(base_url, session))
        sent.update(matched)
        problems += wrong
        latencies += [r[2] for r in records]
    step.requests, step.seconds = len(latencies), written["wall"]
    step.req_per_s = step.requests / step.seconds
    step.events_per_s = len(sent) / step.seconds
    step.p50_ms, step.p99_ms = quantile(latencies, 0.5) * 1e3, quantile(latencies, 0.99) * 1e3
    step.errors, step.error_samples = len(problems), problems[:5]
    return step, sent


def _deliveries(step: Step, sent: dict[int, tuple[float, float]],
                receipts: list[dict[int, float]]) -> None:
    delays: list[float] = []
    after_commit: list[float] = []
    for got in receipts:
        for position, (at, recorded) in sent.items():
            received = got.get(position)
            if received is None:
                step.undelivered += 1
                continue
            delays.append(received - at)
            after_commit.append(received - recorded)
    step.deliveries = len(delays)
    step.delivery_p50_ms = quantile(delays, 0.5) * 1e3
    step.delivery_p99_ms = quantile(delays, 0.99) * 1e3
    step.delivery_max_ms = max(delays, default=0.0) * 1e3
    step.after_commit_p99_ms = quantile(after_commit, 0.99) * 1e3


# --------------------------------------------------------------------------------------------
# Orchestration and printout.


def render(args: argparse.Namespace, sweep: list[Step], target: Step, note: str) -> str:
    lines = [
        f"load bench: sessionledger serve on loopback, SQLite synchronous=FULL (the default); "
        f"{args.subscribers} SSE subscribers on /v1/events/stream in "
        f"{args.subscriber_procs} process(es), writers in one process",
        f"  python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.machine()}",
        f"  {note}",
        "",
        f"(a) throughput sweep: closed-loop clients, {args.duration:g} s per step, "
        f"alternating TodoWrite ({ITEMS} items, {TODO_EVENTS} events) and a mode cycle (1 event)",
        "",
        f"{'clients':>7}{'requests':>10}{'req/s':>8}{'events/s':>10}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'errors':>8}{'undeliv.':>9}{'deliv p50':>11}{'deliv p99':>11}{'CPU % srv/wr/sub':>18}",
        "-" * 108,
    ]
    for s in sweep:
        lines.append(
            f"{s.clients:>7}{s.requests:>10,}{s.req_per_s:>8,.0f}{s.events_per_s:>10,.0f}"
            f"{s.p50_ms:>8.1f}{s.p99_ms:>8.1f}{s.errors:>8}{s.undelivered:>9}"
            f"{s.delivery_p50_ms:>11.1f}{s.delivery_p99_ms:>11.1f}{cpu_note(s):>18}")
    passed = target_passed(target)
    lines += [
        "",
        f"(b) SSE delivery target: {args.rate:g} events/s paced over {target.clients} clients, "
        f"{args.subscribers} subscribers, {args.duration:g} s",
        "",
        f"{'events/s':>9}{'requests':>10}{'p99 ms':>8}{'errors':>8}{'undeliv.':>9}"
        f"{'deliveries':>12}{'deliv p50':>11}{'deliv p99':>11}{'deliv max':>11}"
        f"{'commit→recv p99':>17}{'target':>10}{'result':>8}",
        "-" * 124,
        f"{target.events_per_s:>9,.0f}{target.requests:>10,}{target.p99_ms:>8.1f}"
        f"{target.errors:>8}{target.undelivered:>9}{target.deliveries:>12,}"
        f"{target.delivery_p50_ms:>11.1f}{target.delivery_p99_ms:>11.1f}"
        f"{target.delivery_max_ms:>11.1f}{target.after_commit_p99_ms:>17.1f}"
        f"{f'< {TARGET_MS:g} ms':>10}{'PASS' if passed else 'FAIL':>8}",
        "",
        "delivery (ms): subscriber's receipt minus the writer's send of the request; "
        "commit→recv: receipt minus recordedAt",
        f"CPU of the target run, % of one core: {cpu_note(target)} "
        "(server / writer process / subscriber processes)",
    ]
    for s in [*sweep, target]:
        lines += [f"  error ({s.clients} clients): {e}" for e in s.error_samples]
    return "\n".join(lines)


def cpu_note(step: Step) -> str:
    return (f"{step.server_cpu_pct:.0f}/{step.writers_cpu_pct:.0f}/"
            f"{step.subscribers_cpu_pct:.0f}")


def target_passed(step: Step) -> bool:
    return (step.delivery_p99_ms < TARGET_MS and step.errors == 0 and step.undelivered == 0
            and step.deliveries > 0)


def server_complaints(log: Path) -> list[str]:
    """The server's log lines above ``info`` (and any that are not JSON), at most 20."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            quiet = json.loads(line).get("level") in ("debug", "info")
        except ValueError:  # not JSON: a complaint, unless one of serve's lines for a person
            quiet = line.startswith(("sessionledger serving http", "created a new event store"))
        if not quiet:
            found.append(line[:300])
    return found[:20]


def _loadavg() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=lambda s: [int(n) for n in s.split(",") if n],
                   default=[1, 8, 32, 64],
                   help="comma-separated writer counts of the sweep ('' for none)")
    p.add_argument("--duration", type=float, default=15.0, help="seconds of writing per step")
    p.add_argument("--subscribers", type=int, default=100, help="SSE subscribers per step")
    p.add_argument("--subscriber-procs", type=int, default=2,
                   help="processes the subscribers are spread over")
    p.add_argument("--rate", type=float, default=100.0,
                   help="events/s of the SSE target run (b)")
    p.add_argument("--rate-clients", type=int, default=8, help="writers of the target run")
    p.add_argument("--catch-up", type=float, default=120.0,
                   help="seconds subscribers may take after the writers stop")
    p.add_argument("--tmp", type=Path, default=None,
                   help="directory for the server's files (default: system temp dir)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes: a smoke test, numbers meaningless")
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.duration, args.subscribers = [1, 2], 1.0, 3
        args.subscriber_procs, args.rate, args.rate_clients = 1, 20.0, 2
    args.subscriber_procs = max(1, min(args.subscriber_procs, args.subscribers))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    load_before = _loadavg()
    with tempfile.TemporaryDirectory(prefix="sl-bench-load-", dir=args.tmp) as tmp, \
            running_server(Path(tmp)) as (base_url, server):
        log = Path(tmp) / "server.log"
        # The target run first: it is the one with a target, and a fresh log.
        target, after = run_step(base_url, server, args, args.rate_clients, 0, args.rate)
        sweep = []
        for clients in args.clients:
            step, after = run_step(base_url, server, args, clients, after, None)
            sweep.append(step)
        complaints = server_complaints(log)
    note = f"1-min load average {load_before} before, {_loadavg()} after"
    print(render(args, sweep, target, note))
    if complaints:
        print("\nserver log, warnings and errors:\n" + "\n".join(complaints))
    print(f"\n(total wall time {time.perf_counter() - started:.0f} s)")
    if args.json is not None:
        args.json.write_text(json.dumps(
            {"sweep": [asdict(s) for s in sweep], "target": asdict(target),
             "passed": target_passed(target), "load": note}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
