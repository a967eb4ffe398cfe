"""The one normalized schema of ``results/dataset/nova.parquet``, whatever the source.

One row per image. Boxes are pixel ``x, y`` (top-left corner), ``width, height`` in the
frame of the image as stored. The ``image`` column uses the Hugging Face ``Image``
feature (a struct of PNG ``bytes`` and ``path``) and the file carries the ``datasets``
feature metadata, so ``datasets.Dataset.from_parquet`` decodes it as images.
"""

from __future__ import annotations

from datasets import Features, Image, List, Value

SCHEMA_VERSION = 1

# NOVA slices are published at 480x480; other sizes are kept and recorded.
EXPECTED_IMAGE_SIZE = (480, 480)

_BOX = {
    "x": Value("float64"),
    "y": Value("float64"),
    "width": Value("float64"),
    "height": Value("float64"),
}

FEATURES = Features(
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
        "gold_boxes": List(_BOX),
        "rater_boxes": List({"rater": Value("string"), **_BOX}),
        "image_path": Value("string"),
        # Every other upstream metadata field, as sorted JSON, so nothing is lost.
        "meta": Value("string"),
    }
)

ARROW_SCHEMA = FEATURES.arrow_schema
COLUMNS = tuple(FEATURES)
