"""What was recorded: the session event log (SPEC §2).

Envelope, closed event catalog, upcasters, hash chain and the store backends. Import from
here; the submodules are implementation detail.
"""

from __future__ import annotations

from .canonical import GENESIS_HASH, canonical_json, envelope_hash
from .catalog import (
    CATALOG,
    Event,
    ExecutionStateData,
    FollowUpData,
    GoalData,
    GoalEnded,
    GoalStarted,
    HostKind,
    InteractionKind,
    InteractionRequested,
    InteractionResolved,
    MessageRecorded,
    ModeChangeVia,
    PermissionDecided,
    PermissionMode,
    PermissionVerdict,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    SessionModeChanged,
    ToolCallCompleted,
    ToolCallRequested,
    TurnControlData,
    event_adapter,
)
from .chain import ChainReport, verify_chain
from .clock import Clock, ManualClock, SystemClock, format_instant, parse_instant
from .envelope import Actor, AppendBatch, AppendResult, NewEvent, RawRow, RecordedEvent
from .errors import (
    ConcurrencyConflict,
    EmptyBatch,
    EventLogError,
    InvalidStoreUrl,
    StoreBusy,
    StoreClosed,
    UnknownEventType,
    UnknownSchemaVersion,
)
from .ids import new_id, new_session_id
from .inline import InlineProjection, Progress
from .store import (
    DEFAULT_STORE_URL,
    EventStore,
    Listener,
    SessionHead,
    backend_of,
    open_store,
)
from .upcasting import UpcasterRegistry, default_upcasters

__all__ = [
    "CATALOG",
    "DEFAULT_STORE_URL",
    "GENESIS_HASH",
    "Actor",
    "AppendBatch",
    "AppendResult",
    "ChainReport",
    "Clock",
    "ConcurrencyConflict",
    "EmptyBatch",
    "Event",
    "EventLogError",
    "EventStore",
    "ExecutionStateData",
    "FollowUpData",
    "GoalData",
    "GoalEnded",
    "GoalStarted",
    "HostKind",
    "InlineProjection",
    "InteractionKind",
    "InteractionRequested",
    "InteractionResolved",
    "InvalidStoreUrl",
    "Listener",
    "ManualClock",
    "MessageRecorded",
    "ModeChangeVia",
    "NewEvent",
    "PermissionDecided",
    "PermissionMode",
    "PermissionVerdict",
    "Progress",
    "RawRow",
    "RecordedEvent",
    "SessionCreated",
    "SessionDeleted",
    "SessionEvent",
    "SessionHead",
    "SessionModeChanged",
    "StoreBusy",
    "StoreClosed",
    "SystemClock",
    "ToolCallCompleted",
    "ToolCallRequested",
    "TurnControlData",
    "UnknownEventType",
    "UnknownSchemaVersion",
    "UpcasterRegistry",
    "backend_of",
    "canonical_json",
    "default_upcasters",
    "envelope_hash",
    "event_adapter",
    "format_instant",
    "new_id",
    "new_session_id",
    "open_store",
    "parse_instant",
    "verify_chain",
]
