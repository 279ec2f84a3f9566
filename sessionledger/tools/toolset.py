"""Which service tools exist and what each is built over: the default registry's contents.

Every handler lives in :mod:`sessionledger.tools`; the ones added for SPEC §8 to §10 need
the store (another session's events for ReadSessionContext, the session's records for the
cron and off-peak tools, the session's chosen model for ListModels) and the host's ports
(:class:`~sessionledger.tools.ports.ToolPorts`). This module builds them over one store and
its projections, so :mod:`sessionledger.tools.service` stays about running calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from eventlog import EventStore, RecordedEvent, StoreClosed
from projections import Projections, SessionSummary
from projections.tables import Doc

from .ask_handler import AskUserQuestionHandler
from .handlers import ToolHandler
from .list_models import ListModelsHandler
from .plan_files import PlanFiles
from .plan_handlers import EnterPlanModeHandler, ExitPlanModeHandler
from .ports import ToolPorts
from .schedule_handlers import ScheduleTools, schedule_handlers
from .session_context import ReadSessionContextHandler
from .todo_handler import TodoReadHandler, TodoWriteHandler

__all__ = ["StoreSessionSource", "basic_handlers", "service_handlers"]


@dataclass(frozen=True, slots=True)
class StoreSessionSource:
    """Sessions, their events and their records as the handlers read them."""

    store: EventStore
    projections: Projections

    def summary(self, session_id: str) -> SessionSummary | None:
        return self.projections.summary(self.store, session_id)

    def events(self, session_id: str) -> Iterator[RecordedEvent]:
        return self.store.read_session(session_id)

    def records(self, session_id: str, status: str) -> list[Doc]:
        records = self.projections.records
        return self.store.read_view(lambda tx: records.records(tx, session_id, status))

    def gone(self, session_id: str) -> bool:
        """Deleted or unknown: a plan file write for it is cancelled (PM-7)."""
        try:
            summary = self.summary(session_id)
        except StoreClosed:  # the service is shutting down
            return True
        return summary is None or summary.deleted

    def chosen_model(self, session_id: str) -> str | None:
        records = self.projections.records
        doc = self.store.read_view(lambda tx: records.chosen_model(tx, session_id))
        return None if doc is None else str(doc.body["model"])


def basic_handlers() -> list[ToolHandler]:
    """The tools that need nothing but the session: todos and questions."""
    return [TodoReadHandler(), TodoWriteHandler(), AskUserQuestionHandler()]


def service_handlers(
    store: EventStore, projections: Projections, ports: ToolPorts
) -> list[ToolHandler]:
    """Every service tool over ``store``, reaching the host through ``ports``."""
    source = StoreSessionSource(store, projections)
    schedules = ScheduleTools(
        cron=ports.cron, off_peak=ports.off_peak(), clock=ports.clock, records=source.records
    )
    return [
        *basic_handlers(),
        ListModelsHandler(ports.model_catalog(), source.chosen_model),
        ReadSessionContextHandler(
            source, auxiliary=ports.auxiliary, auxiliary_timeout_s=ports.auxiliary_timeout_s
        ),
        *schedule_handlers(schedules),
        EnterPlanModeHandler(),
        ExitPlanModeHandler(PlanFiles(ports.workspace_root), session_gone=source.gone,
                            session_events=source.events),
    ]
