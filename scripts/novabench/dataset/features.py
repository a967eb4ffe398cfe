"""The ``datasets`` features of ``nova.parquet``: only the writer needs them.

Kept apart from :mod:`novabench.dataset.schema` so that reading the file never imports
``datasets`` (the prediction, scoring and reporting environments do without it).
"""

from __future__ import annotations

from functools import cache


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
