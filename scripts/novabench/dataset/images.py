"""Reading the dataset's images and storing each one as an 8-bit grayscale PNG.

NOVA's slices are 8-bit grayscale PNGs; those are stored byte for byte. Every other
image is converted once, here, by one documented mapping, so that every consumer (local
models, the classical detector, figures) sees the same pixels and none of them clips a
16-bit image to white on its own:

- modes 1, P, RGB, RGBA, LA, CMYK (...): Pillow's conversion to L (ITU-R 601-2 luma of
  the colour channels; alpha is ignored);
- 16- and 32-bit integer modes (I;16, I;16B, I): values that all lie in 0..255 are kept as
  they are; otherwise the WINDOW percentiles (0.5 and 99.5) are mapped linearly onto 0..255
  and values outside the window are clipped;
- float images (F, e.g. a float TIFF): always that percentile window (NaN becomes 0).

Each conversion is returned and listed in the dataset manifest.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from novabench.errors import DatasetError

# Percentiles of the intensity window for images of more than 8 bits.
WINDOW = (0.5, 99.5)


def _is_wide(mode: str) -> bool:
    """16/32-bit integer or float pixels (Pillow's I;16*, I, F)."""
    return mode in ("I", "F") or mode.startswith("I;16")


@dataclass(frozen=True)
class StoredImage:
    """An image as ``nova.parquet`` stores it, and how it got there."""

    png: bytes
    width: int
    height: int
    source_sha256: str  # of the file as read, before any conversion
    conversion: dict[str, Any] | None  # None: stored as read


def image_file(root: Path, image_path: str, filename: str) -> Path:
    """``root/image_path``, refused unless it lies inside ``root`` once links are resolved:
    metadata must not make the build read (and send to API models) a file from elsewhere
    (an absolute ``image_path``, ``..`` in it or in the filename, a link out of the
    folder)."""
    base = Path(root).resolve()
    try:
        path = (base / image_path).resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11 raises RuntimeError on a loop
        raise DatasetError(
            f"image_path {image_path!r} of row {filename!r} cannot be resolved ({exc})",
            "remove the link loop from the dataset folder, or re-download it",
        ) from exc
    if not path.is_relative_to(base):
        raise DatasetError(
            f"image_path {image_path!r} of row {filename!r} points outside the dataset "
            f"folder {base} (to {path})",
            "give every image_path relative to the dataset folder (e.g. images/<filename>), "
            "without '..', and copy linked images into the folder instead of linking out",
        )
    return path


def load_image(root: Path, image_path: str, filename: str) -> StoredImage:
    """Read ``root/image_path``, decode every pixel, convert it to 8-bit grayscale."""
    path = image_file(root, image_path, filename)
    if not path.is_file():
        raise DatasetError(
            f"image {image_path} of {filename} is missing under {root}",
            "re-download the dataset repository (the images are part of it)",
        )
    data = path.read_bytes()
    try:
        # Pillow only warns below twice its pixel limit: a bomb of either size is refused.
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                img.load()  # decodes every pixel: truncated files fail here, not later
                width, height = img.size
                if img.format == "PNG" and img.mode == "L":
                    return StoredImage(data, width, height, _sha256(data), None)
                pixels, conversion = to_gray8(img)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        found = re.search(r"\((\d+) pixels\)", str(exc))
        raise DatasetError(
            f"image {image_path} of {filename} has {found[1] if found else 'more'} pixels, "
            f"more than the {Image.MAX_IMAGE_PIXELS} Pillow decodes (a possible "
            "decompression bomb)",
            "replace it with the real slice (NOVA's are 480x480) or drop its row",
        ) from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DatasetError(
            f"image {image_path} of {filename} cannot be decoded ({exc})",
            "re-download that file; it is corrupt or not an image",
        ) from exc
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode="L").save(buffer, format="PNG")
    conversion = {"filename": filename, "format": img.format, **conversion}
    return StoredImage(buffer.getvalue(), width, height, _sha256(data), conversion)


def to_gray8(img: Image.Image) -> tuple[np.ndarray, dict[str, Any]]:
    """8-bit grayscale pixels of any Pillow image, and the mapping that made them."""
    mode = img.mode
    if mode == "L":
        return np.asarray(img), {"mode": mode, "mapping": "none"}
    if not _is_wide(mode):
        return np.asarray(img.convert("L")), {"mode": mode, "mapping": "luma"}
    values = np.asarray(img, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if mode != "F" and finite.size == values.size and finite.min() >= 0 and finite.max() <= 255:
        return values.astype(np.uint8), {"mode": mode, "mapping": "cast (values in 0..255)"}
    low, high = (float(v) for v in np.percentile(finite, WINDOW)) if finite.size else (0.0, 0.0)
    if high > low:
        scaled = (np.nan_to_num(values, nan=low) - low) / (high - low)
    else:  # a constant image has no contrast to keep
        scaled = np.zeros_like(values)
    pixels = np.round(np.clip(scaled, 0.0, 1.0) * 255).astype(np.uint8)
    window = {"percentiles": list(WINDOW), "low": low, "high": high}
    return pixels, {"mode": mode, "mapping": "percentile window", "window": window}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
