"""The images a reading or score job covers: a task's scored rows of the dataset, and the
check that a prediction or verdict file names no image outside it. Shared by
:mod:`novabench.reading` and :mod:`novabench.score`, and small, so that a score job's code
holds neither the answer reader nor any judge."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.errors import NovaError
from novabench.tasks import Task

# The dataset columns that name an image, read by every reading and score job.
KEY_COLUMNS = ["filename", "case_id"]


def check_filenames(records: Sequence[Mapping[str, Any]], frame: pd.DataFrame, path: Path) -> None:
    unknown = sorted({r["filename"] for r in records} - set(frame["filename"]))
    if unknown:
        raise NovaError(
            f"{path} has records of {len(unknown)} image(s) not in the dataset, e.g. {unknown[0]}",
            f"delete {path} and re-run `predict` against the current dataset",
        )


def scored_frame(task: Task, frame: pd.DataFrame, dataset: Path) -> tuple[pd.DataFrame, list]:
    """(the rows ``task`` scores, the filenames it excludes); NovaError when none is left."""
    frame, excluded = task.scored_rows(frame)
    if frame.empty:
        raise NovaError(
            f"no image of {dataset} has the {' and '.join(task.required_references)} that "
            f"{task.name} needs ({len(excluded)} excluded)",
            f"disable tasks.{task.name}, or use a dataset with these references",
        )
    return frame, excluded
