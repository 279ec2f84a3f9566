"""The services: what a session is and does (issue 20's ``service/`` room).

:mod:`.sessions` is the application service every face calls (create, read, list, page,
change, delete, audit), with its parts: :mod:`.execution` applies mode, Plan and goal commands
in ES-6's order; :mod:`.turns` records the conversation and decides, per model request,
which reminders to inject; :mod:`.timers` runs the questions' auto-continue timers and serve's
scheduler; :mod:`.settings`, :mod:`.models` and :mod:`.audit`; :mod:`.documents` is how a
session reads from outside. The turn-loop names are importable from here.
"""

from __future__ import annotations

from .execution import CommandResult, ExecutionRuntime, StateListener
from .turns import (
    ProjectedTodos,
    Reminder,
    ReminderContext,
    ReminderSource,
    TodoSource,
    TurnRequest,
    TurnService,
    decide_reminders,
)

__all__ = [
    "CommandResult",
    "ExecutionRuntime",
    "ProjectedTodos",
    "Reminder",
    "ReminderContext",
    "ReminderSource",
    "StateListener",
    "TodoSource",
    "TurnRequest",
    "TurnService",
    "decide_reminders",
]
