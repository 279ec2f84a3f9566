"""bash as the oracle of what a shell command does (issue 37).

:class:`Sandbox` runs a command with a real ``bash`` or ``sh`` (Debian's dash) inside
bubblewrap — a throwaway workspace bound read-write, the rest of the file system read-only, a
fresh tmpfs for ``/tmp`` and ``$HOME``, no network, its own process namespace — under
``strace -ff`` recording every system call that could create, change or delete a file, set
the clock, or run a program. :meth:`Sandbox.run` answers the :class:`Finding` s: each such
call (whether or not the kernel let it succeed), each ``execve`` of a program outside the
allowed set, and any change to the workspace's files (compared before and after; a changed
workspace is rebuilt from its recipe so the next run starts the same).

What may happen without a finding is small and written here once: opening the terminal and
the null device for writing (bash opens ``/dev/tty`` when it starts), and running the shells
and the programs the caller names (the read-only allow-list, plus what those programs run
themselves, such as the interpreter of ``npm``'s ``#!/usr/bin/env node``).

The sandbox needs ``bwrap`` and ``strace`` (``apt-get install bubblewrap strace``; .ci/run
installs them); :func:`unavailable` says why it cannot run.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

TRACED = (
    # files: creating, opening to write, changing, removing, linking, renaming
    "open,openat,openat2,creat,truncate,ftruncate,fallocate,unlink,unlinkat,rename,renameat,"
    "renameat2,mkdir,mkdirat,rmdir,link,linkat,symlink,symlinkat,chmod,fchmod,fchmodat,"
    "chown,fchown,lchown,fchownat,utime,utimes,utimensat,futimesat,mknod,mknodat,setxattr,"
    "lsetxattr,fsetxattr,removexattr,lremovexattr,fremovexattr,"
    # the world beyond the workspace: mounts, the clock, the host's name
    "mount,umount2,clock_settime,settimeofday,adjtimex,clock_adjtime,sethostname,"
    "setdomainname,"
    # programs, and the processes and threads that run them
    "execve,execveat,clone,clone3,fork,vfork"
)
"""The system calls recorded (strace's names); every one but a read-only open is a finding."""

_WRITE_FLAGS = re.compile(r"\bO_(?:WRONLY|RDWR|CREAT|TRUNC|APPEND)\b")
_DEVICES = frozenset({"/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr"})
_CALL = re.compile(r"^(?P<name>[a-z0-9_]+)\((?P<args>.*)\)\s+=\s+(?P<result>.*)$")
_FIRST_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_CLONED = re.compile(r"^(?:clone3?|v?fork)\(.*\)\s+=\s+(\d+)$")
_RAN = re.compile(r'^execve\("([^"]*)".*\)\s+=\s+0$')
SHELLS = ("bash", "sh")
NOBODY = 65534
PROCESSES = 256
"""The most processes a run may start beyond what its user runs already (a command that forks
without end meets this limit, and the timeout)."""
WORKSPACE = "/tmp/ws"
HOME = "/tmp/home"

ALLOWANCES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # git refreshes the index's cached file times under an optional lock while it reads
    # (git status, git diff): the lock is created, then removed or renamed over the index
    # with the same entries. git itself calls these operations read-only (GIT_OPTIONAL_LOCKS).
    ("git", re.compile(r'^(?:openat\(AT_FDCWD, |unlink\(|rename\()"'
                       + re.escape(WORKSPACE) + r'/\.git/index\.lock"')),
    # npm keeps a debug log and an update check's time stamp under ~/.npm, whatever it runs
    ("node", re.compile(r'^(?:mkdir|openat\(AT_FDCWD,) ?\(?"' + re.escape(HOME)
                        + r'/\.npm(?:/_logs(?:/[^"/]*)?|/_update-notifier-last-checked)?"')),
)
"""Bookkeeping a read-only program does in its own files: by program, what the call is."""


def _threads(uid: int) -> int:
    """How many threads ``uid`` runs now (RLIMIT_NPROC counts a user's threads)."""
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                count += sum(1 for _ in (entry / "task").iterdir())
        except OSError:
            continue  # gone meanwhile
    return count


def unavailable() -> str | None:
    """Why the sandbox cannot run here, or None when it can."""
    for tool, package in (("bwrap", "bubblewrap"), ("strace", "strace"), ("dash", "dash"),
                          ("prlimit", "util-linux"), ("setpriv", "util-linux")):
        if shutil.which(tool) is None:
            return f"no {tool} (apt-get install {package})"
    return None


@dataclass(frozen=True)
class Finding:
    """One thing a run did that a read-only command must not do."""

    shell: str
    what: str

    def __str__(self) -> str:
        return f"{self.shell}: {self.what}"


class Sandbox:
    """A throwaway workspace and the means to run commands in it and see what they did.

    ``recipe`` builds the workspace in a directory (called again whenever a run changed it);
    ``programs`` are the basenames a run may ``execve`` without a finding.
    """

    def __init__(self, root: Path, recipe: object, programs: Iterable[str]) -> None:
        self.root = root
        self.workspace = root / "ws"
        self.traces = root / "traces"
        self._recipe = recipe
        self.programs = frozenset(programs) | {"bash", "sh", "dash"}
        self.runs = 0
        # As root, the run is nobody's: the kernel never limits root's processes, and a
        # command that forks without end must meet a limit (RLIMIT_NPROC) in the sandbox.
        self._root = os.geteuid() == 0
        self._as = (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
                    if self._root else [])
        root.chmod(0o755)
        self._build()

    def _build(self) -> None:
        if self.workspace.exists():
            shutil.rmtree(self.workspace)
        self.workspace.mkdir(parents=True)
        self._recipe(self.workspace, NOBODY if self._root else None)  # type: ignore[operator]
        self._before = self.snapshot()

    def _own(self, top: Path) -> None:
        if self._root:
            for path in [top, *top.rglob("*")]:
                os.lchown(path, NOBODY, NOBODY)

    def snapshot(self) -> dict[str, tuple[int, int, int, str]]:
        """Every entry of the workspace: mode, size, modification time and content hash (a
        link: its target). Left out: a directory's time (a new or removed entry is seen as
        itself, or as a call) and the index's (git may refresh it: ALLOWANCES)."""
        seen: dict[str, tuple[int, int, int, str]] = {}
        for path in sorted(self.workspace.rglob("*")):
            info = path.lstat()
            if path.is_symlink():
                digest = os.readlink(path)
            elif path.is_file():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                digest = ""
            name = str(path.relative_to(self.workspace))
            mtime = 0 if name == ".git/index" or path.is_dir() else info.st_mtime_ns
            seen[name] = (info.st_mode, info.st_size, mtime, digest)
        return seen

    def run(self, command: str, shell: str, *, timeout: float = 20.0) -> list[Finding]:
        """Run ``command`` with ``shell -c`` in the sandbox; what it did that it must not."""
        self.runs += 1
        if self.traces.exists():
            shutil.rmtree(self.traces)
        self.traces.mkdir()
        self._own(self.traces)
        limit = _threads(NOBODY if self._root else os.getuid()) + PROCESSES
        argv = [
            *self._as, "prlimit", f"--nproc={limit}", "bwrap",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--bind", str(self.workspace), WORKSPACE,
            "--bind", str(self.traces), "/tmp/.traces", "--dir", HOME,
            "--unshare-all", "--die-with-parent", "--new-session", "--chdir", WORKSPACE,
            "--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
            "--setenv", "HOME", HOME, "--setenv", "LC_ALL", "C.UTF-8",
            "--setenv", "TERM", "dumb",
            "strace", "-ff", "-qq", "-s", "4096", "-o", "/tmp/.traces/t",
            "-e", f"trace={TRACED}", "-e", "signal=none", shell, "-c", command,
        ]
        try:
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            pass  # what it did until then is in the traces; a hang writes nothing
        findings = [Finding(shell, what) for what in self._read_traces()]
        after = self.snapshot()
        if after != self._before:
            changed = sorted(set(after.items()) ^ set(self._before.items()))
            findings.append(Finding(shell, f"the workspace changed: {changed[:5]}"))
            self._build()
        return findings

    def _read_traces(self) -> list[str]:
        """Each process's calls (strace -ff writes one file per thread), judged knowing which
        program the thread runs: the one it last ran, or its parent's when it was cloned."""
        lines = {int(trace.name.rsplit(".", 1)[1]): trace.read_text("utf-8", "replace")
                 .splitlines() for trace in self.traces.iterdir()}
        children = {int(c.group(1)) for text in lines.values() for line in text
                    if (c := _CLONED.match(line)) is not None}
        queue = [(tid, "") for tid in sorted(set(lines) - children)]
        root = queue[0][0] if len(queue) == 1 else None
        found: list[str] = [] if root is not None else [f"not one first process: {queue}"]
        while queue:
            tid, program = queue.pop()
            for line in lines.pop(tid, []):
                what = self._judge(line, program, tid == root and not program)
                if what is not None:
                    found.append(what)
                if (ran := _RAN.match(line)) is not None:
                    program = ran.group(1).rsplit("/", 1)[-1]
                elif (cloned := _CLONED.match(line)) is not None:
                    queue.append((int(cloned.group(1)), program))
        found.extend(f"a process no trace started: {tid}" for tid in lines)
        return found

    def _judge(self, line: str, program: str, first: bool) -> str | None:
        """What is wrong with one recorded call of ``program``'s process (``first``: the
        run's first process, before it ran anything), or None."""
        for allowed, pattern in ALLOWANCES:
            if program == allowed and pattern.search(line):
                return None
        call = _CALL.match(line.strip())
        if call is None:
            # strace also prints lines such as "+++ exited with 0 +++"; a call it could not
            # decode is suspect, not skipped
            return None if line.startswith(("+++", "---")) or not line.strip() else (
                f"unread trace line {line!r}")
        name, args = call["name"], call["args"]
        if name in ("clone", "clone3", "fork", "vfork"):
            return None
        path = _FIRST_STRING.search(args)
        target = path.group(1) if path else ""
        if name in ("open", "openat", "openat2", "creat"):
            if name != "creat" and not _WRITE_FLAGS.search(args):
                return None
            if target in _DEVICES or re.fullmatch(r"/dev/fd/\d+|/proc/self/fd/\d+", target):
                return None
            return f"opened to write: {line.strip()}"
        if name in ("execve", "execveat"):
            program = target.rsplit("/", 1)[-1]
            if program in self.programs and _runs_as_listed(program, _argv(args), first):
                return None
            return f"ran {program!r}: {line.strip()}"
        return f"{name}: {line.strip()}"


VERSION_FLAGS = (["--version"], ["-V"], ["-v"], ["-version"])
TOOLCHAINS = {
    "npm": ("ls", "list", "--version", "-v"),
    "pip": ("list", "freeze", "show", "--version", "-V"),
    "pip3": ("list", "freeze", "show", "--version", "-V"),
    "go": ("version", "env"),
}
"""What the toolchains may be run as: their first argument."""
WRAPPERS = frozenset({"time", "nice", "timeout"})
"""Programs that run the command after their options (sh's ``time`` is /usr/bin/time)."""
VERSION_ONLY = frozenset({"python", "python3", "node", "cargo", "rustc", "java", "ruby", "gcc",
                          "make", "docker"})


def _argv(args: str) -> list[str]:
    """The argument vector of a recorded ``execve`` (its second argument, a list)."""
    start = args.find(", [")
    end = args.find("]", start)
    return [bytes(s, "utf-8").decode("unicode_escape")
            for s in _FIRST_STRING.findall(args[start:end])] if start >= 0 else []


def _runs_as_listed(program: str, argv: list[str], first: bool) -> bool:
    """Whether running ``program`` with ``argv`` is within the read-only list: a shell only as
    the run's own first process; a version-only program with a version flag; a toolchain
    with a listing subcommand (node also as npm's interpreter)."""
    if program in ("bash", "sh", "dash"):
        return first
    rest = argv[1:]
    if program == "node" and rest and rest[0].endswith(("/npm", "/npm-cli.js")):
        program, rest = "npm", rest[1:]
    if program in TOOLCHAINS:
        return bool(rest) and rest[0] in TOOLCHAINS[program]
    if program in VERSION_ONLY:
        return rest in VERSION_FLAGS
    if program == "time":  # GNU time writes its report to -o FILE (-a: appended)
        for word in rest:
            if not word.startswith("-") or word == "--":
                break  # the command it runs, whose options are its own
            if word.startswith(("-o", "-a", "--o", "--a")):
                return False
    return True


def workspace_recipe(root: Path, owner: int | None) -> None:
    """A small git repository with a commit, files in a folder, and a clean index whose
    timestamps are older than the index (git would otherwise refresh it: a write), all
    ``owner``'s when given (set before the index is refreshed: a new owner is a new ctime)."""
    (root / "src").mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\nbeta\ngamma\n")
    (root / "other.txt").write_text("alpha\ndelta\n")
    (root / "data.json").write_text('{"a": [1, 2, 3]}\n')
    (root / "src" / "main.py").write_text("print('hello')\n")
    (root / "victim").mkdir()
    (root / "victim" / "keep.txt").write_text("keep\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "HOME": str(root)}

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "safe.directory=*", "-C", str(root), *args], check=True,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    git("tag", "v1")
    past = 1_700_000_000
    for path in [root, *root.rglob("*")]:
        if owner is not None:
            os.lchown(path, owner, owner)
        if ".git" not in path.parts:
            os.utime(path, (past, past), follow_symlinks=False)
    git("update-index", "--really-refresh")
    if owner is not None:
        os.lchown(root / ".git" / "index", owner, owner)


@contextmanager
def sandbox(programs: Iterable[str]) -> Iterator[Sandbox]:
    """A sandbox in a new temporary directory, removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="bash-oracle-") as holder:
        yield Sandbox(Path(holder), workspace_recipe, programs)
