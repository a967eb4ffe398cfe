"""Build ``nova.parquet`` and its manifest from any source.

Validation happens here, once, so every later rule can trust the file: images decode,
filenames are unique, boxes are finite, positive and inside their image and have a known
source, every task's references are checked (:mod:`novabench.dataset.references`).
Images with no gold box are kept (they are "normal" for localization); images of an
unexpected size are kept and recorded; images other than 8-bit grayscale are converted
(:mod:`novabench.dataset.images`) and recorded.

Every output is written under a temporary name and renamed over the previous one only
when all of them are complete: a failed build leaves the previous dataset as it was.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import novabench
from novabench.dataset import hub, layouts
from novabench.dataset.features import arrow_schema
from novabench.dataset.fingerprint import source_fingerprint
from novabench.dataset.images import load_image
from novabench.dataset.references import task_digests, task_exclusions
from novabench.dataset.schema import (
    EXPECTED_IMAGE_SIZE,
    RATER_PREFIX,
    SCHEMA_VERSION,
    rater_slug,
)
from novabench.dataset.tags import source_identity, source_tag
from novabench.errors import ConfigError, DatasetError
from novabench.io import atomic_path
from novabench.provenance import sha256_file

SOURCES = ("hf", "hf-legacy", "local", "sample")

# Box coordinates may overshoot the image by rounding; beyond this they are an error.
BOX_TOLERANCE_PX = 1.0
# NOVA's captions and histories are a few hundred characters; scoring time and memory
# grow with a reference's length (one 50 MB caption: minutes and gigabytes per job).
MAX_TEXT_CHARS = 20_000
TEXT_FIELDS = ("caption", "clinical_history", "final_diagnosis")


@dataclass
class BuildReport:
    """What validation found, recorded in the manifest."""

    unexpected_size: list[dict[str, Any]] = field(default_factory=list)
    clipped_boxes: int = 0
    dropped_boxes: int = 0
    missing_text: Counter = field(default_factory=Counter)
    converted_images: list[dict[str, Any]] = field(default_factory=list)
    image_sha256: dict[str, str] = field(default_factory=dict)  # of the files as read
    defaulted_box_sources: int = 0


def _check_box(
    box: dict[str, Any], width: int, height: int, where: str, clip: bool, report: BuildReport
) -> dict[str, float] | None:
    try:
        x, y, w, h = (float(box[k]) for k in ("x", "y", "width", "height"))
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{where}: malformed box {box}", "fix the annotation") from exc
    fix = "fix the annotation, or set dataset.clip_boxes: true to clip and drop such boxes"
    if not all(math.isfinite(v) for v in (x, y, w, h)):
        if clip:
            report.dropped_boxes += 1
            return None
        raise DatasetError(f"{where}: box {box} has a non-finite coordinate", fix)
    if w <= 0 or h <= 0:
        if clip:
            report.dropped_boxes += 1
            return None
        raise DatasetError(f"{where}: box {box} has a non-positive width or height", fix)
    tol = BOX_TOLERANCE_PX
    outside = x < -tol or y < -tol or x + w > width + tol or y + h > height + tol
    if outside and not clip:
        raise DatasetError(f"{where}: box {box} lies outside the {width}x{height} image", fix)
    x0, y0 = max(0.0, x), max(0.0, y)
    x1, y1 = min(float(width), x + w), min(float(height), y + h)
    if x1 <= x0 or y1 <= y0:
        report.dropped_boxes += 1
        return None
    if (x0, y0, x1, y1) != (x, y, x + w, y + h):
        report.clipped_boxes += outside
    return {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0}


def check_text_length(raw: layouts.RawImage, max_chars: int) -> None:
    """Stop at a caption, history or diagnosis longer than ``dataset.max_text_chars``."""
    for name in TEXT_FIELDS:
        length = len(getattr(raw, name))
        if length > max_chars:
            raise DatasetError(
                f"{name} of {raw.filename} is {length} characters long, more than "
                f"dataset.max_text_chars ({max_chars})",
                f"shorten that {name} in the metadata, or raise dataset.max_text_chars",
            )


def normalize(
    root: Path,
    raws: list[layouts.RawImage],
    clip_boxes: bool = False,
    max_text_chars: int = MAX_TEXT_CHARS,
) -> tuple[list[dict[str, Any]], BuildReport]:
    """Validate raw rows and turn them into records of the normalized schema."""
    report = BuildReport()
    seen: set[str] = set()
    records = []
    for raw in sorted(raws, key=lambda r: r.filename):
        if not raw.filename:
            raise DatasetError("a row has an empty filename", "fix the metadata")
        if PurePosixPath(raw.filename.replace("\\", "/")).name != raw.filename:
            raise DatasetError(
                f"filename {raw.filename!r} of a row is a path, not a file name",
                "give each row the image's file name only (e.g. case0001_001.png); its "
                "folder belongs in image_path",
            )
        if raw.filename in seen:
            raise DatasetError(
                f"filename {raw.filename} appears more than once",
                "remove the duplicate rows; every image must be listed once",
            )
        seen.add(raw.filename)
        if not raw.case_id:
            raise DatasetError(f"{raw.filename} has no case_id", "fix the metadata")
        check_text_length(raw, max_text_chars)
        records.append(_record(root, raw, clip_boxes, report))
    if not records:
        raise DatasetError(f"the dataset under {root} has no images", "check dataset.local_path")
    return records, report


def _record(
    root: Path, raw: layouts.RawImage, clip_boxes: bool, report: BuildReport
) -> dict[str, Any]:
    """One validated row of ``nova.parquet``; what was found goes into ``report``."""
    image = load_image(root, raw.image_path, raw.filename)
    width, height = image.width, image.height
    report.image_sha256[raw.filename] = image.source_sha256
    if image.conversion is not None:
        report.converted_images.append(image.conversion)
    if (width, height) != EXPECTED_IMAGE_SIZE:
        report.unexpected_size.append({"filename": raw.filename, "width": width, "height": height})
    for name in ("caption", "clinical_history", "final_diagnosis"):
        if not getattr(raw, name):
            report.missing_text[name] += 1
    report.defaulted_box_sources += raw.defaulted_sources
    gold = [
        b
        for box in raw.gold_boxes
        if (b := _check_box(box, width, height, f"{raw.filename} gold", clip_boxes, report))
    ]
    raters = []
    for box in raw.rater_boxes:
        where = f"{raw.filename} rater {box.get('rater')}"
        if checked := _check_box(box, width, height, where, clip_boxes, report):
            raters.append({"rater": str(box["rater"]), **checked})
    return {
        "filename": raw.filename,
        "case_id": raw.case_id,
        "scan_id": raw.scan_id,
        "image": {"bytes": image.png, "path": raw.filename},
        "width": width,
        "height": height,
        "caption": raw.caption,
        "clinical_history": raw.clinical_history,
        "final_diagnosis": raw.final_diagnosis,
        "gold_boxes": gold,
        "rater_boxes": raters,
        "image_path": raw.image_path,
        "meta": json.dumps(raw.meta, sort_keys=True, default=str),
    }


def write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    """Write with page checksums, so silent corruption is detected on read."""
    table = pa.Table.from_pylist(records, schema=arrow_schema())
    pq.write_table(table, path, write_page_checksum=True, row_group_size=128)


def record_counts(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's counts of images, cases, gold boxes and raters' boxes."""
    rater_counts = Counter(b["rater"] for r in records for b in r["rater_boxes"])
    return {
        "n_images": len(records),
        "n_cases": len({r["case_id"] for r in records}),
        "n_gold_boxes": sum(len(r["gold_boxes"]) for r in records),
        "n_images_without_gold_boxes": sum(not r["gold_boxes"] for r in records),
        "raters": sorted(rater_counts),
        "n_rater_boxes": dict(sorted(rater_counts.items())),
    }


def _manifest(
    records: list[dict[str, Any]],
    report: BuildReport,
    source: dict[str, Any],
    path: Path,
    exclusions: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "novabench_version": novabench.__version__,
        **source,
        "file": path.name,
        "sha256": sha256_file(path),
        **record_counts(records),
        "expected_image_size": list(EXPECTED_IMAGE_SIZE),
        "images_with_unexpected_size": report.unexpected_size,
        "clipped_boxes": report.clipped_boxes,
        "dropped_boxes": report.dropped_boxes,
        "boxes_with_default_source": report.defaulted_box_sources,
        "missing_text": dict(sorted(report.missing_text.items())),
        "n_excluded": {task: len(e["filenames"]) for task, e in exclusions.items()},
        "excluded": dict(exclusions),
        "n_converted_images": len(report.converted_images),
        "converted_images": report.converted_images,
        "image_sha256": dict(sorted(report.image_sha256.items())),
    }


def _source_root(
    dataset_cfg: Mapping[str, Any], sample_dir: Path | None, cache_dir: Path
) -> tuple[Path, dict[str, Any]]:
    """(the folder to read, the provenance of the manifest) of the configured source."""
    source = dataset_cfg["source"]
    hf_cfg = dataset_cfg.get("hf", {})
    if source == "sample":
        if sample_dir is None:
            raise ConfigError("dataset.source is sample but no sample directory was given")
        return Path(sample_dir), {"source": "sample", **dataset_cfg.get("sample", {})}
    if source == "local":
        if not dataset_cfg.get("local_path"):
            raise ConfigError(
                "dataset.source is local but dataset.local_path is not set",
                "set dataset.local_path to the downloaded dataset repository",
            )
        provenance = {
            "source": "local",
            "local_path": str(dataset_cfg["local_path"]),
            "source_fingerprint": source_fingerprint(dataset_cfg),
        }
        return Path(dataset_cfg["local_path"]).expanduser(), provenance
    if source in ("hf", "hf-legacy"):
        key = "current" if source == "hf" else "legacy"
        repo_id, revision = hf_cfg[key]["repo_id"], hf_cfg[key]["revision"]
        timeout = float(hf_cfg.get("timeout_s", 10))
        root, sha = hub.download_snapshot(repo_id, revision, cache_dir / "hub", timeout)
        provenance = {"source": source, "repo_id": repo_id, "revision": revision}
        return root, {**provenance, "resolved_revision": sha}
    raise ConfigError(f"dataset.source {source!r} is unknown", f"use one of {', '.join(SOURCES)}")


def build_dataset(
    dataset_cfg: dict[str, Any],
    out_parquet: Path,
    out_manifest: Path,
    *,
    task_needs: Mapping[str, Mapping[str, Any]] | None = None,
    out_tasks: Mapping[str, Path] | None = None,
    sample_dir: Path | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Read the configured source, validate, write ``out_parquet``, ``out_manifest`` and
    per task ``out_tasks[task]`` (what its jobs read: :func:`references.task_digests`).

    ``task_needs`` is :func:`novabench.tasks.dataset_needs` (passed in, so this job needs
    none of the scorers' libraries): each task's references are checked against it (no
    task: no check). Nothing is replaced before everything is built: on any error the
    previous files stay.
    """
    cache_dir = Path(cache_dir) if cache_dir else Path(out_parquet).parent / "cache"
    root, provenance = _source_root(dataset_cfg, sample_dir, cache_dir)
    layout, raws = layouts.read_layout(
        root,
        cache_dir / "datasets",
        dataset_cfg.get("box_source_default"),
        max_images=int(dataset_cfg.get("max_images") or layouts.MAX_IMAGES),
    )
    if dataset_cfg["source"] == "hf-legacy" and layout != "legacy":
        raise DatasetError(f"{root} is not in the review-time layout", "use dataset.source: hf")
    records, report = normalize(
        root,
        raws,
        clip_boxes=bool(dataset_cfg.get("clip_boxes", False)),
        max_text_chars=int(dataset_cfg.get("max_text_chars") or MAX_TEXT_CHARS),
    )
    policy = dataset_cfg.get("missing_reference") or "exclude"
    needs = dict(task_needs or {})
    exclusions = task_exclusions(records, needs, policy)
    digests = task_digests(records, report.image_sha256, exclusions, needs)
    out_parquet, out_manifest = Path(out_parquet), Path(out_manifest)
    with contextlib.ExitStack() as outputs:
        # Renamed into place when the block ends, only if nothing in it raised.
        tmp_parquet = outputs.enter_context(atomic_path(out_parquet))
        tmp_manifest = outputs.enter_context(atomic_path(out_manifest))
        write_parquet(records, tmp_parquet)
        provenance = {**provenance, "layout": layout, "tag": source_tag(dataset_cfg)}
        provenance["source_id"] = source_identity(dataset_cfg)  # novabench.dataset.tags
        manifest = _manifest(
            records, report, {**provenance, "subset": None}, tmp_parquet, exclusions
        )
        manifest.update(file=out_parquet.name, missing_reference=policy)
        tmp_manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        for task, path in (out_tasks or {}).items():
            tmp = outputs.enter_context(atomic_path(path))
            tmp.write_text(json.dumps(digests[task], indent=2) + "\n", encoding="utf-8")
    return manifest


def remove_stale_rater_scores(folder: Path, raters: Sequence[str]) -> list[Path]:
    """Delete the rater score files in ``folder`` of raters no longer in the dataset (the
    report reads only those the manifest names; a leftover would only mislead a reader).
    Returns the removed paths."""
    current = {f"{RATER_PREFIX}{rater_slug(r)}" for r in raters}
    removed = []
    for suffix in (".json", ".images.csv"):
        for path in sorted(Path(folder).glob(f"{RATER_PREFIX}*{suffix}")):
            if path.name.removesuffix(suffix) not in current:
                path.unlink()
                removed.append(path)
    return removed
