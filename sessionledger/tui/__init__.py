"""The terminal UI host (HO-1, TD-6): ``sessionledger tui SESSION``, built with Textual.

A package of its own so that Textual is imported only by the ``tui`` command (the other
commands start fast, like ``serve`` keeps FastAPI to itself). The rules live in pure modules
— :mod:`.questionnaire` (HO-1's keys, the ``modify`` input and the ordinary approval request
of a plan) and :mod:`.shown` (how any text from the log is drawn, EG-7) — and the widgets
(:mod:`.panels`, the sidebar in :mod:`.app`) and the app only draw them and call the session
service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import SessionApp, run_tui

__all__ = ["SessionApp", "run_tui"]


def __getattr__(name: str) -> Any:
    """The app on first use: ``replay`` draws text by :mod:`.shown` without importing Textual."""
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
