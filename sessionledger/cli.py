"""The ``sessionledger`` command line: serve, read, replay, audit and maintain the log.

Every subcommand takes ``--db URL`` (else ``SESSIONLEDGER_DB``, else the embedded SQLite
file); the store is always opened with its projections, so the CLI reads what the server
reads. Exit codes: 0 success, 1 a fault found or a refused command, 2 bad usage or input.
Application errors become one ``error: …`` line on stderr with their exit code, never a
traceback. Long work (audit, rebuild, replay of a big log) shows a progress bar when it runs
on a terminal.

Importing this module loads click and the standard library only (issue 38): ``--help`` of
every command is answered without the service, the event catalog, pydantic or rich. A command
imports what it uses when it runs; the consoles are made on first use; FastAPI and uvicorn
load for ``serve`` only, the MCP SDK for ``mcp``, Textual for ``tui``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import click

from . import __version__
from .claude_code.forward import (
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    HookOptions,
    run_command_hook,
)
from .config import (
    DB_ENV,
    DEFAULT_HOST,
    DEFAULT_MCP_MAX_SESSIONS,
    DEFAULT_PORT,
    DEFAULT_QUESTION_DEADLINE_S,
    DEFAULT_QUESTION_GRACE_S,
    MAX_CURSOR,
    TOKEN_ENV,
    ServerSettings,
    missing_store_file,
    resolve_store_url,
)

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

    from eventlog import HostKind, RecordedEvent

    from .claude_code.recorder import Recorder
    from .claude_code.transcripts import TranscriptFile
    from .errors import SessionLedgerError
    from .service.sessions import AuditReport, SessionService

__all__ = ["PROGRESS_THRESHOLD", "REPLAY_PROGRESS_THRESHOLD", "main"]

PROGRESS_THRESHOLD = 20
"""``audit`` shows a progress bar when it checks more sessions than this (on a terminal)."""
REPLAY_PROGRESS_THRESHOLD = 2000
"""``replay`` shows a progress bar when it replays more events than this (on a terminal)."""

F = TypeVar("F", bound=Callable[..., Any])
Tick = Callable[[int, int], None]

_PIPE_WIDTH = 200
"""Console width when output is not a terminal, so piped tables never cut an id short."""
_DEMO_WIDTH = 100
"""The demo's console width when piped (its long lines are never wrapped then)."""
_EVERY_ROW = 2**62
"""A page size that is no bound (SQLite and PostgreSQL take a LIMIT up to 2^63 - 1)."""

_piped = not sys.stdout.isatty()


@cache
def _out() -> Console:
    """Standard output's console, made on first use (rich loads then, not at start)."""
    from rich.console import Console

    return Console(  # piped lines are never wrapped: one event, one line, for grep and friends
        highlight=False, width=_PIPE_WIDTH if _piped else None, soft_wrap=_piped
    )


@cache
def _err() -> Console:
    """Standard error's console, made on first use."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def escape(markup: str) -> str:
    """``markup`` with rich's markup escaped (:func:`rich.markup.escape`, loaded on first use)."""
    from rich.markup import escape as escape_markup

    return escape_markup(markup)


def _usage_error(exc: click.UsageError) -> NoReturn:
    """A usage error said as every other error is (one ``error: …`` line on standard error,
    exit 2), naming the help to read; a group called without a command prints its help and
    exits 0 (there is nothing wrong in asking what it does)."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2 and later
    if isinstance(exc, no_args) and exc.ctx is not None:
        click.echo(exc.ctx.get_help())
        raise click.exceptions.Exit(0)
    message = exc.format_message().rstrip(".")
    where = exc.ctx.command_path if exc.ctx is not None else "sessionledger"
    click.echo(f"error: {message}. See `{where} --help`.", err=True)
    raise click.exceptions.Exit(exc.exit_code)


class LedgerGroup(click.Group):
    """A command group that turns application and usage errors into one ``error: …`` line
    and an exit code."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_error(exc)
        except Exception as exc:
            failure = _application_error(exc)
            if failure is not None:
                _fail(failure)
            if isinstance(exc, BrokenPipeError):  # `sessionledger events … | head`: reader left
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                raise click.exceptions.Exit(1) from None
            raise


def _application_error(exc: Exception) -> SessionLedgerError | None:
    """What the user is told of ``exc``: a log error translated, an application error as it
    is, ``None`` for anything else. Neither is imported to ask (a subcommand's ``--help`` ends
    in an exception too): both need :mod:`eventlog`, so without it ``exc`` is neither."""
    if "eventlog" not in sys.modules:
        return None
    from eventlog import EventLogError

    from .errors import SessionLedgerError

    if isinstance(exc, EventLogError):
        from .ledger import from_eventlog

        return from_eventlog(exc)
    return exc if isinstance(exc, SessionLedgerError) else None


def _fail(exc: SessionLedgerError) -> NoReturn:
    click.echo(f"error: {exc.message}", err=True)
    raise click.exceptions.Exit(exc.exit_code)


def db_option(command: F) -> F:
    """The ``--db URL`` option every subcommand carries."""
    return click.option(
        "--db", "db", metavar="URL", default=None,
        help=f"Event store URL (sqlite:///path.db). Default: ${DB_ENV}, "
             "else sqlite:///.sessionledger/ledger.db under the current directory.",
    )(command)


def _store_url(db: str | None, *, create: bool) -> str:
    """The store URL ``--db`` names, checked before it is opened: a command that only reads
    never creates a store (a missing SQLite file is an error naming it); one that writes may,
    and says so once on standard error."""
    url = resolve_store_url(db)
    missing = missing_store_file(url)
    if missing is not None:
        if not create:
            from .errors import StoreNotFound

            raise StoreNotFound(str(missing.absolute()))
        click.echo(f"created a new event store at {missing.absolute()}", err=True)
    return url


@contextmanager
def _service(
    db: str | None, workspace: Path | None = None, *, create: bool = False
) -> Iterator[SessionService]:
    """A service over the store ``--db`` names, closed when the command ends; the store must
    exist unless ``create`` (a command that records)."""
    from .service.sessions import SessionService

    service = SessionService.open(_store_url(db, create=create),
                                  workspace_root=workspace or Path.cwd())
    try:
        yield service
    finally:
        service.close()


@contextmanager
def _progress(
    label: str, *, console: Console, show: bool, total: int | None = None
) -> Iterator[tuple[Tick | None, Callable[[RenderableType], None]]]:
    """A transient bar on ``console`` when ``show`` and it is a terminal.

    Yields ``(tick, say)``: ``tick(done, total)`` advances the bar (``None`` without one) and
    ``say(markup)`` prints a line to standard output above the bar.
    """
    if not (show and console.is_terminal):
        yield None, _out().print
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(label, total=total)

        def tick(done: int, of: int) -> None:
            progress.update(task, completed=done, total=of)

        say = progress.console.print if console is _out() else _out().print
        yield tick, say


@click.group(cls=LedgerGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="sessionledger")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Event-sourced session state for AI coding-agent hosts."""
    if ctx.invoked_subcommand is None:  # bare `sessionledger`: what it can do, exit 0
        click.echo(ctx.get_help())


@main.command()
@db_option
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port to listen on.")
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
@click.option("--allowed-host", "allowed_hosts", metavar="NAME[:PORT]", multiple=True,
              help="Another Host name clients may use (any port unless one is given), besides "
                   "the bound address and localhost, 127.0.0.1, [::1]; repeatable. Needed "
                   "to reach a server bound to 0.0.0.0 by a remote name.")
@click.option("--allowed-origin", "allowed_origins", metavar="SCHEME://HOST[:PORT]",
              multiple=True,
              help="Another origin whose pages may send POST, PUT and DELETE; repeatable.")
@click.option("--no-elicitation", "no_elicitation", is_flag=True, default=False,
              help="/mcp never asks through the client's forms: questions and plan approvals "
                   "wait, pending, for the web page (for clients that answer forms by "
                   "themselves, as Codex's headless run does).")
@click.option("--mcp-max-sessions", type=int, default=DEFAULT_MCP_MAX_SESSIONS, show_default=True,
              help="MCP sessions open at once on /mcp; at the limit a new client closes the "
                   "session idle longest.")
@click.option("--idle-exit", "idle_exit_s", type=float, default=None, metavar="SECONDS",
              help="Stop after SECONDS with no request in flight.")
@click.option("--hook-writer", is_flag=True, default=False,
              help="Run as the command hook's writer (the hook starts it when no serve runs): "
                   "exit at once if another one serves the database; its token in the "
                   "discovery file; a forwarded hook's sessions are created inside the root "
                   "the hook names, so it serves every workspace's hooks; stop when the "
                   "database is removed. Needs a token and --idle-exit.")
@click.option("--log-format", type=click.Choice(["auto", "human", "json"]), default="auto",
              show_default=True,
              help="Log lines for a person or one JSON object per line; auto: human on a "
                   "terminal, JSON otherwise.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True,
              help="The least severe lines written; on a terminal a line per request only "
                   "at debug.")
def serve(
    db: str | None, host: str, port: int, workspace: Path | None,
    question_grace_s: float, question_deadline_s: float, token: str | None,
    allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...], no_elicitation: bool,
    mcp_max_sessions: int, idle_exit_s: float | None, hook_writer: bool, log_format: str,
    log_level: str,
) -> None:
    """Serve the HTTP API, the web page and event streams until Ctrl+C, SIGTERM or SIGHUP.

    Prints `sessionledger serving http://HOST:PORT/ — open it in a browser` on standard
    output once it listens; logs go to standard error. Exit 0 when stopped, 2 on bad options
    or workspace rules, 3 when it cannot listen on the address (the port is taken: choose
    another with --port).
    """
    if log_format == "auto":
        log_format = "human" if sys.stderr.isatty() else "json"
    settings = ServerSettings(
        host=host, port=port, workspace_root=workspace or Path.cwd(),
        question_grace_s=question_grace_s, question_deadline_s=question_deadline_s,
        token=token, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
        mcp_elicitation=not no_elicitation, mcp_max_sessions=mcp_max_sessions,
        idle_exit_s=idle_exit_s, hook_writer=hook_writer, log_format=log_format,
        log_level=log_level,
    )
    from .config.workspace import load_workspace_config
    from .http import serve as run_server
    from .http.server import hold_writer_lock, listening_socket  # FastAPI and uvicorn
    from .service.sessions import SessionService

    with listening_socket(host, port) as listener:  # a taken port is said before anything else
        load_workspace_config(settings.workspace_root)  # never start on invalid rules
        url = _store_url(db, create=True)
        if hook_writer and not hold_writer_lock(url):
            return  # another writer serves this database
        service = SessionService.open(
            url, workspace_root=settings.workspace_root, timer_config=settings.timer_config,
        )
        run_server(settings, service=service, listener=listener)


@main.command()
@click.option(
    "--db", "db", metavar="URL", default=None,
    help="Event store URL to run on (sqlite:///path.db). Default: a temporary SQLite file, "
         f"removed afterwards (${DB_ENV} is not used here).",
)
def demo(db: str | None) -> None:
    """Walk a scripted agent session through every feature, then audit it.

    Modes, Plan with a denied write, a question answered and one auto-continued, todos with
    a reminder and a dropped-todo warning, plan feedback then approval, a compaction with the
    plan-file reference, ListModels, ReadSessionContext, deletion and an audit — on the
    service in process, in a temporary workspace, in a few seconds. Exit 0 when every step
    went as expected, 1 naming the step that did not.
    """
    from rich.console import Console

    from .demo import run_demo

    console = Console(highlight=False, width=_DEMO_WIDTH if _piped else None, soft_wrap=_piped)
    if not run_demo(console, db=db).ok:
        raise click.exceptions.Exit(1)


@main.command()
@db_option
@click.option("--all", "include_deleted", is_flag=True,
              help="Also list deleted sessions (their events stay until purged).")
@click.option("--waiting", is_flag=True,
              help="Only sessions with a question or approval waiting for someone.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="At most N sessions, the most recently updated (default: all).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: `sessions`, each with its name, what waits in it and "
                   "whether it is deleted.")
def sessions(
    db: str | None, include_deleted: bool, waiting: bool, limit: int | None, as_json: bool
) -> None:
    """List sessions (not deleted ones unless --all), most recently updated first, with what
    waits for someone in each: questions, plan and tool approvals, the nearest deadline."""
    with _service(db) as service:
        if limit is None and not waiting:
            rows = service.summaries(include_deleted=include_deleted)
        else:  # one query, however many sessions there are
            rows = service.summary_page(limit=limit or _EVERY_ROW, waiting=waiting,
                                        include_deleted=include_deleted)[0]
        entries = service.list_entries(rows)
    if as_json:
        click.echo(json.dumps({"sessions": [
            {**entry, "deleted": row.deleted} for entry, row in zip(entries, rows, strict=True)
        ]}, ensure_ascii=False))
        return
    if not rows:
        _out().print("no sessions waiting" if waiting else "no sessions")
        return
    from rich.table import Table

    table = Table()
    table.add_column("session", no_wrap=True, overflow="fold")
    table.add_column("name", overflow="fold")
    table.add_column("mode")
    table.add_column("waiting", overflow="fold")
    table.add_column("updated")
    for entry, row in zip(entries, rows, strict=True):
        mode = f"{row.display_mode} (deleted)" if row.deleted else row.display_mode
        table.add_row(row.session_id, escape(entry["name"]), mode,
                      _waiting_words(entry["pending"]), row.updated_at)
    _out().print(table)


def _waiting_words(pending: dict[str, Any]) -> str:
    """``2 questions, 1 plan approval — deadline 2026-…Z``: what waits, as a person says it."""
    from .service.documents import WAITING_KINDS

    said = [f"{pending[key]} {noun}{'' if pending[key] == 1 else 's'}"
            for _kind, key, noun in WAITING_KINDS if pending.get(key)]
    if said and pending.get("deadlineAt"):
        said[-1] += f" — deadline {pending['deadlineAt']}"
    return ", ".join(said)


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def state(db: str | None, session_id: str, as_json: bool) -> None:
    """Show a session's execution state, display mode and version."""
    from .service.documents import state_document

    with _service(db) as service:
        summary = service.summary(session_id, allow_deleted=True)
    if as_json:
        click.echo(json.dumps(state_document(summary), ensure_ascii=False))
        return
    execution = summary.execution
    rows = [
        ("session", summary.session_id),
        ("display", summary.display_mode),
        ("mode", execution.mode),
        ("plan", "on" if execution.plan_enabled else "off"),
        ("goal", "none" if execution.goal is None else json.dumps(execution.goal)),
        ("version", f"{summary.version} (updated {summary.updated_at})"),
    ]
    if summary.deleted:
        rows.append(("deleted", "yes: its events stay until `sessionledger purge`"))
    for name, value in rows:
        _out().print(f"{name:<8} {escape(value)}")


_STATUS_STYLE = {"completed": "green", "in_progress": "bold yellow", "pending": ""}


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a table.")
def todos(db: str | None, session_id: str, as_json: bool) -> None:
    """Show a session's todo list in order, with its completed/total progress."""
    with _service(db) as service:
        current = service.todos.current(session_id)
    if as_json:
        click.echo(json.dumps(current.to_json(), ensure_ascii=False))
        return
    when = f", updated {current.updated_at}" if current.updated_at else ""
    _out().print(f"{current.session_id}: {current.progress}{when}")
    if not current.items:
        _out().print("no todos")
        return
    from rich.table import Table

    table = Table()
    table.add_column("#", justify="right")
    table.add_column("status")
    table.add_column("priority")
    table.add_column("content", overflow="fold")
    for number, item in enumerate(current.items, start=1):
        style = _STATUS_STYLE.get(item.status, "")
        table.add_row(str(number), f"[{style}]{item.status}[/]" if style else item.status,
                      item.priority, escape(item.content))
    _out().print(table)


def _event_line(event: RecordedEvent) -> Text:
    from rich.text import Text

    from .tui.shown import shown

    data = json.dumps(event.to_wire()["data"], ensure_ascii=False, separators=(",", ":"))
    line = Text(f"{event.seq:>6}  {event.recorded_at}  {event.actor:<6}  ")
    line.append(event.type, style="bold")
    line.append("  ")
    return line.append_text(shown(data))  # EG-7: what would show as nothing is marked


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
                _out().print(_event_line(event))


@cache
def _type_width() -> int:
    """``replay``'s type column: as wide as the longest type name, so the notes line up."""
    from eventlog import CATALOG

    return max(len(name) for name in CATALOG)


_WHEN_WIDTH = len("2025-01-01T00:00:00.000Z")


def _timeline_line(event: RecordedEvent) -> Text:
    """When (the host's ``occurredAt`` if it gave one, CC-9), who, what, in aligned columns;
    an event with its own time names when the ledger recorded it at the end of the line.
    The note is shown by the terminal's one rule (:func:`shown`, EG-7): markup and HTML as
    typed, a character that would show as nothing or steer the terminal marked."""
    from rich.text import Text

    from .service.documents import describe_event, occurred_at
    from .tui.shown import shown

    occurred = occurred_at(event)
    when = (occurred or event.recorded_at).ljust(_WHEN_WIDTH)
    line = Text(f"{event.seq:>6}  {when}  {event.actor:<6}  ")
    line.append(event.type.ljust(_type_width()), style="bold")
    line.append("  ")
    line.append_text(shown(describe_event(event)))
    if occurred is not None:
        line.append(f"  (recorded {event.recorded_at})", style="dim")
    return line


def _question_lines(payload: dict[str, Any]) -> list[str]:
    """An askUserQuestion payload as a person reads it: each question with its header and
    every option's label, description and preview, in full."""
    lines: list[str] = []
    questions = payload.get("questions")
    for question in questions if isinstance(questions, list) else []:
        if not isinstance(question, dict):
            continue
        multi = " (several answers)" if question.get("multiSelect") else ""
        lines.append(f"[{question.get('header', '')}] {question.get('question', '')}{multi}")
        options = question.get("options")
        for number, option in enumerate(options if isinstance(options, list) else [], 1):
            if not isinstance(option, dict):
                continue
            lines.append(f"  {number}. {option.get('label', '')} — {option.get('description', '')}")
            preview = option.get("preview")
            if isinstance(preview, str):
                lines += ["     | " + row for row in preview.splitlines()]
    return lines


def _in_full(event: RecordedEvent) -> Text | None:
    """EG-7: what a person was asked to approve or answer, in full under its timeline line —
    a submitted plan line for line, a question with all its options and previews."""
    from rich.text import Text

    from eventlog import InteractionRequested, PlanSubmitted

    from .tui.shown import plan_text, shown

    data = event.data
    if isinstance(data, PlanSubmitted):
        body = plan_text(data.plan)
    elif isinstance(data, InteractionRequested) and data.kind == "askUserQuestion":
        body = shown("\n".join(_question_lines(data.payload)))
    else:
        return None
    indent = " " * 8
    return Text("\n").join(Text(indent).append_text(line) for line in body.split("\n"))


def _printed(
    events: Iterable[RecordedEvent], say: Callable[[RenderableType], None], tick: Tick | None,
    total: int,
) -> Iterator[RecordedEvent]:
    """Pass ``events`` through, printing each one's timeline line on the way."""
    for event in events:
        say(_timeline_line(event))
        full = _in_full(event)
        if full is not None:
            say(full)
        if tick is not None:
            tick(event.seq, total)
        yield event


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
@click.option("--until", type=click.IntRange(1, MAX_CURSOR), default=None, metavar="SEQ",
              help="Stop after the event with this seq (default: the last one).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: the timeline `entries` (as the HTTP timeline route gives "
                   "them) and the `state` as of the last one.")
def replay(db: str | None, session_id: str, until: int | None, as_json: bool) -> None:
    """Show the timeline up to an event (when, who, what) and the state as of it.

    An event its host timed itself (an imported transcript's) shows that time, with when the
    ledger recorded it at the end of its line; a session another program created (Claude
    Code) is named with that program's session id first. A plan submitted for approval and a
    question asked are printed in full under their line, as typed: HTML and markup as text,
    a character that would show as nothing as its `<U+XXXX>` mark.
    """
    from projections.session import fold

    from .errors import CorruptLog, InvalidInput
    from .service.documents import client_note, origin_wire, state_document, state_note

    entries: list[dict[str, Any]] = []
    with _service(db) as service:
        service.require_session(session_id)
        version = service.store.version(session_id)
        if until is not None and until > version:
            raise InvalidInput(
                f"--until {until} is past the end: session {session_id} has {version} events"
            )
        last = version if until is None else until
        created = service.find_summary(session_id)
        origin = (client_note(created.client, created.external_session_id)
                  if created is not None else None)
        if origin is not None and not as_json:  # a session Claude Code created says so first
            _out().print(f"{session_id}: {escape(origin)}")
        show = last > REPLAY_PROGRESS_THRESHOLD
        console = _err() if as_json else _out()
        with _progress("replaying", console=console, show=show, total=last) as (tick, say):
            events = service.iter_events(session_id, until=last)
            if as_json:
                events = _collected(events, entries, tick, last)
            summary = fold(events if as_json else _printed(events, say, tick, last))
    if summary is None:
        raise CorruptLog(f"session {session_id} has no SessionCreated event before seq {last}")
    if as_json:
        click.echo(json.dumps({
            "sessionId": session_id,
            **(origin_wire(created) if created is not None else {}),
            "entries": entries,
            "state": state_document(summary),  # as of the last entry
        }, ensure_ascii=False))
        return
    gone = ", deleted" if summary.deleted else ""
    _out().print(f"\nstate as of seq {summary.version} ({summary.updated_at}): "
               f"{escape(state_note(summary.execution))}{gone}")


def _collected(
    events: Iterable[RecordedEvent], into: list[dict[str, Any]], tick: Tick | None, total: int
) -> Iterator[RecordedEvent]:
    """Pass ``events`` through, keeping each one's timeline entry in ``into``."""
    from .service.documents import timeline_entry

    for event in events:
        into.append(timeline_entry(event))
        if tick is not None:
            tick(event.seq, total)
        yield event


# -- audit and maintenance -------------------------------------------------------------------


def _audit_all(service: SessionService) -> list[AuditReport]:
    total = len(service.store.session_heads())
    with _progress("auditing", console=_err(), show=total > PROGRESS_THRESHOLD) as (tick, _say):
        return service.audit_all(progress=tick)


@main.command()
@db_option
@click.argument("session_id", metavar="[SESSION]", required=False)
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object: `ok` and `sessions`, each session's audit document with its "
                   "`sessionId`.")
@click.option("--strict", is_flag=True, help="Exit 1 when any session has findings too.")
def audit(db: str | None, session_id: str | None, as_json: bool, strict: bool) -> None:
    """Verify hash chains and projections (one session, or all); exit 1 naming each fault.

    An event this build cannot decode is a fault named `undecodable at seq N` (its chain may
    well be intact); the other events and sessions are still checked. Findings (a
    write while Plan was on, unfinished todos dropped, a question nobody answered) are listed
    as `FINDING` lines; they are not faults, unless `--strict` makes any of them exit 1.
    """
    with _service(db) as service:
        reports = [service.audit_report(session_id)] if session_id else _audit_all(service)
    found = sum(len(r.findings) for r in reports)
    failed = not all(r.ok for r in reports) or (strict and found > 0)
    if as_json:
        click.echo(json.dumps(
            {"ok": all(r.ok for r in reports),
             "sessions": [{"sessionId": r.session_id, **r.to_wire()} for r in reports]},
            ensure_ascii=False,
        ))
        if failed:
            raise click.exceptions.Exit(1)
        return
    for report in reports:
        if not report.chain_ok:
            _out().print(f"FAIL {report.session_id}: chain broken at seq {report.first_bad_seq}"
                       f" ({escape(report.reason or 'unknown reason')})")
        for undecodable in report.undecodable:
            _out().print(f"FAIL {report.session_id}: {escape(str(undecodable))}")
        for difference in report.differences:
            _out().print(f"FAIL {report.session_id}: projection differs: {escape(difference)}")
        for note in report.notes:
            _out().print(f"NOTE {report.session_id}: {escape(note)}")
    if all(r.ok for r in reports):
        events_total = sum(r.events for r in reports)
        noun = "session" if len(reports) == 1 else "sessions"
        events_noun = "event" if events_total == 1 else "events"
        _out().print(f"OK: {len(reports)} {noun}, {events_total} {events_noun}, every hash chain "
                   "verifies and every projection equals a fresh fold of the log")
    for report in reports:  # after the verdict: findings are not faults (CC-10)
        for finding in report.findings:
            _out().print(f"FINDING {report.session_id}: {escape(str(finding))}")
    if found:
        with_findings = sum(1 for r in reports if r.findings)
        _out().print(f"{found} finding{'' if found == 1 else 's'} in {with_findings} "
                   f"session{'' if with_findings == 1 else 's'}"
                   + (" (--strict: exit 1)" if strict else ""))
    if failed:
        raise click.exceptions.Exit(1)


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True,
              help="Folder to write the two files into (it must exist).")
@click.option("--overwrite", is_flag=True, help="Replace files of an earlier export.")
def export(db: str | None, session_id: str, directory: Path, overwrite: bool) -> None:
    """Write a session's events as JSON Lines and its audit as JSON, to keep or hand on.

    `SESSION.events.jsonl` holds one envelope per line in seq order, as `events --json` and
    the HTTP events route give them (hashes included: `audit` of an imported copy can check
    the chain); `SESSION.audit.json` the audit document of the session as of that export.
    A deleted session's events export too. Both files are written beside their names and
    renamed into place once both are complete. Exit 2 when the session is unknown, a file
    exists (without --overwrite), the folder is missing or a file cannot be written there.
    """
    from .errors import InvalidInput

    if not directory.is_dir():
        raise InvalidInput(f"--dir {str(directory)!r} is not an existing folder")
    with _service(db) as service:
        service.require_session(session_id)  # an unknown session is named before any file
        names = [f"{session_id}.{suffix}" for suffix in ("events.jsonl", "audit.json")]
        if any(len(os.fsencode(f".{name}.partial")) > _NAME_MAX or Path(name).name != name
               for name in names):
            raise InvalidInput(f"session id {session_id!r} cannot name a file")
        targets = [directory / name for name in names]
        for target in targets:
            if (target.exists() or target.is_symlink()) and not overwrite:
                raise InvalidInput(f"{target} exists: pass --overwrite to replace it")
        partials = [t.with_name(f".{t.name}.partial") for t in targets]
        try:
            count = _written(partials[0], (
                json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":")) + "\n"
                for event in service.iter_events(session_id)
            ))
            report = service.audit_report(session_id)
            _written(partials[1], [json.dumps({"sessionId": session_id, **report.to_wire()},
                                              ensure_ascii=False, indent=2) + "\n"])
            for partial, target in zip(partials, targets, strict=True):
                partial.replace(target)  # both complete before either is in place
        except OSError as exc:
            raise InvalidInput(f"cannot write the export into {directory}: "
                               f"{exc.strerror or exc}") from None
        finally:
            for partial in partials:
                partial.unlink(missing_ok=True)
    _out().print(f"exported {count} event{'' if count == 1 else 's'} to {escape(str(targets[0]))}"
                 f" and the audit ({'ok' if report.ok else 'FAULTS FOUND'}) to "
                 f"{escape(str(targets[1]))}")


_NAME_MAX = 255
"""The longest file name, in bytes, most file systems take."""


def _written(path: Path, chunks: Iterable[str]) -> int:
    """Write ``chunks`` to a new file at ``path``; how many were written."""
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for chunk in chunks:
            out.write(chunk)
            count += 1
    return count


@main.command()
@db_option
def rebuild(db: str | None) -> None:
    """Drop every projection and rebuild it from the log."""
    from .tools.plan_files import restore_plan_files

    with _service(db) as service, _progress("rebuilding", console=_err(), show=True) as (tick, _):
        folded = service.rebuild_projections(progress=tick)
        restored = restore_plan_files(service.store, service.summaries())
    _out().print(f"rebuilt every projection: {folded} events folded")
    for path in restored:
        _out().print(f"restored the approved plan file {escape(path)}")


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
def purge(db: str | None, session_id: str) -> None:
    """Remove a deleted session's events; other sessions' chains are untouched."""
    with _service(db) as service:
        removed = service.purge_session(session_id)
    _out().print(f"purged {session_id}: {removed} events removed")


@main.command()
@db_option
@click.argument("dest", metavar="DEST", type=click.Path(path_type=Path))
@click.option("--overwrite", is_flag=True,
              help="Replace DEST if it is an existing regular file (never the store itself or "
                   "its -wal/-shm files).")
def backup(db: str | None, dest: Path, overwrite: bool) -> None:
    """Copy the SQLite store to DEST with SQLite's online backup, safe while serve writes.

    The copy is the store as of one commit: every event acknowledged before the backup began,
    with its hash chain, head records and projections, in one self-contained file; writers go
    on meanwhile. It is written beside DEST and renamed into place when complete, so a failed
    backup leaves DEST as it was. Restore by putting the copy in place of the stopped store;
    check it first with `sessionledger audit --db sqlite:///DEST`. Exit 2 when the store is not
    SQLite or missing, DEST exists (without --overwrite), is the store, is not a regular file
    (a FIFO, a device, a socket, a symbolic link: never replaced), or its directory is missing;
    1 when the copy fails.
    """
    from eventlog import BackupRefused, backup_store

    from .errors import InvalidInput

    try:
        report = backup_store(_store_url(db, create=False), dest, overwrite=overwrite)
    except BackupRefused as exc:
        raise InvalidInput(str(exc)) from exc
    noun = "session" if report.sessions == 1 else "sessions"
    _out().print(
        f"backed up {report.events} events of {report.sessions} {noun} (through global "
        f"position {report.head_position}, {report.size_bytes} bytes) to "
        f"{escape(str(report.destination))}"
    )


@main.command()
@db_option
@click.option("--from", "source", metavar="URL", default=None,
              help="The store to copy (default: the one --db names).")
@click.option("--to", "target", metavar="URL", required=True,
              help="An empty PostgreSQL store (postgresql://…[?schema=NAME]).")
def migrate(db: str | None, source: str | None, target: str) -> None:
    """Copy a log into an empty PostgreSQL store, verifying every chain on arrival.

    The source's chains are verified first; the rows are copied as stored (ids, times,
    hashes) in one transaction that checks every chain again before it commits, then the
    destination's projections are built from the copy. Nothing is written to the destination
    unless everything verified. Exit 1 when the source's chains break or the destination is
    not empty, 2 when --to is not a PostgreSQL URL.
    """
    from eventlog import backend_of
    from eventlog.migrate import MigrationRefused
    from eventlog.migrate import migrate as copy_log

    from .errors import Conflict, InvalidInput

    from_url = _store_url(source or db, create=False)
    if backend_of(target) != "postgresql":
        raise InvalidInput(f"--to must name a postgresql:// store, not {target!r}")
    try:
        report = copy_log(from_url, target)
    except MigrationRefused as exc:
        raise Conflict(f"nothing was migrated: {exc}") from exc
    with _service(target):
        pass  # opening the service builds the destination's projections from the copy
    noun = "session" if report.sessions == 1 else "sessions"
    _out().print(
        f"migrated {report.events} events of {report.sessions} {noun} to "
        f"{escape(_without_password(target))}; every chain verified on arrival"
    )


def _without_password(url: str) -> str:
    """The URL as it may be printed: a password in it is masked."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
@click.argument("tool")
@click.option("--input", "input_json", required=True, metavar="JSON",
              help="The tool input as a JSON object.")
@click.option("--call-id", default=None, help="Reuse a call id (re-sending returns the original).")
def call(db: str | None, session_id: str, tool: str, input_json: str, call_id: str | None) -> None:
    """Run one tool call as the headless host: a call that needs the user is denied.

    Prints the text the model would get. Exit 0 when the call completed successfully, 1 when
    it was denied or failed, 2 for bad input (nothing is appended then).
    """
    from eventlog import JsonShapeError, loads_json

    from .errors import InvalidInput
    from .ledger import shape_refused

    try:
        raw = loads_json(input_json)  # EG-1: the edges' strict decoder
    except JsonShapeError as exc:
        raise shape_refused(exc, loc="--input") from None
    except ValueError as exc:
        raise InvalidInput(f"--input is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidInput("--input must be a JSON object")
    with _service(db, create=True) as service:
        answer = service.tools.call(session_id, tool, raw, call_id=call_id, host="headless")
    document = answer.document
    _out().print(escape(str(document.get("modelContent", ""))), soft_wrap=True)
    ok = document["status"] == "completed" and document.get("success") is True
    raise SystemExit(0 if ok else 1)


@main.command()
@db_option
@click.option(
    "--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
    help="Workspace root: the new session's workspace. Default: the current directory.",
)
@click.option("--session", "session_id", metavar="SESSION", default=None,
              help="Resume this session (todos, mode, pending questions) instead of a new one.")
@click.option("--host-kind", type=click.Choice(["protocol", "tui", "headless"]),
              default="protocol", show_default=True,
              help="The host the calls are made as: decides the broker and the tool surface.")
@click.option("--web-url", metavar="URL", default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}/",
              show_default=True,
              help="Where `sessionledger serve` runs: named in pending results so a person "
                   "can answer there.")
@click.option("--question-grace-s", type=float, default=DEFAULT_QUESTION_GRACE_S,
              show_default=True, help="Seconds a question waits before its countdown shows.")
@click.option("--question-deadline-s", type=float, default=DEFAULT_QUESTION_DEADLINE_S,
              show_default=True, help="Seconds after which a question auto-continues.")
@click.option("--no-elicitation", "no_elicitation", is_flag=True, default=False,
              help="Never ask through the client's forms: questions and plan approvals wait, "
                   "pending, for the web page (for clients that answer forms by themselves, "
                   "as Codex's headless run does).")
def mcp(
    db: str | None, workspace: Path | None, session_id: str | None, host_kind: str,
    web_url: str, question_grace_s: float, question_deadline_s: float, no_elicitation: bool,
) -> None:
    """Serve the session tools over the Model Context Protocol on stdin/stdout.

    One MCP connection is one ledger session: --session resumes it, else a new session is
    created at the first tool call (its id is printed on stderr then). Every call is recorded
    exactly as one made over HTTP. AskUserQuestion and ExitPlanMode ask through MCP
    elicitation when the client supports it; otherwise they answer that they are pending,
    naming the web page where a person can answer, and InteractionStatus reports the outcome.
    See docs/mcp.md.
    """
    from .config.workspace import load_workspace_config
    from .mcp import LedgerMcp, McpOptions, run_stdio  # the mcp SDK only for this command
    from .service.sessions import SessionService
    from .service.timers import TimerScheduler

    settings = ServerSettings(  # the checks serve makes of the root and the durations
        workspace_root=workspace or Path.cwd(), question_grace_s=question_grace_s,
        question_deadline_s=question_deadline_s,
    )
    load_workspace_config(settings.workspace_root)  # TR-4: never start on invalid rules
    options = McpOptions(session_id=session_id, host=cast("HostKind", host_kind), web_url=web_url,
                         elicitation=not no_elicitation)
    service = SessionService.open(
        _store_url(db, create=True), workspace_root=settings.workspace_root,
        timer_config=settings.timer_config,
    )
    scheduler = TimerScheduler(service.timers, service.store)  # the protocol host's timers
    try:
        ledger = LedgerMcp(service, options)
        scheduler.start()
        run_stdio(ledger)
    finally:
        scheduler.stop()
        service.close()


@main.command()
@db_option
@click.argument("session_id", metavar="SESSION")
def tui(db: str | None, session_id: str) -> None:
    """Open the terminal UI on a session: todos with progress, mode (Shift+Tab), Goal, and the
    approval queue — questions answered from the keyboard, plans approved. Ctrl+Q quits.
    """
    from .tui import run_tui  # Textual only for this command

    with _service(db) as service:
        run_tui(service, session_id)


@main.group()
def hook() -> None:
    """Answer an agent host's hook events: Claude Code, Codex CLI, Gemini CLI."""


def _finite(value: float) -> float:
    if value != value:  # NaN passes every range comparison
        raise click.BadParameter("must be a number of seconds")
    return value


HOOK_HOSTS = {"claude-code": "Claude Code", "codex": "Codex CLI", "gemini": "Gemini CLI"}


def _hook_command(host: str) -> None:
    """``sessionledger hook HOST``: the same options and path for every host."""
    name = HOOK_HOSTS[host]

    @hook.command(host, help=f"""One {name} hook event on stdin, its JSON output on stdout,
    exit 0.

    The event goes to a running serve when one is named or found (the same answer as its HTTP
    route, without loading the service here), else it is recorded in the database directly
    and a serve of the hook's own is started in the background for the events that follow
    (it stops after 10 minutes without one; SESSIONLEDGER_HOOK_WRITER=off starts none,
    a number of seconds sets the wait). An event that cannot be read or recorded is answered
    ``{{}}`` with a line on stderr, so a broken hook never stops the agent.
    """)
    @db_option
    @click.option(
        "--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
        help=f"Workspace root: the sessions' cwd must lie inside it. Default: the current "
             f"directory ({name} runs command hooks in the project).",
    )
    @click.option(
        "--url", "url", metavar="URL", default=None,
        help="A serve to forward the event to (http://HOST:PORT). Default: $SESSIONLEDGER_URL, "
             "else the serve whose discovery file lies beside the database, else none: the "
             "event is recorded here (and the hook's own serve started).",
    )
    @click.option("--direct", is_flag=True,
                  help="Record the event here, never forward it (and start no serve).")
    @click.option(
        "--timeout", type=click.FloatRange(min=0, min_open=True, max=MAX_TIMEOUT_S),
        default=DEFAULT_TIMEOUT_S, callback=lambda _ctx, _param, value: _finite(value),
        show_default=True, help="Seconds to wait for a serve's answer before answering {}.",
    )
    def run_hook(db: str | None, workspace: Path | None, url: str | None, direct: bool,
                 timeout: float) -> None:
        options = HookOptions(db=db, workspace=workspace, url=url, direct=direct,
                              timeout=timeout, host=host)
        output, problem = run_command_hook(sys.stdin.buffer.read(), options)
        if problem is not None:
            click.echo(f"sessionledger hook: {problem}", err=True)
        click.echo(json.dumps(output, ensure_ascii=False))


for _host in HOOK_HOSTS:
    _hook_command(_host)


# -- setting a host up -------------------------------------------------------------------------


@main.group()
def setup() -> None:
    """Put this ledger's hooks into an agent host's settings."""


@setup.command("claude-code")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR",
              help="The project whose .claude/settings.json to change. Default: the current "
                   "directory.")
@click.option("--user", is_flag=True,
              help="Change the user's settings ($CLAUDE_CONFIG_DIR, else ~/.claude) for "
                   "every project instead.")
@click.option("--url", "url", metavar="URL", default=None,
              help=f"The serve the HTTP hooks post to. Default: "
                   f"http://{DEFAULT_HOST}:{DEFAULT_PORT}.")
@click.option("--command", "command", is_flag=True,
              help="Command hooks for every event (no serve needed; slower per tool call).")
@db_option
@click.option("--remove", is_flag=True, help="Take this ledger's hooks out instead.")
def setup_claude_code(project: Path | None, user: bool, url: str | None, command: bool,
                      db: str | None, remove: bool) -> None:
    """Write or merge this ledger's hooks into Claude Code's settings.json.

    HTTP hooks to a running serve where Claude Code takes them, the command hook for
    SessionStart (Claude Code runs no HTTP hook there); with --command, command hooks only.
    Every other setting and hook in the file is kept; running it again replaces this
    ledger's hooks rather than adding a second copy; the old file is kept beside it as
    settings.json.bak. --remove takes exactly this ledger's hooks out. Prints what changed.
    """
    from .claude_code.setup import SettingsError, changes, ledger_hooks, merged, removed
    from .errors import InvalidInput

    if user and project is not None:
        raise InvalidInput("--user and --project name two different settings files; give one")
    if command and url is not None:
        raise InvalidInput("--command writes no HTTP hook: it takes no --url")
    _check_url(url)
    if user:
        config = os.environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
        path = Path(config) / "settings.json"
    else:
        path = (project or Path.cwd()) / ".claude" / "settings.json"
    text, before = _read_json_settings(path)
    try:
        if remove:
            after = removed(before)
        else:
            served = None if command else (url or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}")
            after = merged(before, ledger_hooks(url=served, db=db, command=command))
    except SettingsError as exc:
        raise InvalidInput(f"{path}: {exc}; nothing was changed") from exc
    _write_changed(path, text, json.dumps(after, indent=2, ensure_ascii=False) + "\n",
                   changes(before, after), "hooks removed" if remove else "hooks written")


def _read_json_settings(path: Path) -> tuple[str, dict[str, Any]]:
    """A JSON settings file's text and document (``""`` and ``{}`` when there is none)."""
    from .errors import InvalidInput

    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        document: Any = json.loads(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path} cannot be read as JSON: {exc}; nothing was changed") from exc
    if not isinstance(document, dict):
        raise InvalidInput(f"{path} is not a JSON object; nothing was changed")
    return text, document


def _write_changed(path: Path, old_text: str, new_text: str, lines: list[str],
                   what: str) -> None:
    """Replace ``path`` with ``new_text`` (atomically, the old file kept beside it as
    ``.bak``) and print ``lines``; say ``unchanged`` when nothing changed."""
    if not lines:
        click.echo(f"{path}: unchanged")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    if old_text:
        path.with_name(path.name + ".bak").write_text(old_text, encoding="utf-8")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(new_text, encoding="utf-8")
    os.replace(temporary, path)
    click.echo(f"{path}: {what}" + (f" (the old file is {path.name}.bak)" if old_text else ""))
    for line in lines:
        click.echo(f"  {line}")


def _check_url(url: str | None) -> None:
    from .errors import InvalidInput

    if url is not None and not url.startswith(("http://", "https://")):
        raise InvalidInput(f"--url {url!r} is not an http:// or https:// address")


@setup.command("codex")
@click.option("--codex-home", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR",
              help="Codex CLI's home, where hooks.json and config.toml live. Default: "
                   "$CODEX_HOME, else ~/.codex.")
@click.option("--url", "url", metavar="URL", default=None,
              help="A serve the hooks forward to and whose /mcp Codex uses. Default: the hooks "
                   "find a serve beside the database or record there; MCP runs "
                   "`sessionledger mcp`.")
@db_option
@click.option("--mcp/--no-mcp", default=True, show_default=True,
              help="Register the ledger's MCP server too.")
@click.option("--remove", is_flag=True, help="Take this ledger's hooks, their trust and its "
                                              "MCP server out instead.")
def setup_codex(codex_home: Path | None, url: str | None, db: str | None, mcp: bool,
                remove: bool) -> None:
    """Write or merge this ledger's hooks and MCP server into Codex CLI's configuration.

    The command hooks go into hooks.json; config.toml gets their trust (Codex runs no hook
    nobody trusted, and says nothing), [tools.update_plan] enabled = true (Codex's todo
    list, which codex exec offers only so; a setting of your own is kept) and, unless
    --no-mcp, [mcp_servers.sessionledger], which Codex waits for before the model's first
    request. Everything else in both files is kept; running it again replaces this ledger's
    entries; old files are kept as .bak.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from .claude_code.setup import (
        MCP_NAME,
        SettingsError,
        changes,
        codex_hooks,
        codex_mcp,
        codex_trust,
        merged,
        removed,
    )
    from .errors import InvalidInput

    _check_url(url)
    home = codex_home or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    hooks_path, config_path = (home / "hooks.json").absolute(), (home / "config.toml").absolute()
    hooks_text, before = _read_json_settings(hooks_path)
    try:
        after = removed(before) if remove else merged(before, codex_hooks(url=url, db=db))
        old_trust = codex_trust(str(hooks_path), before)
        new_trust = {} if remove else codex_trust(str(hooks_path), after)
    except SettingsError as exc:
        raise InvalidInput(f"{hooks_path}: {exc}; nothing was changed") from exc
    try:
        config_text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
        config = tomlkit.parse(config_text)
    except (OSError, UnicodeDecodeError, TOMLKitError) as exc:
        raise InvalidInput(f"{config_path} cannot be read as TOML: {exc}; nothing was "
                           "changed") from exc
    lines: list[str] = []
    try:
        hooks_table = config.setdefault("hooks", tomlkit.table(is_super_table=True))
        state = hooks_table.setdefault("state", tomlkit.table(is_super_table=True))
        for key in old_trust:
            if key not in new_trust and key in state:
                del state[key]
                lines.append(f"- trust of {key.rsplit(':', 3)[1]} hook")
        for key, digest in new_trust.items():
            current = state.get(key)
            if current is None or current.get("trusted_hash") != digest:
                entry = tomlkit.table()
                entry["trusted_hash"] = digest
                state[key] = entry
                lines.append(f"+ trust of {key.rsplit(':', 3)[1]} hook")
        if not state:
            del hooks_table["state"]
        if not hooks_table:
            del config["hooks"]
        servers = config.get("mcp_servers")
        if remove or not mcp:
            if servers is not None and MCP_NAME in servers:
                del servers[MCP_NAME]
                lines.append(f"- mcp_servers.{MCP_NAME}")
                if not servers:
                    del config["mcp_servers"]
        else:
            wanted = codex_mcp(url=url, db=db)
            if servers is None:
                servers = config.setdefault("mcp_servers", tomlkit.table(is_super_table=True))
            if servers.get(MCP_NAME) != wanted:
                server = tomlkit.table()
                server.update(wanted)
                servers[MCP_NAME] = server
                lines.append(f"+ mcp_servers.{MCP_NAME}")
        lines += _codex_plan_tool(config, remove=remove)
    except (AttributeError, TypeError, ValueError, TOMLKitError) as exc:
        raise InvalidInput(f"{config_path}: its hooks, mcp_servers or tools are not tables "
                           f"({exc}); nothing was changed") from exc
    _write_changed(hooks_path, hooks_text, json.dumps(after, indent=2, ensure_ascii=False)
                   + "\n", changes(before, after), "hooks removed" if remove
                   else "hooks written")
    written = tomlkit.dumps(config).rstrip("\n")  # a removed table leaves its blank line
    _write_changed(config_path, config_text, written + "\n" if written else "", lines,
                   "entries removed" if remove else "trust, plan tool and MCP server written")


def _codex_plan_tool(config: Any, *, remove: bool) -> list[str]:
    """``[tools.update_plan] enabled = true``, marked as this ledger's, unless the user set it
    either way or wrote ``tools`` in a shape this leaves alone (an inline table, dotted keys,
    another value); with ``remove``, taken out again if it is the ledger's, with the table
    the ledger added for it. The change, if any."""
    import tomlkit
    from tomlkit.items import Table

    from .claude_code.setup import CODEX_PLAN_TOOL_NOTE

    def plain(container: Any, name: str) -> Table | None:
        """``container[name]`` when it is a table written as ``[header]``, else ``None``."""
        value = container.get(name)
        body = container.body if hasattr(container, "body") else container.value.body
        dotted = any(key is not None and key.key == name and key.is_dotted()
                     for key, _item in body)
        return value if isinstance(value, Table) and not dotted else None

    tools = config.get("tools")
    plan_tool = None if plain(config, "tools") is None else tools.get("update_plan")
    if (tools is not None and plain(config, "tools") is None) or (
            plan_tool is not None and plain(tools, "update_plan") is None):
        if not remove:
            click.echo("note: config.toml writes `tools` in a form setup leaves to you; for "
                       "Codex's todo list in codex exec add `[tools.update_plan] enabled = "
                       "true` yourself", err=True)
        return []
    if plan_tool is not None and "enabled" in plan_tool:
        if not remove or CODEX_PLAN_TOOL_NOTE not in plan_tool.item("enabled").trivia.comment:
            return []  # the user's own setting
        del plan_tool["enabled"]
        if not plan_tool and CODEX_PLAN_TOOL_NOTE in plan_tool.trivia.comment:
            del tools["update_plan"]  # the table the ledger added for it
            if not tools and tools.is_super_table():
                del config["tools"]
        return ["- tools.update_plan.enabled"]
    if remove:
        return []
    enabled = tomlkit.item(True)
    enabled.comment(CODEX_PLAN_TOOL_NOTE)
    if tools is None:
        tools = config.setdefault("tools", tomlkit.table(is_super_table=True))
    if plan_tool is None:
        plan_tool = tomlkit.table()
        plan_tool.comment(CODEX_PLAN_TOOL_NOTE)
        tools.add("update_plan", plan_tool)
    plan_tool.add("enabled", enabled)
    return ["+ tools.update_plan.enabled"]


@setup.command("gemini")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR",
              help="The project whose .gemini/settings.json to change. Default: the current "
                   "directory.")
@click.option("--user", is_flag=True,
              help="Change the user's settings (~/.gemini/settings.json) for every project "
                   "instead.")
@click.option("--url", "url", metavar="URL", default=None,
              help="A serve the hooks forward to and whose /mcp Gemini uses. Default: the "
                   "hooks find a serve beside the database or record there; MCP runs "
                   "`sessionledger mcp`.")
@db_option
@click.option("--mcp/--no-mcp", default=True, show_default=True,
              help="Register the ledger's MCP server too.")
@click.option("--remove", is_flag=True,
              help="Take this ledger's hooks and MCP server out instead.")
def setup_gemini(project: Path | None, user: bool, url: str | None, db: str | None, mcp: bool,
                 remove: bool) -> None:
    """Write or merge this ledger's hooks and MCP server into Gemini CLI's settings.json.

    Command hooks on the events the ledger reads and, unless --no-mcp,
    mcpServers.sessionledger. Everything else in the file is kept; running it again replaces
    this ledger's entries; the old file is kept as settings.json.bak.
    """
    from .claude_code.setup import (
        MCP_NAME,
        SettingsError,
        changes,
        gemini_hooks,
        gemini_mcp,
        merged,
        removed,
    )
    from .errors import InvalidInput

    if user and project is not None:
        raise InvalidInput("--user and --project name two different settings files; give one")
    _check_url(url)
    base = Path.home() if user else (project or Path.cwd())
    path = base / ".gemini" / "settings.json"
    text, before = _read_json_settings(path)
    try:
        after = removed(before) if remove else merged(before, gemini_hooks(url=url, db=db))
    except SettingsError as exc:
        raise InvalidInput(f"{path}: {exc}; nothing was changed") from exc
    lines = changes(before, after)
    servers = after.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f'{path}: "mcpServers" is not a JSON object; nothing was changed')
    if remove or not mcp:
        if servers and MCP_NAME in servers:
            del servers[MCP_NAME]
            lines.append(f"- mcpServers.{MCP_NAME}")
            if not servers:
                del after["mcpServers"]
    else:
        wanted = gemini_mcp(url=url, db=db)
        if (servers or {}).get(MCP_NAME) != wanted:
            after["mcpServers"] = {**(servers or {}), MCP_NAME: wanted}
            lines.append(f"+ mcpServers.{MCP_NAME}")
    _write_changed(path, text, json.dumps(after, indent=2, ensure_ascii=False) + "\n", lines,
                   "hooks removed" if remove else "hooks written")


# -- importing another host's sessions (CC-9) --------------------------------------------------

IMPORT_PROGRESS_THRESHOLD = 2000
"""``import claude-code`` shows a progress bar past this many observations (on a terminal)."""


@main.group("import")
def import_() -> None:
    """Import sessions another coding agent recorded."""


def _import_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options every ``import HOST`` takes."""
    for option in reversed((
        db_option,
        click.argument("paths", metavar="PATH…", nargs=-1, required=True,
                       type=click.Path(exists=True, path_type=Path)),
        click.option(
            "--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path),
            default=None,
            help="Workspace root, as for serve: a session's cwd must lie inside it. Default: "
                 "the current directory.",
        ),
        click.option(
            "--into", type=click.Path(exists=True, file_okay=False, path_type=Path),
            default=None, metavar="DIR",
            help="Record every imported session in DIR (inside the root) whatever cwd its "
                 "file names: for files from another machine.",
        ),
        click.option("--json", "as_json", is_flag=True,
                     help="One JSON document with every file's outcome instead of text."),
    )):
        command = option(command)
    return command


@import_.command("claude-code")
@_import_options
def import_claude_code(
    db: str | None, paths: tuple[Path, ...], workspace: Path | None, into: Path | None,
    as_json: bool,
) -> None:
    """Import Claude Code's JSONL transcripts into ledger sessions.

    Each PATH is a .jsonl file or a directory searched for them (~/.claude/projects/…); a
    subagent's transcript (<session>/subagents/agent-*.jsonl) becomes a child session of its
    parent's.

    Each transcript's prompts, answers, tool calls and results, todo lists, questions, plans
    and their outcomes, permission modes and compactions are appended in transcript order,
    each with the transcript's own time as occurredAt. Importing again appends nothing; a
    transcript that grew appends only what is new. Into a session its hooks recorded, only
    what they never saw is added (the assistant's text), and none of it dated before the
    session's last event: such lines are reported skipped. A malformed line is reported as
    file:line on stderr and skipped whole. A transcript whose cwd lies outside the root is
    reported and not imported (see --into). Exit 0 when every transcript was imported
    (skipped lines are no failure), 1 when one could not be, 2 on bad arguments.
    """
    _import_files("claude-code", db, paths, workspace, into, as_json)


IMPORTED_FILES = {
    "codex": ("Codex CLI", "rollouts", "$CODEX_HOME/sessions/…/rollout-*.jsonl"),
    "gemini": ("Gemini CLI", "chat recordings", "~/.gemini/tmp/<project>/chats/session-*.jsonl"),
}


def _import_host_command(host: str) -> None:
    name, what, where = IMPORTED_FILES[host]

    @import_.command(host, help=f"""Import {name}'s {what} into ledger sessions.

    Each PATH is a .jsonl file or a directory searched for them ({where}). Each file's
    prompts, tool calls and their results, todo lists, the assistant's text and compactions
    are appended in file order as the host's hooks would have recorded them, each with the
    file's own time as occurredAt: one session per file, the hooked session when its hooks
    recorded it. Importing again appends nothing; a file that grew appends only what is new.
    A malformed line is reported as file:line on stderr and skipped whole. Exit 0 when every
    file was imported, 1 when one could not be, 2 on bad arguments.
    """)
    @_import_options
    def run_import(db: str | None, paths: tuple[Path, ...], workspace: Path | None,
                   into: Path | None, as_json: bool) -> None:
        _import_files(host, db, paths, workspace, into, as_json)


def _import_files(host: str, db: str | None, paths: tuple[Path, ...], workspace: Path | None,
                  into: Path | None, as_json: bool) -> None:
    """``import HOST``: every file under ``paths`` into ledger sessions, reported."""
    from .claude_code.recorder import Recorder
    from .claude_code.transcripts import NotATranscript, find_transcripts
    from .errors import InvalidInput

    root = (workspace or Path.cwd()).resolve()
    if into is not None and not into.resolve().is_relative_to(root):
        raise InvalidInput(f"--into {str(into)!r} lies outside the workspace root {str(root)!r}")
    try:
        files = find_transcripts(paths)
    except (FileNotFoundError, NotATranscript) as exc:
        raise InvalidInput(str(exc)) from exc
    if not files:
        raise InvalidInput(f"no {HOOK_HOSTS[host]} session files (*.jsonl) under "
                           + ", ".join(str(p) for p in paths))
    reports: list[dict[str, Any]] = []
    with _service(db, root, create=True) as service:
        recorder = Recorder(service, workspace=into)
        for file in files:
            reports.append(_import_transcript(recorder, file, root=root, into=into,
                                              as_json=as_json, host=host))
    if as_json:
        click.echo(json.dumps({"transcripts": reports}, ensure_ascii=False))
    if any(r.get("notImported") for r in reports):
        raise click.exceptions.Exit(1)


for _host in IMPORTED_FILES:
    _import_host_command(_host)


def _import_transcript(
    recorder: Recorder, file: TranscriptFile, *, root: Path, into: Path | None, as_json: bool,
    host: str = "claude-code",
) -> dict[str, Any]:
    """Import one of ``host``'s session files and report it (a line on stdout and its
    skipped lines on stderr, or the JSON entry returned)."""
    from .claude_code.host_files import read_codex_rollout, read_gemini_chat
    from .claude_code.observations import ledger_session_id
    from .claude_code.recorder import unheld_todo_list
    from .claude_code.transcripts import read_transcript

    read = {"codex": read_codex_rollout, "gemini": read_gemini_chat}.get(host, read_transcript)
    name = str(file.path)
    report: dict[str, Any] = {"path": name, "sessionId": None, "externalSessionId": None,
                              "parentSessionId": None, "appended": 0, "skipped": []}
    try:
        transcript = read(file)
    except OSError as exc:
        report["notImported"] = f"cannot be read: {exc.strerror or exc}"
        _say_not_imported(report, as_json)
        return report
    skipped = [(s.line, s.reason) for s in transcript.skipped]
    notes = [(int(seen.where.rpartition(":")[2]),
              f"recorded as the call, not as the session's todo list: {reason}")
             for seen in transcript.seen
             if (reason := unheld_todo_list(seen.observation)) is not None]
    if notes:  # recorded, but not all of it: said apart from the lines skipped
        report["notes"] = [{"line": line, "note": note} for line, note in notes]
    if transcript.seen:
        origin = transcript.seen[0].origin
        report["sessionId"] = ledger_session_id(origin.session_id, origin.agent_id,
                                                origin.client)
        report["externalSessionId"] = origin.session_id if origin.agent_id is None else (
            f"{origin.session_id}/{origin.agent_id}")
        if origin.agent_id is not None:
            report["parentSessionId"] = ledger_session_id(origin.session_id)
        show = not as_json and len(transcript.seen) > IMPORT_PROGRESS_THRESHOLD
        total = len(transcript.seen)
        with _progress(f"importing {file.path.name}", console=_err(), show=show,
                       total=total) as (tick, _say):
            done = 0

            def moved(count: int) -> None:
                nonlocal done
                done += count
                if tick is not None:
                    tick(done, total)

            outcome = recorder.record_all(transcript.seen, progress=moved)
        report["appended"] = sum(outcome.appended.values())
        for where, reason in outcome.failed:
            skipped.append((int(where.rpartition(":")[2]), f"not recorded: {reason}"))
        for where in outcome.late:
            skipped.append((int(where.rpartition(":")[2]), LATE_TEXT))
        if outcome.refused:
            report["notImported"] = _refusal(transcript.cwd, root, into)
    skipped.sort()
    report["skipped"] = [{"line": line, "reason": reason} for line, reason in skipped]
    if not as_json:
        for line, reason in sorted([*skipped, *notes]):
            _err().print(escape(f"{name}:{line}: {reason}"))
    if report.get("notImported"):
        _say_not_imported(report, as_json)
    elif not as_json:
        _out().print(escape(_import_line(report, host)))
    return report


LATE_TEXT = ("not appended: the assistant's text, dated before the session's last event "
             "(its hooks recorded past it and never see the assistant's text); appended, it "
             "would put the log's times out of order")


def _import_line(report: dict[str, Any], host: str = "claude-code") -> str:
    skipped = len(report["skipped"])
    lines = f"{skipped} line{'' if skipped == 1 else 's'} skipped"
    if report["sessionId"] is None:
        return f"{report['path']}: nothing to import, {lines}"
    child = f", child of {report['parentSessionId']}" if report["parentSessionId"] else ""
    appended = report["appended"]
    label = {"claude-code": "claude"}.get(host, host)
    return (f"{report['path']}: session {report['sessionId']} ({label} "
            f"{report['externalSessionId']}{child}), {appended} event"
            f"{'' if appended == 1 else 's'} appended, {lines}")


def _say_not_imported(report: dict[str, Any], as_json: bool) -> None:
    if not as_json:
        _err().print(escape(f"{report['path']}: not imported: {report['notImported']}"))


def _refusal(cwd: str | None, root: Path, into: Path | None) -> str:
    """Why a transcript's session could not be recorded (the recorder only says that)."""
    if into is None and not cwd:
        return "its lines name no cwd (use --into DIR)"
    if into is None and cwd and not Path(cwd).resolve().is_relative_to(root):
        return (f"its cwd {cwd} lies outside the workspace root {root} "
                "(use --workspace ROOT, or --into DIR for a transcript from another machine)")
    return "its session could not be created there (deleted, or its workspace is unusable)"
