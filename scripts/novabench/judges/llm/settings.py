"""An LLM judge's settings: the backend (the chat client's settings), the protocol,
the prompts and the failure budget; checked, resolved and read here."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench import paths, vllm_server
from novabench.errors import ConfigError, NovaError, settings_error
from novabench.io import resolve_path
from novabench.judges.llm import live_check
from novabench.models import chat_client

#: How a caption judge asks: one request per (reference, prediction) pair (the paper's), or
#: one per caption. A diagnosis judge always asks once per image for the ranked list.
PROTOCOLS = ("paired", "per-caption")
DEFAULT_PROTOCOL = "paired"
DIAGNOSIS_PROTOCOL = "ranked-list"
#: The tasks whose answers an llm judge reads, and the ways it can ask for each (the first
#: is the default); the judge classes of this package implement each pair.
TASK_PROTOCOLS: dict[str, tuple[str, ...]] = {
    "captioning": PROTOCOLS,
    "diagnosis": (DIAGNOSIS_PROTOCOL,),
}
TASKS = tuple(TASK_PROTOCOLS)
# The default prompts ship inside the package (the one copy: the workflow's configurations
# name them by their path in it), so an installed novabench finds them too.
PROMPTS_DIR = paths.JUDGE_PROMPTS


@dataclass(frozen=True)
class PromptSpec:
    """The default prompt of one way of asking, and the placeholders its template uses."""

    default: str
    placeholders: frozenset[str]


PROMPT_SPECS: dict[str, PromptSpec] = {
    "paired": PromptSpec("judge-caption-paired-v1.txt", frozenset({"reference", "prediction"})),
    "per-caption": PromptSpec("judge-keywords-v1.txt", frozenset({"caption"})),
    DIAGNOSIS_PROTOCOL: PromptSpec(
        "judge-diagnosis-v1.txt", frozenset({"reference", "candidates"})
    ),
}
# A judge should answer the same way every time: greedy decoding, and room for two
# captions' keyword lists (raw and standardized). The adapter's own defaults are the
# paper's settings for *models*.
BACKEND_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 2048}
# Config paths are relative to the working directory, else to the repository (where the
# workflow lives), as everywhere in the configuration. An installed package has no
# repository: its paths are relative to the working directory only.
REPOSITORY = paths.REPOSITORY

SETTINGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["backend"],
    "properties": {
        "backend": chat_client.SETTINGS_SCHEMA,
        "protocol": {"enum": list(PROTOCOLS)},
        "prompts": {
            "type": "object",
            "additionalProperties": False,
            "properties": {task: {"type": "string", "minLength": 1} for task in TASKS},
        },
        "max_failure_rate": {"type": "number", "minimum": 0, "maximum": 100},
        "live_check": live_check.SCHEMA,
        # An open-weight judge the reading job serves itself (vllm serve backend.model).
        "serve": vllm_server.SERVE_SCHEMA,
    },
}
#: A served judge's address of record (its answers' cache key), as a managed model's.
SERVED_RECORD_URL = "http://localhost:8000/v1"


def _default_resolve(path: str) -> str:
    return resolve_path(path, REPOSITORY)


def task_protocol(task: str, protocol: str) -> str:
    """How the judge of ``task`` asks: the caption protocol, or the diagnosis one."""
    protocols = TASK_PROTOCOLS[task]
    return protocol if protocol in protocols else protocols[0]


def check_settings(
    name: str, settings: dict[str, Any], resolve: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """Validate an ``llm`` judge's settings; return them resolved (defaults, prompt paths).

    Raises ConfigError naming ``judges.<name>.settings.<key>`` and the fix.
    """
    import jsonschema

    where = f"judges.{name}.settings"
    # A served judge's backend needs no address or key: the defaults fill them in.
    if isinstance(settings.get("backend"), dict):
        settings = {**settings, "backend": {**served_backend(settings), **settings["backend"]}}
    try:
        jsonschema.validate(settings, SETTINGS_SCHEMA)
    except jsonschema.ValidationError as exc:
        raise settings_error(exc, where, "see the llm judge in config/README.md") from None
    resolve = resolve or _default_resolve
    backend_settings = {**BACKEND_DEFAULTS, **settings["backend"]}
    backend = chat_client.resolve_settings(name, backend_settings, f"{where}.backend")
    protocol = settings.get("protocol", DEFAULT_PROTOCOL)
    prompts = {
        task: settings.get("prompts", {}).get(task)
        or str(PROMPTS_DIR / PROMPT_SPECS[task_protocol(task, protocol)].default)
        for task in TASKS
    }
    return {
        "backend": backend,
        "backend_settings": backend_settings,
        "protocol": protocol,
        "prompts": {task: Path(resolve(path)) for task, path in prompts.items()},
        "max_failure_rate": float(settings.get("max_failure_rate", 0.0)),
        "live_check": live_check.resolve(settings.get("live_check")),
        "serve": served_settings(name, settings),
    }


def served_backend(settings: dict[str, Any]) -> dict[str, Any]:
    """A served judge's backend defaults: no key (loopback), the address of record."""
    if "serve" not in settings:
        return {}
    return {"base_url": SERVED_RECORD_URL, "api_key_env": None}


def served_settings(name: str, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The ``serve`` block with its defaults and checks (as a managed model's), or None."""
    if "serve" not in settings:
        return None
    serve = vllm_server.resolve_serve(f"judges.{name}", settings["serve"])
    problem = vllm_server.replicas_problem(f"judges.{name}", serve)
    if problem is not None:
        raise problem
    return serve


def read_prompt(name: str, task: str, path: Path, protocol: str = DEFAULT_PROTOCOL) -> str:
    """The judge's prompt template for ``task``; ConfigError if absent or malformed."""
    try:
        template = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"judges.{name}: cannot read the {task} judge prompt {path} ({exc.strerror or exc})",
            f"fix judges.{name}.settings.prompts.{task}",
        ) from None
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        fields = {f"malformed: {exc}"}
    ask = task_protocol(task, protocol)
    wanted = PROMPT_SPECS[ask].placeholders
    if fields != wanted:
        expected = ", ".join("{" + f + "}" for f in sorted(wanted))
        raise ConfigError(
            f"judges.{name}: the {task} judge prompt {path} has the placeholders "
            f"{sorted(fields)}, not {expected} (protocol {ask})",
            f"use exactly {expected} and double literal braces {{{{ }}}}",
        )
    return template


def prompt_paths(
    name: str, settings: dict[str, Any], resolve: Callable[[str], str] | None = None
) -> dict[str, str]:
    """Task -> the resolved path of its judge prompt (for the workflow's inputs)."""
    resolved = check_settings(name, settings, resolve)
    return {task: str(path) for task, path in resolved["prompts"].items()}


def api_resource(settings: dict[str, Any]) -> str:
    """The Snakemake resource ``api_<provider>`` that the judge's requests count against."""
    return chat_client.api_resource(settings.get("backend", {}))


def endpoint_problem(name: str, backend: dict[str, Any]) -> NovaError | None:
    return chat_client.endpoint_problem(
        f"judges.{name}",
        backend,
        key_fix="before scoring, or choose another judge under tasks.<task>.judge",
        url_fix=f"start the server or fix judges.{name}.settings.backend.base_url, and check "
        "the network",
        holder="the judge's API key",
    )
