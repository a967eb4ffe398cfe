"""Score a verdict file: glue between the reading stage's verdicts and the task's metrics.

Each score file ``results/<tag>/scores/{task}/{model}.json`` holds ``task, model, metrics``
(the scorer's summary), ``n_images`` scored and ``n_excluded`` / ``excluded_images`` (left
out for lack of a reference the task needs), the ``judge`` identity where a judge was
used with ``judge_validation``, the judge's held-out figures looked up by that identity
(``novabench.judge_figures``: "judge not validated" with the reason where the record
does not hold it), ``judge_usage`` (an LLM judge's requests, from the verdict summary),
``judge_live_check`` (its live checks on hand-labelled pairs, from the same summary),
and the sha256 of the dataset and prediction files it was computed from. A per-image CSV
(scored images only) sits beside it. Scoring runs no judge: the verdicts were given when
the answers were read (:mod:`novabench.reading`).
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.controls import check_control
from novabench.dataset.read import load_nova
from novabench.errors import NovaError
from novabench.io import atomic_path, atomic_write_text
from novabench.judge_figures import lookup
from novabench.provenance import sha256_file
from novabench.records import read_verdicts
from novabench.scored_images import KEY_COLUMNS, check_filenames, scored_frame
from novabench.spreadsheet import write_csv
from novabench.tasks import Answers, ScoringContext, get_task

# The reading stage, which only the one-call `novabench score` command runs from here.
READING = "novabench.reading"


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


def metrics_text(metrics: Mapping[str, Any], limit: int = 360) -> str:
    """A score's scalar metrics as one log line, ``key=value`` with plain numbers (a
    numpy scalar would print as ``np.float64(88.46...)``); nested details are in the file.
    The first metrics (the headline ones) up to ``limit`` characters: the rest are counted,
    as the line is printed on the terminal too."""
    parts = []
    for key, value in metrics.items():
        value = _json_safe(value)
        if isinstance(value, dict | list):
            continue
        parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    text = ", ".join(parts)
    if len(text) <= limit:
        return text
    shown = text[:limit].rsplit(", ", 1)[0]
    return f"{shown}, and {len(parts) - shown.count(', ') - 1} more in the score file"


def write_scores(
    payload: dict[str, Any], per_image: pd.DataFrame, out_json: Path, out_csv: Path
) -> None:
    with atomic_path(out_csv) as tmp:
        write_csv(per_image, tmp, index=False, float_format="%.6g")
    atomic_write_text(out_json, json.dumps(_json_safe(payload), indent=2) + "\n")


def read_summary(path: Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NovaError(
            f"cannot read the verdict summary {path} ({exc})", f"delete {path} and re-run `read`"
        ) from exc


def _judge_fields(
    summary: Mapping[str, Any], task: str, judge_figures: Path | None
) -> dict[str, Any]:
    """What a score file says of the judge, from the verdict summary."""
    identity = summary.get("identity")
    return {
        "judge": identity,
        "judge_validation": (
            lookup(identity, task, judge_figures, summary.get("reader")) if identity else None
        ),
        # An LLM judge's requests: how many were answered from the cache, failed, cost.
        "judge_usage": summary.get("usage"),
        # The LLM judges' live checks on hand-labelled pairs in the reading job.
        "judge_live_check": summary.get("live_check"),
    }


def score_verdicts(
    *,
    task: str,
    dataset: Path,
    verdicts: Path,
    verdict_summary: Path,
    out_json: Path,
    out_csv: Path,
    options: Mapping[str, Any] | None = None,
    nltk_data: Path | None = None,
    code: str | None = None,
    judge_figures: Path | None = None,
    control: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Score one verdict file (and its summary) with the task's metrics; write the score
    file and the per-image table; return the metrics.

    ``options``: the task's scoring options (``Task.options``). ``code``: the job's code
    fingerprint, recorded. ``judge_figures``: the record of the judges' held-out figures
    (default: ``validation/judge_figures.json``). ``control``: a control's bounds
    (:mod:`novabench.controls`), checked before anything is written.
    """
    spec = get_task(task)
    frame = load_nova(dataset, columns=[*KEY_COLUMNS, *spec.reference_columns])
    records = read_verdicts(verdicts)
    check_filenames(records, frame, Path(verdicts))
    frame, excluded = scored_frame(spec, frame, Path(dataset))
    summary = read_summary(verdict_summary)
    identity = summary.get("identity")
    context = ScoringContext(
        verdicts={r["filename"]: r["verdict"] for r in records},
        judge=identity,
        notes=summary.get("notes") or {},
        options=dict(options or {}),
        nltk_data=nltk_data,
    )
    metrics, per_image = spec.score(frame, Answers(records), context)
    model = summary.get("model") or Path(verdicts).stem
    judge = str(summary.get("judge") or spec.reader)
    control_check = check_control(task, model, judge, metrics, spec.metrics, control)
    payload = {
        "task": task,
        "model": model,
        "metrics": metrics,
        "n_images": len(frame),
        "n_excluded": len(excluded),
        "excluded_images": excluded,
        **_judge_fields(summary, task, judge_figures),
        # A control's scores against its bounds (None for a model under test).
        "control_check": control_check,
        "inputs": {
            "dataset_sha256": sha256_file(Path(dataset)),
            "predictions_sha256": (summary.get("inputs") or {}).get("predictions_sha256"),
            "verdicts_sha256": sha256_file(Path(verdicts)),
        },
        "code": code,
    }
    write_scores(payload, per_image, out_json, out_csv)
    return metrics


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
    judge_figures: Path | None = None,
    reading_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Read, judge and score one prediction file in one call (the ``novabench score``
    command): the reading stage's verdict files are written beside ``out_json``
    (``<stem>.verdicts.jsonl`` and ``<stem>.verdicts.summary.json``), then scored.
    ``options``: the task's scoring options; ``reading_options``: its reading options
    (``Task.reading_options``; None: the task's defaults), as the read rule passes them. The
    reading stage is loaded by name: a score job reads no answer, and its code holds
    neither the answer reader nor a judge."""
    read_predictions_file = importlib.import_module(READING).read_predictions_file

    stem = Path(out_json).with_suffix("")
    verdicts = stem.with_name(stem.name + ".verdicts.jsonl")
    verdict_summary = stem.with_name(stem.name + ".verdicts.summary.json")
    read_predictions_file(
        task=task,
        dataset=Path(dataset),
        predictions=Path(predictions),
        out=verdicts,
        summary_out=verdict_summary,
        judge_cfg=judge_cfg,
        cache_dir=cache_dir,
        options=reading_options,
    )
    return score_verdicts(
        task=task,
        dataset=Path(dataset),
        verdicts=verdicts,
        verdict_summary=verdict_summary,
        out_json=Path(out_json),
        out_csv=Path(out_csv),
        options=options,
        nltk_data=nltk_data,
        judge_figures=judge_figures,
    )


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
