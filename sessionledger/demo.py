"""``sessionledger demo``: a scripted agent session that walks through every feature.

:func:`run_demo` opens the service the way ``serve`` does — a :class:`SessionService` over the
store with its projections, and the timer scheduler thread of ``serve`` — on a temporary
SQLite file (or the store ``--db`` names) and a temporary workspace whose
``.sessionledger/config.toml`` turns on ListModels with a small model catalog. It then runs
the steps of :mod:`sessionledger.demo_script` in order, in process (no HTTP: the routes call
these same objects), printing each with ``rich``. Question timers are short (half a second of
grace, a second and a half to the deadline) and run on the real clock, so the log's times are
true and the demo ends in a few seconds.

The demo's sessions end deleted (the workspace they name is removed with the temporary
directory; a later ``rebuild`` must not write their plan file there again); their events stay
for ``replay`` and ``audit`` until purged. The outcome says which step failed, if any.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from statemachine.interaction import TimerConfig

from .config.workspace import config_path
from .demo_script import STEPS, DemoContext, DemoFailure, Step
from .errors import SessionLedgerError
from .service.sessions import SessionService
from .service.timers import TimerScheduler

__all__ = ["DEMO_CONFIG", "DEMO_DEADLINE_S", "DEMO_GRACE_S", "DemoOutcome", "run_demo"]

DEMO_GRACE_S = 0.5
"""Seconds a demo question waits silently before its countdown shows."""
DEMO_DEADLINE_S = 1.5
"""Seconds after which an unanswered demo question auto-continues."""
_SCHEDULER_POLL_S = 0.05

DEMO_CONFIG = """\
# Written by `sessionledger demo` into its temporary workspace.
[features]
dynamicWorkflows = true

[models]
current = "anthropic/claude-sonnet"

[[models.providers]]
id = "anthropic"
name = "Anthropic"

[[models.providers.models]]
id = "claude-sonnet"
name = "Claude Sonnet"
contextWindow = 200000
reasoningLevels = ["low", "medium", "high"]
defaultLevel = "medium"

[[models.providers.models]]
id = "claude-opus"
contextWindow = 200000
disabled = "no API key configured"

[[models.providers]]
id = "local"
name = "Local"

[[models.providers.models]]
id = "qwen-coder"
contextWindow = 32768
"""
"""The demo workspace's configuration: ListModels on, a catalog with a disabled model."""


@dataclass(frozen=True, slots=True)
class DemoOutcome:
    """How the demo went: the steps run, and the failed one with its reason, if any."""

    steps: int
    failed: str | None = None
    """``"N/M title"`` of the step that failed."""
    reason: str | None = None
    verdict: str = ""

    @property
    def ok(self) -> bool:
        return self.failed is None


def _workspace(directory: Path) -> Path:
    workspace = directory / "workspace"
    config = config_path(workspace)
    config.parent.mkdir(parents=True)
    config.write_text(DEMO_CONFIG, encoding="utf-8")
    return workspace.resolve()


def run_demo(
    console: Console,
    *,
    db: str | None = None,
    steps: Sequence[Step] | None = None,
    grace_s: float = DEMO_GRACE_S,
    deadline_s: float = DEMO_DEADLINE_S,
) -> DemoOutcome:
    """Run ``steps`` (default :data:`STEPS`) on a temporary store (or ``db``) and workspace,
    printing to ``console``.

    A store that cannot be opened raises its :class:`SessionLedgerError` before any step;
    everything a step raises is reported as that step's failure.
    """
    with tempfile.TemporaryDirectory(prefix="sessionledger-demo-") as temp:
        workspace = _workspace(Path(temp))
        url = db or f"sqlite:///{Path(temp).resolve() / 'demo.db'}"
        service = SessionService.open(
            url, workspace_root=workspace,
            timer_config=TimerConfig(grace_s=grace_s, deadline_s=deadline_s),
        )
        scheduler = TimerScheduler(service.timers, service.store, poll_s=_SCHEDULER_POLL_S)
        scheduler.start()
        try:
            context = DemoContext(
                service=service, console=console, workspace=workspace, store_url=url,
                grace_s=grace_s, deadline_s=deadline_s,
            )
            return _run(context, STEPS if steps is None else steps)
        finally:
            scheduler.stop()
            service.close()


def _run(context: DemoContext, steps: Sequence[Step]) -> DemoOutcome:
    console = context.console
    console.print("[bold]sessionledger demo[/bold]: one scripted agent session through every "
                  "feature, on the service itself (in process, no HTTP)")
    total = len(steps)
    for number, (title, step) in enumerate(steps, start=1):
        console.print()
        console.rule(f"[bold cyan]{number}/{total}  {escape(title)}", align="left")
        try:
            step(context)
        except DemoFailure as exc:
            reason = str(exc)
        except SessionLedgerError as exc:
            reason = f"{exc.code}: {exc.message}"
        except Exception as exc:  # a bug shows as the step's failure, never a traceback
            reason = f"{type(exc).__name__}: {exc}"
        else:
            continue
        failed = f"{number}/{total} {title}"
        console.print(f"\n[bold red]demo FAILED at step {escape(failed)}:[/bold red] "
                      f"{escape(reason)}")
        return DemoOutcome(total, failed=failed, reason=reason, verdict=context.verdict)
    return DemoOutcome(total, verdict=context.verdict)
