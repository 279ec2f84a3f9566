"""Schema evolution (EL-6): upcasters turn stored payloads into the current model.

An upcaster maps one event type's payload from version ``n`` to ``n + 1``. Reading applies the
chain from the stored version to the catalog's current one; a type missing from the catalog or
a version the chain cannot reach is a named error, never a silent drop. Payloads that take
these slower paths are parsed by the same JSON parser as the fast strict read (pydantic's), so
every path refuses the same text: a lone surrogate, nesting deeper than it allows, ``NaN``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from .catalog import CATALOG, Event, legacy_execution_state
from .errors import UnknownEventType, UnknownSchemaVersion

__all__ = ["Upcaster", "UpcasterRegistry", "default_upcasters", "decode_payload"]

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class UpcasterRegistry:
    """Upcasters keyed by (event type, version they read)."""

    def __init__(self) -> None:
        self._steps: dict[tuple[str, int], Upcaster] = {}
        self._legacy: dict[str, Upcaster] = {}

    def register(self, event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
        """Decorator: register ``fn`` turning version ``from_version`` into the next."""

        def wrap(fn: Upcaster) -> Upcaster:
            self._steps[(event_type, from_version)] = fn
            return fn

        return wrap

    def register_legacy(
        self, event_type: str
    ) -> Callable[[Upcaster], Upcaster]:
        """Decorator: ``fn`` rewrites a current-version payload that the strict model refuses
        (forms still accepted on read); it runs only after the fast strict read failed."""

        def wrap(fn: Upcaster) -> Upcaster:
            self._legacy[event_type] = fn
            return fn

        return wrap

    def legacy_reader(self, event_type: str) -> Upcaster | None:
        """The legacy rewrite registered for ``event_type``, if any."""
        return self._legacy.get(event_type)

    def upcast(
        self, event_type: str, version: int, payload: dict[str, Any], *, target: int
    ) -> dict[str, Any]:
        """Apply the chain from ``version`` to ``target`` or raise UnknownSchemaVersion."""
        while version < target:
            step = self._steps.get((event_type, version))
            if step is None:
                raise UnknownSchemaVersion(event_type, version)
            payload = step(payload)
            version += 1
        return payload


default_upcasters = UpcasterRegistry()


@default_upcasters.register_legacy("SessionCreated")
def _legacy_session_created(payload: dict[str, Any]) -> dict[str, Any]:
    """ES-2: a session created with the legacy ``{"mode": "plan"}`` state."""
    if "executionState" in payload:
        return {**payload, "executionState": legacy_execution_state(payload["executionState"])}
    return payload


def _parse(data_json: str) -> Any:
    """The stored text as Python values, by the parser the strict read uses (ValueError)."""
    return from_json(data_json, allow_inf_nan=False)


def decode_payload(
    event_type: str,
    schema_version: int,
    data_json: str,
    *,
    upcasters: UpcasterRegistry = default_upcasters,
) -> Event:
    """Turn a stored payload into its typed, current-version model."""
    cls = CATALOG.get(event_type)
    if cls is None:
        raise UnknownEventType(event_type)
    current = cls.schema_version
    if schema_version == current:
        try:
            return cls.__pydantic_validator__.validate_json(data_json)  # type: ignore[no-any-return]
        except ValidationError:
            legacy = upcasters.legacy_reader(event_type)
            if legacy is None:
                raise
            return cls.model_validate(legacy(_parse(data_json)))
    if schema_version > current or schema_version < 1:
        raise UnknownSchemaVersion(event_type, schema_version)
    payload = upcasters.upcast(
        event_type, schema_version, _parse(data_json), target=current
    )
    return cls.model_validate(payload)
