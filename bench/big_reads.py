"""Big data read by a real ``serve``: the paged session list and the audit of a long session.

Run ``.venv/bin/python bench/big_reads.py`` (defaults: 20,000 sessions and one session of
200,000 events; ``--quick`` for a smoke run of 2,000 and 20,000). It writes a SQLite log
through the projected store (as ``serve`` would have: every read model updated inline):

* ``--sessions`` small sessions (created, one user message; every 100th with a question
  waiting, so the waiting filter has something to find), and
* one session ``sess_big`` of ``--events`` events: rounds of a user message, a ``Read`` tool
  call requested and completed, and an assistant message.

Then it starts ``sessionledger serve`` over the file on a free loopback port and, while a
thread asks ``/healthz`` every 20 ms and another samples the server's RSS every 20 ms:

1. lists every session page by page (``GET /v1/sessions?limit=…&cursor=…``) and the waiting
   ones (``?waiting=true``);
2. audits ``sess_big`` (``GET /v1/sessions/sess_big/audit``) once, then three at once.

Anchors, run side by side in the same run: the server's idle RSS (what an audit adds is the
difference), and the typed replay of ``sess_big`` (``store.read_session``) in a fresh process,
for the audit's time. Targets (issue 41 acceptance 4): audit RSS under 150 MB, three at once
under 300 MB, ``/healthz`` p99 under 100 ms throughout. ``sessionledger audit sess_big`` (the
CLI) is measured in a fresh process too (its peak RSS, ``VmHWM``). See docs/performance.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_HERE.parent) not in sys.path:
    sys.path.append(str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402
import psutil  # noqa: E402

from eventlog import (  # noqa: E402
    AppendBatch,
    Event,
    InteractionRequested,
    MessageRecorded,
    NewEvent,
    SessionCreated,
    ToolCallCompleted,
    ToolCallRequested,
)
from projections import open_projected_store  # noqa: E402

BIG = "sess_big"
SAMPLE_S = 0.02
QUESTION = {"questions": [{"question": "Which database?", "header": "DB", "multiSelect": False,
                           "options": [{"label": "SQLite", "description": "embedded"},
                                       {"label": "PostgreSQL", "description": "a server"}]}]}


def _small(index: int) -> list[Event]:
    events: list[Event] = [SessionCreated(workspace=f"/work/project-{index % 50}"),
                           MessageRecorded(role="user", content=f"task number {index}")]
    if index % 100 == 0:
        call = f"call_w{index:06d}"
        events += [
            ToolCallRequested(call_id=call, tool="AskUserQuestion", input=QUESTION,
                              host="protocol"),
            InteractionRequested(interaction_id=f"int_w{index:06d}", call_id=call,
                                 kind="askUserQuestion", payload=QUESTION),
        ]
    return events


def _round(index: int) -> list[Event]:
    call = f"call_{index:08d}"
    path = f"/work/project/src/module_{index % 700}.py"
    return [
        MessageRecorded(role="user", content=f"look at {path} and tell me what it does"),
        ToolCallRequested(call_id=call, tool="Read", input={"file_path": path},
                          host="protocol"),
        ToolCallCompleted(call_id=call, tool="Read", status="completed", success=True,
                          result={"lines": 120}, model_content="def main():\n    ...\n" * 8),
        MessageRecorded(role="assistant", content="It parses the arguments and runs. " * 3),
    ]


def build(path: Path, sessions: int, events: int) -> float:
    started = time.perf_counter()
    store, _ = open_projected_store(f"sqlite:///{path}?synchronous=normal")
    try:
        batches = [AppendBatch(f"sess_{i:06d}", tuple(NewEvent(e, actor="user")
                                                        for e in _small(i)))
                   for i in range(sessions)]
        for start in range(0, len(batches), 2000):
            store.append_many(batches[start:start + 2000])
        store.append(BIG, [NewEvent(SessionCreated(workspace="/work/project"), actor="user")])
        rounds = (events - 1) // 4
        group: list[NewEvent] = []
        for index in range(rounds):
            group += [NewEvent(e, actor="user") for e in _round(index)]
            if len(group) >= 4000:
                store.append(BIG, group)
                group = []
        if group:
            store.append(BIG, group)
    finally:
        store.close()
    return time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(path: Path, directory: Path) -> Iterator[tuple[str, psutil.Process]]:
    port = _free_port()
    command = [str(Path(sys.executable).parent / "sessionledger"), "serve", "--db",
               f"sqlite:///{path}", "--port", str(port)]
    env = {**os.environ, "SESSIONLEDGER_HOOK_WRITER": "off"}
    with open(directory / "serve.log", "wb") as log:
        process = subprocess.Popen(command, cwd=directory, stdout=log, stderr=subprocess.STDOUT,
                                   env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("serve did not start:\n" + (directory / "serve.log").read_text())
            time.sleep(0.1)
        yield base, psutil.Process(process.pid)
    finally:
        process.terminate()
        process.wait(30)


class Watch:
    """``/healthz`` latencies and the server's RSS, sampled in threads while a step runs."""

    def __init__(self, base: str, server: psutil.Process) -> None:
        self.base, self.server = base, server
        self.health: list[float] = []
        self.rss: list[float] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._probe), threading.Thread(target=self._rss)]

    def _probe(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as http:
            while not self._stop.is_set():
                started = time.perf_counter()
                http.get("/healthz")
                self.health.append(time.perf_counter() - started)
                self._stop.wait(SAMPLE_S)

    def _rss(self) -> None:
        while not self._stop.is_set():
            self.rss.append(self.server.memory_info().rss / 2**20)
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> Watch:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def p99_ms(self) -> float:
        ordered = sorted(self.health)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000 if ordered else 0.0


def step(base: str, server: psutil.Process, action: Callable[[], Any]) -> dict[str, Any]:
    with Watch(base, server) as watch:
        started = time.perf_counter()
        result = action()
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "peak_mb": max(watch.rss), "p99_ms": watch.p99_ms(),
            "result": result}


def list_pages(base: str, limit: int, *, waiting: bool = False) -> dict[str, Any]:
    pages, listed, largest, cursor = 0, 0, 0, None
    with httpx.Client(base_url=base, timeout=60) as http:
        while True:
            params: dict[str, Any] = {"limit": limit}
            if cursor is not None:
                params["cursor"] = cursor
            if waiting:
                params["waiting"] = "true"
            response = http.get("/v1/sessions", params=params)
            response.raise_for_status()
            body = response.json()
            pages += 1
            listed += len(body["sessions"])
            largest = max(largest, len(response.content))
            cursor = body.get("next")
            if cursor is None:
                return {"pages": pages, "sessions": listed, "largest_kb": largest / 1024}


def audit(base: str, copies: int) -> list[bool]:
    def one() -> bool:
        with httpx.Client(base_url=base, timeout=600) as http:
            response = http.get(f"/v1/sessions/{BIG}/audit")
            response.raise_for_status()
            return bool(response.json()["ok"])

    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(one())) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(path: Path) -> None:
    """The anchor: the typed replay of sess_big in this fresh process."""
    from eventlog import open_store

    store = open_store(f"sqlite:///{path}")
    started = time.perf_counter()
    count = sum(1 for event in store.read_session(BIG) if event.data is not None)
    print(json.dumps({"events": count, "seconds": time.perf_counter() - started,
                      "peak_mb": _peak_mb()}))


def cli_audit(path: Path) -> dict[str, float]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "sessionledger"), "audit", BIG, "--db",
         f"sqlite:///{path}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    handle = psutil.Process(process.pid)
    peak = 0.0
    while process.poll() is None:
        try:
            peak = max(peak, handle.memory_info().rss / 2**20)
        except psutil.NoSuchProcess:
            break
        time.sleep(SAMPLE_S)
    return {"seconds": time.perf_counter() - started, "peak_mb": peak,
            "exit": float(process.returncode)}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--page", type=int, default=200, help="sessions per list page")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tmp", type=Path, default=None, help="scratch directory")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    if args.quick:
        args.sessions, args.events = 2_000, 20_000
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        directory = Path(tmp)
        path = directory / "ledger.db"
        took = build(path, args.sessions, args.events)
        print(f"big reads: {args.sessions:,} sessions and one of {args.events:,} events, "
              f"built in {took:.1f} s ({path.stat().st_size / 2**20:.0f} MB)")
        replay = json.loads(subprocess.run(
            [sys.executable, __file__, "--child", str(path)], check=True, capture_output=True,
            text=True).stdout.strip().splitlines()[-1])
        rows: list[tuple[str, dict[str, Any]]] = []
        with serving(path, directory) as (base, server):
            time.sleep(1)
            idle = server.memory_info().rss / 2**20
            rows.append(("list every session, page by page",
                         step(base, server, lambda: list_pages(base, args.page))))
            rows.append(("list the waiting sessions",
                         step(base, server, lambda: list_pages(base, args.page, waiting=True))))
            rows.append(("audit sess_big", step(base, server, lambda: audit(base, 1))))
            rows.append(("three audits of sess_big at once",
                         step(base, server, lambda: audit(base, 3))))
        cli = cli_audit(path)
    print(f"server idle RSS {idle:.0f} MB; anchor: typed replay of sess_big in a fresh process "
          f"{replay['seconds']:.2f} s, peak RSS {replay['peak_mb']:.0f} MB")
    print(f"{'step':<36}{'seconds':>9}{'x replay':>10}{'peak RSS MB':>13}"
          f"{'healthz p99 ms':>16}  result")
    for name, row in rows:
        print(f"{name:<36}{row['seconds']:>9.2f}{row['seconds'] / replay['seconds']:>10.2f}"
              f"{row['peak_mb']:>13.0f}{row['p99_ms']:>16.1f}  {row['result']}")
    print(f"{'CLI: sessionledger audit sess_big':<36}{cli['seconds']:>9.2f}"
          f"{cli['seconds'] / replay['seconds']:>10.2f}{cli['peak_mb']:>13.0f}{'':>16}  "
          f"exit {int(cli['exit'])}")
    audits = {name: row for name, row in rows if name.startswith(("audit", "three"))}
    one, three = audits["audit sess_big"], audits["three audits of sess_big at once"]
    worst = max(row["p99_ms"] for _, row in rows)
    print(f"targets: one audit < 150 MB: {one['peak_mb']:.0f} "
          f"{'PASS' if one['peak_mb'] < 150 else 'MISS'}; three < 300 MB: "
          f"{three['peak_mb']:.0f} {'PASS' if three['peak_mb'] < 300 else 'MISS'}; "
          f"healthz p99 < 100 ms: {worst:.1f} {'PASS' if worst < 100 else 'MISS'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
