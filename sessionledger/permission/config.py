"""The ``[permission]`` table of the workspace configuration (SPEC TR-4), validated at load time.

Keys are camelCase exactly as in ``config.toml``; unknown keys are refused. Pattern lists
(``disallowedTools``, ``allowedTools``, ``allow``, ``ask``, ``deny``) hold strings parsed by
:func:`.patterns.parse_pattern`; ``webFetchPreapproved`` holds bare domain names (lower-cased,
a trailing dot dropped), each also admitting its subdomains. Build one from a mapping with
:meth:`PermissionConfig.model_validate`; ``PermissionConfig()`` is the empty default.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainSerializer,
    PlainValidator,
    StrictStr,
)
from pydantic.alias_generators import to_camel

from .patterns import RulePattern, parse_pattern

__all__ = ["Domain", "Pattern", "PermissionConfig", "validate_domain", "validate_pattern"]

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DOMAIN = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")


def validate_pattern(value: Any) -> RulePattern:
    """Pydantic validator: a :class:`RulePattern` as is, or a string parsed into one."""
    if isinstance(value, RulePattern):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a pattern must be a string, not {type(value).__name__}")
    return parse_pattern(value)


def validate_domain(value: str) -> str:
    """Pydantic validator: a bare domain name such as ``docs.python.org``, lower-cased."""
    domain = value.strip().lower().removesuffix(".")
    if not _DOMAIN.match(domain):
        raise ValueError(
            f"{value!r} is not a domain name like 'docs.python.org' "
            "(no scheme, port, path or wildcard; subdomains are included anyway)"
        )
    return domain


Pattern = Annotated[
    RulePattern, PlainValidator(validate_pattern), PlainSerializer(str, return_type=str)
]
"""A rule pattern as a configuration value: parsed from its string, serialised back to it."""

Domain = Annotated[StrictStr, AfterValidator(validate_domain)]
"""A WebFetch pre-approved domain."""


class PermissionConfig(BaseModel):
    """Project rules the permission service applies in the order of SPEC PM-3."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, validate_by_alias=True,
        validate_by_name=False,
    )

    disallowed_tools: tuple[Pattern, ...] = ()
    """Denied before anything else, EnterPlanMode and questions included."""
    allowed_tools: tuple[Pattern, ...] = ()
    """Allowed just before the mode default (after Plan, allow rules and WebFetch)."""
    allow: tuple[Pattern, ...] = ()
    ask: tuple[Pattern, ...] = ()
    deny: tuple[Pattern, ...] = ()
    web_fetch_preapproved: tuple[Domain, ...] = ()
