"""Where the service's settings come from, decided in one place.

Two things are configured: which event store to open (``--db`` beats ``SESSIONLEDGER_DB``
beats the embedded default, EL-8 and docs/spec.md; :meth:`sessionledger.ledger.Ledger.open` opens
it with its inline projections attached) and how ``serve`` runs (:class:`ServerSettings`:
address, workspace root, question timer durations, bearer token). Settings are validated when
built, so a server never starts on values it cannot honour.

Importing this module loads only the standard library (issue 38: ``sessionledger --help``
shows the defaults below): the log's default URL, the timer settings and the error raised are
imported where they are used.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..environment import DB_ENV, TOKEN_ENV

if TYPE_CHECKING:
    from statemachine.interaction import TimerConfig

__all__ = [
    "DB_ENV",
    "MAX_CURSOR",
    "DEFAULT_MCP_MAX_SESSIONS",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_QUESTION_DEADLINE_S",
    "DEFAULT_QUESTION_GRACE_S",
    "TOKEN_ENV",
    "ServerSettings",
    "is_loopback",
    "parse_authority",
    "parse_origin",
    "resolve_store_url",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_QUESTION_GRACE_S = 60.0
DEFAULT_QUESTION_DEADLINE_S = 300.0
MAX_CURSOR = 2**63 - 1
"""The largest ``seq`` or global position SQLite can store; larger cursors are bad input (here,
where the command line's options can name it without loading the service)."""


def resolve_store_url(option: str | None, *, env: Mapping[str, str] | None = None) -> str:
    """The store URL to open: the ``--db`` option, else ``SESSIONLEDGER_DB``, else the default.

    The default, ``sqlite:///.sessionledger/ledger.db``, is relative to the current directory;
    the SQLite backend creates the directory and file on first use. An empty option or
    variable counts as unset.
    """
    from eventlog import DEFAULT_STORE_URL

    if option:
        return option
    environ = os.environ if env is None else env
    return environ.get(DB_ENV) or DEFAULT_STORE_URL


def missing_store_file(url: str) -> Path | None:
    """The file a ``sqlite:`` store URL names when no such file exists yet (opening it would
    create it), else ``None`` (it exists, or the URL names another backend). A ``sqlite:``
    URL that is not valid raises the store's :class:`~eventlog.InvalidStoreUrl` naming why."""
    from urllib.parse import urlsplit

    from eventlog.store import sqlite_target

    if urlsplit(url).scheme != "sqlite":  # as the store reads it (SQLITE:// is sqlite://)
        return None
    path, _synchronous = sqlite_target(url)
    return None if path.exists() else path


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_HOST_NAME = re.compile(r"[a-z0-9_.-]+")
DEFAULT_PORTS = {"http": 80, "https": 443}
"""The port a URL of each scheme means when it names none."""


def parse_authority(text: str) -> tuple[str, int | None]:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` (a ``Host`` header, an
    ``--allowed-host``) as ``(name, port)``: the name in lower case, an IPv6 address without
    brackets in its compressed form, ``None`` for no port. Anything else is a ``ValueError``
    (``ipaddress`` raises one for a bad IPv6 address).
    """
    lowered = text.lower()
    if lowered.startswith("["):
        address, bracket, rest = lowered[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not a host name")
        name, has_port, port = str(ipaddress.IPv6Address(address)), bool(rest), rest[1:]
    elif lowered.count(":") > 1:  # a bare IPv6 address, no port (an option may spell it so)
        name, has_port, port = str(ipaddress.IPv6Address(lowered)), False, ""
    else:
        name, colon, port = lowered.partition(":")
        has_port = bool(colon)
        if not _HOST_NAME.fullmatch(name):
            raise ValueError(f"{text!r} is not a host name")
    if has_port and not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
        raise ValueError(f"{text!r} has no valid port")
    return name, int(port) if has_port else None


def parse_origin(text: str) -> tuple[str, str, int]:
    """An ``Origin`` (``scheme://host[:port]``, http or https) as ``(scheme, name, port)``,
    the port made explicit. ``null``, another scheme, a path or user info is a ``ValueError``.
    """
    scheme, separator, authority = text.lower().partition("://")
    if not separator or scheme not in DEFAULT_PORTS or not authority or any(
        mark in authority for mark in "/?#@"
    ):
        raise ValueError(f"{text!r} is not an origin (scheme://host[:port], http or https)")
    name, port = parse_authority(authority)
    return scheme, name, DEFAULT_PORTS[scheme] if port is None else port


def _check_duration(name: str, value: float) -> None:
    from ..errors import ConfigurationError

    if not math.isfinite(value) or value < 0:
        raise ConfigurationError(f"{name} must be a finite number of seconds >= 0, not {value}")


DEFAULT_MCP_MAX_SESSIONS = 1_000
"""MCP sessions open at once on ``/mcp`` (the SDK's default is 10,000, ~40 KB each)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """How ``serve`` runs; built once at start, read everywhere, never changed.

    ``workspace_root`` is the default workspace of a new session and the directory every
    session workspace must resolve inside. ``question_grace_s`` and ``question_deadline_s`` are
    the AskUserQuestion auto-continue durations (HO-4; :attr:`timer_config`). ``token``
    is the bearer token; it is required when ``host`` is not loopback.
    ``stream_poll_s`` bounds how late an append by another process reaches an open stream
    (on PostgreSQL the store's ``LISTEN/NOTIFY`` usually wakes it at once, D116);
    ``stream_keepalive_s`` is the idle time after which a stream sends a comment.
    ``allowed_hosts`` are ``Host`` names the server answers to besides its bound address and
    the loopback names (``name`` on any port, ``name:port`` on that one); ``allowed_origins``
    are pages of other origins that may change state (EG-3).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workspace_root: Path = field(default_factory=Path.cwd)
    question_grace_s: float = DEFAULT_QUESTION_GRACE_S
    question_deadline_s: float = DEFAULT_QUESTION_DEADLINE_S
    token: str | None = None
    stream_poll_s: float = 0.5
    stream_keepalive_s: float = 15.0
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    mcp_elicitation: bool = True
    """``/mcp`` asks through the client's forms where it offers them; ``False``
    (``--no-elicitation``): every question waits as a pending call (issue 40)."""
    mcp_max_sessions: int = DEFAULT_MCP_MAX_SESSIONS
    """MCP sessions open at once on ``/mcp``; at the limit the one idle longest is closed for
    a new client (``--mcp-max-sessions``, issue 41)."""
    idle_exit_s: float | None = None
    """Stop after this many seconds with no request in flight (``--idle-exit``)."""
    hook_writer: bool = False
    """Run as a command hook's writer (``--hook-writer``): one per database, its token and
    workspace in the discovery file, stopping too when the database is gone (issue 38)."""
    log_format: str = "json"
    """``json`` (one object per line, for a log shipper) or ``human`` (for a terminal, the
    routine per-request lines left out below debug); ``--log-format``."""
    log_level: str = "info"
    """``debug``, ``info``, ``warning`` or ``error`` (``--log-level``)."""

    def __post_init__(self) -> None:
        from ..errors import ConfigurationError

        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port must be between 0 and 65535, not {self.port}")
        for name in ("question_grace_s", "question_deadline_s"):
            _check_duration(name.replace("_", "-"), getattr(self, name))
        if self.question_grace_s > self.question_deadline_s:
            raise ConfigurationError(
                "question-grace-s must not exceed question-deadline-s "
                f"({self.question_grace_s} > {self.question_deadline_s})"
            )
        if not (self.stream_poll_s > 0 and self.stream_keepalive_s > 0):
            raise ConfigurationError("stream intervals must be positive")
        if self.mcp_max_sessions < 1:
            raise ConfigurationError(
                f"mcp-max-sessions must be at least 1, not {self.mcp_max_sessions}")
        if self.idle_exit_s is not None and not (
                math.isfinite(self.idle_exit_s) and self.idle_exit_s > 0):
            raise ConfigurationError(
                f"idle-exit must be a finite number of seconds > 0, not {self.idle_exit_s}")
        if self.hook_writer and (self.token is None or self.idle_exit_s is None):
            raise ConfigurationError("--hook-writer needs a token and --idle-exit")
        if self.token is not None:
            _check_token(self.token)
        if self.token is None and not is_loopback(self.host):
            raise ConfigurationError(
                f"binding to {self.host!r} (not loopback) requires a bearer token: "
                f"pass --token or set {TOKEN_ENV}"
            )
        for option, values, parse in (("--allowed-host", self.allowed_hosts, parse_authority),
                                      ("--allowed-origin", self.allowed_origins, parse_origin)):
            for value in values:
                try:
                    parse(value)
                except ValueError as exc:
                    raise ConfigurationError(f"{option} {value!r}: {exc}") from exc
        root = Path(self.workspace_root).expanduser()
        if not root.is_dir():
            raise ConfigurationError(f"workspace root {str(root)!r} is not a directory")
        object.__setattr__(self, "workspace_root", root.resolve())

    @property
    def timer_config(self) -> TimerConfig:
        """The question timer durations of HO-4 (grace, deadline)."""
        from statemachine.interaction import TimerConfig

        return TimerConfig(grace_s=self.question_grace_s, deadline_s=self.question_deadline_s)


def _check_token(token: str) -> None:
    """A bearer token every client can send: HTTP strips a header value's leading and
    trailing whitespace and carries no control characters, and clients send ASCII."""
    from ..errors import ConfigurationError

    if not token.strip():
        raise ConfigurationError("the bearer token must not be empty")
    if token != token.strip():
        raise ConfigurationError(
            "the bearer token starts or ends with whitespace, which HTTP strips from the "
            "Authorization header: no client could send it; remove the spaces")
    for at, char in enumerate(token, start=1):  # where, not what: the token is a secret
        if ord(char) < 0x20 or ord(char) == 0x7F:
            raise ConfigurationError(
                f"the bearer token holds a control character (character {at}), which an HTTP "
                "header cannot carry")
        if ord(char) > 0x7E:
            raise ConfigurationError(
                f"the bearer token holds a character that is not ASCII (character {at}): "
                "clients send header values as ASCII; use letters, digits and punctuation")
