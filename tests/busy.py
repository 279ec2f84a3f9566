"""Run a command on a busy machine: CPU-bound and fsync-heavy processes beside it (issue 36).

    python tests/busy.py [--cpu 2] [--fsync 1] -- make test

starts ``--cpu`` processes that spin on the CPU and ``--fsync`` processes that write and
``fsync`` a small file in a loop (in a temporary directory beside nothing of the project's),
runs the command, then stops them and removes what they wrote — also when the command fails
or this script is interrupted. It prints the load average it saw and how long the command
took, and exits with the command's status. A test that fails here and passes on an idle
machine depends on the machine's speed: fix the test or the code, not the timeout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

SPIN = "while True:\n    pass\n"

FSYNC = """\
import os, sys
path = os.path.join(sys.argv[1], "fsync.bin")
block = os.urandom(4096)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
n = 0
while True:
    os.write(fd, block)
    os.fsync(fd)
    n += 1
    if n % 256 == 0:  # keep the file small: a mebibyte, rewritten for ever
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
"""


def start_load(cpu: int, fsync: int, directory: str) -> list[subprocess.Popen[bytes]]:
    """The load processes, each in its own session so that a stop reaches all of it."""
    commands = [[sys.executable, "-c", SPIN]] * cpu
    commands += [[sys.executable, "-c", FSYNC, tempfile.mkdtemp(dir=directory)]
                 for _ in range(fsync)]
    return [subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
            for command in commands]


def stop_load(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
    for process in processes:
        process.wait()


class LoadWatch:
    """Samples the 1-minute load average every few seconds while the command runs."""

    def __init__(self, every_s: float = 5.0) -> None:
        self.samples: list[float] = []
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", type=int, default=2, help="CPU-bound processes (2)")
    parser.add_argument("--fsync", type=int, default=1, help="fsync-heavy processes (1)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if args.cpu < 0 or args.fsync < 0:
        parser.error("--cpu and --fsync count processes: 0 or more")

    directory = tempfile.mkdtemp(prefix="busy-")
    # An interrupt or a TERM ends the command, then the finally below stops the load.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes = start_load(args.cpu, args.fsync, directory)
        started = time.monotonic()
        with LoadWatch() as watch:
            status = subprocess.call(command)
        took = time.monotonic() - started
    finally:
        stop_load(processes)
        shutil.rmtree(directory, ignore_errors=True)
    loads = watch.samples or [os.getloadavg()[0]]
    print(
        f"busy: {args.cpu} CPU-bound + {args.fsync} fsync-heavy processes beside "
        f"`{' '.join(command)}`: exit {status} after {took:.0f} s; load average "
        f"{min(loads):.1f} to {max(loads):.1f} (median {sorted(loads)[len(loads) // 2]:.1f})",
        file=sys.stderr,
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
