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
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from novabench.errors import DatasetError

CURRENT_METADATA = Path("data") / "nova-v1.parquet"
LEGACY_FILES = ("captions.csv", "bboxes_gold.csv", "bboxes_raters.csv", "case_metadata.csv")
LEGACY_IMAGE_DIR = "test"
# NOVA has 906 images; the dataset job holds every image in memory (about 0.5 GiB per
# 1,000), so a metadata file of a million rows is refused before it is read.
MAX_IMAGES = 10_000


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
    # Boxes whose empty source (rater) was set from dataset.box_source_default.
    defaulted_sources: int = 0


def detect_layout(root: Path) -> str:
    """Return ``"current"`` or ``"legacy"`` for a dataset directory."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise DatasetError(
            f"dataset folder {root} is a file, not a folder",
            "set dataset.local_path to the folder holding the downloaded dataset repository "
            f"(the one with {CURRENT_METADATA} or captions.csv), not to a file in it",
        )
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


def read_layout(
    root: Path,
    cache_dir: Path | None = None,
    box_source_default: str | None = None,
    max_images: int = MAX_IMAGES,
) -> tuple[str, list[RawImage]]:
    """The layout's name and its rows; ``box_source_default`` names the source of a box
    whose source (current layout) or rater (review-time layout) is empty (None: an error).
    More than ``max_images`` rows stop the build before they are read."""
    layout = detect_layout(root)
    if layout == "current":
        return layout, read_current(root, cache_dir, box_source_default, max_images)
    return layout, read_legacy(root, box_source_default, max_images)


def check_row_count(n_rows: int | None, max_images: int, where: Path) -> None:
    """Stop when the metadata lists more images than ``dataset.max_images``."""
    if n_rows is not None and n_rows > max_images:
        raise DatasetError(
            f"{where} lists {n_rows} images, more than dataset.max_images ({max_images}); "
            "NOVA has 906",
            "check that dataset.local_path is a NOVA download, or raise dataset.max_images "
            "(the dataset job needs about 0.5 GiB of memory per 1,000 images)",
        )


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def _count_rows(path: Path) -> int | None:
    """Rows in a Parquet file's footer; None when unreadable (the reader reports that)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # pyarrow raises several types for a bad file
        return None


def _load_metadata_parquet(
    path: Path, cache_dir: Path | None, max_images: int = MAX_IMAGES
) -> list[dict[str, Any]]:
    n_rows = _count_rows(path)
    if n_rows == 0:
        raise DatasetError(
            f"metadata parquet {path} is readable but lists no images (0 rows)",
            "re-download the dataset repository; this copy of the file is empty",
        )
    check_row_count(n_rows, max_images, path)
    # The authors document loading the metadata through `datasets`; do the same so a
    # local copy and the Hub read identically.
    import datasets

    datasets.disable_progress_bars()
    if cache_dir is not None:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
    # The Arrow copy `datasets` prepares is read once, here: it is removed afterwards
    # rather than left in results/ (the build re-runs only when the source changed).
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="metadata-") as scratch:
        try:
            table = datasets.load_dataset(
                "parquet", data_files=str(path), split="train", cache_dir=scratch
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


def _parse_boxes(value: Any, filename: str) -> list[dict[str, Any]]:
    """``bboxes`` as a list of box objects: a list of structs, or the same as a JSON
    text (the upstream metadata describes the boxes "as JSON"); null is no box."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"bboxes of {filename} is not valid JSON ({exc})",
                "fix or re-download the metadata",
            ) from exc
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise DatasetError(
            f"bboxes of {filename} is a {type(value).__name__}, expected a list of boxes",
            "give bboxes as a list of {x, y, width, height, source} (or that list as JSON)",
        )
    for number, box in enumerate(value, 1):
        if box is not None and not isinstance(box, dict):
            raise DatasetError(
                f"box {number} of {filename} is a {type(box).__name__}, expected an object",
                "give each box as {x, y, width, height, source}",
            )
    return [box for box in value if box is not None]


def _box_source(value: Any, where: str, default: str | None) -> tuple[str, bool]:
    """(the box's source, whether it came from ``default``); an empty one is an error
    unless a default is configured: a guess would turn a rater's box into a gold box."""
    source = _text(value)
    if source:
        return source, False
    if default:
        return default, True
    raise DatasetError(
        f"{where} has no source (null or empty)",
        "fill in the source (gold or the rater's id), or set dataset.box_source_default "
        "to the source such boxes have (e.g. gold)",
    )


def _image_path(value: Any, filename: str) -> str:
    """``image_path`` of a row; it must name the row's own file."""
    image_path = _text(value)
    if not image_path:
        return f"images/{filename}"
    if PurePosixPath(image_path.replace("\\", "/")).name != filename:
        raise DatasetError(
            f"image_path {image_path} and filename {filename} of one row name different images",
            "fix the metadata so that image_path ends in the row's filename",
        )
    return image_path


def _current_image(rec: dict[str, Any], box_source_default: str | None) -> RawImage:
    filename = _text(rec["filename"])
    meta = _parse_meta(rec.get("meta"), filename)
    gold, raters, defaulted = [], [], 0
    for number, box in enumerate(_parse_boxes(rec.get("bboxes"), filename), 1):
        where = f"box {number} of {filename}"
        source, was_default = _box_source(box.get("source"), where, box_source_default)
        defaulted += was_default
        coords = {k: box.get(k) for k in ("x", "y", "width", "height")}
        if source == "gold":
            gold.append(coords)
        else:
            raters.append({"rater": source, **coords})
    return RawImage(
        filename=filename,
        case_id=_text(rec.get("case_id")),
        scan_id=_text(rec.get("scan_id")),
        caption=_text(rec.get("caption_text")),
        clinical_history=_text(meta.pop("clinical_history", None)),
        final_diagnosis=_text(meta.pop("final_diagnosis", None)),
        image_path=_image_path(rec.get("image_path"), filename),
        gold_boxes=gold,
        rater_boxes=raters,
        meta=meta,
        defaulted_sources=defaulted,
    )


def read_current(
    root: Path,
    cache_dir: Path | None = None,
    box_source_default: str | None = None,
    max_images: int = MAX_IMAGES,
) -> list[RawImage]:
    root = Path(root)
    records = _load_metadata_parquet(root / CURRENT_METADATA, cache_dir, max_images)
    required = {"filename", "case_id", "caption_text", "image_path", "meta", "bboxes"}
    if records:
        missing = required - set(records[0])
        if missing:
            raise DatasetError(
                f"{root / CURRENT_METADATA} lacks columns {sorted(missing)}",
                "use the current release of c-i-ber/Nova or the review-time CSV layout",
            )
    return [_current_image(rec, box_source_default) for rec in records]


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
    # Ids are compared without surrounding spaces, as in captions.csv.
    cases["case_id"] = cases["case_id"].str.strip()
    if cases["case_id"].duplicated().any():
        dup = cases.loc[cases["case_id"].duplicated(), "case_id"].iloc[0]
        raise DatasetError(f"case_metadata.csv lists case {dup} twice", "fix the metadata file")
    return cases.set_index("case_id").to_dict(orient="index")


def _boxes_by_file(
    table: pd.DataFrame, source: str, *, rater_default: str | None = None, with_rater: bool = False
) -> tuple[dict[str, list[dict[str, Any]]], Counter]:
    """(filename -> its boxes in file order, each led by its rater when ``with_rater``;
    filename -> how many of its raters came from ``rater_default``)."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    defaulted: Counter = Counter()
    for line, rec in enumerate(table.to_dict(orient="records"), 2):
        filename = rec["filename"].strip()
        where = f"{source}, {filename}"
        box = {k: _float(rec[k], where) for k in ("x", "y", "width", "height")}
        if with_rater:
            rater, was_default = _box_source(
                rec["rater"], f"line {line} of {source} ({filename})", rater_default
            )
            defaulted[filename] += was_default
            box = {"rater": rater, **box}
        by_file.setdefault(filename, []).append(box)
    return by_file, defaulted


def _legacy_image(
    rec: dict[str, Any],
    case_meta: dict[Any, dict[str, Any]],
    gold_by_file: dict[str, list[dict[str, Any]]],
    raters_by_file: dict[str, list[dict[str, Any]]],
) -> RawImage:
    """One captions.csv row with its case and boxes; the boxes are popped from the maps,
    so what is left there belongs to no image."""
    filename, case_id = rec["filename"].strip(), rec["case_id"].strip()
    case = dict(case_meta.get(case_id, {}))
    if not case:
        raise DatasetError(
            f"case {case_id!r} of {filename} is not in case_metadata.csv",
            "re-download the dataset repository; the metadata is incomplete",
        )
    extra = {k: v for k, v in rec.items() if k not in {"filename", "case_id", "scan_id", "caption"}}
    extra.update(
        {k: v for k, v in case.items() if k not in {"clinical_history", "final_diagnosis"}}
    )
    return RawImage(
        filename=filename,
        case_id=case_id,
        scan_id=_text(rec.get("scan_id")),
        caption=_text(rec["caption"]),
        clinical_history=_text(case.get("clinical_history")),
        final_diagnosis=_text(case.get("final_diagnosis")),
        image_path=f"{LEGACY_IMAGE_DIR}/{filename}",
        gold_boxes=gold_by_file.pop(filename, []),
        rater_boxes=raters_by_file.pop(filename, []),
        meta=extra,
    )


def read_legacy(
    root: Path, box_source_default: str | None = None, max_images: int = MAX_IMAGES
) -> list[RawImage]:
    root = Path(root)
    captions = _read_csv(root / "captions.csv", {"filename", "case_id", "caption"})
    check_row_count(len(captions), max_images, root / "captions.csv")
    gold = _read_csv(root / "bboxes_gold.csv", {"filename", "x", "y", "width", "height"})
    raters = _read_csv(
        root / "bboxes_raters.csv", {"filename", "rater", "x", "y", "width", "height"}
    )
    case_meta = _legacy_cases(root)
    gold_by_file, _ = _boxes_by_file(gold, "bboxes_gold.csv")
    raters_by_file, defaulted = _boxes_by_file(
        raters, "bboxes_raters.csv", rater_default=box_source_default, with_rater=True
    )
    rows = [
        _legacy_image(rec, case_meta, gold_by_file, raters_by_file)
        for rec in captions.to_dict(orient="records")
    ]
    for row in rows:
        row.defaulted_sources = defaulted[row.filename]
    orphans = sorted(set(gold_by_file) | set(raters_by_file))
    if orphans:
        raise DatasetError(
            f"boxes reference {len(orphans)} image(s) missing from captions.csv, e.g. {orphans[0]}",
            "re-download the dataset repository; the annotation files do not match",
        )
    return rows
