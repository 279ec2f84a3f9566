"""The turn-loop runtime: execution-state commands, and the reminders of each model request.

:mod:`.execution` applies mode, Plan and goal commands in SPEC ES-6's order; :mod:`.turns`
records the conversation's messages and compactions and decides, per model request, which
reminders to inject (the texts and the rule are sections of :mod:`.turns`). Import from here.
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
