"""What each task reads of the dataset: the images it leaves out, and a digest of the rest.

Every task declares the reference columns it reads and those an image must have
(``Task.reference_columns``, ``Task.required_references``; passed here as
``Task.dataset_needs()``, so that the dataset job needs none of the scorers' libraries).
The dataset build checks them once, here: an image without a required reference is
excluded from that task only (``dataset.missing_reference: exclude``, the default;
counted in the manifest, the score files and the tables) or stops the build (``error``).
Scoring and the report leave out the same images through ``Task.scored_rows``, which
asks :func:`missing_references` too.

The digest of a task covers exactly what its prediction and scoring jobs read (keys,
size, its reference columns, the image when it sends one, its exclusions). The workflow
gives those jobs the digest file as an input, so a rebuilt dataset re-runs only the tasks
whose inputs changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from novabench.errors import DatasetError
from novabench.provenance import canonical_json, sha256_text

POLICIES = ("exclude", "error")
KEY_COLUMNS = ("filename", "case_id", "width", "height")


def missing_references(row: Mapping[str, Any], required: Sequence[str]) -> list[str]:
    """The ``required`` columns of one dataset row that hold no text."""
    return [c for c in required if not (isinstance(row.get(c), str) and row[c].strip())]


def task_exclusions(
    records: Sequence[Mapping[str, Any]],
    needs: Mapping[str, Mapping[str, Any]],
    policy: str = "exclude",
) -> dict[str, dict[str, Any]]:
    """Per task (``needs``: task -> ``Task.dataset_needs()``) that must leave images out:
    ``{reason, filenames}``; with ``policy`` ``error`` the first such task stops the build."""
    if policy not in POLICIES:
        raise DatasetError(
            f"dataset.missing_reference is {policy!r}", f"use one of {', '.join(POLICIES)}"
        )
    exclusions = {}
    for task, need in needs.items():
        required = list(need["required"])
        missing = [r["filename"] for r in records if missing_references(r, required)]
        if not missing:
            continue
        reason = "no " + " or ".join(required)
        if policy == "error":
            raise DatasetError(
                f"{len(missing)} image(s) have {reason}, which {task} needs (e.g. {missing[0]})",
                f"fill in the missing {' and '.join(required)}, or set "
                f"dataset.missing_reference: exclude to leave these images out of {task} only",
            )
        exclusions[task] = {"reason": reason, "filenames": missing}
    return exclusions


def task_digests(
    records: Sequence[Mapping[str, Any]],
    image_sha256: Mapping[str, str],
    exclusions: Mapping[str, Mapping[str, Any]],
    needs: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Per task of ``needs``: what its jobs read of the dataset, and its sha256."""
    digests = {}
    for task, need in needs.items():
        columns = [*KEY_COLUMNS, *need["columns"]]
        rows = [
            [*(r[c] for c in columns), image_sha256[r["filename"]] if need["uses_image"] else None]
            for r in records
        ]
        excluded = list(exclusions.get(task, {}).get("filenames", []))
        digests[task] = {
            "task": task,
            "columns": columns,
            "uses_image": bool(need["uses_image"]),
            "n_images": len(records) - len(excluded),
            "n_excluded": len(excluded),
            "excluded": excluded,
            "sha256": sha256_text(canonical_json([rows, excluded])),
        }
    return digests
