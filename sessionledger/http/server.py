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
import os
import platform
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import uvicorn

from ..claude_code.wire import remove_discovery, write_discovery
from ..config import ServerSettings
from ..logs import configure_logging, log_event, logger
from ..service.sessions import SessionService
from .app import create_app

__all__ = [
    "GRACEFUL_SHUTDOWN_S", "MMAP_THRESHOLD_BYTES", "STOP_SIGNALS", "GracefulServer",
    "pin_mmap_threshold", "serve",
]

GRACEFUL_SHUTDOWN_S = 30
"""How long in-flight requests may take after a stop signal before they are cancelled."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

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


class GracefulServer(uvicorn.Server):
    """A uvicorn server that tells the app when shutdown begins, and once it listens, calls
    ``on_listening`` with the address it is bound to."""

    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None],
                 on_listening: Callable[[str, int], None] | None = None) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._on_listening is not None and not self.should_exit:
            for server in self.servers:
                for bound in server.sockets:
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

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
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


def serve(settings: ServerSettings, *, service: SessionService) -> None:
    """Serve until a stop signal, then close the service's store; blocks."""
    configure_logging(names=("sessionledger", "uvicorn", "asyncio"))
    pin_mmap_threshold()
    stopping = threading.Event()
    app = create_app(service=service, settings=settings, stopping=stopping)
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
    discovery: list[Path] = []

    def listening(host: str, port: int) -> None:
        # Command hooks on the same database forward their events here (issue 38).
        written = write_discovery(service.store.url, f"http://{_reachable(host)}:{port}",
                                  token=settings.token is not None)
        if written is not None:
            discovery.append(written)

    server = GracefulServer(config, on_exit=stopping.set, on_listening=listening)
    log_event(
        _log, "starting", host=settings.host, port=settings.port,
        store=service.store.url, workspaceRoot=str(settings.workspace_root),
    )
    try:
        with _stop_signals_end_serving(server):
            server.run()
    finally:
        for path in discovery:
            remove_discovery(path)
        stopping.set()
        service.close()
        log_event(_log, "stopped", store=service.store.url)


def _reachable(host: str) -> str:
    """The host a client on this machine connects to: loopback for a wildcard address."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
