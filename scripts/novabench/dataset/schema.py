"""The one normalized schema of ``results/<tag>/dataset/nova.parquet``, whatever the source.

One row per image. Boxes are pixel ``x, y`` (top-left corner), ``width, height`` in the
frame of the image as stored. The ``image`` column uses the Hugging Face ``Image``
feature (a struct of PNG ``bytes`` and ``path``) and the file carries the ``datasets``
feature metadata, so ``datasets.Dataset.from_parquet`` decodes it as images.
"""

from __future__ import annotations

import re

SCHEMA_VERSION = 1

# NOVA slices are published at 480x480; other sizes are kept and recorded.
EXPECTED_IMAGE_SIZE = (480, 480)

COLUMNS = (
    "filename",
    "case_id",
    "scan_id",
    "image",
    "width",
    "height",
    "caption",
    "clinical_history",
    "final_diagnosis",
    "gold_boxes",
    "rater_boxes",
    "image_path",
    "meta",
)


# A rater's entry in scores and tables is named "rater-<slug>" (model names may not start so).
RATER_PREFIX = "rater-"


def rater_slug(rater: str) -> str:
    """A rater id as it appears in file names (upstream ids may hold any character)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", rater.strip()).strip("._-")
    return slug or "unnamed"
