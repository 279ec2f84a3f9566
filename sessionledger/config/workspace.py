"""The workspace configuration ``<workspace>/.sessionledger/config.toml`` (TR-4).

Read with the standard library's ``tomllib`` into frozen pydantic models that refuse unknown
keys and values of the wrong type (``true`` is not ``"true"``, ``1`` is not ``true``). A missing
file means the defaults; anything invalid raises
:class:`~sessionledger.errors.InvalidWorkspaceConfig` (422 ``invalid_configuration``) whose
message and ``details.errors`` name every offending key, as ``permission.allow[2]: …`` (list
indexes from 0; ``(file)`` when the file cannot be read, decoded or parsed), so the service
does not start on the root's file, and a session is not created on, and its calls are
refused by, a broken file of its workspace (EG-2). The shape, all tables and keys optional::

    [permission]                      # the project rules, applied in the PM-3 order
    disallowedTools = ["WebFetch"]    # rule patterns (see sessionledger.permission.authority):
    allowedTools = ["mcp__github__get_*"]   # Tool, Tool(argument glob), tool-name globs
    allow = ["Bash(git *)", "Read(src/**)"]
    ask = ["Bash(npm publish*)"]
    deny = ["Read(.env)", "mcp__prod__*"]
    webFetchPreapproved = ["docs.python.org"]   # bare domains; subdomains included

    [features]
    dynamicWorkflows = false          # registers ListModels (TR-1, LM-1)

    [models]                          # the host's model catalog (LM-1, LM-2); absent: no catalog
    current = "anthropic/claude-sonnet"     # the session model, "providerId/modelId"

    [[models.providers]]
    id = "anthropic"                  # no "/", "$" or whitespace in ids
    name = "Anthropic"                # display name, defaults to the id

    [[models.providers.models]]
    id = "claude-sonnet"
    name = "Claude Sonnet"            # optional display name
    contextWindow = 200000            # optional, tokens, > 0
    reasoningLevels = ["low", "medium", "high"]   # optional, unique
    defaultLevel = "medium"           # optional, one of reasoningLevels

    [[models.providers.models]]
    id = "claude-opus"
    disabled = "no API key configured"      # optional: unusable, with the reason shown

    [plans]                           # where an approved plan is written (the file the
    folder = ".zcode/plans"           # model is pointed at after a compaction): a relative
                                      # folder inside the workspace; this is the default

    [offPeak]                         # the host's off-peak windows (TR-5); absent: the
    windows = ["22:00-06:00"]         # off-peak port is closed. "HH:MM-HH:MM", may wrap
    timezone = "Europe/Berlin"        # midnight; IANA zone of the times, default "UTC"

Provider ids are unique, and model ids unique within a provider, ignoring case (model
references resolve case-insensitively, LM-2); ``current`` must name a listed model.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from datetime import time
from pathlib import Path, PurePosixPath
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from ..errors import InvalidWorkspaceConfig, from_os_error
from ..permission.authority import PermissionConfig

__all__ = [
    "CONFIG_PATH",
    "FeaturesConfig",
    "ModelEntry",
    "ModelsConfig",
    "OffPeakConfig",
    "PermissionConfig",
    "ProviderEntry",
    "WorkspaceConfig",
    "config_path",
    "load_workspace_config",
    "parse_workspace_config",
]

CONFIG_PATH = PurePosixPath(".sessionledger/config.toml")
"""Where the configuration lives, relative to the workspace."""

Id = Annotated[StrictStr, Field(min_length=1, pattern=r"^[^\s/$]+$")]
Text = Annotated[StrictStr, Field(min_length=1)]


class _KeyedError(ValueError):
    """A cross-field error that belongs to a key below the validated table."""

    def __init__(self, key: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.key = key


class _Table(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, validate_by_alias=True,
        validate_by_name=False,
    )


class FeaturesConfig(_Table):
    """Feature flags (``[features]``)."""

    dynamic_workflows: StrictBool = False


class ModelEntry(_Table):
    """One model of a provider, as ListModels shows it (LM-1)."""

    id: Id
    name: Text | None = None
    context_window: Annotated[StrictInt, Field(gt=0)] | None = None
    reasoning_levels: tuple[Text, ...] = ()
    default_level: Text | None = None
    disabled: Text | None = None
    """Why the model cannot be used; ``None`` when it can."""

    @model_validator(mode="after")
    def _levels(self) -> ModelEntry:
        if len(set(self.reasoning_levels)) != len(self.reasoning_levels):
            raise _KeyedError(("reasoningLevels",), "levels must be unique")
        if self.default_level is not None and self.default_level not in self.reasoning_levels:
            raise _KeyedError(
                ("defaultLevel",),
                f"{self.default_level!r} is not one of reasoningLevels "
                f"{list(self.reasoning_levels)}",
            )
        return self


class ProviderEntry(_Table):
    """A model provider and its models."""

    id: Id
    name: Text | None = None
    models: tuple[ModelEntry, ...] = ()

    @property
    def display_name(self) -> str:
        return self.name or self.id

    @model_validator(mode="after")
    def _unique_models(self) -> ProviderEntry:
        _refuse_duplicates([m.id for m in self.models], "models")
        return self


class ModelsConfig(_Table):
    """The model catalog (``[models]``): providers in catalog order and the current model."""

    providers: tuple[ProviderEntry, ...] = ()
    current: StrictStr | None = None
    """The session's model as ``providerId/modelId``."""

    @model_validator(mode="after")
    def _consistent(self) -> ModelsConfig:
        _refuse_duplicates([p.id for p in self.providers], "providers")
        if self.current is not None:
            listed = {f"{p.id}/{m.id}".lower() for p in self.providers for m in p.models}
            if self.current.lower() not in listed:
                raise _KeyedError(
                    ("current",),
                    f"{self.current!r} is not a listed model (expected 'providerId/modelId')",
                )
        return self


def _refuse_duplicates(ids: list[str], key: str) -> None:
    seen: set[str] = set()
    for index, value in enumerate(ids):
        if value.lower() in seen:
            raise _KeyedError((key, index, "id"), f"duplicate id {value!r} (ids ignore case)")
        seen.add(value.lower())


_WINDOW = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


class OffPeakConfig(_Table):
    """The host's off-peak windows (``[offPeak]``): when off-peak prompts are due (TR-5)."""

    windows: tuple[StrictStr, ...] = Field(min_length=1)
    timezone: StrictStr = "UTC"

    @model_validator(mode="after")
    def _valid(self) -> OffPeakConfig:
        for index, window in enumerate(self.windows):
            match = _WINDOW.match(window)
            if match is None or match[1] + match[2] == match[3] + match[4]:
                raise _KeyedError(
                    ("windows", index),
                    f"{window!r} is not a window 'HH:MM-HH:MM' (24-hour, start != end)",
                )
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise _KeyedError(("timezone",), f"unknown time zone {self.timezone!r}") from None
        return self

    def spans(self) -> list[tuple[time, time]]:
        """Each window as (start, end) times of day; an end before the start wraps midnight."""
        return [
            (time(int(w[0:2]), int(w[3:5])), time(int(w[6:8]), int(w[9:11])))
            for w in self.windows
        ]


DEFAULT_PLANS_FOLDER = ".zcode/plans"


class PlansConfig(_Table):
    """Where approved plans are written (``[plans]``): ``folder``, a relative path inside
    the workspace, ``/``-separated (default :data:`DEFAULT_PLANS_FOLDER`)."""

    folder: StrictStr = DEFAULT_PLANS_FOLDER

    @model_validator(mode="after")
    def _inside(self) -> PlansConfig:
        parts = self.folder.split("/")
        if (not self.folder or self.folder.startswith("/") or "\\" in self.folder
                or "\0" in self.folder or any(part in ("", ".", "..") for part in parts)):
            raise _KeyedError(("folder",), f"{self.folder!r} is not a folder inside the "
                              "workspace: give a relative path such as 'docs/plans' (no '..', "
                              "no leading '/', no empty or '.' parts)")
        return self


class WorkspaceConfig(_Table):
    """The whole ``config.toml``: permission rules, feature flags, the model catalog, the
    off-peak windows and where approved plans go."""

    permission: PermissionConfig = PermissionConfig()
    features: FeaturesConfig = FeaturesConfig()
    plans: PlansConfig = PlansConfig()
    models: ModelsConfig | None = None
    """``None`` when the file has no ``[models]`` table: the host has no model catalog."""
    off_peak: OffPeakConfig | None = None
    """``None`` when the file has no ``[offPeak]`` table: the off-peak port stays closed."""


def config_path(workspace: Path) -> Path:
    """The configuration file of ``workspace``."""
    return workspace / CONFIG_PATH


def load_workspace_config(workspace: Path) -> WorkspaceConfig:
    """Load ``<workspace>/.sessionledger/config.toml``; the defaults when there is no file."""
    path = config_path(workspace)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return WorkspaceConfig()
    except OSError as exc:
        shortage = from_os_error(exc)  # no descriptor left is the service's, not the file's
        if shortage is not None:
            raise shortage from exc
        problem = f"cannot read the file: {exc.strerror or exc}"
        raise _invalid(str(path), [("(file)", problem)]) from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        problem = f"is not UTF-8 text: {exc.reason} at byte {exc.start}"
        raise _invalid(str(path), [("(file)", problem)]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(str(path), [("(file)", f"is not valid TOML: {exc}")]) from exc
    return parse_workspace_config(data, source=str(path))


def parse_workspace_config(
    data: Mapping[str, Any], *, source: str = str(CONFIG_PATH)
) -> WorkspaceConfig:
    """Validate parsed TOML; :class:`InvalidWorkspaceConfig` names each invalid key."""
    try:
        return WorkspaceConfig.model_validate(data)
    except ValidationError as exc:
        raise _invalid(source, [(_key(e), _message(e)) for e in exc.errors()]) from None


def _invalid(source: str, errors: list[tuple[str, str]]) -> InvalidWorkspaceConfig:
    """The one error for a configuration that cannot be used, each offending key named."""
    lines = "; ".join(f"{key}: {message}" for key, message in errors)
    return InvalidWorkspaceConfig(
        f"invalid configuration in {source}: {lines}",
        details={"source": source, "errors": [{"key": k, "message": m} for k, m in errors]},
    )


def _key(error: ErrorDetails) -> str:
    loc = list(error["loc"])
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, _KeyedError):
        loc.extend(cause.key)
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


_TYPE_MESSAGES = {
    "extra_forbidden": "unknown key",
    "model_type": "expected a table",
    "model_attributes_type": "expected a table",
    "dict_type": "expected a table",
    "tuple_type": "expected a list",
    "list_type": "expected a list",
    "string_type": "expected a string",
    "bool_type": "expected true or false",
    "int_type": "expected an integer",
}
_PLAIN_MESSAGES = {
    "string_pattern_mismatch": "an id must not be empty or contain '/', '$' or whitespace",
    "string_too_short": "must not be empty",
}


def _message(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind in _TYPE_MESSAGES:
        message = _TYPE_MESSAGES[kind]
        return message if kind == "extra_forbidden" else f"{message}, got {error['input']!r}"
    if kind in _PLAIN_MESSAGES:
        return f"{_PLAIN_MESSAGES[kind]}, got {error['input']!r}"
    return error["msg"].removeprefix("Value error, ")
