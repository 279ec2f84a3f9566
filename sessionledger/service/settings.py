"""Service-wide settings (HO-6, docs/spec.md ``GET|PUT /v1/settings``): where they live and how they
change.

The log is per session, but a setting belongs to no session. It is recorded in one reserved
stream, :data:`~projections.tools.SETTINGS_STREAM`, as ``SettingChanged``
events: hash-chained, audited and replayable like any session, ordered against every
session's events by global position — which is what "the setting at the moment a question
was registered" means (HO-4). The stream has no ``SessionCreated``, so it is never listed as
a session; its events page and chain stay readable.

Today there is one setting, ``autoContinueQuestions`` (default on). A ``PUT`` that changes
nothing appends nothing. Turning it off appends the change, then at once appends what it
causes in every session with a question waiting (running timers pause, ``hiddenGrace``
included; queued questions become ineligible); the scheduler would do the same on its next
pass. Turning it back on touches nothing already registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
)

from eventlog import NewEvent, SettingChanged
from projections.tools import SETTINGS_STREAM

from ..errors import (
    InvalidInput,
)
from ..ledger import Ledger, eventlog_errors
from ..tools.executor import summarize, validation_details
from .timers import TimerService

__all__ = ["SETTINGS_STREAM", "SettingsService", "SettingsUpdate"]



class SettingsUpdate(BaseModel):
    """Body of ``PUT /v1/settings``: any subset of the settings; unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    auto_continue_questions: StrictBool | None = Field(
        default=None, alias="autoContinueQuestions",
        description="auto-continue unanswered questions of protocol hosts; default on",
    )

    @field_validator("auto_continue_questions", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:  # leave the key out to keep the value; null is not a value
            raise ValueError("must be true or false")
        return value


class SettingsService:
    """Reads and changes the settings recorded in the settings stream."""

    def __init__(self, ledger: Ledger, timers: TimerService) -> None:
        self._ledger = ledger
        self._store = ledger.store
        self._timers = timers

    def current(self) -> dict[str, Any]:
        """``{"autoContinueQuestions": bool}`` as the log says now."""
        with eventlog_errors():
            return {"autoContinueQuestions": self._timers.settings().current}

    def update(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Apply a partial update; the settings afterwards. Bad input is 422, nothing appended."""
        try:
            update = SettingsUpdate.model_validate(dict(raw))
        except ValidationError as exc:
            raise InvalidInput(
                f"settings are invalid: {summarize(exc)}", details=validation_details(exc)
            ) from exc
        wanted = update.auto_continue_questions
        if wanted is None:
            return self.current()
        with eventlog_errors():
            turned_off = self._set_auto_continue(wanted)
            if turned_off:  # HO-6: what it pauses is appended before the answer
                self._timers.run_due()
        return self.current()

    def _set_auto_continue(self, wanted: bool) -> bool:
        """Append the change unless it is already so; whether it was turned off now."""
        def attempt() -> bool:
            version = self._store.version(SETTINGS_STREAM)  # first: the history is as new
            current = self._timers.settings().current
            if current == wanted:
                return False
            event = SettingChanged(name="autoContinueQuestions", previous=current, value=wanted)
            self._ledger.append(
                SETTINGS_STREAM, [NewEvent(event, actor="user")], expected_version=version
            )
            return not wanted

        return self._ledger.retry(SETTINGS_STREAM, attempt)
