"""The 2026-07-28 protocol's way to ask mid-call: an ``input_required`` round (D124).

On a modern connection the server cannot send the elicitation request itself; it answers the
``tools/call`` with an ``InputRequiredResult`` holding the form, and the client asks the user
and calls again with the response and the ``requestState`` it was given. Our state names the
waiting call and its interaction; the retry is checked against the log (the call must be this
session's, and still wait on that interaction), so a forged state can answer nothing a
client could not answer through ``respond`` anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcp_types import (
    CallToolRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

from ..errors import InvalidInput
from .forms import Form

__all__ = ["ANSWER_KEY", "Round", "asking_round", "returned_round"]

ANSWER_KEY = "answer"


@dataclass(frozen=True, slots=True)
class Round:
    """A retried call: which waiting call it answers, and the user's response."""

    call_id: str
    interaction_id: str
    response: ElicitResult | None
    """``None`` when the client sent no form response (nothing to record)."""


def asking_round(form: Form, pending: dict[str, Any]) -> InputRequiredResult:
    """The ``input_required`` answer to a call that waits for the user."""
    request = ElicitRequest(params=ElicitRequestFormParams(
        message=form.message, requested_schema=form.schema,
    ))
    state = json.dumps({"callId": pending["callId"], "interactionId": pending["interactionId"]})
    return InputRequiredResult(input_requests={ANSWER_KEY: request}, request_state=state)


def returned_round(params: CallToolRequestParams) -> Round | None:
    """The round a retried call returns, or ``None`` for a first call."""
    if params.request_state is None:
        return None
    try:
        state = json.loads(params.request_state)
        call_id, interaction_id = str(state["callId"]), str(state["interactionId"])
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidInput("requestState does not name a waiting call") from exc
    response = (params.input_responses or {}).get(ANSWER_KEY)
    return Round(call_id, interaction_id, response if isinstance(response, ElicitResult) else None)
