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
