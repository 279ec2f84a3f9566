"""The ``sessionledger`` command line (SPEC §11): serve, list, read and audit the log.

Every subcommand takes ``--db URL`` (else ``SESSIONLEDGER_DB``, else the embedded SQLite
file). Exit codes: 0 success, 1 a fault found or a refused command, 2 bad usage or input.
Application errors become one ``error: …`` line on stderr with their exit code, never a
traceback. FastAPI and uvicorn are imported by ``serve`` only, so the other commands start
fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from eventlog import EventLogError, RecordedEvent

from . import __version__
from .config import (
    DB_ENV,
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_QUESTION_DEADLINE_S,
    DEFAULT_QUESTION_GRACE_S,
    TOKEN_ENV,
    ServerSettings,
    open_event_store,
    resolve_store_url,
)
from .errors import SessionLedgerError, from_eventlog
from .sessions import MAX_CURSOR, AuditReport, SessionService

__all__ = ["PROGRESS_THRESHOLD", "main"]

PROGRESS_THRESHOLD = 20
"""``audit`` shows a progress bar when it checks more sessions than this (on a terminal)."""

F = TypeVar("F", bound=Callable[..., Any])

_PIPE_WIDTH = 200
"""Console width when output is not a terminal, so piped tables never cut an id short."""

_out = Console(highlight=False, width=None if sys.stdout.isatty() else _PIPE_WIDTH)
_err = Console(stderr=True, highlight=False, soft_wrap=True)


class LedgerGroup(click.Group):
    """A command group that turns application errors into a message and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EventLogError as exc:
            _fail(from_eventlog(exc))
        except SessionLedgerError as exc:
            _fail(exc)
        except BrokenPipeError:  # `sessionledger events … | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(1) from None


def _fail(exc: SessionLedgerError) -> None:
    click.echo(f"error: {exc.message}", err=True)
    raise click.exceptions.Exit(exc.exit_code)


def db_option(command: F) -> F:
    """The ``--db URL`` option every subcommand carries."""
    return click.option(
        "--db", "db", metavar="URL", default=None,
        help=f"Event store URL (sqlite:///path.db). Default: ${DB_ENV}, "
             "else sqlite:///.sessionledger/ledger.db under the current directory.",
    )(command)


@contextmanager
def _service(db: str | None, workspace: Path | None = None) -> Iterator[SessionService]:
    """A service over the store ``--db`` names, closed when the command ends."""
    store = open_event_store(resolve_store_url(db))
    try:
        yield SessionService(store, workspace_root=workspace or Path.cwd())
    finally:
        store.close()


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sessionledger")
def main() -> None:
    """Event-sourced session state for AI coding-agent hosts."""


@main.command()
@db_option
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
    help="Workspace root: default workspace of new sessions, which must stay inside it. "
         "Default: the current directory.",
)
@click.option("--question-grace-s", type=float, default=DEFAULT_QUESTION_GRACE_S,
              show_default=True, help="Seconds a question waits before its countdown shows.")
@click.option("--question-deadline-s", type=float, default=DEFAULT_QUESTION_DEADLINE_S,
              show_default=True, help="Seconds after which a question auto-continues.")
@click.option("--token", envvar=TOKEN_ENV, show_envvar=True, default=None,
              help="Bearer token clients must send; required off loopback.")
def serve(
    db: str | None, host: str, port: int, workspace: Path | None,
    question_grace_s: float, question_deadline_s: float, token: str | None,
) -> None:
    """Serve the HTTP API and event streams until SIGTERM or Ctrl+C."""
    settings = ServerSettings(
        host=host, port=port, workspace_root=workspace or Path.cwd(),
        question_grace_s=question_grace_s, question_deadline_s=question_deadline_s,
        token=token,
    )
    from .http import serve as run_server  # FastAPI and uvicorn only when serving

    store = open_event_store(resolve_store_url(db))
    run_server(settings, service=SessionService(store, workspace_root=settings.workspace_root))


@main.command()
@db_option
def sessions(db: str | None) -> None:
    """List sessions, most recently updated first."""
    with _service(db) as service:
        rows = service.list_sessions()["sessions"]
    if not rows:
        _out.print("no sessions")
        return
    table = Table()
    table.add_column("session", no_wrap=True, overflow="fold")
    table.add_column("mode")
    table.add_column("version", justify="right")
    table.add_column("updated")
    table.add_column("parent", overflow="fold")
    for row in rows:
        table.add_row(
            row["sessionId"], row["displayMode"], str(row["version"]), row["updatedAt"],
            row["parentSessionId"] or "",
        )
    _out.print(table)


def _event_line(event: RecordedEvent) -> str:
    data = json.dumps(event.to_wire()["data"], ensure_ascii=False, separators=(",", ":"))
    return (f"{event.seq:>6}  {event.recorded_at}  {event.actor:<6}  "
            f"[bold]{escape(event.type)}[/bold]  {escape(data)}")


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
@click.option("--after", type=click.IntRange(0, MAX_CURSOR), default=0, show_default=True,
              metavar="SEQ", help="Only events with a greater seq.")
@click.option("--json", "as_json", is_flag=True,
              help="One envelope per line, in the wire shape of the HTTP API.")
def events(db: str | None, session_id: str, after: int, as_json: bool) -> None:
    """Print a session's events in seq order."""
    with _service(db) as service:
        for event in service.iter_events(session_id, after=after):
            if as_json:
                click.echo(json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":")))
            else:
                _out.print(_event_line(event))


def _audit_all(service: SessionService) -> list[AuditReport]:
    total = len(service.store.session_heads())
    if total <= PROGRESS_THRESHOLD or not _err.is_terminal:
        return service.audit_all()
    columns = (TextColumn("auditing"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=_err, transient=True) as progress:
        task = progress.add_task("audit", total=total)
        return service.audit_all(progress=lambda done, _: progress.update(task, completed=done))


@main.command()
@db_option
@click.argument("session_id", metavar="[SESSION]", required=False)
def audit(db: str | None, session_id: str | None) -> None:
    """Verify hash chains (one session, or all); exit 1 naming the first break."""
    with _service(db) as service:
        reports = [service.audit_report(session_id)] if session_id else _audit_all(service)
    broken = [r for r in reports if not r.ok]
    for report in broken:
        _out.print(f"FAIL {report.session_id}: chain broken at seq {report.first_bad_seq}"
                   f" ({escape(report.reason or 'unknown reason')})")
    if broken:
        raise click.exceptions.Exit(1)
    events_total = sum(r.events for r in reports)
    noun = "session" if len(reports) == 1 else "sessions"
    _out.print(f"OK: {len(reports)} {noun}, {events_total} events, every hash chain verifies")
