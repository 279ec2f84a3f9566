"""What it means now: folds of the event log into read models, updated inline on append.

The first inline projections (execution state, session summaries) arrive with issue 3; until
then the session document is folded on read by ``sessionledger.sessions``.
"""

from __future__ import annotations

__all__: list[str] = []
