"""Fixtures shared by the todo test modules: a workspace root, a database path, the service
over SQLite or over each backend, and a fresh session. Modules load them with
``pytest_plugins = ["todo_fixtures"]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import PG_BACKEND, schema_url

from sessionledger import SessionService


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def service(db_path: Path, root: Path) -> Iterator[SessionService]:
    opened = SessionService.open(f"sqlite:///{db_path}", workspace_root=root)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(params=["memory", "sqlite", PG_BACKEND])
def any_service(
    request: pytest.FixtureRequest, db_path: Path, root: Path
) -> Iterator[SessionService]:
    """The service over each backend (the todo table, its in-memory twin, PostgreSQL's)."""
    if request.param == "postgresql":
        database = str(request.getfixturevalue("pg_database"))
        url = schema_url(database, db_path.parent, db_path)
    else:
        url = "memory://" if request.param == "memory" else f"sqlite:///{db_path}"
    opened = SessionService.open(url, workspace_root=root)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def session(service: SessionService) -> str:
    return str(service.create_session()["sessionId"])
