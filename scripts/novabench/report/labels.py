"""What dataset the numbers are on, in one phrase, for every caption and title.

:func:`dataset_label` reads the dataset manifest (``results/dataset/manifest.json``) that
the dataset rule writes; tables, the summary, the reproduced-vs-reported comparison and the
HTML report's captions all use it, so that numbers on the synthetic sample are never
captioned as NOVA. :func:`not_comparable` says why a dataset's numbers cannot be set
beside the paper's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The published numbers are on the full release: 906 images from 281 cases.
NOVA_IMAGES = 906
HUB_SOURCES = ("hf", "hf-legacy")


def _short(revision: str) -> str:
    """A commit sha shortened as git does; a branch or tag name as it is."""
    is_sha = len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)
    return revision[:7] if is_sha else revision


def _revision(manifest: Mapping[str, Any]) -> str:
    asked = str(manifest.get("revision") or "")
    resolved = str(manifest.get("resolved_revision") or "")
    if resolved and asked and _short(asked) != _short(resolved):
        return f"{asked} ({_short(resolved)})"  # e.g. "main (3f2a1b9)"
    return _short(resolved or asked or "unknown revision")


def describe_subset(subset: Any) -> str:
    """A subset object in words: its ``description``, else its settings as key=value."""
    if isinstance(subset, Mapping):
        if subset.get("description"):
            return str(subset["description"])
        return ", ".join(f"{k}={subset[k]}" for k in sorted(subset))
    return str(subset)


def dataset_label(manifest: Mapping[str, Any] | None) -> str:
    """E.g. "synthetic sample (not NOVA)", "NOVA c-i-ber/Nova @ 3f2a1b9", "local copy at
    /data/nova", each followed by " + subset: ..." when the run used a subset."""
    if not manifest:
        return "unknown dataset (no dataset manifest)"
    source = manifest.get("source")
    if source == "sample":
        label = "synthetic sample (not NOVA)"
    elif source in HUB_SOURCES:
        label = f"NOVA {manifest.get('repo_id', '?')} @ {_revision(manifest)}"
    elif source == "local":
        label = f"local copy at {manifest.get('local_path', '?')}"
    else:
        label = f"dataset from source {source!r}"
    if manifest.get("subset"):
        label += f" + subset: {describe_subset(manifest['subset'])}"
    return label


def not_comparable(manifest: Mapping[str, Any] | None) -> str | None:
    """Why numbers on this dataset cannot be set beside the paper's, or None when they can:
    the Hub release (current or review-time) or a local copy with all 906 images, no
    subset."""
    if not manifest:
        return "there is no dataset manifest"
    source, n_images = manifest.get("source"), manifest.get("n_images")
    if source == "sample":
        return "the dataset is the synthetic sample, not NOVA"
    if manifest.get("subset"):
        return f"the dataset is a subset ({describe_subset(manifest['subset'])})"
    if source == "local" and n_images != NOVA_IMAGES:
        return f"the local copy has {n_images} images, not the release's {NOVA_IMAGES}"
    if source not in (*HUB_SOURCES, "local"):
        return f"dataset source {source!r} is not a NOVA release"
    return None


def read_manifest(path: Path | None) -> dict[str, Any] | None:
    """The dataset manifest, or None when there is none (yet)."""
    if path is None or not Path(path).is_file():
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def rst_escape(text: str) -> str:
    """Plain text for reStructuredText on one line: no markup, no link (``a@b`` is an e-mail
    link), no directive. ``/`` is escaped too, so that the escaped text, which Snakemake
    also shows raw among a job's parameters inside a ``<script>`` block of its HTML report,
    never holds ``</`` (``\\<\\/script`` renders as ``</script`` and ends nothing)."""
    return "".join("\\" + c if c in "\\*`_|@[]:<>/" else c for c in " ".join(text.split()))


class DatasetLabel:
    """The label of the manifest at ``path`` as reStructuredText, read when it is shown
    (``str``).

    A parameter of the report rules for the HTML report's captions, which Snakemake renders
    after the run, when the manifest exists; not a value Snakemake compares between runs,
    so it never re-runs a job.
    """

    def __init__(self, path: str | Path):
        self.path = str(path)

    def __str__(self) -> str:
        return rst_escape(dataset_label(read_manifest(Path(self.path))))

    def __repr__(self) -> str:
        return f"DatasetLabel({self.path!r})"


class TaskCaption:
    """A task's own caption text of one figure family in the HTML report
    (``Task.figure_caption``), with the dataset's label in it, read when it is shown
    (``str``).

    A parameter of the figure rules, so that the caption templates (workflow/report/*.rst)
    name no task; like :class:`DatasetLabel`, never a reason to re-run a job.
    """

    def __init__(self, task: str, family: str, dataset: Any):
        self.task, self.family, self.dataset = task, family, dataset

    def __str__(self) -> str:
        from novabench.tasks import get_task

        return get_task(self.task).figure_caption(self.family, str(self.dataset))

    def __repr__(self) -> str:
        return f"TaskCaption({self.task!r}, {self.family!r})"


def figure_note(manifest: Mapping[str, Any] | None) -> str | None:
    """The line a figure carries when its numbers are not on the full NOVA release (the
    synthetic sample, a subset, a partial copy); None on the release itself, so that
    figures meant for a paper stay clean."""
    if manifest is None or not_comparable(manifest) is None:
        return None
    return f"Dataset: {dataset_label(manifest)}"
