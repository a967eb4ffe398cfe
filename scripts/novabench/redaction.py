"""API keys out of everything the pipeline stores, logs or forwards.

A server may echo a key in an error body (many services quote the key they refused) or,
hostile or buggy, inside an answer; a key in an answer would reach the response cache,
the prediction records, the logs, the score tables and the prompt of an LLM judge (another
provider). So every text that comes from a server is passed through a :class:`Redactor`
before it goes anywhere: error messages before they are cut to length (a key straddling
the cut would survive as its first characters), answers before they are cached.

A redactor removes

- every key the configuration names: the values of the environment variables that
  ``models.*.settings.api_key_env`` and ``judges.*.settings.backend.api_key_env`` name.
  The workflow exports those names (:func:`export_key_variables`, at plan time) so that
  each job, which sees only its own model, also knows the keys of the others;
- text shaped like a well-known provider's key (OpenAI and Anthropic ``sk-...``, Google
  ``AIza...``, Hugging Face ``hf_...``), which a key from elsewhere (a proxy's, a key the
  server holds) would have.

A process the pipeline starts (a managed vLLM server) may print what it was given: its
output is also cleared of the values of the secret-named variables it inherits
(:func:`environment_secrets`: ``HF_TOKEN``, ``*_API_KEY``, ``*_PASSWORD``...).

Keys shorter than :data:`MIN_KEY_LENGTH` are left alone: they are placeholders such as
``EMPTY`` and would hit ordinary words of an answer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

PLACEHOLDER = "[redacted]"
# The environment variable holding the names (space-separated) of the configured keys'
# variables: names only, never a key.
KEY_VARIABLES_ENV = "NOVABENCH_KEY_VARIABLES"
MIN_KEY_LENGTH = 8
# Well-known key shapes; long enough that no word or identifier of an answer matches.
KEY_SHAPES = (
    r"\bsk-[A-Za-z0-9_-]{20,}",  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    r"\bAIza[0-9A-Za-z_-]{35}",  # Google (Gemini)
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
)
# Names of environment variables that hold secrets by convention (HF_TOKEN, VLLM_API_KEY,
# AWS_SECRET_ACCESS_KEY, PGPASSWORD, ...).
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)


class Redactor:
    """Replaces ``keys`` and key-shaped text with :data:`PLACEHOLDER`."""

    def __init__(self, keys: Iterable[str | None] = ()):
        secrets = {k.strip() for k in keys if k and len(k.strip()) >= MIN_KEY_LENGTH}
        # Longest first: a key that contains another is replaced whole.
        literal = [re.escape(k) for k in sorted(secrets, key=len, reverse=True)]
        self.n_keys = len(secrets)
        self._pattern = re.compile("|".join([*literal, *KEY_SHAPES]))

    def redact(self, text: str) -> tuple[str, int]:
        """The text without keys, and how many were removed."""
        return self._pattern.subn(PLACEHOLDER, text)

    def __call__(self, text: str) -> str:
        return self.redact(text)[0]


def configured_keys(*own: str | None) -> Redactor:
    """A redactor for ``own`` keys and every key the configuration names (see
    :func:`export_key_variables`) that is set in the environment."""
    names = os.environ.get(KEY_VARIABLES_ENV, "").split()
    return Redactor([*own, *(os.environ.get(name) for name in names)])


def export_key_variables(names: Iterable[str]) -> None:
    """Tell every job (a child process, or a cluster job that re-reads the workflow) which
    variables hold the configured keys."""
    os.environ[KEY_VARIABLES_ENV] = " ".join(sorted(set(names)))


def environment_secrets(environment: Mapping[str, str]) -> list[str]:
    """The values of the variables whose names say they hold a secret."""
    return [value for name, value in environment.items() if SECRET_NAME.search(name)]
