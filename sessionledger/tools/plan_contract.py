"""The contracts of EnterPlanMode and ExitPlanMode: inputs, descriptions, exact texts (§7).

EnterPlanMode takes no input and never needs approval (PM-1); its description encourages
Plan for non-trivial implementation work, names the seven situations where it fits and — unlike
the seed's system — does not claim the user has to approve entering. ExitPlanMode's input
(PM-6) is the plan (1 to 20000 code points, not only whitespace, stored verbatim) and optional
``allowedPrompts`` that are echoed in the result and grant nothing; other fields are allowed.
The texts the model receives for each outcome are here, verbatim from SPEC §7, so tests and
the handlers share one copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "APPROVE_OPTION",
    "APPROVED_PREFIX",
    "ENTER_DESCRIPTION",
    "ENTER_GUIDANCE",
    "EXIT_DESCRIPTION",
    "FEEDBACK_SOURCE",
    "NOT_APPROVED",
    "PLAN_MAX",
    "REVIEW_QUESTION",
    "TURN_STOP_REASON",
    "AllowedPrompt",
    "EnterPlanInput",
    "ExitPlanInput",
    "approved_text",
    "parse_enter_input",
    "parse_exit_input",
]

PLAN_MAX = 20000
REVIEW_QUESTION = "Review this implementation plan."
APPROVE_OPTION = "Approve"
FEEDBACK_SOURCE = "plan_approval_feedback"
TURN_STOP_REASON = "plan_exit_denied"
NOT_APPROVED = "The plan was not approved by the user."
APPROVED_PREFIX = (
    "User has approved your plan. You can now start coding. Start with updating your todo "
    "list if applicable.\n\n## Approved Plan:\n"
)

ENTER_GUIDANCE = (
    "Entered plan mode. You should now focus on exploring the codebase and designing an "
    "implementation approach.\n\n"
    "In plan mode, you should:\n"
    "1. Thoroughly explore the codebase to understand existing patterns\n"
    "2. Identify similar features and architectural approaches\n"
    "3. Consider multiple approaches and their trade-offs\n"
    "4. Use AskUserQuestion if you need to clarify the approach\n"
    "5. Design a concrete implementation strategy\n"
    "6. When ready, use ExitPlanMode to present your plan for approval\n\n"
    "Remember: DO NOT write or edit any files yet"
)

ENTER_DESCRIPTION = (
    "Use this tool proactively when you are about to start a non-trivial implementation "
    "task. Planning first, and getting the user's sign-off on the approach before writing "
    "code, prevents wasted effort. Entering plan mode takes effect at once; no permission "
    "prompt is shown. In plan mode you explore and design; you cannot edit files or run "
    "tools that change anything until the plan is approved through ExitPlanMode.\n\n"
    "Use it when any of these apply:\n"
    "1. New feature implementation: adding meaningful new functionality\n"
    "2. Multiple valid approaches: the task can be solved in several different ways\n"
    "3. Code modifications that affect existing behavior or structure\n"
    "4. Architectural decisions: choosing between patterns or technologies\n"
    "5. Multi-file changes: the task will likely touch more than two or three files\n"
    "6. Unclear requirements: you need to explore before understanding the full scope\n"
    "7. User preferences matter: the implementation could reasonably go several ways\n\n"
    "Do not use it for single-line or obvious fixes, small tweaks with clear requirements, "
    "or pure research questions."
)

EXIT_DESCRIPTION = (
    "Use this tool when you are in plan mode and have finished designing your plan: it "
    "presents the plan to the user for approval. Pass the whole plan, in markdown, as the "
    "'plan' argument; the plan is not read from a file. Only use it for implementation "
    "tasks that need code to be written, not for research. If you have open questions, ask "
    "them with AskUserQuestion first; never ask 'is this plan okay?' any other way than by "
    "calling this tool. Optional 'allowedPrompts' describe the kinds of commands the plan "
    "will need (for example {\"tool\": \"Bash\", \"prompt\": \"run the tests\"}); they are "
    "shown to the user but grant nothing."
)


class EnterPlanInput(BaseModel):
    """EnterPlanMode takes nothing; extra fields are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class AllowedPrompt(BaseModel):
    """A kind of command the plan will need (recorded and echoed, never a grant)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: Literal["Bash"]
    prompt: str = Field(min_length=1)


class ExitPlanInput(BaseModel):
    """PM-6: the plan verbatim, the optional prompts; other fields allowed."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    plan: str = Field(min_length=1, max_length=PLAN_MAX, strict=True)
    allowed_prompts: tuple[AllowedPrompt, ...] = Field(default=(), alias="allowedPrompts")

    @field_validator("plan")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the plan must not be only whitespace")
        return value  # verbatim: never stripped or rewritten


def parse_enter_input(raw: Mapping[str, Any]) -> EnterPlanInput:
    return EnterPlanInput.model_validate(dict(raw))


def parse_exit_input(raw: Mapping[str, Any]) -> ExitPlanInput:
    return ExitPlanInput.model_validate(dict(raw))


def approved_text(plan: str) -> str:
    """PM-7: the exact approval text followed by the plan verbatim."""
    return APPROVED_PREFIX + plan
