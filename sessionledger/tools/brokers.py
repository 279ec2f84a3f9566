"""Brokers: how each kind of host answers a call that needs the user (SPEC HO-1 … HO-3).

The executor only knows this protocol. A protocol host (desktop/web) and the TUI get a pending
interaction that waits in the session's queue until the user answers (the TUI's in-process
panel answers through the same path; it never auto-continues). A headless run has no
approval surface: its deny broker refuses at once with the exact HO-3 text, and nothing stays
pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from eventlog import HostKind, PermissionVerdict

__all__ = ["BROKERS", "Broker", "DenyBroker", "Pending", "PendingBroker", "broker_for"]


@dataclass(frozen=True, slots=True)
class Pending:
    """The call waits for the user."""


class Broker(Protocol):
    """Answers "this call needs the user" for one kind of host."""

    def on_ask(self, tool: str) -> Pending | PermissionVerdict: ...


class PendingBroker:
    """Protocol and TUI hosts: the call waits in the session's interaction queue."""

    def on_ask(self, tool: str) -> Pending | PermissionVerdict:
        return Pending()


class DenyBroker:
    """Headless hosts: no permission client, so every ask is denied at once (HO-3)."""

    def on_ask(self, tool: str) -> Pending | PermissionVerdict:
        return PermissionVerdict(
            behavior="deny",
            reason=f"No permission client configured for {tool}",
            rule_id="host.headless.noPermissionClient",
        )


BROKERS: dict[HostKind, Broker] = {
    "protocol": PendingBroker(),
    "tui": PendingBroker(),
    "headless": DenyBroker(),
}


def broker_for(host: HostKind) -> Broker:
    """The broker of a host kind."""
    return BROKERS[host]
