"""The table lifecycle every inline projection shares, delegated to the projection's table.

An inline projection (``eventlog.inline.InlineProjection``) is asked by the store to create,
check and drop its tables; each of ours keeps them in one table object with a SQLite and a
memory variant, so those three steps are always the same three calls. Folding (``apply``) and
forgetting a purged session stay with each projection.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

__all__ = ["TableBacked"]


class _Table(Protocol):
    def create(self, tx: Any) -> None: ...
    def is_present(self, tx: Any) -> bool: ...
    def drop(self, tx: Any) -> None: ...


T = TypeVar("T", bound=_Table)


class TableBacked(Generic[T]):
    """Mixin: ``create``, ``is_present`` and ``drop`` of an inline projection via ``table``."""

    table: T

    def create(self, tx: Any) -> None:
        self.table.create(tx)

    def is_present(self, tx: Any) -> bool:
        return self.table.is_present(tx)

    def drop(self, tx: Any) -> None:
        self.table.drop(tx)
