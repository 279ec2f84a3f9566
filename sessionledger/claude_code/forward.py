"""The command hook on the host's hot path (issue 38): forward to a running ``serve``, else
append directly.

Claude Code, Codex CLI and Gemini CLI start the command hook twice per tool call, so its
start is what users feel. When a ``serve`` is reachable the hook sends the event's bytes to
its hook route for the host (``POST /v1/hooks/claude-code``, ``/codex``, ``/gemini``) with the
standard library and prints the answer — the
same answer the server gives an HTTP hook — without importing the service, the event
catalog or any third-party package. The server is found by ``--url``, else
``SESSIONLEDGER_URL``, else the discovery file ``serve`` writes beside its SQLite database
(:func:`.wire.discovery_path`: ``<database>.serve.json``, removed when it stops). With no server
(no URL, or a discovery file whose server is gone), or with ``--direct``, the hook opens the
store and appends itself (:func:`answer_directly`). When a named server cannot answer (down,
too slow, an error), the hook answers ``{}`` — no decision, so the host goes on as if there
were no hook — and says why on stderr; it never waits past ``--timeout``.

Recording the event itself costs the hook the event catalog's import (~15 times an empty
interpreter's start), on every event. So a hook that found no server also starts one in the
background for the events that follow (:func:`start_writer`): a ``serve --hook-writer`` on a
free loopback port with a random token, which writes the discovery file as any ``serve`` does
(with its token, readable by this user only), serves the hooks of every workspace on that
database — each hook names its own root (:data:`.wire.WORKSPACE_HEADER`), inside which the
writer creates its sessions as the hook would have — and stops after
``SESSIONLEDGER_HOOK_WRITER`` seconds without a request (600; ``off`` starts none) or when its
database is gone. At most one runs per database (it holds ``<database>.writer.lock``),
and a hook starts one at most every :data:`WRITER_RETRY_S` seconds.

This module imports only the standard library at the top: :mod:`sessionledger.launch` runs
it before anything else is imported.
"""

from __future__ import annotations

import _socket  # socket.py's enums and selectors cost the hook ~4 ms of its start
import os
import sys
import time

from ..environment import DB_ENV, TOKEN_ENV, WRITER_ENV, read_options
from .wire import (
    DISCOVERY_SUFFIX,
    HOOK_PATHS,
    PROBLEM_HEADER,
    WORKSPACE_HEADER,
    WRITER_LOCK_SUFFIX,
    WRITER_LOG_SUFFIX,
    discovery_path,
)

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (a few ms here)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path
    from typing import Any

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "URL_ENV",
    "HookOptions",
    "answer_directly",
    "forward",
    "parse_hook_args",
    "run_command_hook",
    "start_writer",
]

URL_ENV = "SESSIONLEDGER_URL"
"""The environment variable naming a ``serve`` for the command hook to forward to."""
DEFAULT_DB_URL = "sqlite:///.sessionledger/ledger.db"
"""``eventlog.DEFAULT_STORE_URL`` (a test keeps the two the same): importing ``eventlog`` loads
the event catalog, which the forwarding path does without."""
DEFAULT_TIMEOUT_S = 5.0
HOLD_MARGIN_S = 5.0
"""Recording directly, a question answered here is waited for up to ``--timeout`` less
this (the hook must print its answer before Claude Code gives up on it)."""
"""How long the hook waits for a server's answer: under the 10 s the documented hook settings
give Claude Code to wait for the hook (its own default is 60 s)."""
MAX_TIMEOUT_S = 3600.0
DEFAULT_WRITER_IDLE_S = 600.0
"""How long the hook's writer stays without a request (``SESSIONLEDGER_HOOK_WRITER``)."""
WRITER_RETRY_S = 30.0
"""A hook starts a writer at most this often per database: one that is still starting, or
failed to start (a broken workspace configuration, say), is not started again meanwhile."""



class HookOptions:
    """``sessionledger hook HOST``'s options (a plain class: ``dataclasses`` imports
    ``inspect``, a seventh of the forwarding hook's start); ``host`` is one of
    :data:`.wire.HOOK_PATHS`."""

    __slots__ = ("db", "direct", "host", "timeout", "url", "workspace")

    def __init__(self, *, db: str | None = None, workspace: str | Path | None = None,
                 url: str | None = None, direct: bool = False,
                 timeout: float = DEFAULT_TIMEOUT_S, host: str = "claude-code") -> None:
        self.host = host
        self.db = db
        self.workspace = None if workspace is None else str(workspace)
        self.url = url
        self.direct = direct
        self.timeout = timeout


def parse_hook_args(args: list[str], host: str = "claude-code") -> HookOptions | None:
    """The options after ``hook HOST``, or ``None`` for anything this reader does not
    know (``--help``, a typo, a bad number): the full command line parses those and says what
    is wrong."""
    values = read_options(args, _VALUED, frozenset({"--direct"}))
    if values is None:
        return None
    try:
        timeout = float(values.get("--timeout", DEFAULT_TIMEOUT_S))
    except ValueError:
        return None
    if not 0 < timeout <= MAX_TIMEOUT_S:
        return None
    db, workspace, url = (values.get(n) for n in ("--db", "--workspace", "--url"))
    return HookOptions(db=db if isinstance(db, str) else None,
                       workspace=workspace if isinstance(workspace, str) and workspace else None,
                       url=url if isinstance(url, str) else None,
                       direct=bool(values.get("--direct")), timeout=timeout, host=host)


_VALUED = frozenset({"--db", "--workspace", "--url", "--timeout"})


# -- JSON without the json package -------------------------------------------------------------
#
# ``import json`` imports ``re`` (and ``enum``): ~8 ms of the hook's start on a user's install,
# nearly as much as the interpreter's own. The json package's speed comes from its C module,
# ``_json``, whose scanner and encoder it builds from a decoder's and an encoder's settings;
# these are the same two, built with json's defaults. An interpreter without them (not CPython)
# gets the json package.


class _Decoding:
    """What the C scanner reads of a decoder: ``json.JSONDecoder()``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod({"NaN": float("nan"), "Infinity": float("inf"),
                                   "-Infinity": float("-inf")}.__getitem__)


def _unencodable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_scan: Callable[[str, int], tuple[Any, int]] | None = None
_encode: Callable[[Any, int], Iterable[str]] | None = None
try:
    from _json import encode_basestring as _encode_string
    from _json import make_encoder as _make_encoder
    from _json import make_scanner as _make_scanner

    # typeshed types the context as the scanner class itself; it reads only these attributes
    _scan = _make_scanner(_Decoding())  # type: ignore[arg-type]
    _encode = _make_encoder({}, _unencodable, _encode_string, None, ": ", ", ", False, False,
                            True)
except (ImportError, TypeError):  # pragma: no cover - another interpreter
    pass


def loads(text: str) -> Any:
    """``json.loads(text)``; a ``ValueError`` for anything that is not one JSON value."""
    if _scan is None:  # pragma: no cover - another interpreter
        import json

        return json.loads(text)
    stripped = text.strip(" \t\n\r")
    try:
        value, end = _scan(stripped, 0)
    except StopIteration as exc:
        raise ValueError(f"not JSON at character {exc.value}") from None
    if end != len(stripped):
        raise ValueError(f"more than one JSON value (extra data at character {end})")
    return value


def dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``."""
    if _encode is None:  # pragma: no cover - another interpreter
        import json

        return json.dumps(value, ensure_ascii=False)
    return "".join(_encode(value, 0))


# -- finding a server ----------------------------------------------------------------------------


class _Server:
    __slots__ = ("discovered", "root", "token", "url")

    def __init__(self, url: str, discovered: bool, token: str | None,
                 root: str | None = None) -> None:
        self.url = url
        self.discovered = discovered  # from the discovery file: refused means it is gone
        self.token = token
        self.root = root  # a hook's writer: the hook's own root, named in the request


def _server(options: HookOptions) -> _Server | None:
    token = os.environ.get(TOKEN_ENV) or None
    named = options.url or os.environ.get(URL_ENV)
    if named:
        return _Server(named, False, token)
    path = discovery_path(options.db or os.environ.get(DB_ENV) or DEFAULT_DB_URL)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            record = loads(file.read())
        url = record["url"]
        needs_token = bool(record.get("token"))
        secret, root = record.get("secret"), record.get("root")
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return None  # no server here (or a file being replaced): append directly
    own = None
    if isinstance(secret, str):  # a hook's writer: its own token, every workspace's hooks
        own = _root(options)
        if record.get("anyRoot") is not True and (  # an earlier version's: one workspace's
                not isinstance(root, str) or not _inside(own, root)):
            return None
        token = secret
    if not isinstance(url, str) or (needs_token and token is None):
        return None
    return _Server(url, True, token, own)


def _root(options: HookOptions) -> str:
    """The workspace root the hook records under (``--workspace``, else where it runs)."""
    return os.path.realpath(options.workspace or ".")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _writer_idle_s() -> float | None:
    """``SESSIONLEDGER_HOOK_WRITER``: seconds the writer waits, ``None`` for none."""
    value = os.environ.get(WRITER_ENV, "").strip().lower()
    if not value:
        return DEFAULT_WRITER_IDLE_S
    if value in ("off", "no", "false", "0"):
        return None
    try:
        seconds = float(value)
    except ValueError:
        return DEFAULT_WRITER_IDLE_S
    return seconds if 0 < seconds <= 86400 else DEFAULT_WRITER_IDLE_S


def start_writer(store_url: str, root: str, idle_s: float) -> int | None:
    """Start ``serve --hook-writer`` on the SQLite store ``store_url`` in the background
    (its own session, no descriptor of the host's; its log ``<database>.writer.log``), unless
    one runs or a hook started one less than :data:`WRITER_RETRY_S` seconds ago: its process
    id, or ``None`` when none was started."""
    found = discovery_path(store_url)
    if found is None:
        return None  # PostgreSQL: a server of its own is the operator's
    base = found[:-len(DISCOVERY_SUFFIX)]
    import fcntl

    try:
        descriptor = os.open(base + WRITER_LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # a writer holds it: it runs
        started = os.fstat(descriptor)
        if started.st_size and 0 <= time.time() - started.st_mtime < WRITER_RETRY_S:
            return None  # one was started a moment ago (still starting, or it failed)
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{time.time()}\n".encode())
        log = base + WRITER_LOG_SUFFIX
        _rotate(log)
        return _spawn_writer(store_url, root, idle_s, log)
    finally:
        os.close(descriptor)  # the writer takes the lock itself once it starts


WRITER_LOG_MAX_BYTES = 1 << 20
"""A writer's log past this size is moved to ``<log>.1`` (the one before it dropped) when the
next writer starts: the log of writers started again and again for years stays small."""


def _rotate(log: str) -> None:
    try:
        if os.stat(log).st_size > WRITER_LOG_MAX_BYTES:
            os.replace(log, log + ".1")
    except OSError:  # none yet, or it cannot be moved: the writer appends to it as it is
        pass


def _spawn_writer(store_url: str, root: str, idle_s: float, log: str) -> int | None:
    """``posix_spawn``: a process of its own session (a host that ends the hook's process
    group leaves it), its input and output ``/dev/null`` and ``log``, holding none of the
    host's descriptors (``subprocess``'s ``Popen`` would warn about a child it never waits
    for)."""
    environment = dict(os.environ)
    environment[TOKEN_ENV] = os.urandom(24).hex()  # never on its command line (ps shows it)
    environment.pop(URL_ENV, None)
    actions: list[tuple[Any, ...]] = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
    ]
    try:
        inherited = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:  # not Linux: descriptors are opened not inheritable (PEP 446) anyway
        inherited = []
    for number in inherited:
        try:
            if number > 2 and os.get_inheritable(number):
                actions.append((os.POSIX_SPAWN_CLOSE, number))
        except OSError:  # the listing's own descriptor, closed since
            pass
    try:
        return os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "sessionledger", "serve", "--db", store_url,
             "--host", "127.0.0.1", "--port", "0", "--workspace", root,
             "--idle-exit", f"{idle_s:g}", "--hook-writer"],
            environment, file_actions=actions, setsid=True)
    except OSError:
        return None


# -- answering -----------------------------------------------------------------------------------


class _Unreachable(Exception):
    """The server named cannot answer; the message says why."""


class _Gone(_Unreachable):
    """Nothing listens where the discovery file says: that server has stopped."""


def forward(server_url: str, body: bytes, *, timeout: float, token: str | None = None,
            discovered: bool = False, host: str = "claude-code", root: str | None = None,
            ) -> tuple[dict[str, Any], str | None]:
    """POST the event to the server's hook route for ``host``; its JSON output and the
    problem it names, if any (``_Unreachable`` when it gives no output). ``root``: the
    hook's own workspace root, named to a hook's writer."""
    address = _http_address(server_url)
    if address is None:
        raise _Unreachable(f"cannot forward to {server_url!r}: only http://HOST:PORT")
    name, port, path = address
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if root is not None:
        headers[WORKSPACE_HEADER] = _quoted(root)
    try:
        status, answer_headers, payload = _post(
            name, port, path.rstrip("/") + HOOK_PATHS[host], body, headers, timeout=timeout)
    except ConnectionRefusedError as exc:
        if discovered:
            raise _Gone(str(exc)) from exc
        raise _Unreachable(f"{server_url} refused the connection") from exc
    except (OSError, ValueError) as exc:  # timeouts are OSErrors; a garbled answer
        raise _Unreachable(f"{server_url} did not answer ({exc.__class__.__name__}: "
                           f"{exc})") from exc
    if status != 200:
        raise _Unreachable(f"{server_url} answered {status}: "
                           f"{payload[:200].decode('utf-8', 'replace')}")
    try:
        output = loads(payload.decode("utf-8"))
    except ValueError as exc:
        raise _Unreachable(f"{server_url} answered something that is not JSON") from exc
    if not isinstance(output, dict):
        raise _Unreachable(f"{server_url} answered {type(output).__name__}, not an object")
    problem = answer_headers.get(PROBLEM_HEADER.lower())
    if problem is None:
        return output, None
    from urllib.parse import unquote

    return output, unquote(problem)


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")


def _quoted(path: str) -> str:
    """``path``'s bytes percent-encoded (``urllib.parse.quote``, without its import):
    ``os.fsdecode(unquote_to_bytes(...))`` gives it back, undecodable bytes included."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in os.fsencode(path))


def _http_address(url: str) -> tuple[str, int, str] | None:
    """The host, port and path of an ``http://`` URL (``None`` for any other scheme or no
    host). What ``serve`` writes in its discovery file, ``http://ADDRESS:PORT``, is read here;
    anything else (brackets, userinfo, a query, escapes) by ``urllib.parse``, whose import
    (``ipaddress`` and more) costs the hook ~3 ms of its start."""
    scheme, separator, rest = url.partition("://")
    if separator and scheme == "http" and not any(c in rest for c in "[]@?#%\\ \t\r\n"):
        netloc, slash, path = rest.partition("/")
        host, colon, port = netloc.partition(":")
        if host and not colon:
            return host.lower(), 80, slash + path
        if host and port.isascii() and port.isdigit() and int(port) <= 65535:
            return host.lower(), int(port), slash + path
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        number = parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or not parts.hostname:
        return None
    return parts.hostname, number or 80, parts.path


def _post(host: str, port: int, path: str, body: bytes, headers: dict[str, str], *,
           timeout: float) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 POST on a new connection (``Connection: close``) within ``timeout``
    seconds in all: the status, the headers (names lower-cased) and the body. A socket and
    the request's few lines, because ``http.client`` imports the ``email`` package, which
    costs the hook a fifth of its start-up (issue 38); the server is our own ``serve``."""
    deadline = time.monotonic() + timeout

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        return remaining

    head = [f"POST {path or '/'} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
            f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
    sock = _connected(host, port, left())
    try:
        sock.settimeout(left())
        sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body)
        received = bytearray()
        while True:
            sock.settimeout(left())
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    finally:
        sock.close()
    header_bytes, separator, rest = bytes(received).partition(b"\r\n\r\n")
    if not separator:
        raise ValueError("the answer ended inside its headers")
    status_line, *lines = header_bytes.decode("latin-1").split("\r\n")
    version, _, code = status_line.partition(" ")
    if not version.startswith("HTTP/1.") or not code[:3].isdigit():
        raise ValueError(f"not an HTTP answer: {status_line[:60]!r}")
    answer_headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        answer_headers[name.strip().lower()] = value.strip()
    if answer_headers.get("transfer-encoding", "").lower() == "chunked":
        rest = _unchunked(rest)
    elif "content-length" in answer_headers:
        length = int(answer_headers["content-length"])
        if len(rest) < length:
            raise ValueError("the answer ended inside its body")
        rest = rest[:length]
    return int(code[:3]), answer_headers, rest


def _connected(host: str, port: int, timeout: float) -> _socket.socket:
    """A connection to ``host``: an address as it is (``socket.create_connection`` resolves
    even those, which loads the ``idna`` codec), a name through the resolver."""
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    try:
        _socket.inet_pton(family, host)
    except OSError:
        import socket as named

        return named.create_connection((host, port), timeout=timeout)
    sock = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _unchunked(data: bytes) -> bytes:
    """A chunked body's bytes."""
    out = bytearray()
    while True:
        size_line, separator, data = data.partition(b"\r\n")
        if not separator:
            raise ValueError("the answer ended inside a chunk")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        if len(data) < size + 2:
            raise ValueError("the answer ended inside a chunk")
        out += data[:size]
        data = data[size + 2:]


def answer_directly(body: bytes, options: HookOptions) -> tuple[dict[str, Any], str | None]:
    """Open the store, record the event and answer it (the leanest path with no server): the
    output and what went wrong, if anything, for stderr."""
    from pathlib import Path as PathType

    from ..config import resolve_store_url
    from ..service.sessions import SessionService
    from .hooks import answer_hook
    from .recorder import Recorder

    service = SessionService.open(resolve_store_url(options.db),
                                  workspace_root=PathType(options.workspace) if options.workspace
                                  else PathType.cwd())
    try:
        answer = answer_hook(Recorder(service), body, host=options.host,
                             hold_s=max(0.0, options.timeout - HOLD_MARGIN_S))
    finally:
        service.close()
    return answer.output, answer.problem


GEMINI_COMPRESSED = b"Got it. Thanks for the additional context!"
"""What marks a Gemini CLI model request that follows a compression (``hooks.GEMINI_COMPRESSED``,
which a test holds equal)."""


def _uncompressed_model_call(body: bytes) -> bool:
    """Whether ``body`` is a Gemini ``BeforeModel`` event whose request does not follow a
    compression: the ledger records nothing of it and answers ``{}``, so the hook does too,
    without the server (Gemini sends one before every model call, with the whole history)."""
    if GEMINI_COMPRESSED in body or b"BeforeModel" not in body:
        return False
    try:
        raw = loads(body.decode("utf-8"))
    except ValueError:
        return False
    return isinstance(raw, dict) and raw.get("hook_event_name") == "BeforeModel"


def run_command_hook(body: bytes, options: HookOptions) -> tuple[dict[str, Any], str | None]:
    """The command hook's answer to ``body``: forwarded when a server is reachable, else
    recorded here; ``{}`` and the reason when neither works. Never raises."""
    try:
        if options.host == "gemini" and _uncompressed_model_call(body):
            return {}, None
        server = None if options.direct else _server(options)
        if server is not None:
            try:
                return forward(server.url, body, timeout=options.timeout, token=server.token,
                               discovered=server.discovered, host=options.host,
                               root=server.root)
            except _Gone:
                pass  # a stale discovery file: nothing serves this database now
            except _Unreachable as exc:
                return {}, f"not recorded: {exc}"
        answered = answer_directly(body, options)
    except Exception as exc:  # a broken hook never stops the agent
        return {}, f"not recorded ({exc.__class__.__name__}: {exc})"
    idle_s = None if options.direct or options.url else _writer_idle_s()
    if idle_s is not None:
        try:
            from ..config import resolve_store_url  # loaded already: answering needed it

            start_writer(resolve_store_url(options.db), _root(options), idle_s)
        except Exception:  # the next event starts one, or records itself
            pass
    return answered


def main(args: list[str], host: str = "claude-code") -> bool:
    """``sessionledger hook HOST ARGS`` without the command-line parser: ``False``
    when ``args`` need it (help, a mistake), else answer and return ``True``."""
    options = parse_hook_args(args, host)
    if options is None:
        return False
    output, problem = run_command_hook(sys.stdin.buffer.read(), options)
    if problem is not None:
        sys.stderr.write(f"sessionledger hook: {problem}\n")
    sys.stdout.write(dumps(output) + "\n")
    sys.stdout.flush()
    return True
