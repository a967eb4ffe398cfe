"""``results/<tag>/manifest.json``: what produced the results, in one file.

Records the code (git commit, or null outside a git checkout, and the hash of every
module and data file the jobs ran, as ``novabench.code_fingerprint`` hashes them, with
each prediction and score file's code fingerprint), the software (Python, Snakemake
and key package versions), the configuration (its sha256 and, with secrets removed, the
model settings), the dataset (source, revision, sha256), per prediction file
the prompt and model identity hashes, per score file the judge identity and input hashes,
and every seed. A key whose name contains key, token, secret or password is dropped
wherever it appears, with its value: API key *variables* are not secret, but a rule that
cannot be talked around is safer than a list of exceptions.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from novabench.io import atomic_write_text
from novabench.provenance import canonical_json, sha256_file, sha256_text

MANIFEST_VERSION = 1
SECRET_KEY = re.compile(r"key|token|secret|password", re.IGNORECASE)
PACKAGES = (
    "snakemake",
    "numpy",
    "pandas",
    "scipy",
    "pyarrow",
    "pycocotools",
    "nltk",
    "sacrebleu",
    "matplotlib",
    "pillow",
    "pyyaml",
    "datasets",
    "huggingface_hub",
    "openai",
    "rank-bm25",
)
DATASET_KEYS = (
    "source",
    "repo_id",
    "revision",
    "resolved_revision",
    "local_path",
    "layout",
    "file",
    "sha256",
    "schema_version",
    "n_images",
    "n_gold_boxes",
    "raters",
)


def drop_secrets(value: Any) -> Any:
    """A copy of ``value`` without any mapping key that names a secret, at any depth."""
    if isinstance(value, Mapping):
        return {str(k): drop_secrets(v) for k, v in value.items() if not SECRET_KEY.search(str(k))}
    if isinstance(value, list | tuple):
        return [drop_secrets(v) for v in value]
    return value


def git_state(directory: Path) -> dict[str, Any]:
    """The commit checked out in ``directory`` and whether tracked files differ from it;
    ``{"commit": None}`` outside a git checkout or without git."""

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(
                ["git", "-C", str(directory), *args],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    commit = git("rev-parse", "--verify", "HEAD")
    if not commit:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _seeds(config: Mapping[str, Any]) -> dict[str, Any]:
    seeds: dict[str, Any] = {}
    dataset = config.get("dataset", {})
    if dataset.get("source") == "sample":
        seeds["dataset.sample.seed"] = dataset.get("sample", {}).get("seed")
    boot = config.get("reporting", {}).get("bootstrap", {})
    if "seed" in boot:
        seeds["reporting.bootstrap.seed"] = boot["seed"]
    for name, model in config.get("models", {}).items():
        seed = (model.get("settings") or {}).get("seed")
        if seed is not None:
            seeds[f"models.{name}.settings.seed"] = seed
    return seeds


def _models(config: Mapping[str, Any]) -> dict[str, Any]:
    """The enabled models' settings, secrets removed."""
    models = {}
    for name, model in config.get("models", {}).items():
        if not model.get("enabled", True):
            continue
        keys = ("adapter", "tasks", "box_format", "prompts", "settings")
        models[name] = drop_secrets({k: model[k] for k in keys if k in model})
    return models


def _predictions(prediction_summaries: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """task -> model -> what identifies its prediction file (from its summary)."""
    predictions: dict[str, dict[str, Any]] = {}
    for path in prediction_summaries:
        summary = _read_json(path)
        task, model = Path(path).parent.name, summary.get("model", Path(path).name.split(".")[0])
        predictions.setdefault(task, {})[model] = drop_secrets(
            {
                "request": summary.get("request"),
                "identity": summary.get("identity"),
                "box_format": summary.get("box_format"),
                "status_counts": summary.get("status_counts"),
                "n_cached": summary.get("n_cached"),
                # The model versions and system fingerprints the server reported.
                "served": summary.get("served"),
                "code": summary.get("code"),
            }
        )
    return predictions


def _scores(score_files: Sequence[Path]) -> tuple[dict[str, dict[str, Any]], dict[str, list]]:
    """task -> score file -> its hash, judge and inputs; and task -> the judges used."""
    scores: dict[str, dict[str, Any]] = {}
    judges: dict[str, list[Any]] = {}
    for path in score_files:
        payload = _read_json(path)
        task, name = payload["task"], Path(path).name.removesuffix(".json")
        judge = payload.get("judge")
        scores.setdefault(task, {})[name] = {
            "sha256": sha256_file(Path(path)),
            "judge": judge,
            "inputs": payload.get("inputs"),
            "code": payload.get("code"),
        }
        if judge is not None and judge not in judges.setdefault(task, []):
            judges[task].append(judge)
    return scores, judges


def _software() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": platform.platform(terse=True),
        "packages": package_versions(),
    }


def build_manifest(
    *,
    config: Mapping[str, Any],
    dataset_manifest: Path,
    prediction_summaries: Sequence[Path],
    score_files: Sequence[Path],
    prompts: Sequence[Path] = (),
    git: Mapping[str, Any] | None = None,
    code_files: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The provenance manifest as a dict (see the module docstring).

    ``prompts`` are the prompt templates used; ``git`` the state of the workflow's
    checkout (:func:`git_state`; computed at DAG build time so a new commit re-runs the
    manifest rule); ``code_files`` the hash of every module and data file behind the
    run's jobs (``Plan.run_code_files``), which each job's ``code`` fingerprint covers.
    """
    from novabench import __version__

    dataset = _read_json(dataset_manifest)
    models = _models(config)
    predictions = _predictions(prediction_summaries)
    prompt_files = {
        Path(path).name: {"id": Path(path).stem, "sha256": sha256_file(Path(path))}
        for path in prompts
    }
    scores, judges = _scores(score_files)
    judge_config = drop_secrets(config.get("judges", {}))
    return {
        "manifest_version": MANIFEST_VERSION,
        "novabench_version": __version__,
        "git": dict(git) if git is not None else {"commit": None, "dirty": None},
        "code": {"files": dict(sorted((code_files or {}).items()))},
        "software": _software(),
        "config_sha256": sha256_text(canonical_json(config)),
        "dataset": {key: dataset[key] for key in DATASET_KEYS if key in dataset},
        "tasks": drop_secrets(config.get("tasks", {})),
        "prompts": prompt_files,
        "judges": {"configured": judge_config, "used": judges},
        "models": models,
        "predictions": predictions,
        "scores": scores,
        "seeds": _seeds(config),
        "reporting": drop_secrets(config.get("reporting", {})),
    }


def write_manifest(out: Path, **kwargs: Any) -> dict[str, Any]:
    manifest = build_manifest(**kwargs)
    atomic_write_text(out, json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n")
    return manifest
