"""Prediction records as the reading stage reads them, for tests that check what a model
answered (the files themselves hold the raw answers only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from novabench.answers import read_file
from novabench.dataset.read import load_nova
from novabench.records import read_predictions


def read_back(predictions: Path, dataset: Path, task: str | None = None) -> list[dict[str, Any]]:
    """Each record of ``predictions``, in order, with ``status``, ``error`` and ``read``
    as reading gives them (``task``: the records' own by default)."""
    records = read_predictions(Path(predictions))
    if not records:
        return []
    read = read_file(task or records[0]["task"], Path(predictions), load_nova(Path(dataset)))
    return [{**r, **read.by_filename[r["filename"]]} for r in records]
