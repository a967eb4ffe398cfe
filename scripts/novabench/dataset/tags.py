"""The tag that names a dataset's results folder, ``results/<tag>/``.

Each dataset's results live in a folder of their own, so switching between datasets and
subsets re-runs nothing and overwrites nothing. The tag is ``dataset.tag`` when set, else
derived: ``sample``, ``nova`` / ``nova-legacy`` (plus ``-<revision>`` when pinned: the
whole revision name, a commit sha's first 12 digits), ``local-<folder>``, and
``-subset-<8 hex digits of the subset's settings>`` for a subset. Two sources can still
meet in one tag (two folders of one name, a tag set by hand): the dataset's manifest
records its source (:func:`source_identity`), and :func:`check_tag_source` refuses, before
anything runs, a tag whose folder holds the dataset of another source.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from novabench.errors import ConfigError

SUBSET_KEYS = ("cases", "filenames", "categories", "limit", "seed")
# What results/ holds beside the datasets' folders (shared by all of them): no tag may
# take these names (lower case: some file systems ignore case).
SHARED_FOLDERS = (
    "cache",
    "sources",
    "servers",
    "nltk_data",
    "judges",
    "logs",
    "benchmarks",
    "report.html",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def _slug(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._-") or "dataset"


def source_tag(dataset_cfg: Mapping[str, Any]) -> str:
    """The tag of the full dataset of the configured source."""
    if dataset_cfg.get("tag"):
        return _slug(str(dataset_cfg["tag"]))
    source = dataset_cfg["source"]
    if source in ("hf", "hf-legacy"):
        key = "current" if source == "hf" else "legacy"
        base = "nova" if source == "hf" else "nova-legacy"
        revision = str(dataset_cfg.get("hf", {}).get(key, {}).get("revision") or "main")
        if revision == "main":
            return base
        # A commit sha is known by its first 12 digits; any other name by all of it.
        return f"{base}-{revision[:12] if _COMMIT.fullmatch(revision) else _slug(revision)}"
    if source == "local":
        return "local-" + _slug(Path(str(dataset_cfg.get("local_path") or "")).name)
    return _slug(source)


def subset_spec(dataset_cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """The configured subset with its defaults filled in, or None for the whole dataset."""
    subset = dataset_cfg.get("subset")
    if not subset:
        return None
    spec = {key: subset[key] for key in SUBSET_KEYS if subset.get(key) is not None}
    if "limit" in spec:
        spec.setdefault("seed", 0)
    return spec


def subset_tag(spec: Mapping[str, Any]) -> str:
    """``subset-`` and 8 hex digits of the subset's settings (same settings, same tag)."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return f"subset-{digest[:8]}"


def dataset_tags(dataset_cfg: Mapping[str, Any]) -> tuple[str, str]:
    """(tag of the full dataset, tag of the dataset the run scores): equal without a subset."""
    base = source_tag(dataset_cfg)
    spec = subset_spec(dataset_cfg)
    return base, base if spec is None else f"{base}-{subset_tag(spec)}"


def source_identity(dataset_cfg: Mapping[str, Any]) -> str:
    """What the full dataset is read from, in words: the folder (resolved), the Hub
    repository and revision, or the embedded sample. The dataset manifest records it
    (``source_id``)."""
    source = dataset_cfg["source"]
    if source == "local":
        folder = Path(str(dataset_cfg.get("local_path") or "")).expanduser().resolve()
        return f"the local folder {folder}"
    if source in ("hf", "hf-legacy"):
        release = (dataset_cfg.get("hf") or {}).get("current" if source == "hf" else "legacy")
        release = release or {}
        return f"{release.get('repo_id')}@{release.get('revision') or 'main'} on the Hub"
    return f"the {source} source"


def recorded_identity(manifest: Mapping[str, Any]) -> str | None:
    """The source a dataset manifest records: its ``source_id``, or for a manifest written
    before it, the same words made from its provenance fields; None when unknown."""
    if isinstance(manifest.get("source_id"), str):
        return manifest["source_id"]
    source = manifest.get("source")
    if source == "local" and manifest.get("local_path"):
        return source_identity(manifest)
    if source in ("hf", "hf-legacy") and manifest.get("repo_id"):
        release = {"repo_id": manifest["repo_id"], "revision": manifest.get("revision")}
        key = "current" if source == "hf" else "legacy"
        return source_identity({"source": source, "hf": {key: release}})
    return None if source is None else source_identity({"source": source})


def check_tag_source(results: Path, tag: str, dataset_cfg: Mapping[str, Any]) -> None:
    """ConfigError when ``results/<tag>/`` holds the dataset of another source than the
    configured one: building there would overwrite its dataset and every result."""
    manifest_path = Path(results) / tag / "dataset" / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # nothing built there yet (an unreadable manifest is rebuilt)
    recorded = recorded_identity(manifest) if isinstance(manifest, dict) else None
    current = source_identity(dataset_cfg)
    if recorded is not None and recorded != current:
        raise ConfigError(
            f"results/{tag}/ holds the dataset of {recorded}, not of {current}",
            f"set dataset.tag to a new name for this source, or delete results/{tag}/",
        )
