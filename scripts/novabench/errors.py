"""User-facing errors.

Every problem a user can fix (bad config, missing key, corrupt input) is raised as a
``NovaError`` whose message is one line naming the problem and the fix. Rule entry
scripts print that line instead of a traceback.
"""

from __future__ import annotations

from typing import Any


class NovaError(Exception):
    """A problem with the user's input or environment, explained in one line."""

    def __init__(self, problem: str, fix: str | None = None):
        message = problem if fix is None else f"{problem}; fix: {fix}"
        super().__init__(" ".join(message.split()))


class ConfigError(NovaError):
    """The configuration is invalid."""


class DatasetError(NovaError):
    """The dataset (source files, images, annotations) is missing or invalid."""


class HubUnreachableError(DatasetError):
    """The Hugging Face Hub cannot be reached."""


def settings_error(error: Any, prefix: str, fix: str) -> ConfigError:
    """One line for a jsonschema error in a settings mapping under ``prefix``.

    Shared by every backend and judge that checks its own settings.
    """
    path = ".".join([prefix, *(str(p) for p in error.absolute_path)])
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        problem = f"{path}: unknown setting {extra[0] if extra else '?'}"
    elif error.validator == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        problem = f"{path}: missing setting {missing[0] if missing else '?'}"
    else:
        problem = f"invalid value of {path}: {' '.join(error.message.split())[:200]}"
    return ConfigError(problem, fix)
