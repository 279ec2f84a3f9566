"""What may happen: formal ``transitions`` machines deciding ``state + command -> events``.

Pure code, no I/O. The execution-state machine (permission mode, Plan switch, Goal) arrives
with issue 3; this package exists now so the layering of SPEC §1 is visible from day one.
"""

from __future__ import annotations

__all__: list[str] = []
