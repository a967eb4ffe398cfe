"""Run one model on one task and write its prediction file.

``results/<tag>/predictions/{task}/{model}.jsonl`` holds one record per image, sorted by
filename (the format is documented in docs/outputs.md); images the task excludes for lack of a
reference (``Task.scored_rows``) have none:

``filename, case_id, task, model, request{prompt_id, prompt_sha256, model_sha256,
box_format}, raw, status, error, latency_s, usage, cached`` (and ``served``, ``frame_size``
where known)

A record keeps what the model said and how the request went, nothing a reading of the text
decides: ``status`` is ``ok`` (an answer arrived), ``refusal`` (the API flagged it as one),
``error`` (no answer: the request failed) or ``missing`` (no answer on file: an image a
predictions file lacks). Parsing, text refusals and judging are the reading stage's
(:mod:`novabench.reading`), so a parser fix re-runs no prediction.
"""

from __future__ import annotations

import importlib
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.dataset.read import load_nova
from novabench.errors import ConfigError, NovaError
from novabench.io import atomic_write_text
from novabench.models.base import Adapter, Response, Sample, load_adapter
from novabench.progress import Progress
from novabench.provenance import canonical_json, sha256_text
from novabench.records import PREDICTION_STATUSES, write_jsonl
from novabench.tasks import Task, get_task

# The module that reads an answer's text (novabench.answers): a plug-in of this stage.
ANSWER_READER = "novabench.answers"


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


def upstream_answers(
    task: Task, path: Path, frame: pd.DataFrame
) -> dict[str, dict[str, Any] | None]:
    """The upstream model's answers (e.g. captions for diagnosis) as its task reads them;
    None where the model gave no usable answer. The reader is loaded by name
    (:data:`ANSWER_READER`), so only the jobs that read upstream answers have it and the
    upstream task's parser in their code (novabench.config.Plan.code_roots)."""
    answers = importlib.import_module(ANSWER_READER).read_file(str(task.upstream_task), path, frame)
    return {
        name: (r["read"] or {}) if r["status"] == "ok" else None
        for name, r in answers.by_filename.items()
    }


def build_samples(
    frame: pd.DataFrame,
    task: Task,
    template: str,
    prompt_path: str,
    upstream: Mapping[str, dict[str, Any] | None] | None = None,
) -> list[Sample]:
    """One sample per dataset row: the rendered prompt, the image if the task sends one."""
    samples = []
    for row in frame.itertuples(index=False):
        inputs = {"width": row.width, "height": row.height, **task.prompt_inputs(row, upstream)}
        samples.append(
            Sample(
                filename=row.filename,
                case_id=row.case_id,
                task=task.name,
                prompt=render_prompt(template, inputs, prompt_path),
                image_png=row.image["bytes"] if task.uses_image else None,
                width=int(row.width),
                height=int(row.height),
                inputs={k: str(v) for k, v in inputs.items()},
                reference={column: getattr(row, column) for column in task.reference_columns},
            )
        )
    return samples


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
    declared = model_cfg.get("box_format") or adapter.native_box_format()
    if not declared:
        raise ConfigError(
            f"models.{name} runs localization but declares no box_format",
            "set box_format to the model's box convention (see config/README.md)",
        )
    return declared


def summarize(records: Sequence[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    counts = Counter(r["status"] for r in records)
    usage: Counter = Counter()
    for record in records:
        usage.update(record.get("usage") or {})
    served = Counter(
        (r["served"]["model"], r["served"]["fingerprint"]) for r in records if r.get("served")
    )
    return {
        # Each model version and system fingerprint the server reported, with its count.
        **(
            {
                "served": [
                    {"model": m, "system_fingerprint": f, "n": n}
                    for (m, f), n in sorted(served.items(), key=lambda item: str(item[0]))
                ]
            }
            if served
            else {}
        ),
        "n_images": len(records),
        "status_counts": {s: counts.get(s, 0) for s in PREDICTION_STATUSES},
        "n_cached": sum(bool(r.get("cached")) for r in records),
        # Answers cut at MAX_ANSWER_CHARS before they were stored.
        "n_truncated": sum("raw_chars" in r for r in records),
        "usage": dict(sorted(usage.items())),
        "wall_s": round(wall_s, 3),
    }


def request_fields(
    prompt_id: str | None, prompt_sha: str | None, adapter: Adapter, box_format: str | None
) -> dict[str, Any]:
    """Every record's ``request``: the prompt, the model and the box convention."""
    return {
        "prompt_id": prompt_id,
        "prompt_sha256": prompt_sha,
        "model_sha256": sha256_text(
            canonical_json({**adapter.identity(), "box_format": box_format})
        ),
        # How the answers' boxes are written: the reading stage parses them with it.
        "box_format": box_format,
    }


def run_predictions(
    *,
    dataset: Path,
    task: str,
    model_name: str,
    model_cfg: dict[str, Any],
    prompt_path: Path | None,
    out: Path,
    summary_out: Path,
    upstream_predictions: Path | None = None,
    cache_dir: Path | None = None,
    code: str | None = None,
    shared_server: Path | None = None,
) -> dict[str, Any]:
    """Run ``model_name`` on every image for ``task``; write the JSONL and its summary.

    ``prompt_path`` None sends an empty prompt: only for adapters that read no prompt
    (``predictions_file``, controls). ``upstream_predictions`` is the prediction file of
    the model named by the task's upstream option (diagnosis: a captioning model).
    ``code`` is the job's code fingerprint, recorded in the summary. ``shared_server`` is
    the service file of the model's server for this run (novabench.serving), if it has one.
    """
    started = time.perf_counter()
    spec = get_task(task)
    adapter = ready_adapter(spec, model_name, model_cfg, cache_dir, shared_server)
    box_format = model_box_format(model_name, model_cfg, adapter) if spec.needs_box_format else None
    template, prompt_id, prompt_sha = load_prompt(prompt_path) if prompt_path else ("", None, None)
    # Images the task cannot score (no reference it needs) are not asked either.
    frame, excluded = spec.scored_rows(load_nova(dataset))
    upstream = upstream_answers(spec, upstream_predictions, frame) if upstream_predictions else None
    samples = build_samples(frame, spec, template, str(prompt_path), upstream)
    request = request_fields(prompt_id, prompt_sha, adapter, box_format)
    redacted: Counter = Counter()
    records = answer_all(spec, samples, adapter, model_name, request, redacted)
    summary = {
        "task": task,
        "model": model_name,
        "adapter": model_cfg["adapter"],
        "identity": adapter.identity(),
        "box_format": box_format,
        "request": request,
        **summarize(records, time.perf_counter() - started),
        # Answers in which the server echoed an API key, removed before they were stored.
        "n_redacted": redacted["answers"],
        "n_excluded": len(excluded),
        "code": code,
    }
    cost = getattr(adapter, "cost", None)
    if cost is not None:
        summary["cost_usd"] = cost(summary["usage"])
    check_error_rate(model_name, model_cfg, adapter, records)
    write_jsonl(records, out)
    atomic_write_text(summary_out, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def ready_adapter(
    spec: Task,
    model_name: str,
    model_cfg: dict[str, Any],
    cache_dir: Path | None,
    shared_server: Path | None,
) -> Any:
    """The model's adapter, checked for the task and attached to the run's shared
    server when it has one."""
    adapter = load_adapter(model_name, model_cfg, cache_dir=cache_dir)
    if not adapter.supports(spec.name):
        raise ConfigError(
            f"models.{model_name}: the {model_cfg['adapter']} adapter cannot run {spec.name}",
            f"remove {spec.name} from models.{model_name}.tasks",
        )
    adapter.preflight(spec.name)
    if shared_server is not None:
        adapter.attach(shared_server)
    return adapter


def answer_all(
    task: Task,
    samples: Sequence[Sample],
    adapter: Adapter,
    model_name: str,
    request: dict[str, Any],
    redacted: Counter | None = None,
) -> list[dict[str, Any]]:
    """Every sample's record, in order, counting statuses on a progress bar (unless the
    adapter shows its own); ``redacted`` counts the answers a key was removed from."""
    label = None if adapter.shows_progress else f"{task.name}/{model_name}"
    meter = Progress(len(samples), label)
    records = []
    try:
        for sample, response in zip(samples, adapter.predict(samples), strict=True):
            records.append(_record(sample, response, model_name, request))
            if redacted is not None and response.redacted:
                redacted["answers"] += 1
            meter.update(records[-1]["status"])
    finally:
        meter.close()
    return records


def check_error_rate(
    model_name: str, model_cfg: dict[str, Any], adapter: Adapter, records: Sequence[dict[str, Any]]
) -> None:
    """Fail the job when more than ``max_error_rate`` (a fraction) of the images have no answer
    (status ``error`` or ``missing``).

    Adapters that call a service set a default (answers that did arrive are in their cache,
    so a re-run sends only the failed requests again); ``predictions_file`` allows none
    missing by default.
    """
    limit = model_cfg.get("max_error_rate", getattr(adapter, "max_error_rate", None))
    errors = [r for r in records if r["status"] in ("error", "missing")]
    if limit is None or not records or len(errors) / len(records) <= limit:
        return
    share = f"{100 * len(errors) / len(records):.1f}% > max_error_rate {limit:g}"
    if all(r["status"] == "missing" for r in errors):
        example = next(r["filename"] for r in errors)
        raise NovaError(
            f"models.{model_name}: {len(errors)} of {len(records)} images are missing from "
            f"the predictions file ({share}), e.g. {example}",
            "add the missing answers, or set models."
            f"{model_name}.max_error_rate to score them as missing",
        )
    reasons = Counter(r["error"] for r in errors).most_common(3)
    raise NovaError(
        f"models.{model_name}: {len(errors)} of {len(records)} requests failed "
        f"({share}); most common: " + "; ".join(f"{n}x {reason}" for reason, n in reasons),
        "fix the cause and re-run (answers already received are cached and not re-sent), "
        f"or raise models.{model_name}.max_error_rate",
    )


def _status(response: Response) -> tuple[str, str | None]:
    """(status, error) of one request as it went; the text is not read here."""
    if response.missing:
        return "missing", response.error or "no answer on file"
    if response.error is not None or response.raw is None:
        return "error", response.error or "no answer"
    if response.refusal:
        return "refusal", "the API flagged the answer as a refusal"
    return "ok", None


# Characters of an answer stored (and read): longer than any answer within 64k output
# tokens, and a bound on what one answer costs every later stage. The rest is cut off, and
# the record keeps the answer's length (``raw_chars``), which the summary counts.
MAX_ANSWER_CHARS = 262_144


def _record(
    sample: Sample, response: Response, model: str, request: dict[str, Any]
) -> dict[str, Any]:
    status, error = _status(response)
    raw = response.raw
    cut = isinstance(raw, str) and len(raw) > MAX_ANSWER_CHARS
    return {
        "filename": sample.filename,
        "case_id": sample.case_id,
        "task": sample.task,
        "model": model,
        "request": request,
        "raw": raw[:MAX_ANSWER_CHARS] if cut else raw,
        **({"raw_chars": len(raw)} if cut else {}),
        "status": status,
        "error": error,
        "latency_s": None if response.latency_s is None else round(response.latency_s, 4),
        "usage": response.usage,
        "cached": response.cached,
        # Who answered, as the server says (the snapshot behind an alias, its build).
        **(
            {"served": {"model": response.served_model, "fingerprint": response.system_fingerprint}}
            if response.served_model or response.system_fingerprint
            else {}
        ),
        # The frame a local model resized the image to: boxes in its pixels are read with it.
        **({"frame_size": list(response.frame_size)} if response.frame_size else {}),
    }
