"""Build ``nova.parquet`` and its manifest from any source.

Validation happens here, once, so every later rule can trust the file: images decode,
filenames are unique, boxes are finite, positive and inside their image. Images with no
gold box are kept (they are "normal" for localization); images of an unexpected size are
kept and recorded.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image, UnidentifiedImageError

import novabench
from novabench.dataset import hub, layouts
from novabench.dataset.features import arrow_schema
from novabench.dataset.schema import EXPECTED_IMAGE_SIZE, SCHEMA_VERSION
from novabench.dataset.tags import source_tag
from novabench.errors import ConfigError, DatasetError
from novabench.io import atomic_path, atomic_write_text
from novabench.provenance import sha256_file

SOURCES = ("hf", "hf-legacy", "local", "sample")

# Box coordinates may overshoot the image by rounding; beyond this they are an error.
BOX_TOLERANCE_PX = 1.0


@dataclass
class BuildReport:
    """What validation found, recorded in the manifest."""

    unexpected_size: list[dict[str, Any]] = field(default_factory=list)
    clipped_boxes: int = 0
    dropped_boxes: int = 0
    missing_text: Counter = field(default_factory=Counter)


def _load_png(root: Path, raw: layouts.RawImage) -> tuple[bytes, int, int]:
    path = root / raw.image_path
    if not path.is_file():
        raise DatasetError(
            f"image {raw.image_path} of {raw.filename} is missing under {root}",
            "re-download the dataset repository (the images are part of it)",
        )
    data = path.read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()  # decodes every pixel: truncated files fail here, not later
            width, height = img.size
            if img.format != "PNG":
                buffer = io.BytesIO()
                img.save(buffer, format="PNG")
                data = buffer.getvalue()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DatasetError(
            f"image {raw.image_path} of {raw.filename} cannot be decoded ({exc})",
            "re-download that file; it is corrupt or not an image",
        ) from exc
    return data, width, height


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


def normalize(
    root: Path, raws: list[layouts.RawImage], clip_boxes: bool = False
) -> tuple[list[dict[str, Any]], BuildReport]:
    """Validate raw rows and turn them into records of the normalized schema."""
    report = BuildReport()
    seen: set[str] = set()
    records = []
    for raw in sorted(raws, key=lambda r: r.filename):
        if not raw.filename:
            raise DatasetError("a row has an empty filename", "fix the metadata")
        if raw.filename in seen:
            raise DatasetError(
                f"filename {raw.filename} appears more than once",
                "remove the duplicate rows; every image must be listed once",
            )
        seen.add(raw.filename)
        if not raw.case_id:
            raise DatasetError(f"{raw.filename} has no case_id", "fix the metadata")
        png, width, height = _load_png(root, raw)
        if (width, height) != EXPECTED_IMAGE_SIZE:
            report.unexpected_size.append(
                {"filename": raw.filename, "width": width, "height": height}
            )
        for name in ("caption", "clinical_history", "final_diagnosis"):
            if not getattr(raw, name):
                report.missing_text[name] += 1
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
        records.append(
            {
                "filename": raw.filename,
                "case_id": raw.case_id,
                "scan_id": raw.scan_id,
                "image": {"bytes": png, "path": raw.filename},
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
        )
    if not records:
        raise DatasetError(f"the dataset under {root} has no images", "check dataset.local_path")
    return records, report


def write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    """Write atomically, with page checksums so silent corruption is detected on read."""
    table = pa.Table.from_pylist(records, schema=arrow_schema())
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, write_page_checksum=True, row_group_size=128)


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
    records: list[dict[str, Any]], report: BuildReport, source: dict[str, Any], path: Path
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
        "missing_text": dict(sorted(report.missing_text.items())),
    }


def build_dataset(
    dataset_cfg: dict[str, Any],
    out_parquet: Path,
    out_manifest: Path,
    *,
    sample_dir: Path | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Read the configured source, validate, write ``out_parquet`` and ``out_manifest``."""
    source = dataset_cfg["source"]
    hf_cfg = dataset_cfg.get("hf", {})
    timeout = float(hf_cfg.get("timeout_s", 10))
    cache_dir = Path(cache_dir) if cache_dir else Path(out_parquet).parent / "cache"
    if source == "sample":
        if sample_dir is None:
            raise ConfigError("dataset.source is sample but no sample directory was given")
        root, provenance = Path(sample_dir), {"source": "sample", **dataset_cfg.get("sample", {})}
    elif source == "local":
        if not dataset_cfg.get("local_path"):
            raise ConfigError(
                "dataset.source is local but dataset.local_path is not set",
                "set dataset.local_path to the downloaded dataset repository",
            )
        root = Path(dataset_cfg["local_path"]).expanduser()
        provenance = {"source": "local", "local_path": str(dataset_cfg["local_path"])}
    elif source in ("hf", "hf-legacy"):
        key = "current" if source == "hf" else "legacy"
        repo_id, revision = hf_cfg[key]["repo_id"], hf_cfg[key]["revision"]
        root, sha = hub.download_snapshot(repo_id, revision, cache_dir / "hub", timeout)
        provenance = {
            "source": source,
            "repo_id": repo_id,
            "revision": revision,
            "resolved_revision": sha,
        }
    else:
        raise ConfigError(
            f"dataset.source {source!r} is unknown", f"use one of {', '.join(SOURCES)}"
        )
    layout, raws = layouts.read_layout(root, cache_dir / "datasets")
    if source == "hf-legacy" and layout != "legacy":
        raise DatasetError(f"{root} is not in the review-time layout", "use dataset.source: hf")
    records, report = normalize(root, raws, clip_boxes=bool(dataset_cfg.get("clip_boxes", False)))
    out_parquet, out_manifest = Path(out_parquet), Path(out_manifest)
    write_parquet(records, out_parquet)
    provenance = {**provenance, "layout": layout, "tag": source_tag(dataset_cfg), "subset": None}
    manifest = _manifest(records, report, provenance, out_parquet)
    atomic_write_text(out_manifest, json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return manifest
