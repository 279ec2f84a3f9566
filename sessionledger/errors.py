"""Errors the application raises, each knowing how to answer over HTTP and from the CLI.

One family under one base class, so the HTTP layer and the CLI each need one handler. Every
error carries an HTTP ``status``, a machine ``code`` (the ``error.code`` of the JSON body,
docs/spec.md), optional JSON-safe ``details`` and the CLI ``exit_code`` (2 bad usage or input,
1 a fault or a refusal)::

    SessionLedgerError            500 internal_error          exit 1
    ├── InvalidInput              422 invalid_input           exit 2
    │   └── WorkspaceOutsideRoot  422 workspace_outside_root  exit 2
    ├── ConfigurationError        500 invalid_configuration   exit 2
    │   └── InvalidWorkspaceConfig 422 invalid_configuration  exit 2
    ├── Unauthorized              401 unauthorized            exit 2
    ├── NotFound                  404 not_found               exit 2
    │   └── SessionNotFound       404 session_not_found       exit 2
    ├── Conflict                  409 conflict                exit 1
    │   ├── CommandRefused        409 refused                 exit 1
    │   └── SessionNotDeleted     409 session_not_deleted     exit 1
    ├── SessionDeleted            410 session_deleted         exit 1
    ├── CorruptLog                500 corrupt_log             exit 1
    └── ServiceUnavailable        503 service_unavailable     exit 1
        ├── OutOfDescriptors      503 service_unavailable     exit 1
        └── StorageUnavailable    503 storage_unavailable     exit 1

Errors of the event log are translated by
:func:`sessionledger.ledger.from_eventlog`: ``ConcurrencyConflict`` →
``Conflict``, ``StoreBusy`` and ``StoreClosed`` → ``ServiceUnavailable``,
``DescriptorsExhausted`` (and an ``OSError`` EMFILE/ENFILE, :func:`from_os_error`) →
``OutOfDescriptors``, ``StorageFault`` → ``StorageUnavailable``, ``InvalidStoreUrl`` →
``ConfigurationError``, unknown stored types or versions and a store the driver cannot read
(``UnreadableStore``: not a database, a damaged file or table) → ``CorruptLog``, a payload the
writer refuses (``JsonShapeError``) → ``InvalidInput``. While the store is being opened, a bad
URL or an unreadable file is the configuration's fault: ``ConfigurationError`` naming the URL.
"""

from __future__ import annotations

from typing import Any, ClassVar

from eventlog import StorageFault, descriptors_exhausted

__all__ = [
    "CommandRefused",
    "ConfigurationError",
    "Conflict",
    "CorruptLog",
    "ForbiddenOrigin",
    "InvalidInput",
    "InvalidWorkspaceConfig",
    "MisdirectedRequest",
    "NotFound",
    "OutOfDescriptors",
    "ServiceUnavailable",
    "SessionDeleted",
    "SessionLedgerError",
    "SessionNotDeleted",
    "SessionNotFound",
    "StorageUnavailable",
    "Unauthorized",
    "WorkspaceOutsideRoot",
    "from_os_error",
]


class SessionLedgerError(Exception):
    """Base of every application error; subclasses fix ``status``, ``code`` and ``exit_code``."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_wire(self) -> dict[str, Any]:
        """The JSON error body of docs/spec.md: ``{"error": {code, message, details}}``."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class InvalidInput(SessionLedgerError):
    """A request or command argument failed validation."""

    status = 422
    code = "invalid_input"
    exit_code = 2


class WorkspaceOutsideRoot(InvalidInput):
    """A session workspace does not resolve inside the server's workspace root."""

    code = "workspace_outside_root"


class ConfigurationError(SessionLedgerError):
    """Settings the service cannot start with (bad store URL, missing token, …)."""

    code = "invalid_configuration"
    exit_code = 2


class InvalidWorkspaceConfig(ConfigurationError):
    """A workspace's ``config.toml`` cannot be used (TR-4, EG-2): not readable, not UTF-8,
    not TOML, or a key of the wrong type or unknown. A 422, not a 500: the request is fine
    and the service is, but the session's workspace holds a file the client can repair.

    ``details`` is ``{"source": path, "errors": [{"key", "message"}, ...]}``; ``key`` is the
    dotted key with list indexes (``permission.allowedTools[0]``), ``(file)`` when the file
    itself cannot be read, decoded or parsed.
    """

    status = 422


class Unauthorized(SessionLedgerError):
    """A bearer token is required and the request did not carry the right one."""

    status = 401
    code = "unauthorized"
    exit_code = 2


class ForbiddenOrigin(SessionLedgerError):
    """A request that would change state came from a page of another origin (CSRF, EG-3)."""

    status = 403
    code = "forbidden_origin"
    exit_code = 2


class MisdirectedRequest(SessionLedgerError):
    """The ``Host`` header names no name this server answers to (DNS rebinding, EG-3)."""

    status = 421
    code = "misdirected_request"
    exit_code = 2


class NotFound(SessionLedgerError):
    """The addressed resource does not exist."""

    status = 404
    code = "not_found"
    exit_code = 2


class SessionNotFound(NotFound):
    """No session with this id has been created in this log."""

    code = "session_not_found"

    def __init__(self, session_id: str, *, field: str | None = None) -> None:
        details: dict[str, Any] = {"sessionId": session_id}
        if field is not None:
            details["field"] = field
        super().__init__(f"session {session_id!r} not found", details=details)
        self.session_id = session_id


class StoreNotFound(NotFound):
    """A command that only reads was pointed at an event store file that does not exist: it
    is never created by reading (a mistyped ``--db`` would otherwise look like an empty log)."""

    code = "store_not_found"

    def __init__(self, path: str) -> None:
        super().__init__(
            f"no event store at {path}: nothing has been recorded there. Check --db or "
            "$SESSIONLEDGER_DB, or start recording with `sessionledger serve` (it creates "
            "the store)", details={"path": path})
        self.path = path


class AddressUnavailable(SessionLedgerError):
    """``serve`` cannot listen where it was told to (the port is taken, or not ours to use)."""

    status = 503
    code = "address_unavailable"
    exit_code = 3


class Conflict(SessionLedgerError):
    """The change was refused: a concurrent write won, or the state forbids it."""

    status = 409
    code = "conflict"


class CommandRefused(Conflict):
    """The state machine refused the command from the current state; nothing was appended.

    The message is the machine's (e.g. ES-5's exact sentence); ``details.reason`` its code.
    """

    code = "refused"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message, details={"reason": reason})
        self.reason = reason


class SessionNotDeleted(Conflict):
    """Only a deleted session's events may be purged; this one is still live."""

    code = "session_not_deleted"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} is not deleted: delete it first "
            f"(DELETE /v1/sessions/{session_id}), then purge it",
            details={"sessionId": session_id},
        )
        self.session_id = session_id


class SessionDeleted(SessionLedgerError):
    """The session was deleted; its routes answer 410 and its events stay until purged."""

    status = 410
    code = "session_deleted"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} was deleted", details={"sessionId": session_id})
        self.session_id = session_id


class CorruptLog(SessionLedgerError):
    """A stored event cannot be read back (unknown type or version, malformed row)."""

    code = "corrupt_log"


class ServiceUnavailable(SessionLedgerError):
    """The store is busy beyond every retry, or closed because the server is stopping."""

    status = 503
    code = "service_unavailable"


class OutOfDescriptors(ServiceUnavailable):
    """The process has no file descriptor left (EMFILE, ENFILE): too many open connections
    or files at once, not a disk fault; nothing was changed and a retry later succeeds."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"the service has no file descriptor left ({reason}); nothing was changed (retry "
            "shortly)",
            details={"resource": "file_descriptors"},
        )


class StorageUnavailable(ServiceUnavailable):
    """The disk refused the store's read or write (an I/O error, a full disk, a read-only
    file), or the database server's connection failed; nothing was changed, and the same
    request succeeds once the fault is repaired.

    ``details.storageError`` names the fault as the backend reports it (``SQLITE_FULL``).
    """

    code = "storage_unavailable"

    def __init__(self, fault: StorageFault) -> None:
        retry = {"database connection": "once the database server is reachable",
                 "database server": "shortly"}.get(fault.medium,
                                                   "once the disk is repaired or has room")
        super().__init__(
            f"the event store's {fault.medium} failed: {fault.reason}; nothing was changed "
            f"(retry {retry})",
            details={"storageError": fault.error_name},
        )


def from_os_error(exc: OSError) -> OutOfDescriptors | None:
    """The application error of an ``OSError`` that means "no descriptor left", else None."""
    if not descriptors_exhausted(exc):
        return None
    return OutOfDescriptors(exc.strerror or str(exc))  # not the file it was opening
