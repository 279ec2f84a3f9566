"""A PostgreSQL server for the ``postgres``-marked tests (SPEC EL-8, issue 11).

The server comes from ``SESSIONLEDGER_TEST_PG`` (a ``postgresql://`` URL of a database the
tests may create databases from), or — when that is unset and PostgreSQL's binaries are
found — from a throwaway cluster in a temporary directory, started on a free loopback port
and removed afterwards. As root, ``initdb`` and ``pg_ctl`` run as the ``postgres`` user
(``initdb`` refuses root). Without either, :func:`server_or_reason` says why, and the tests
skip — or fail when ``CI=true``, where a server must be there.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = [
    "ENV_URL",
    "PG_BACKEND",
    "PostgresTamper",
    "Unrepresentable",
    "bindir",
    "create_database",
    "drop_database",
    "schema_url",
    "server",
    "temporary_cluster",
    "with_database",
]

ENV_URL = "SESSIONLEDGER_TEST_PG"

PG_BACKEND = pytest.param("postgresql", marks=pytest.mark.postgres)
"""The PostgreSQL entry of a module's ``backend`` params (``conftest.StoreFactory``)."""


def bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: ``pg_config --bindir``, else Debian's layout."""
    candidates: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 check=True, timeout=10)
            candidates.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        path = Path(directory)
        if (path / "initdb").exists() and (path / "pg_ctl").exists():
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(directory: Path) -> list[str]:
    """The command prefix to run PostgreSQL's tools: as ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return []
    account = pwd.getpwnam("postgres")
    os.chown(directory, account.pw_uid, account.pw_gid)
    return ["runuser", "-u", "postgres", "--"]


@contextmanager
def temporary_cluster(binaries: Path) -> Iterator[str]:
    """A new cluster in a temporary directory, trusted on loopback; yields its URL."""
    directory = Path(tempfile.mkdtemp(prefix="sessionledger-pg-"))
    data = directory / "data"
    prefix = _as_postgres(directory)
    port = _free_port()
    run = {"check": True, "capture_output": True, "timeout": 120}
    try:
        subprocess.run([*prefix, str(binaries / "initdb"), "-D", str(data), "-U", "postgres",
                        "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"], **run)
        options = (f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=200")
        subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-l",
                        str(directory / "log"), "-o", options, "-w", "start"], **run)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run([*prefix, str(binaries / "pg_ctl"), "-D", str(data), "-m",
                            "immediate", "-w", "stop"], capture_output=True, timeout=60)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _with_dbname(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(server_url: str) -> str:
    """A new, empty database on the server; its URL."""
    import psycopg

    name = f"sl_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_dbname(server_url, name)


def drop_database(server_url: str, url: str) -> None:
    """Remove a database made by :func:`create_database`, closing what still uses it."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def with_database(server_url: str) -> Iterator[str]:
    """A fresh database for the block, dropped after it."""
    url = create_database(server_url)
    try:
        yield url
    finally:
        drop_database(server_url, url)


def schema_url(database_url: str, directory: Path, path: Path) -> str:
    """The store URL for a test's store ``path`` (``ledger.db``, ``ledger-2.db`` …): a schema
    of its own in the module's database, named after the test's temporary directory and the
    file, so reopening the same ``path`` reopens the same store."""
    token = uuid.uuid5(uuid.NAMESPACE_URL, str(directory.resolve())).hex[:12]
    stem = "".join(c if c.isalnum() else "_" for c in path.stem.lower())
    return f"{database_url}?schema=t{token}_{stem}"[:200]


@contextmanager
def server() -> Iterator[tuple[str | None, str]]:
    """``(url, "")`` of a server to test against, or ``(None, why there is none)``."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        yield None, "psycopg is not installed (pip install -e '.[postgres]')"
        return
    url = os.environ.get(ENV_URL)
    if url:
        yield url, ""
        return
    binaries = bindir()
    if binaries is None:
        yield None, f"no PostgreSQL server: set {ENV_URL} or install PostgreSQL (initdb)"
        return
    with temporary_cluster(binaries) as started:
        yield started, ""


class Unrepresentable(Exception):
    """A tampering PostgreSQL's typed columns cannot hold (bytes, a non-integer ``seq``, NUL,
    text that is not UTF-8): it cannot happen to a PostgreSQL log, so the case is skipped."""


_INTEGER_COLUMNS = frozenset({"global_position", "seq", "schema_version"})


class PostgresTamper:
    """Tampers with a PostgreSQL store's ``events`` rows through a connection of its own.

    Values are stored as SQLite's column affinity would store them where PostgreSQL's types
    allow it (an integer written to a text column becomes its digits); anything else raises
    :class:`Unrepresentable`.
    """

    def __init__(self, url: str) -> None:
        from eventlog.postgres import parse_url

        self.conninfo, self.schema = parse_url(url)

    def _run(self, *statements: tuple[str, tuple[object, ...]]) -> None:
        import psycopg

        with psycopg.connect(self.conninfo) as conn:
            if self.schema:
                conn.execute(f'SET search_path TO "{self.schema}"')
            for sql, params in statements:
                cursor = conn.execute(sql, params)  # type: ignore[arg-type]
                assert cursor.rowcount == 1, f"{sql} {params} touched {cursor.rowcount} rows"

    @staticmethod
    def _value(column: str, value: object) -> object:
        if value is None:
            return None
        if column in _INTEGER_COLUMNS:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise Unrepresentable(f"{column} is BIGINT/INTEGER on PostgreSQL: {value!r}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str) and "\x00" not in value:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise Unrepresentable(f"{column} must be UTF-8 on PostgreSQL") from None
            return value
        raise Unrepresentable(f"{column} is TEXT on PostgreSQL: {value!r}")

    def update(self, session_id: str, seq: int, column: str, value: object) -> None:
        self._run((f"UPDATE events SET {column} = %s WHERE session_id = %s AND seq = %s",
                   (self._value(column, value), session_id, seq)))

    def undecodable(self, session_id: str, seq: int, column: str) -> None:
        raise Unrepresentable("PostgreSQL keeps text as valid UTF-8: no undecodable bytes")

    def delete(self, session_id: str, seq: int) -> None:
        self._run(("DELETE FROM events WHERE session_id = %s AND seq = %s", (session_id, seq)))

    def swap(self, session_id: str, seq_a: int, seq_b: int) -> None:
        where = "WHERE session_id = %s AND seq = %s"
        parked = -(10**9)  # UNIQUE(session_id, seq) forbids a direct swap
        self._run(
            (f"UPDATE events SET seq = %s {where}", (parked, session_id, seq_a)),
            (f"UPDATE events SET seq = %s {where}", (seq_a, session_id, seq_b)),
            (f"UPDATE events SET seq = %s {where}", (seq_b, session_id, parked)),
        )
