"""Readers for the two upstream layouts of the NOVA dataset repository.

- current release (``c-i-ber/Nova``): ``data/nova-v1.parquet`` with ``filename, case_id,
  scan_id, caption_text, image_path, meta{clinical_history, final_diagnosis, ...},
  bboxes[{x, y, width, height, source}]`` and the PNG files at ``image_path``.
- review-time release (``Ano-2090/Nova``): ``captions.csv``, ``bboxes_gold.csv``,
  ``bboxes_raters.csv``, ``case_metadata.csv`` and the PNG files in ``test/``.

Both return :class:`RawImage` rows; :mod:`novabench.dataset.build` validates and
normalizes them. Rows are always keyed by ``filename``: the upstream parquet is not in
filename order while the image files are, so row position means nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.errors import DatasetError

CURRENT_METADATA = Path("data") / "nova-v1.parquet"
LEGACY_FILES = ("captions.csv", "bboxes_gold.csv", "bboxes_raters.csv", "case_metadata.csv")
LEGACY_IMAGE_DIR = "test"


@dataclass
class RawImage:
    """One image as an upstream layout describes it, before validation."""

    filename: str
    case_id: str
    scan_id: str
    caption: str
    clinical_history: str
    final_diagnosis: str
    image_path: str  # relative to the dataset root
    gold_boxes: list[dict[str, float]] = field(default_factory=list)
    rater_boxes: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


def detect_layout(root: Path) -> str:
    """Return ``"current"`` or ``"legacy"`` for a dataset directory."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(
            f"dataset directory {root} does not exist",
            "set dataset.local_path to the folder holding the downloaded dataset repository",
        )
    if (root / CURRENT_METADATA).is_file():
        return "current"
    if (root / "captions.csv").is_file():
        return "legacy"
    raise DatasetError(
        f"{root} holds neither {CURRENT_METADATA} (current release) nor captions.csv "
        "(review-time release)",
        "point dataset.local_path at the root of the downloaded dataset repository",
    )


def read_layout(root: Path, cache_dir: Path | None = None) -> tuple[str, list[RawImage]]:
    layout = detect_layout(root)
    rows = read_current(root, cache_dir) if layout == "current" else read_legacy(root)
    return layout, rows


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def _load_metadata_parquet(path: Path, cache_dir: Path | None) -> list[dict[str, Any]]:
    # The authors document loading the metadata through `datasets`; do the same so a
    # local copy and the Hub read identically.
    import datasets

    datasets.disable_progress_bars()
    try:
        table = datasets.load_dataset(
            "parquet",
            data_files=str(path),
            split="train",
            cache_dir=str(cache_dir) if cache_dir else None,
        )
    except Exception as exc:  # pyarrow and datasets raise many types for a bad file
        raise DatasetError(
            f"cannot read metadata parquet {path} ({exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'unreadable'})",
            "re-download the dataset repository; the file is missing or corrupt",
        ) from exc
    return table.to_list()


def _parse_meta(value: Any, filename: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"meta of {filename} is not valid JSON ({exc})", "fix or re-download the metadata"
            ) from exc
        if isinstance(parsed, dict):
            return parsed
    raise DatasetError(
        f"meta of {filename} is a {type(value).__name__}, expected a struct or JSON object",
        "fix or re-download the metadata",
    )


def read_current(root: Path, cache_dir: Path | None = None) -> list[RawImage]:
    root = Path(root)
    records = _load_metadata_parquet(root / CURRENT_METADATA, cache_dir)
    required = {"filename", "case_id", "caption_text", "image_path", "meta", "bboxes"}
    if records:
        missing = required - set(records[0])
        if missing:
            raise DatasetError(
                f"{root / CURRENT_METADATA} lacks columns {sorted(missing)}",
                "use the current release of c-i-ber/Nova or the review-time CSV layout",
            )
    rows = []
    for rec in records:
        filename = _text(rec["filename"])
        meta = _parse_meta(rec.get("meta"), filename)
        gold, raters = [], []
        for box in rec.get("bboxes") or []:  # null box lists are normal images
            if box is None:
                continue
            coords = {k: box.get(k) for k in ("x", "y", "width", "height")}
            source = _text(box.get("source")) or "gold"
            if source == "gold":
                gold.append(coords)
            else:
                raters.append({"rater": source, **coords})
        rows.append(
            RawImage(
                filename=filename,
                case_id=_text(rec.get("case_id")),
                scan_id=_text(rec.get("scan_id")),
                caption=_text(rec.get("caption_text")),
                clinical_history=_text(meta.pop("clinical_history", None)),
                final_diagnosis=_text(meta.pop("final_diagnosis", None)),
                image_path=_text(rec.get("image_path")) or f"images/{filename}",
                gold_boxes=gold,
                rater_boxes=raters,
                meta=meta,
            )
        )
    return rows


def _read_csv(path: Path, required: set[str]) -> pd.DataFrame:
    if not path.is_file():
        raise DatasetError(
            f"{path.name} is missing from {path.parent}",
            f"the review-time layout needs {', '.join(LEGACY_FILES)} and the images in "
            f"{LEGACY_IMAGE_DIR}/; re-download the dataset repository",
        )
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as exc:
        raise DatasetError(
            f"cannot read {path} ({exc.__class__.__name__}: {exc})",
            "re-download the dataset repository; the CSV is corrupt",
        ) from exc
    missing = required - set(frame.columns)
    if missing:
        raise DatasetError(
            f"{path} lacks columns {sorted(missing)} (has {list(frame.columns)})",
            "re-download the dataset repository; the CSV is not the review-time layout",
        )
    return frame


def _float(value: str, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise DatasetError(
            f"{where}: box coordinate {value!r} is not a number", "fix the annotation file"
        ) from exc


def _legacy_cases(root: Path) -> dict[Any, dict[str, Any]]:
    """case_metadata.csv as case_id -> its other columns."""
    cases = _read_csv(
        root / "case_metadata.csv", {"case_id", "clinical_history", "final_diagnosis"}
    )
    if cases["case_id"].duplicated().any():
        dup = cases.loc[cases["case_id"].duplicated(), "case_id"].iloc[0]
        raise DatasetError(f"case_metadata.csv lists case {dup} twice", "fix the metadata file")
    return cases.set_index("case_id").to_dict(orient="index")


def _boxes_by_file(
    table: pd.DataFrame, source: str, *, with_rater: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """filename -> its boxes in file order, each led by its rater when ``with_rater``."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for rec in table.to_dict(orient="records"):
        where = f"{source}, {rec['filename']}"
        box = {k: _float(rec[k], where) for k in ("x", "y", "width", "height")}
        if with_rater:
            box = {"rater": rec["rater"].strip(), **box}
        by_file.setdefault(rec["filename"], []).append(box)
    return by_file


def _legacy_image(
    rec: dict[str, Any],
    case_meta: dict[Any, dict[str, Any]],
    gold_by_file: dict[str, list[dict[str, Any]]],
    raters_by_file: dict[str, list[dict[str, Any]]],
) -> RawImage:
    """One captions.csv row with its case and boxes; the boxes are popped from the maps,
    so what is left there belongs to no image."""
    filename = rec["filename"].strip()
    case = dict(case_meta.get(rec["case_id"], {}))
    if not case:
        raise DatasetError(
            f"case {rec['case_id']} of {filename} is not in case_metadata.csv",
            "re-download the dataset repository; the metadata is incomplete",
        )
    extra = {k: v for k, v in rec.items() if k not in {"filename", "case_id", "scan_id", "caption"}}
    extra.update(
        {k: v for k, v in case.items() if k not in {"clinical_history", "final_diagnosis"}}
    )
    return RawImage(
        filename=filename,
        case_id=rec["case_id"].strip(),
        scan_id=_text(rec.get("scan_id")),
        caption=_text(rec["caption"]),
        clinical_history=_text(case.get("clinical_history")),
        final_diagnosis=_text(case.get("final_diagnosis")),
        image_path=f"{LEGACY_IMAGE_DIR}/{filename}",
        gold_boxes=gold_by_file.pop(filename, []),
        rater_boxes=raters_by_file.pop(filename, []),
        meta=extra,
    )


def read_legacy(root: Path) -> list[RawImage]:
    root = Path(root)
    captions = _read_csv(root / "captions.csv", {"filename", "case_id", "caption"})
    gold = _read_csv(root / "bboxes_gold.csv", {"filename", "x", "y", "width", "height"})
    raters = _read_csv(
        root / "bboxes_raters.csv", {"filename", "rater", "x", "y", "width", "height"}
    )
    case_meta = _legacy_cases(root)
    gold_by_file = _boxes_by_file(gold, "bboxes_gold.csv")
    raters_by_file = _boxes_by_file(raters, "bboxes_raters.csv", with_rater=True)
    rows = [
        _legacy_image(rec, case_meta, gold_by_file, raters_by_file)
        for rec in captions.to_dict(orient="records")
    ]
    orphans = sorted(set(gold_by_file) | set(raters_by_file))
    if orphans:
        raise DatasetError(
            f"boxes reference {len(orphans)} image(s) missing from captions.csv, e.g. {orphans[0]}",
            "re-download the dataset repository; the annotation files do not match",
        )
    return rows
