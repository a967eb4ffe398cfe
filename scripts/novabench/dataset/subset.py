"""Subsets of a built dataset (``dataset.subset`` in the config).

A subset is cut from the built ``nova.parquet``, so the full dataset is built, validated
and recorded once and every subset is taken from it. Keys, all optional, combined with AND:

- ``cases``: case ids to keep; ``filenames``: image file names to keep;
- ``categories``: pathology categories of the diagnosis vocabulary (``unknown`` for a
  diagnosis it does not hold), matched on each image's final diagnosis;
- ``limit``: at most this many images, drawn as whole cases in an order fixed by ``seed``
  (a case's images are never split, because the statistics resample cases).
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from novabench.dataset.build import record_counts
from novabench.dataset.references import KEY_COLUMNS, task_digests
from novabench.errors import ConfigError, DatasetError
from novabench.io import atomic_path
from novabench.provenance import sha256_file


def _limit_cases(case_sizes: Mapping[str, int], limit: int, seed: int) -> set[str]:
    """Whole cases, in a seeded random order, while the image count stays within ``limit``.

    When no case is small enough, the smallest one (first in the seeded order) is kept, so
    a subset is never empty.
    """
    order = sorted(case_sizes)
    random.Random(seed).shuffle(order)
    kept, total = set(), 0
    for case in order:
        if total + case_sizes[case] <= limit:
            kept.add(case)
            total += case_sizes[case]
    if not kept:
        kept.add(min(order, key=lambda case: case_sizes[case]))
    return kept


def select_rows(
    table: pa.Table, spec: Mapping[str, Any], category_of: Callable[[str | None], str]
) -> list[int]:
    """Row indices of ``table`` that the subset keeps, in the table's order."""
    filenames = table.column("filename").to_pylist()
    cases = table.column("case_id").to_pylist()
    keep = [True] * len(filenames)
    for key, column in (("cases", cases), ("filenames", filenames)):
        if key in spec:
            wanted = {str(value) for value in spec[key]}
            unknown = sorted(wanted - set(column))
            if unknown:
                raise ConfigError(
                    f"dataset.subset.{key} names {len(unknown)} not in the dataset "
                    f"(e.g. {unknown[0]!r})",
                    f"use {key} of the built dataset (see its nova.parquet)",
                )
            keep = [k and value in wanted for k, value in zip(keep, column, strict=True)]
    if "categories" in spec:
        wanted = set(spec["categories"])
        diagnoses = table.column("final_diagnosis").to_pylist()
        keep = [k and category_of(d) in wanted for k, d in zip(keep, diagnoses, strict=True)]
    if "limit" in spec:
        sizes: dict[str, int] = {}
        for k, case in zip(keep, cases, strict=True):
            if k:
                sizes[case] = sizes.get(case, 0) + 1
        chosen = _limit_cases(sizes, int(spec["limit"]), int(spec["seed"]))
        keep = [k and case in chosen for k, case in zip(keep, cases, strict=True)]
    rows = [i for i, k in enumerate(keep) if k]
    if not rows:
        raise ConfigError(
            f"dataset.subset {json.dumps(spec, sort_keys=True)} keeps no image",
            "widen dataset.subset (or remove it to score the whole dataset)",
        )
    return rows


def _subset_exclusions(manifest: Mapping[str, Any], kept: set[str]) -> dict[str, Any]:
    """The full dataset's per-task exclusions, restricted to the subset's images."""
    exclusions = {}
    for task, excluded in (manifest.get("excluded") or {}).items():
        filenames = [f for f in excluded["filenames"] if f in kept]
        if filenames:
            exclusions[task] = {**excluded, "filenames": filenames}
    return exclusions


def write_subset(
    full_parquet: Path,
    full_manifest: Path,
    spec: Mapping[str, Any],
    tag: str,
    out_parquet: Path,
    out_manifest: Path,
    category_of: Callable[[str | None], str],
    *,
    task_needs: Mapping[str, Mapping[str, Any]] | None = None,
    out_tasks: Mapping[str, Path] | None = None,
) -> dict[str, Any]:
    """Cut the subset from the built dataset; its manifest records what was kept and why,
    and ``out_tasks[task]`` what each task's jobs read of it (as the dataset build writes)."""
    try:
        table = pq.read_table(full_parquet)
        manifest = json.loads(Path(full_manifest).read_text())
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise DatasetError(
            f"the built dataset {full_parquet} cannot be read ({exc})",
            "delete it and re-run to rebuild it",
        ) from None
    subset = table.take(pa.array(select_rows(table, spec, category_of), type=pa.int64()))
    kept = set(subset.column("filename").to_pylist())
    exclusions = _subset_exclusions(manifest, kept)
    needs = dict(task_needs or {})
    columns = list(
        dict.fromkeys(
            [*KEY_COLUMNS, "gold_boxes", "rater_boxes"]
            + [c for n in needs.values() for c in n["columns"]]
        )
    )
    records = subset.select(columns).to_pylist()
    image_sha256 = {f: manifest.get("image_sha256", {}).get(f) for f in kept}
    digests = task_digests(records, image_sha256, exclusions, needs)
    with contextlib.ExitStack() as outputs:
        tmp_parquet = outputs.enter_context(atomic_path(Path(out_parquet)))
        pq.write_table(subset, tmp_parquet, write_page_checksum=True, row_group_size=128)
        manifest.update(_subset_manifest(manifest, spec, tag, records, kept, exclusions))
        manifest["sha256"] = sha256_file(tmp_parquet)
        tmp_manifest = outputs.enter_context(atomic_path(Path(out_manifest)))
        tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        for task, path in (out_tasks or {}).items():
            tmp = outputs.enter_context(atomic_path(Path(path)))
            tmp.write_text(json.dumps(digests[task], indent=2) + "\n", encoding="utf-8")
    return manifest


def _subset_manifest(
    manifest: Mapping[str, Any],
    spec: Mapping[str, Any],
    tag: str,
    records: list[dict[str, Any]],
    kept: set[str],
    exclusions: Mapping[str, Any],
) -> dict[str, Any]:
    """What changes in the full dataset's manifest for the subset."""
    full = {key: manifest.get(key) for key in ("file", "sha256", "n_images", "n_cases")}
    counts = record_counts(records)
    settings = ", ".join(f"{key}={spec[key]}" for key in sorted(spec))
    return {
        "tag": tag,
        **counts,
        "subset": {
            **dict(spec),
            # How tables and captions name the subset.
            "description": f"{settings}; {counts['n_images']} of {full['n_images']} "
            f"images, {counts['n_cases']} of {full['n_cases']} cases",
        },
        "subset_filenames": sorted(kept),
        "full_dataset": full,
        "n_excluded": {task: len(e["filenames"]) for task, e in exclusions.items()},
        "excluded": dict(exclusions),
        "image_sha256": {
            f: h for f, h in sorted((manifest.get("image_sha256") or {}).items()) if f in kept
        },
    }
