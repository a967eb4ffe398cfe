"""Run one model on one task and write its prediction file.

``results/predictions/{task}/{model}.jsonl`` holds one record per image, sorted by
filename (the format is documented in README.md):

``filename, case_id, task, model, request{prompt_id, prompt_sha256, model_sha256},
raw, parsed, status, error, latency_s, usage, cached``

``status`` is ``ok``, ``no_finding`` (a valid "nothing abnormal" answer),
``parse_error`` (an answer we could not read) or ``error`` (no answer: the request
failed). The three failure kinds are counted separately and never confused.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.dataset.read import load_nova
from novabench.errors import ConfigError, NovaError
from novabench.models.base import Adapter, Response, Sample, load_adapter
from novabench.provenance import canonical_json, sha256_text

TASKS = ("localization", "captioning", "diagnosis")
STATUSES = ("ok", "no_finding", "parse_error", "error")


def load_prompt(path: Path) -> tuple[str, str, str]:
    """Return (template, prompt id, sha256); the id is the file name without suffix."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"prompt template {path} does not exist", "fix the prompt path in the config"
        )
    template = path.read_text(encoding="utf-8")
    return template, path.stem, sha256_text(template)


def render_prompt(template: str, values: dict[str, Any], path: str = "prompt") -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as exc:
        raise ConfigError(
            f"prompt template {path} uses an unknown or malformed placeholder ({exc})",
            f"use only {{{'}, {'.join(sorted(values))}}} and double literal braces {{{{ }}}}",
        ) from exc


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """Read a prediction JSONL file written by this module."""
    path = Path(path)
    if not path.is_file():
        raise NovaError(f"prediction file {path} does not exist", "run the `predict` rule first")
    with open(path, encoding="utf-8") as handle:
        try:
            return [json.loads(line) for line in handle if line.strip()]
        except json.JSONDecodeError as exc:
            raise NovaError(
                f"prediction file {path} is corrupt ({exc})", f"delete {path} and re-run `predict`"
            ) from exc


def findings_from_predictions(path: Path) -> dict[str, str | None]:
    """Captions of a captioning model, for the diagnosis task's "model caption" mode."""
    return {
        r["filename"]: (r["parsed"] or {}).get("caption") if r["status"] == "ok" else None
        for r in read_predictions(path)
    }


def build_samples(
    frame: pd.DataFrame,
    task: str,
    template: str,
    prompt_path: str,
    findings: dict[str, str | None] | None = None,
) -> list[Sample]:
    samples = []
    for row in frame.itertuples(index=False):
        reference = {
            "gold_boxes": row.gold_boxes,
            "caption": row.caption,
            "final_diagnosis": row.final_diagnosis,
        }
        inputs = {"width": row.width, "height": row.height}
        if task == "diagnosis":
            text = row.caption if findings is None else (findings.get(row.filename) or "")
            inputs.update(clinical_history=row.clinical_history, findings=text)
        samples.append(
            Sample(
                filename=row.filename,
                case_id=row.case_id,
                task=task,
                prompt=render_prompt(template, inputs, prompt_path),
                # Diagnosis is text-only in NOVA: history and findings, no image.
                image_png=None if task == "diagnosis" else row.image["bytes"],
                width=int(row.width),
                height=int(row.height),
                inputs={k: str(v) for k, v in inputs.items()},
                reference=reference,
            )
        )
    return samples


def parse_answer(
    task: str,
    raw: str | None,
    box_format: str | None,
    width: int,
    height: int,
    frame_size: tuple[int, int] | None = None,
) -> tuple[str, dict[str, Any] | None, str | None]:
    """Turn raw model text into (status, parsed, error) for a task.

    ``frame_size`` is the (width, height) the adapter resized the image to; it is used
    where the box convention is in pixels of that frame (``qwen25_bbox_2d``).
    """
    if task == "localization":
        from novabench import boxes

        resized = frame_size if box_format == "qwen25_bbox_2d" else None
        parsed = boxes.parse_boxes(
            raw or "", box_format, image_size=(width, height), resized_size=resized
        )
        return parsed.status, boxes.to_dict(parsed), parsed.error
    if task == "captioning":
        caption = " ".join((raw or "").split())
        if not caption:
            return "parse_error", None, "empty answer"
        return "ok", {"caption": caption}, None
    from novabench.diagnosis import parse_diagnosis

    parsed = parse_diagnosis(raw or "")
    if parsed.status != "ok":
        return parsed.status, None, parsed.error
    return "ok", {"ranked": list(parsed.ranked)}, None


def model_box_format(name: str, model_cfg: dict[str, Any], adapter: Adapter) -> str | None:
    if adapter.box_format is not None:
        declared = model_cfg.get("box_format")
        if declared and declared != adapter.box_format:
            raise ConfigError(
                f"models.{name}.box_format is {declared} but the {model_cfg['adapter']} adapter "
                f"always answers in {adapter.box_format}",
                "remove box_format from this model",
            )
        return adapter.box_format
    if not model_cfg.get("box_format"):
        raise ConfigError(
            f"models.{name} runs localization but declares no box_format",
            "set box_format to the model's box convention (see config/README.md)",
        )
    return model_cfg["box_format"]


def write_jsonl(records: Sequence[dict[str, Any]], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, path)


def summarize(records: Sequence[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    counts = Counter(r["status"] for r in records)
    usage: Counter = Counter()
    for record in records:
        usage.update(record.get("usage") or {})
    return {
        "n_images": len(records),
        "status_counts": {s: counts.get(s, 0) for s in STATUSES},
        "n_cached": sum(bool(r.get("cached")) for r in records),
        "usage": dict(sorted(usage.items())),
        "wall_s": round(wall_s, 3),
    }


def run_predictions(
    *,
    dataset: Path,
    task: str,
    model_name: str,
    model_cfg: dict[str, Any],
    prompt_path: Path,
    out: Path,
    summary_out: Path,
    findings_predictions: Path | None = None,
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Run ``model_name`` on every image for ``task``; write the JSONL and its summary."""
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}", f"use one of {', '.join(TASKS)}")
    started = time.perf_counter()
    adapter = load_adapter(model_name, model_cfg, cache_dir=cache_dir)
    if task not in adapter.supported_tasks:
        raise ConfigError(
            f"models.{model_name}: the {model_cfg['adapter']} adapter cannot run {task}",
            f"remove {task} from models.{model_name}.tasks",
        )
    box_format = (
        model_box_format(model_name, model_cfg, adapter) if task == "localization" else None
    )
    adapter.preflight(task)
    template, prompt_id, prompt_sha = load_prompt(prompt_path)
    findings = findings_from_predictions(findings_predictions) if findings_predictions else None
    frame = load_nova(dataset)
    samples = build_samples(frame, task, template, str(prompt_path), findings)
    request = {
        "prompt_id": prompt_id,
        "prompt_sha256": prompt_sha,
        "model_sha256": sha256_text(
            canonical_json({**adapter.identity(), "box_format": box_format})
        ),
    }
    records = []
    responses = adapter.predict(samples)
    for sample, response in zip(samples, responses, strict=True):
        records.append(_record(sample, response, model_name, request, box_format))
    summary = {
        "task": task,
        "model": model_name,
        "adapter": model_cfg["adapter"],
        "identity": adapter.identity(),
        "box_format": box_format,
        "request": request,
        **summarize(records, time.perf_counter() - started),
    }
    cost = getattr(adapter, "cost", None)
    if cost is not None:
        summary["cost_usd"] = cost(summary["usage"])
    check_error_rate(model_name, model_cfg, adapter, records)
    write_jsonl(records, out)
    Path(summary_out).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def check_error_rate(
    model_name: str, model_cfg: dict[str, Any], adapter: Adapter, records: Sequence[dict[str, Any]]
) -> None:
    """Fail the job when more than ``max_error_rate`` percent of the requests failed.

    Only adapters that call a service set a default; answers that did arrive are in their
    cache, so a re-run sends only the failed requests again.
    """
    limit = model_cfg.get("max_error_rate", getattr(adapter, "max_error_rate", None))
    errors = [r for r in records if r["status"] == "error"]
    if limit is None or not records or 100 * len(errors) / len(records) <= limit:
        return
    reasons = Counter(r["error"] for r in errors).most_common(3)
    raise NovaError(
        f"models.{model_name}: {len(errors)} of {len(records)} requests failed "
        f"({100 * len(errors) / len(records):.1f}% > max_error_rate {limit}%); most common: "
        + "; ".join(f"{n}x {reason}" for reason, n in reasons),
        "fix the cause and re-run (answers already received are cached and not re-sent), "
        f"or raise models.{model_name}.max_error_rate",
    )


def _record(
    sample: Sample, response: Response, model: str, request: dict[str, Any], box_format: str | None
) -> dict[str, Any]:
    if response.error is not None or response.raw is None:
        status, parsed, error = "error", None, response.error or "no answer"
    else:
        status, parsed, error = parse_answer(
            sample.task,
            response.raw,
            box_format,
            sample.width,
            sample.height,
            frame_size=response.frame_size,
        )
    return {
        "filename": sample.filename,
        "case_id": sample.case_id,
        "task": sample.task,
        "model": model,
        "request": request,
        "raw": response.raw,
        "parsed": parsed,
        "status": status,
        "error": error,
        "latency_s": None if response.latency_s is None else round(response.latency_s, 4),
        "usage": response.usage,
        "cached": response.cached,
    }
