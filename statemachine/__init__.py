"""What may happen: formal ``transitions`` machines deciding ``state + command -> events``.

Pure code, no I/O. One module per machine, each its states and legal moves as data: the
execution state (permission mode, Plan switch, Goal), an interaction's timer, a plan approval.
:func:`quiet_machine` builds each of them the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from transitions import Machine

__all__ = ["quiet_machine"]


def quiet_machine(
    model: Any, *, states: Sequence[str], transitions: Sequence[dict[str, Any]], initial: str
) -> Machine:
    """A machine over ``states`` and ``transitions`` (no automatic ``to_<state>`` moves),
    bound to ``model``, or to no model when it is ``None``."""
    # model_override binds only the triggers the model declares; transitions logs a warning
    # for each is_<state>/may_<trigger> helper it skips, which we do not want.
    core_log = logging.getLogger("transitions.core")
    level = core_log.level
    core_log.setLevel(logging.ERROR)
    try:
        return Machine(
            model=model if model is not None else [],
            states=states,
            transitions=transitions,
            initial=initial,
            auto_transitions=False,
            model_override=True,
        )
    finally:
        core_log.setLevel(level)
