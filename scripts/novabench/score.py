"""Score a prediction file: glue between prediction records and the task's scorer.

Each score file ``results/scores/{task}/{model}.json`` holds ``task, model, metrics``
(the scorer's summary), the ``judge`` identity where a judge was used, and the sha256
of the dataset and prediction files it was computed from. A per-image CSV sits beside it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.config import rater_slug
from novabench.dataset.read import load_nova
from novabench.errors import NovaError
from novabench.predict import read_predictions
from novabench.provenance import sha256_file

TEXT_COLUMNS = ["filename", "case_id", "caption", "final_diagnosis", "gold_boxes", "rater_boxes"]


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


def write_scores(
    payload: dict[str, Any], per_image: pd.DataFrame, out_json: Path, out_csv: Path
) -> None:
    out_json, out_csv = Path(out_json), Path(out_csv)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    per_image.to_csv(out_csv.with_name(out_csv.name + ".tmp"), index=False, float_format="%.6g")
    os.replace(out_csv.with_name(out_csv.name + ".tmp"), out_csv)
    tmp = out_json.with_name(out_json.name + ".tmp")
    tmp.write_text(json.dumps(_json_safe(payload), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, out_json)


def _by_filename(records: list[dict[str, Any]], frame: pd.DataFrame, path: Path) -> dict[str, dict]:
    by_name = {r["filename"]: r for r in records}
    unknown = sorted(set(by_name) - set(frame["filename"]))
    if unknown:
        raise NovaError(
            f"{path} has predictions for {len(unknown)} image(s) not in the dataset, "
            f"e.g. {unknown[0]}",
            f"delete {path} and re-run `predict` against the current dataset",
        )
    return by_name


def make_judge(judge_cfg: dict[str, Any], task: str | None = None, cache_dir: Path | None = None):
    """Build the configured judge; fail loudly if it cannot run (never fall back).

    An ``llm`` judge needs the ``task`` it judges, and keeps its answers under
    ``cache_dir`` (none: not cached).
    """
    kind, settings = judge_cfg["kind"], judge_cfg.get("settings", {})
    if kind == "llm":
        from novabench.judges.llm import make_llm_judge

        return make_llm_judge(judge_cfg.get("name") or "llm", settings, task, cache_dir)
    if kind == "keyword-lexicon":
        from novabench.judges.keywords import KeywordJudge

        return KeywordJudge(**settings)
    if kind == "diagnosis-matcher":
        from novabench.judges.diagnosis_matcher import DiagnosisMatcher

        return DiagnosisMatcher(**settings)
    raise NovaError(
        f"judge {judge_cfg.get('name')!r} of kind {kind!r} cannot run in this version",
        "use a keyword-lexicon judge for captioning or a diagnosis-matcher judge for diagnosis",
    )


def score_predictions(
    *,
    task: str,
    dataset: Path,
    predictions: Path,
    out_json: Path,
    out_csv: Path,
    judge_cfg: dict[str, Any] | None = None,
    unit: str = "image",
    nltk_data: Path | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Score one prediction file; ``cache_dir`` keeps an LLM judge's answers."""
    frame = load_nova(dataset, columns=TEXT_COLUMNS)
    records = read_predictions(predictions)
    by_name = _by_filename(records, frame, Path(predictions))
    model = records[0]["model"] if records else Path(predictions).stem
    if task not in ("localization", "captioning", "diagnosis"):
        raise NovaError(f"unknown task {task!r}", "use localization, captioning or diagnosis")
    missing = {"status": "error", "parsed": None}  # an image the model never answered

    def answer(filename: str, key: str, default: Any = None) -> tuple[Any, str]:
        rec = by_name.get(filename, missing)
        return (rec.get("parsed") or {}).get(key, default), rec["status"]

    judge = (
        None if task == "localization" else make_judge(judge_cfg, task=task, cache_dir=cache_dir)
    )
    if task == "localization":
        from novabench.metrics.localization import score_localization

        gold, preds, statuses = {}, {}, {}
        for r in frame.itertuples(index=False):
            gold[r.filename] = [[b["x"], b["y"], b["width"], b["height"]] for b in r.gold_boxes]
            preds[r.filename], statuses[r.filename] = answer(r.filename, "boxes", [])
        metrics, per_image = score_localization(gold, preds, statuses)
    elif task == "captioning":
        from novabench.metrics.captioning import score_captioning

        rows = []
        for r in frame.itertuples(index=False):
            caption, status = answer(r.filename, "caption")
            rows.append(
                {
                    "filename": r.filename,
                    "reference": r.caption,
                    "prediction": caption,
                    "status": status,
                }
            )
        metrics, per_image = score_captioning(rows, judge, nltk_data)
    else:
        from novabench.metrics.diagnosis import score_diagnosis

        rows = []
        for r in frame.itertuples(index=False):
            ranked, status = answer(r.filename, "ranked", [])
            rows.append(
                {
                    "filename": r.filename,
                    "case_id": r.case_id,
                    "reference": r.final_diagnosis,
                    "predictions": ranked,
                    "status": status,
                }
            )
        metrics, per_image = score_diagnosis(rows, judge, unit=unit)
    judge_identity = judge.identity() if judge is not None else None
    payload = {
        "task": task,
        "model": model,
        "metrics": metrics,
        "judge": judge_identity,
        # An LLM judge's requests: how many were answered from the cache, failed, cost.
        "judge_usage": judge.usage() if hasattr(judge, "usage") else None,
        "inputs": {
            "dataset_sha256": sha256_file(Path(dataset)),
            "predictions_sha256": sha256_file(Path(predictions)),
        },
    }
    write_scores(payload, per_image, out_json, out_csv)
    return metrics


def score_rater(*, rater: str, dataset: Path, out_json: Path, out_csv: Path) -> dict[str, Any]:
    """The human reference: one rater's boxes scored against gold with the same code.

    ``rater`` is the rater's slug (:func:`rater_slug`).
    """
    from novabench.metrics.localization import score_localization

    frame = load_nova(dataset, columns=TEXT_COLUMNS)
    gold, preds = {}, {}
    for r in frame.itertuples(index=False):
        gold[r.filename] = [[b["x"], b["y"], b["width"], b["height"]] for b in r.gold_boxes]
        preds[r.filename] = [
            {"x": b["x"], "y": b["y"], "width": b["width"], "height": b["height"]}
            for b in r.rater_boxes
            if rater_slug(b["rater"]) == rater
        ]
    if not any(preds.values()):
        raise NovaError(
            f"rater {rater!r} has no boxes in {dataset}", "check the dataset manifest's raters"
        )
    statuses = {name: "ok" if boxes else "no_finding" for name, boxes in preds.items()}
    metrics, per_image = score_localization(gold, preds, statuses)
    payload = {
        "task": "localization",
        "model": f"rater-{rater}",
        "metrics": metrics,
        "judge": None,
        "inputs": {"dataset_sha256": sha256_file(Path(dataset))},
    }
    write_scores(payload, per_image, out_json, out_csv)
    return metrics
