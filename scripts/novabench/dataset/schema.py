"""The one normalized schema of ``results/dataset/nova.parquet``, whatever the source.

One row per image. Boxes are pixel ``x, y`` (top-left corner), ``width, height`` in the
frame of the image as stored. The ``image`` column uses the Hugging Face ``Image``
feature (a struct of PNG ``bytes`` and ``path``) and the file carries the ``datasets``
feature metadata, so ``datasets.Dataset.from_parquet`` decodes it as images.
"""

from __future__ import annotations

from functools import cache

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


@cache
def features():
    """The ``datasets`` features of the file (imported lazily: only the writer needs them)."""
    from datasets import Features, Image, List, Value

    box = {k: Value("float64") for k in ("x", "y", "width", "height")}
    return Features(
        {
            "filename": Value("string"),
            "case_id": Value("string"),
            "scan_id": Value("string"),
            "image": Image(),
            "width": Value("int32"),
            "height": Value("int32"),
            "caption": Value("string"),
            "clinical_history": Value("string"),
            "final_diagnosis": Value("string"),
            "gold_boxes": List(box),
            "rater_boxes": List({"rater": Value("string"), **box}),
            "image_path": Value("string"),
            # Every other upstream metadata field, as sorted JSON, so nothing is lost.
            "meta": Value("string"),
        }
    )


def arrow_schema():
    return features().arrow_schema
