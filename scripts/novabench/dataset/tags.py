"""The tag that names a dataset's results folder, ``results/<tag>/``.

Each dataset's results live in a folder of their own, so switching between datasets and
subsets re-runs nothing and overwrites nothing. The tag is ``dataset.tag`` when set, else
derived: ``sample``, ``nova`` / ``nova-legacy`` (plus ``-<revision>`` when pinned),
``local-<folder>``, and ``-subset-<8 hex digits of the subset's settings>`` for a subset.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SUBSET_KEYS = ("cases", "filenames", "categories", "limit", "seed")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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
        return base if revision == "main" else f"{base}-{_slug(revision)[:12]}"
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
