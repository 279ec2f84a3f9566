"""House rules checked on the source: where SQL may be written, where a retry loop may live.

Issue 20 (acceptance 2 and 4): the services meet the log at one seam. SQL and the database
drivers stay in the store backends and the view-table modules, so a service never speaks to a
connection and never catches a driver's error (the backend raises the log's own errors,
translated once by ``sessionledger.errors.from_eventlog``); and a lost race is retried by one
policy, so a new hand-written ``except ConcurrencyConflict`` loop fails here.

The checks read the syntax tree, not the text: ``SessionService.execute`` is a method, not
SQL, and a word in a docstring is not an import.
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from eventlog import NewEvent, SessionCreated, UnreadableStore
from eventlog.sqlite import SQLiteEventStore

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("eventlog", "statemachine", "projections", "sessionledger")
"""The product packages; tests and benches may open a database as they please."""

# -- SQL stays in the backends and the view tables (issue 20, acceptance 2) -------------------

SQL_ALLOWED = {
    "eventlog/sqlite.py": (
        "the SQLite store backend: its tables, SQL text and driver-error mapping, its reader "
        "pool and its group write in the append transaction"
    ),
    "eventlog/sqlite_backup.py": "the SQLite backend's online backup (`sessionledger backup`)",
    "eventlog/postgres.py": (
        "the PostgreSQL store backend: its tables, SQL text and URL, its group write in the "
        "append transaction and its LISTEN/NOTIFY of other processes' commits"
    ),
    "projections/tables.py": (
        "view tables: every projection table on SQLite (summaries, documents, todo rows, "
        "interaction timers) beside its in-memory twin"
    ),
    "projections/pg_tables.py": "view tables: every projection table on PostgreSQL",
}
"""Modules that may run SQL or import a database driver, each with its reason. Not listed:
``eventlog/inline.py`` (it hands the backend's transaction handle to a projection and runs
nothing on it)."""

DRIVERS = ("sqlite3", "sqlite_utils", "psycopg", "psycopg2", "psycopg_pool")
"""Top-level modules that talk to a database."""

SQL_METHODS = {"execute", "executemany", "executescript"}
CONNECTION_WORDS = {
    "conn", "connection", "connections", "con", "connect", "cursor", "cur", "db", "database",
    "tx", "txn", "transaction",
}
"""Words of a receiver's name that say it is a connection, cursor or transaction handle:
``conn.execute``, ``self._conn.execute``, ``read_tx.execute``, ``conn.cursor().execute``."""


def _product_modules() -> list[Path]:
    return sorted(p for package in PRODUCT for p in (ROOT / package).rglob("*.py"))


def _receiver_name(node: ast.expr) -> str | None:
    """The last name of what a method is called on (``cursor`` of ``conn.cursor()``)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_connection(name: str) -> bool:
    return any(word in CONNECTION_WORDS for word in re.split(r"_+", name.lower()) if word)


def _is_driver(module: str) -> bool:
    return module.split(".")[0] in DRIVERS


def sql_uses(source: str) -> list[str]:
    """Each place ``source`` runs SQL or imports a database driver, as ``line: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if _is_driver(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_driver(node.module):
                found.append(f"{node.lineno}: from {node.module} import …")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if called in SQL_METHODS and isinstance(node.func, ast.Attribute):
                receiver = _receiver_name(node.func.value)
                if receiver is not None and _is_connection(receiver):
                    found.append(f"{node.lineno}: {receiver}.{called}(…)")
            elif called in {"import_module", "__import__"} and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    if _is_driver(first.value):
                        found.append(f"{node.lineno}: {called}({first.value!r})")
    return found


def test_sql_appears_only_in_the_store_backends_and_the_view_tables() -> None:
    # Issue 20, acceptance 2: no SQL or driver import outside the modules of SQL_ALLOWED.
    wrong = {
        str(module.relative_to(ROOT)): uses
        for module in _product_modules()
        if str(module.relative_to(ROOT)) not in SQL_ALLOWED
        and (uses := sql_uses(module.read_text(encoding="utf-8")))
    }
    assert not wrong, f"SQL outside the store backends and view tables: {wrong}"


@pytest.mark.parametrize("module", sorted(SQL_ALLOWED))
def test_every_module_allowed_sql_still_uses_it(module: str) -> None:
    # Issue 20: an allowance nobody needs any more is removed, so the list stays the truth
    # (and the check is seen to find the SQL that is really there).
    assert sql_uses((ROOT / module).read_text(encoding="utf-8")), f"{module} runs no SQL"


@pytest.mark.parametrize("source", [
    "import sqlite3\n",
    "import psycopg.rows\n",
    "from sqlite3 import DatabaseError\n",
    "from psycopg import errors\n",
    "import importlib\ndriver = importlib.import_module('psycopg')\n",
    "def f(conn):\n    conn.execute('DELETE FROM events')\n",
    "def f(self):\n    self._conn.executemany('INSERT INTO t VALUES (?)', [(1,)])\n",
    "def f(self):\n    self._read_tx.execute('SELECT 1')\n",
    "def f(db):\n    db.cursor().execute('SELECT 1')\n",
])
def test_the_sql_check_finds(source: str) -> None:
    # Issue 20: what the check above must refuse outside the allowed modules.
    assert sql_uses(source)


@pytest.mark.parametrize("source", [
    "def f(self):\n    self.execute(session_id, Cycle(), via='cycle')\n",
    "def f(self):\n    return self._runtime.execute(session_id, command)\n",
    "def f(executor):\n    executor.execute(call)\n",
    '"""Runs on a ``sqlite3.Connection`` via ``conn.execute``."""\n',
])
def test_the_sql_check_leaves_alone(source: str) -> None:
    # Issue 20: a service method named ``execute`` and a docstring are not SQL.
    assert sql_uses(source) == []


def test_sessionledger_catches_no_driver_error() -> None:
    # Issue 20: the backends raise the log's errors (StorageFault, UnreadableStore, …), so
    # no module of the services names a driver's exception class.
    driver_error = re.compile(r"\b(sqlite3|psycopg2?)\.\w*(Error|Warning)\b")
    wrong = [
        f"{module.relative_to(ROOT)}:{number}"
        for module in sorted((ROOT / "sessionledger").rglob("*.py"))
        for number, line in enumerate(module.read_text(encoding="utf-8").splitlines(), 1)
        if driver_error.search(line)
    ]
    assert not wrong, f"driver errors caught in the services: {wrong}"


def test_no_driver_error_leaves_the_sqlite_store(tmp_path: Path) -> None:
    # Issue 20: a file that is no database, or a table not of the store's shape, is the log's
    # UnreadableStore (the services' CorruptLog or ConfigurationError), never sqlite3's error.
    (tmp_path / "notes.db").write_text("not a database at all, just some text " * 40)
    with pytest.raises(UnreadableStore, match="file is not a database") as opened:
        SQLiteEventStore(tmp_path / "notes.db")
    assert isinstance(opened.value.__cause__, sqlite3.DatabaseError)
    with pytest.raises(UnreadableStore, match="unable to open database file"):
        SQLiteEventStore(tmp_path)  # a directory
    with closing(SQLiteEventStore(tmp_path / "ledger.db")) as store:
        store.append("sess_x", [NewEvent(SessionCreated(workspace="w"), actor="user")])
        with closing(sqlite3.connect(tmp_path / "ledger.db")) as conn:
            conn.executescript("DROP TABLE streams; CREATE TABLE streams (x);")
        with pytest.raises(UnreadableStore, match="no such column"):
            store.session_heads()
        with pytest.raises(UnreadableStore, match="no such column"):
            store.append("sess_y", [NewEvent(SessionCreated(workspace="w"), actor="user")])


# -- one retry policy (issue 20, acceptance 4) ------------------------------------------------

RETRY_ALLOWED = {
    "sessionledger/ledger.py": (
        "the one retry policy for overtaken appends (D146): read, decide, append with the "
        "expected version, back off, within a time bound"
    ),
    "sessionledger/service/timers.py": (
        "timers.settle keeps its own bounded loop (D146): it runs in the background and "
        "leaves what it could not append to the scheduler's next pass"
    ),
}
"""Modules allowed one ``except ConcurrencyConflict`` each, with the reason."""


def conflict_handlers(source: str) -> list[int]:
    """The lines of the ``except`` clauses of ``source`` that catch ``ConcurrencyConflict``
    (alone, in a tuple, or by a dotted name)."""

    def names(node: ast.expr | None) -> list[str]:
        if node is None:
            return []
        if isinstance(node, ast.Tuple):
            return [n for element in node.elts for n in names(element)]
        if isinstance(node, ast.Attribute):
            return [node.attr]
        if isinstance(node, ast.Name):
            return [node.id]
        return []

    return [
        node.lineno for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ExceptHandler) and "ConcurrencyConflict" in names(node.type)
    ]


def test_a_lost_race_is_retried_by_one_policy() -> None:
    # Issue 20, acceptance 4: `except ConcurrencyConflict` only where RETRY_ALLOWED says.
    found = {
        str(module.relative_to(ROOT)): lines
        for module in _product_modules()
        if (lines := conflict_handlers(module.read_text(encoding="utf-8")))
    }
    extra = {m: lines for m, lines in found.items() if m not in RETRY_ALLOWED}
    assert not extra, f"hand-written retry on ConcurrencyConflict (use retry_overtaken): {extra}"
    assert {m: len(lines) for m, lines in found.items()} == dict.fromkeys(RETRY_ALLOWED, 1)


@pytest.mark.parametrize("source", [
    "try:\n    f()\nexcept ConcurrencyConflict:\n    pass\n",
    "try:\n    f()\nexcept (StoreBusy, ConcurrencyConflict) as exc:\n    pass\n",
    "try:\n    f()\nexcept eventlog.ConcurrencyConflict:\n    pass\n",
])
def test_the_retry_check_finds(source: str) -> None:
    # Issue 20: the shapes of a hand-written retry the check above must count.
    assert conflict_handlers(source) == [3]


# -- the rooms of sessionledger and their one-way floors (issue 20, acceptance 2) -------------

FLOORS: dict[str, int] = {
    # faces: what a user or a host talks to
    "__init__": 6, "__main__": 6, "cli": 6, "launch": 6, "demo": 6, "demo_script": 6, "docgen": 6,
    "claude_code": 6, "http": 6, "mcp": 6, "tui": 6, "web": 6,
    "service": 5,  # sessions, execution, turns and reminders, timers, settings, models, audit
    "tools": 4,  # a tool call end to end: service, executor, handlers, registry, ports
    "ledger": 3,  # the store and its views, the retry policy, the error translation
    "config": 2,  # where settings come from: the store URL, serve's settings, the workspace
    "permission": 1,  # pure rules and the tool descriptors they read
    "errors": 0, "logs": 0,  # what every floor raises and logs
    "environment": 0,  # the environment variables the commands read
}
"""Each room of ``sessionledger/`` (a subpackage or a top-level module) and its floor: a module
imports its own room and lower floors only (faces may use one another)."""
FACES = 6


def _room(module: str) -> str:
    """``sessionledger.tools.executor`` → ``tools``; ``sessionledger`` → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def sessionledger_imports(path: Path) -> list[tuple[int, str]]:
    """Each import of a ``sessionledger`` module by ``path``, absolute, with its line."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target] if node.module else [
                f"{target}.{a.name}" if _is_module(f"{target}.{a.name}") else target
                for a in node.names
            ]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, t) for t in targets if t.split(".")[0] == "sessionledger"]
    return found


def floor_breaches(path: Path) -> list[str]:
    """The imports of ``path`` that run up a floor or into a room of the same floor."""
    here = _room(_module_name(path))
    wrong = []
    for line, target in sessionledger_imports(path):
        there = _room(target)
        if target == "sessionledger" and here != "__init__":
            there = "__init__"  # the package's face, never imported from inside
        if there == here or (FLOORS[here] == FACES and FLOORS[there] == FACES):
            continue
        if FLOORS[there] >= FLOORS[here]:
            wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    return wrong


def test_every_room_has_a_floor() -> None:
    # Issue 20: a new module or folder at the top of sessionledger/ is given its room here.
    rooms = {p.stem if p.suffix == ".py" else p.name
             for p in (ROOT / "sessionledger").iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert rooms == set(FLOORS)


def test_imports_run_down_the_floors_of_sessionledger() -> None:
    # Issue 20, acceptance 2: faces → service → tools → ledger → config → permission →
    # errors/logs → the three lower packages (their own order is test_docs' check).
    wrong = [b for p in sorted((ROOT / "sessionledger").rglob("*.py")) for b in floor_breaches(p)]
    assert not wrong, "imports against the floors:\n" + "\n".join(wrong)


def test_no_import_loops_between_sessionledger_modules() -> None:
    # Issue 20: no two modules import each other, directly or around a loop.
    graph: dict[str, set[str]] = {}
    paths = sorted((ROOT / "sessionledger").rglob("*.py"))
    names = {_module_name(p) for p in paths}
    for path in paths:
        edges = set()
        for _line, target in sessionledger_imports(path):
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != _module_name(path):
                edges.add(target)
        graph[_module_name(path)] = edges
    loops = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if nxt.startswith(node + ".") or node.startswith(nxt + "."):
                continue  # a package and its own modules (its __init__ re-exports them)
            if state.get(nxt) == 1:
                loops.append(" → ".join([*trail[trail.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not loops, "import loops:\n" + "\n".join(loops)


@pytest.mark.parametrize(("module", "source", "breach"), [
    ("sessionledger/tools/x.py", "from ..service import sessions\n", True),
    ("sessionledger/tools/x.py", "from sessionledger.http import app\n", True),
    ("sessionledger/permission/x.py", "from ..config import workspace\n", True),
    ("sessionledger/ledger.py", "from .tools import executor\n", True),
    ("sessionledger/errors.py", "from .logs import log_event\n", True),
    ("sessionledger/tools/x.py", "from ..ledger import Ledger\n", False),
    ("sessionledger/service/x.py", "from ..tools.executor import ToolExecutor\n", False),
    ("sessionledger/http/x.py", "from ..mcp.http import McpHttpTransport\n", False),
    ("sessionledger/tools/x.py", "from .registry import ToolRegistry\n", False),
])
def test_the_floor_check(tmp_path: Path, module: str, source: str, breach: bool,
                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 20: what the floor check refuses and what it lets through.
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    path = tmp_path / module
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    assert bool(floor_breaches(path)) is breach


# -- one error translation, one live-session check (issue 20, acceptance 4) -------------------

def _calls_and_raises(name: str) -> dict[str, int]:
    """Per product module, how many times it calls ``name(…)`` or raises ``name(…)``."""
    counts: dict[str, int] = {}
    for module in sorted((ROOT / "sessionledger").rglob("*.py")):
        found = sum(
            1 for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call)
            and (node.func.id if isinstance(node.func, ast.Name)
                 else node.func.attr if isinstance(node.func, ast.Attribute) else "") == name
        )
        if found:
            counts[str(module.relative_to(ROOT))] = found
    return counts


def test_the_log_errors_are_translated_in_one_place() -> None:
    # Issue 20, acceptance 4: `from_eventlog` is written in the ledger and called by the ledger
    # (its `eventlog_errors` block and `Ledger.open`) and by the faces' last-resort handlers
    # for what they read from the store directly (the HTTP app, the CLI) — nowhere else.
    assert _calls_and_raises("from_eventlog") == {
        "sessionledger/ledger.py": 2, "sessionledger/http/app.py": 1, "sessionledger/cli.py": 1,
    }


def test_the_live_session_check_is_written_once() -> None:
    # Issue 20, acceptance 4: 404 session_not_found and 410 session_deleted are raised by the
    # ledger's `known` and `live` only; every service asks the ledger.
    assert _calls_and_raises("SessionDeleted") == {"sessionledger/ledger.py": 1}
    assert _calls_and_raises("SessionNotFound") == {"sessionledger/ledger.py": 2}


def test_services_append_through_the_ledger_only() -> None:
    # Issue 20: one seam between the services and the log — no module of sessionledger but
    # the ledger calls a store's append, so every batch reaches the after-append observers.
    wrong = [
        f"{module.relative_to(ROOT)}:{node.lineno}"
        for module in sorted((ROOT / "sessionledger").rglob("*.py"))
        if module.name != "ledger.py" or module.parent.name != "sessionledger"
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"append", "append_many"}
        and re.fullmatch(r"_?(event_)?store", _receiver_name(node.func.value) or "")
    ]
    assert not wrong, f"appends around the ledger: {wrong}"


def test_the_retry_policy_is_called_through_the_ledger() -> None:
    # Issue 20, acceptance 4: services call `Ledger.retry`; the policy function itself is
    # called by the ledger alone.
    assert _calls_and_raises("retry_overtaken") == {"sessionledger/ledger.py": 1}


# -- one question's walk through the rooms (issue 20, acceptance 3) ---------------------------


@pytest.fixture(scope="module")
def traced() -> dict[str, Any]:
    """What the script tests/trace_call.py prints with ``--json``, run once."""
    printed = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "trace_call.py"), "--json"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    found: dict[str, Any] = json.loads(printed.stdout)
    return found


def test_one_question_and_its_answer_enter_at_most_twenty_product_files(
    traced: dict[str, Any],
) -> None:
    # Issue 20, acceptance 3: the script tests/trace_call.py traces one AskUserQuestion call
    # over the in-process app (SQLite) and its answer and prints the files each entered and
    # the cross-file calls; each enters at most MOST_FILES product files.
    from trace_call import MOST_FILES

    for name in ("call", "answer"):
        entered = traced[name]["entered"]
        assert "sessionledger/tools/ask.py" in entered, name  # the tool itself ran
        assert "eventlog/sqlite.py" in entered, name  # and it appended
        assert traced[name]["files"] == len(entered) <= MOST_FILES, (name, sorted(entered))
        assert traced[name]["crossFileCalls"] > 0, name


def test_the_figure_in_the_architecture_page_is_the_trace(traced: dict[str, Any]) -> None:
    # Issue 20, acceptance 3: docs/architecture.md shows the files the call and the answer
    # enter; the figure names the same files the script traces today.
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    figure = page.split("### One question through the rooms", 1)[1].split("```", 2)[1]
    shown: dict[str, set[str]] = {"call": set(), "answer": set()}
    part = "call"
    for line in figure.splitlines():
        if line.startswith("its answer"):
            part = "answer"
        elif line.strip() and line.startswith(" "):
            shown[part].add(line.split()[-1])
    assert shown == {name: set(traced[name]["entered"]) for name in ("call", "answer")}
