"""User-facing errors.

Every problem a user can fix (bad config, missing key, corrupt input) is raised as a
``NovaError`` whose message is one line naming the problem and the fix. Rule entry
scripts print that line instead of a traceback.
"""


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
