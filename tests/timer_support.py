"""Shared pieces of the timer tests: a service with a manual clock over one backend, restarts.

The clock starts at ``T0``, a fixed instant, so every test can name the exact absolute times
it expects (``iso(60)`` is ``T0 + 60 s`` as the wire writes it). The durations are the
defaults of HO-4, 60 s and 300 s. A restart closes the SQLite file and opens it again; the
in-memory store is kept under a new service (its data would not survive a process).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from eventlog import ManualClock, RecordedEvent, format_instant
from projections import open_projected_store
from sessionledger import SessionService
from statemachine.interaction import TimerConfig

__all__ = ["ASK", "T0", "TEXTS", "Ledger", "iso", "question", "timer"]

T0 = datetime(2026, 11, 29, 19, 10, 56, 123000, tzinfo=UTC)
ASK = "AskUserQuestion"
TEXTS = ("Which database?", "Which queue?", "Which cache?")


def question(text: str = TEXTS[0]) -> dict[str, Any]:
    return {"questions": [{
        "question": text, "header": "Choice", "multiSelect": False,
        "options": [{"label": "Postgres (Recommended)", "description": "the server"},
                    {"label": "SQLite", "description": "one file"}],
    }]}


def iso(seconds: float) -> str:
    return format_instant(T0 + timedelta(seconds=seconds))


def timer(state: str, started: float) -> dict[str, str]:
    return {"state": state, "startedAt": iso(started), "visibleAt": iso(started + 60),
            "deadlineAt": iso(started + 300)}


class Ledger:
    """One service over one backend, its manual clock, and restarts."""

    def __init__(self, backend: str, root: Path, url: str | None = None) -> None:
        """``url`` overrides the backend's default (a PostgreSQL schema, say)."""
        self.clock = ManualClock(T0)
        self.root = root
        self.url = url or (
            "memory://" if backend == "memory" else f"sqlite:///{root / 'ledger.db'}"
        )
        self.backend = backend
        self.service = self._open()

    def _open(self, store: Any = None, projections: Any = None) -> SessionService:
        if store is None:
            store, projections = open_projected_store(self.url, clock=self.clock)
        return SessionService(store, projections, workspace_root=self.root,
                              timer_config=TimerConfig(60, 300), clock=self.clock)

    def restart(self) -> SessionService:
        """Stop the service (nothing runs while it is down) and start it again."""
        old = self.service
        if self.backend == "memory":
            self.service = self._open(old.store, old.projections)
        else:
            old.close()
            self.service = self._open()
        return self.service

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def tick(self, seconds: float = 0) -> None:
        """Advance the clock and let the scheduler do what is due."""
        self.clock.advance(seconds)
        self.service.timers.run_due()

    def session(self, **options: Any) -> str:
        return str(self.service.create_session(**options)["sessionId"])

    def ask(self, sid: str, text: str = TEXTS[0]) -> dict[str, Any]:
        answer = self.service.tools.call(sid, ASK, question(text))
        assert answer.status_code == 202, answer.document
        return answer.document

    def timers(self, sid: str) -> list[dict[str, Any] | None]:
        return [i["autoResolution"] for i in self.service.document(sid)["interactions"]]

    def events(self, sid: str, *types: str) -> list[RecordedEvent]:
        return [e for e in self.service.store.read_session(sid) if not types or e.type in types]

    def changes(self, sid: str) -> list[dict[str, Any]]:
        return [e.to_wire()["data"] for e in self.events(sid, "InteractionAutoResolutionChanged")]

    def close(self) -> None:
        self.service.close()
