"""Reading the normalized ``nova.parquet`` (for rules and notebooks)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from PIL import Image

from novabench.dataset.schema import COLUMNS
from novabench.errors import DatasetError


def load_nova(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    """Load the normalized dataset as a DataFrame, one row per image, sorted by filename.

    ``image`` holds ``{"bytes": PNG, "path": ...}``; box columns hold lists of dicts.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path} does not exist", "run the `dataset` rule first")
    try:
        table = pq.read_table(path, columns=columns, page_checksum_verification=True)
    except Exception as exc:  # pyarrow signals corruption with several exception types
        raise DatasetError(
            f"cannot read {path} ({exc.__class__.__name__}: {exc})",
            f"delete {path} and re-run the `dataset` rule",
        ) from exc
    missing = set(columns or COLUMNS) - set(table.column_names)
    if missing:
        raise DatasetError(
            f"{path} lacks columns {sorted(missing)}",
            f"delete {path} and re-run the `dataset` rule",
        )
    frame = table.to_pandas(types_mapper=None)
    for col in ("gold_boxes", "rater_boxes"):
        if col in frame:
            frame[col] = frame[col].map(
                lambda boxes: [dict(b) for b in boxes] if boxes is not None else []
            )
    return frame.sort_values("filename", kind="stable").reset_index(drop=True)


def decode_image(png: bytes, filename: str = "image") -> np.ndarray:
    """Decode PNG bytes to a grayscale uint8 array (H, W)."""
    try:
        with Image.open(io.BytesIO(png)) as img:
            return np.asarray(img.convert("L"))
    except Exception as exc:
        raise DatasetError(
            f"image {filename} cannot be decoded ({exc})",
            "rebuild results/<tag>/dataset/nova.parquet",
        ) from exc
