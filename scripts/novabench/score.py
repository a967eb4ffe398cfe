"""Score a prediction file: glue between prediction records and the task's scorer.

Each score file ``results/<tag>/scores/{task}/{model}.json`` holds ``task, model, metrics``
(the scorer's summary), ``n_images`` scored and ``n_excluded`` / ``excluded_images`` (left
out for lack of a reference the task needs), the ``judge`` identity where a judge was
used with ``judge_validation``, the judge's held-out figures looked up by that identity
(``novabench.judges.figures``: "judge not validated" with the reason where the record
does not hold it), and the sha256 of the dataset and prediction files it was computed
from. A per-image CSV (scored images only) sits beside it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.dataset.read import load_nova
from novabench.errors import NovaError
from novabench.io import atomic_path, atomic_write_text
from novabench.judges import make_judge
from novabench.judges.figures import lookup
from novabench.provenance import sha256_file
from novabench.records import read_predictions
from novabench.spreadsheet import write_csv
from novabench.tasks import Answers, ScoringContext, get_task

KEY_COLUMNS = ["filename", "case_id"]


def _json_safe(value: Any) -> Any:
    """NaN is not JSON: undefined metrics are written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _json_safe(value.item())
    return value


def metrics_text(metrics: Mapping[str, Any]) -> str:
    """A score's scalar metrics as one log line, ``key=value`` with plain numbers (a
    numpy scalar would print as ``np.float64(88.46...)``); nested details are in the file."""
    parts = []
    for key, value in metrics.items():
        value = _json_safe(value)
        if isinstance(value, dict | list):
            continue
        parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    return ", ".join(parts)


def write_scores(
    payload: dict[str, Any], per_image: pd.DataFrame, out_json: Path, out_csv: Path
) -> None:
    with atomic_path(out_csv) as tmp:
        write_csv(per_image, tmp, index=False, float_format="%.6g")
    atomic_write_text(out_json, json.dumps(_json_safe(payload), indent=2) + "\n")


def _check_filenames(records: list[dict[str, Any]], frame: pd.DataFrame, path: Path) -> None:
    unknown = sorted({r["filename"] for r in records} - set(frame["filename"]))
    if unknown:
        raise NovaError(
            f"{path} has predictions for {len(unknown)} image(s) not in the dataset, "
            f"e.g. {unknown[0]}",
            f"delete {path} and re-run `predict` against the current dataset",
        )


def score_predictions(
    *,
    task: str,
    dataset: Path,
    predictions: Path,
    out_json: Path,
    out_csv: Path,
    judge_cfg: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    nltk_data: Path | None = None,
    cache_dir: Path | None = None,
    code: str | None = None,
    judge_figures: Path | None = None,
) -> dict[str, Any]:
    """Score one prediction file with the task's scorer; write the score file and the
    per-image table; return the metrics.

    ``judge_cfg`` is ``{kind, settings, name}`` for tasks scored through a judge (None:
    the task's default offline judge, ``Task.default_judge``). ``options`` are the task's
    scoring options (``Task.options``). ``cache_dir`` keeps an LLM judge's answers.
    ``code`` is the job's code fingerprint (:mod:`novabench.code_fingerprint`), recorded in
    the score file.
    ``judge_figures``: the record of the judges' held-out figures (default: the
    repository's ``validation/judge_figures.json``).
    """
    spec = get_task(task)
    frame = load_nova(dataset, columns=[*KEY_COLUMNS, *spec.reference_columns])
    records = read_predictions(predictions)
    _check_filenames(records, frame, Path(predictions))
    # Images without a reference this task needs are left out and counted (the dataset
    # build reported them; dataset.missing_reference: error would have stopped it).
    frame, excluded = spec.scored_rows(frame)
    if frame.empty:
        raise NovaError(
            f"no image of {dataset} has the {' and '.join(spec.required_references)} that "
            f"{task} needs ({len(excluded)} excluded)",
            f"disable tasks.{task}, or use a dataset with these references",
        )
    model = records[0]["model"] if records else Path(predictions).stem
    judge_cfg = judge_cfg or spec.default_judge
    judge = make_judge(judge_cfg, task, cache_dir=cache_dir) if spec.needs_judge else None
    context = ScoringContext(judge=judge, options=dict(options or {}), nltk_data=nltk_data)
    metrics, per_image = spec.score(frame, Answers(records), context)
    payload = {
        "task": task,
        "model": model,
        "metrics": metrics,
        "n_images": len(frame),
        "n_excluded": len(excluded),
        "excluded_images": excluded,
        "judge": judge.identity() if judge is not None else None,
        "judge_validation": (
            lookup(judge.identity(), task, judge_figures) if judge is not None else None
        ),
        # An LLM judge's requests: how many were answered from the cache, failed, cost.
        "judge_usage": judge.usage() if hasattr(judge, "usage") else None,
        "inputs": {
            "dataset_sha256": sha256_file(Path(dataset)),
            "predictions_sha256": sha256_file(Path(predictions)),
        },
        "code": code,
    }
    write_scores(payload, per_image, out_json, out_csv)
    return metrics


def score_rater(
    *,
    rater: str,
    dataset: Path,
    out_json: Path,
    out_csv: Path,
    code: str | None = None,
    task: str,
) -> dict[str, Any]:
    """The human reference: one rater's annotations of ``task`` (a task that
    ``scores_raters``) scored against gold with the same code.

    ``rater`` is the rater's slug (:func:`novabench.dataset.schema.rater_slug`).
    """
    frame = load_nova(dataset, columns=[*KEY_COLUMNS, "gold_boxes", "rater_boxes"])
    scored = get_task(task).score_rater(frame, rater)
    if scored is None:
        raise NovaError(
            f"rater {rater!r} has no boxes in {dataset}", "check the dataset manifest's raters"
        )
    metrics, per_image = scored
    payload = {
        "task": task,
        "model": f"rater-{rater}",
        "metrics": metrics,
        "judge": None,
        "inputs": {"dataset_sha256": sha256_file(Path(dataset))},
        "code": code,
    }
    write_scores(payload, per_image, out_json, out_csv)
    return metrics
