"""Reading what the scoring stage wrote, for the report: score files, per-image tables,
and the per-detection or per-image quantities the bootstrap needs.

Models and raters are both "entries" of a task's report: an entry is a score file
``results/<tag>/scores/{task}/{name}.json`` with its per-image table beside it; a model entry
also has its verdict file (what the reading stage read of its answers:
``verdicts/{task}/{judge}/{name}.jsonl``), a rater entry (``rater-<slug>``) takes its boxes
from the dataset. Nothing here parses an answer or builds a judge.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.dataset.schema import RATER_PREFIX
from novabench.errors import NovaError
from novabench.models.base import is_control
from novabench.spreadsheet import read_csv

GROUP_MODEL, GROUP_CONTROL, GROUP_HUMAN = "model", "control", "human"
GROUPS = (GROUP_MODEL, GROUP_CONTROL, GROUP_HUMAN)
GROUP_TITLES = {GROUP_MODEL: "Models", GROUP_CONTROL: "Controls", GROUP_HUMAN: "Human reference"}
DATASET_COLUMNS = ["filename", "case_id", "caption", "final_diagnosis", "gold_boxes", "rater_boxes"]


@dataclass
class Entry:
    """One scored model or rater of a task."""

    name: str
    group: str
    scores: dict[str, Any]
    per_image: pd.DataFrame
    verdicts: Path | None = None  # the verdict file the score file counted
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, float]:
        """Numeric metrics of the score file; undefined (null) ones as NaN."""
        out = {}
        for key, value in self.scores["metrics"].items():
            if value is None:
                out[key] = math.nan
            elif isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = float(value)
        return out


def report_models(adapters: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{model: {"adapter", "control"}}`` of ``{model: {"adapter": ...}}``: whether each
    adapter declares its answers a control (``Adapter.control``), decided when the workflow
    is planned, so that the role is a parameter of the report's jobs (changing it re-runs
    them) and the report imports no adapter."""
    return {
        name: {"adapter": model["adapter"], "control": is_control(model["adapter"])}
        for name, model in adapters.items()
    }


def model_group(name: str, models: Mapping[str, Any], controls: Sequence[str] | None) -> str:
    """``human`` for raters, ``control`` for controls, else ``model``.

    Controls are the models named in ``reporting.controls`` or, when that is null, the
    models ``models`` (:func:`report_models`) marks ``control``: those whose adapter
    declares its answers a control (the positive and negative controls).
    """
    if name.startswith(RATER_PREFIX):
        return GROUP_HUMAN
    if controls is not None:
        return GROUP_CONTROL if name in controls else GROUP_MODEL
    return GROUP_CONTROL if (models.get(name) or {}).get("control") else GROUP_MODEL


def reference_model(
    task: str, names: Sequence[str], groups: Mapping[str, str], configured: str | None
) -> str | None:
    """The model every other model of ``task`` is tested against.

    The configured ``reporting.reference_model`` where it ran the task, else the first
    model (not a control, not a rater) of the task in config order, else None.
    """
    if configured is not None and configured in names:
        return configured
    return next((n for n in names if groups.get(n) == GROUP_MODEL), None)


def read_scores(path: Path) -> dict[str, Any]:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise NovaError(
            f"cannot read score file {path} ({exc})", f"delete {path} and re-run `score`"
        ) from exc


def per_image_path(score_path: Path) -> Path:
    """``x.json`` -> ``x.images.csv`` (written beside every score file)."""
    score_path = Path(score_path)
    return score_path.with_name(score_path.name.removesuffix(".json") + ".images.csv")


def read_per_image(path: Path, filenames: Sequence[str]) -> pd.DataFrame:
    """The per-image table, in the order of ``filenames`` (every dataset image exactly once)."""
    path = Path(path)
    try:
        frame = read_csv(path, keep_default_na=True)
    except (OSError, pd.errors.ParserError) as exc:
        raise NovaError(f"cannot read {path} ({exc})", f"delete {path} and re-run `score`") from exc
    if sorted(frame["filename"]) != sorted(filenames):
        raise NovaError(
            f"{path} does not cover the dataset's images exactly once",
            "re-run `score` against the current dataset",
        )
    return frame.set_index("filename").loc[list(filenames)].reset_index()


def load_dataset(
    path: Path, columns: Sequence[str] | None = None, task: str | None = None
) -> pd.DataFrame:
    """The dataset columns the report reads: keys, boxes, and every task's references;
    with ``task``, only the images that task scored (those it excludes for lack of a
    reference are left out, as the scorer left them out)."""
    from novabench.dataset.read import load_nova
    from novabench.tasks import get_task, task_names

    references = [c for t in task_names() for c in get_task(t).reference_columns]
    wanted = list(dict.fromkeys([*(columns or DATASET_COLUMNS), *references]))
    frame = load_nova(Path(path), columns=wanted)
    return frame if task is None else get_task(task).scored_rows(frame)[0]


def load_entries(
    task: str,
    score_paths: Sequence[Path],
    dataset: pd.DataFrame,
    models: Mapping[str, Any],
    controls: Sequence[str] | None,
    verdicts: Mapping[str, Path] | None = None,
) -> list[Entry]:
    """Score files of one task as entries, in the given order."""
    filenames = list(dataset["filename"])
    entries = []
    for path in score_paths:
        path = Path(path)
        scores = read_scores(path)
        if scores.get("task") != task:
            raise NovaError(f"{path} holds {scores.get('task')!r} scores, not {task!r}")
        name = path.name.removesuffix(".json")
        entries.append(
            Entry(
                name=name,
                group=model_group(name, models, controls),
                scores=scores,
                per_image=read_per_image(per_image_path(path), filenames),
                verdicts=Path(verdicts[name]) if name in (verdicts or {}) else None,
            )
        )
    return entries
