"""Running the HTTP service under uvicorn with a shutdown that loses nothing acknowledged.

On SIGTERM or SIGINT uvicorn stops accepting connections and waits for the requests in
flight; :class:`GracefulServer` also sets the app's ``stopping`` flag so open event streams
end instead of holding the shutdown up. Only when uvicorn has returned is the store closed,
and ``close()`` itself waits for a commit in flight. A request whose append returned was
committed before its response was sent, so every acknowledged event is on disk.

On glibc, ``serve`` pins malloc's mmap threshold (:func:`pin_mmap_threshold`): glibc raises
it after each large block it frees, up to 32 MiB, so the 250 KB strings and 1 MiB pages of
streams over big events then come from heap arenas that are not given back after the readers
leave (measured: RSS stayed ~70 MB above the baseline; pinned, ~25 MB, issue 19).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import platform
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from ..claude_code.wire import (
    DISCOVERY_SUFFIX,
    WRITER_LOCK_SUFFIX,
    discovery_path,
    remove_discovery,
    write_discovery,
)
from ..config import ServerSettings
from ..errors import AddressUnavailable, ConfigurationError
from ..logs import LOG_LEVELS, configure_logging, log_event, logger
from ..service.sessions import SessionService
from .app import create_app

__all__ = [
    "GRACEFUL_SHUTDOWN_S", "MMAP_THRESHOLD_BYTES", "STOP_SIGNALS", "GracefulServer",
    "hold_writer_lock", "pin_mmap_threshold", "serve",
]

GRACEFUL_SHUTDOWN_S = 30
"""How long in-flight requests may take after a stop signal before they are cancelled."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM,
                *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else []))
"""What stops ``serve`` gracefully: Ctrl-C, ``kill``, and the terminal it runs in closing
(a shell passes SIGHUP on to its jobs)."""

_log = logger.getChild("server")

MMAP_THRESHOLD_BYTES = 128 * 1024
"""Blocks from this size on are mapped on their own and unmapped when freed (glibc's own
initial value, kept from rising)."""
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def pin_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES`; True if it was set.

    Nothing elsewhere (another C library), nor when the operator set
    ``MALLOC_MMAP_THRESHOLD_`` (their value wins).
    """
    if platform.libc_ver()[0] != "glibc" or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


_writer_lock: list[int] = []


def hold_writer_lock(store_url: str, *, wait_s: float = 2.0) -> bool:
    """Take the lock a command hook's writer holds while it runs on ``store_url``'s
    database, for the rest of this process (``False``: another writer has it). The hook that
    started this one may still hold it for a moment."""
    import fcntl

    found = discovery_path(store_url)
    if found is None:
        return True
    descriptor = os.open(found[:-len(DISCOVERY_SUFFIX)] + WRITER_LOCK_SUFFIX,
                         os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            if time.monotonic() >= deadline:
                os.close(descriptor)
                return False
            time.sleep(0.05)
            continue
        _writer_lock.append(descriptor)
        return True


class _Activity:
    """The ASGI app with a count of the HTTP requests in flight and when the last ended, for
    ``--idle-exit``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.in_flight = 0
        self.last = time.monotonic()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.last = time.monotonic()

    def idle_for(self) -> float:
        return 0.0 if self.in_flight else time.monotonic() - self.last


class GracefulServer(uvicorn.Server):
    """A uvicorn server that tells the app when shutdown begins, and once it listens, calls
    ``on_listening`` with the address it is bound to; ``should_stop``, asked once a second,
    ends it when it answers why (``--idle-exit``)."""

    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None],
                 on_listening: Callable[[str, int], None] | None = None,
                 should_stop: Callable[[], str | None] | None = None) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._on_listening = on_listening
        self._should_stop = should_stop

    async def on_tick(self, counter: int) -> bool:
        if await super().on_tick(counter):
            return True
        if self._should_stop is None or counter % 10:
            return False
        reason = self._should_stop()
        if reason is None:
            return False
        log_event(_log, "stopping", reason=reason)
        self._on_exit()
        return True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._on_listening is not None and not self.should_exit:
            for server in self.servers:
                for bound in server.sockets or ():
                    address = bound.getsockname()
                    self._on_listening(str(address[0]), int(address[1]))
                    return

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


@contextmanager
def _stop_signals_end_serving(server: GracefulServer) -> Iterator[None]:
    """Make a stop signal end ``server.run()`` normally, even around uvicorn's own handling.

    uvicorn handles SIGINT and SIGTERM while it serves and, after its graceful shutdown,
    raises the signal again for the handler that was installed before it. Under the default
    handler that would kill the process before the store is closed; the handler installed
    here only asks the server to exit (which also covers a signal during startup), so
    :func:`serve` returns, closes the store and the command exits 0.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(sig: int, frame: FrameType | None) -> None:
        if not server.should_exit:
            server.handle_exit(sig, frame)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS
                if signal.getsignal(sig) is not signal.SIG_IGN}  # nohup: a hangup stays ignored
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _http_protocol() -> type[asyncio.Protocol] | str:
    """httptools with a response's head and body in one write (:mod:`.onewrite`) when it is
    installed, else uvicorn's choice."""
    try:
        from .onewrite import OneWriteHttpToolsProtocol
    except ImportError:  # no httptools
        return "auto"
    return OneWriteHttpToolsProtocol


def serve(
    settings: ServerSettings, *, service: SessionService, listener: socket.socket | None = None
) -> None:
    """Serve until a stop signal, then close the service's store; blocks. ``listener`` is
    the socket to listen on, bound by the caller (else bound here to the settings' address:
    :func:`listening_socket`)."""
    # A hook's writer logs its warnings and errors only (to <database>.writer.log), as JSON.
    level = logging.WARNING if settings.hook_writer else LOG_LEVELS[settings.log_level]
    configure_logging(names=("sessionledger", "uvicorn", "asyncio"), level=level,
                      human=settings.log_format == "human" and not settings.hook_writer)
    if listener is None:
        try:
            listener = listening_socket(settings.host, settings.port)
        except (AddressUnavailable, ConfigurationError):
            service.close()
            raise
    stopping = threading.Event()
    discovery: list[Path] = []
    try:
        pin_mmap_threshold()
        server = _graceful_server(settings, service, stopping, discovery)
    except BaseException:  # nothing served: the port and the store are let go
        listener.close()
        service.close()
        raise
    log_event(
        _log, "starting", host=settings.host, port=settings.port,
        store=service.store.url, workspaceRoot=str(settings.workspace_root),
    )
    try:
        with _stop_signals_end_serving(server):
            server.run(sockets=[listener])
    finally:
        listener.close()  # uvicorn closed it once it served (closing again is nothing)
        for path in discovery:
            remove_discovery(path)
        stopping.set()
        service.close()
        log_event(_log, "stopped", store=service.store.url)


def _graceful_server(settings: ServerSettings, service: SessionService,
                     stopping: threading.Event, discovery: list[Path]) -> GracefulServer:
    """The server of ``serve``: its app, uvicorn's configuration, and what it does once it
    listens (the discovery file, whose path goes into ``discovery``) and checks between
    requests (a hook writer's database removed, ``--idle-exit``)."""
    app = _Activity(create_app(service=service, settings=settings, stopping=stopping))
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        # uvicorn[standard]: httptools parses HTTP/1.1 and uvloop runs the loop when they are
        # installed (h11 and asyncio otherwise): a cheaper request path (issue 24).
        loop="auto",
        http=_http_protocol(),
        # No route speaks WebSocket: an upgrade request is answered as plain HTTP, through
        # the same Host, Origin and token checks (the websockets package comes with
        # uvicorn[standard], and would otherwise take such requests past the middleware).
        ws="none",
        access_log=False,  # RequestLogMiddleware writes one structured line per request
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        lifespan="on",
        log_config=None,  # uvicorn's loggers keep the JSON handler configured above
    )

    def listening(host: str, port: int) -> None:
        # Command hooks on the same database forward their events here (issue 38).
        writer = (settings.token or "", str(settings.workspace_root)) if (
            settings.hook_writer) else None
        url = f"http://{_reachable(host)}:{port}"
        written = write_discovery(service.store.url, url, token=settings.token is not None,
                                  writer=writer)
        if written is not None:
            discovery.append(written)
        log_event(_log, "listening", url=f"{url}/")
        if not settings.hook_writer:  # the one line a person starting it looks for
            login = " (log in with the token)" if settings.token else ""
            print(f"sessionledger serving {url}/ — open it in a browser{login}", flush=True)

    database = discovery_path(service.store.url) if settings.hook_writer else None

    def should_stop() -> str | None:
        if database is not None and not os.path.exists(database[:-len(DISCOVERY_SUFFIX)]):
            return "database removed"
        if settings.idle_exit_s is not None and app.idle_for() >= settings.idle_exit_s:
            return f"no request for {settings.idle_exit_s:g} s"
        return None

    return GracefulServer(config, on_exit=stopping.set, on_listening=listening,
                          should_stop=should_stop)


LISTEN_BACKLOG = 2048
"""Connections the kernel queues before ``accept`` (uvicorn's default)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port`` (IPv4 unless the host is an IPv6 address, as
    uvicorn binds), for the server to accept on. It listens before any of the server starts
    (two servers starting together cannot both bind it), and a port that is taken or not ours
    is one clear error naming ``--port``; a host that is not this machine's, one naming
    ``--host``."""
    where = f"{_reachable(host)}:{port}"
    try:
        found = socket.getaddrinfo(host.strip("[]") or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigurationError(f"--host {host!r} is no address of this machine: "
                                 f"{getattr(exc, 'strerror', None) or exc}") from None
    family, kind, proto, _name, address = next(
        (entry for entry in found if entry[0] == socket.AF_INET), found[0])
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigurationError(f"--host {host!r} is no address of this machine: "
                                     f"{exc.strerror}") from None
        if exc.errno == errno.EADDRINUSE:
            why = "another program is listening there (another sessionledger serve?)"
        elif exc.errno == errno.EACCES:
            why = "this user may not use that port"
        else:
            why = exc.strerror or str(exc)
        raise AddressUnavailable(
            f"cannot listen on {where}: {why}. Choose another port with --port N "
            "(make run PORT=N)", details={"host": host, "port": port}) from None
    sock.set_inheritable(True)
    return sock


def _reachable(host: str) -> str:
    """The host a client on this machine connects to: loopback for a wildcard address."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
