"""The reading stage: raw answers in, verdicts out, between prediction and scoring.

A prediction record holds what the model said and how the request went
(:mod:`novabench.predict`); reading it decides everything else, in this order: the
request's status (an error, a missing answer, a refusal the API flagged), a refusal
written in the text (:mod:`novabench.refusals`), the task's parser (``Task.parse``), then,
for a judged task, the judge (``Task.judge_answers``). One job per (task, judge, model)
writes ``results/<tag>/verdicts/{task}/{judge}/{model}.jsonl``, one record per scored
image in dataset order (the fields are documented in docs/outputs.md):

``filename, case_id, status, error, read, verdict, labels``

and ``{model}.summary.json`` beside it (status and verdict counts, the judge's identity
and usage, the job's code, the sha256 of its inputs). Scoring counts these verdicts and
runs no judge, so a parser or judge fix re-reads and re-scores, and re-predicts nothing.

A record that carries a ``parsed`` value (another harness's record, or one of this
pipeline from before reading was a stage of its own) is read as it is: its status and
``parsed`` are taken, and its ``raw`` is not parsed again.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.answers import SIZE_COLUMNS, answer_sizes, read_answers, reader_fingerprint
from novabench.errors import NovaError
from novabench.io import atomic_write_text
from novabench.provenance import sha256_file
from novabench.records import STATUSES, read_predictions, write_jsonl
from novabench.scored_images import KEY_COLUMNS, check_filenames, scored_frame
from novabench.tasks import Answers, Task, get_task

# The judge factory, loaded by name for a judged task only, so that only judged tasks'
# reading jobs have the judges' code in their fingerprint (novabench.config.Plan.code_roots).
JUDGE_FACTORY = "novabench.judges"


def verdict_records(
    frame: pd.DataFrame, answers: Answers, judged: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One verdict record per row of ``frame``: the answer as read, the judge's verdict
    and the agreement labels (``judged``: :meth:`Task.judge_answers`, in row order)."""
    out = []
    for row, judgement in zip(frame.itertuples(index=False), judged, strict=True):
        answer = answers.by_filename.get(row.filename, Answers.MISSING)
        out.append(
            {
                "filename": row.filename,
                "case_id": row.case_id,
                "status": answer["status"],
                "error": answer.get("error")
                or ("no answer on file" if answer["status"] == "missing" else None),
                "read": answer.get("read"),
                "verdict": judgement["verdict"],
                "labels": judgement["labels"],
            }
        )
    return out


def check_statuses(records: Sequence[Mapping[str, Any]], predictions: Path) -> None:
    """Every status is one of :data:`STATUSES`: a record that carries its own status
    (another harness's ``parsed``) may name one this pipeline does not count."""
    unknown = sorted({str(r["status"]) for r in records} - set(STATUSES))
    if unknown:
        raise NovaError(
            f"{predictions} has answers of status {', '.join(map(repr, unknown))}, which is "
            f"none of {', '.join(STATUSES)}",
            "correct those records' status, or re-run `predict` for this model",
        )


def read_predictions_file(
    *,
    task: str,
    dataset: Path,
    predictions: Path,
    out: Path,
    summary_out: Path,
    judge_cfg: Mapping[str, Any] | None = None,
    cache_dir: Path | None = None,
    code: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Read one prediction file and judge its answers; write the verdict file and its
    summary; return the summary. ``options``: the task's reading options
    (``Task.reading_options``; None: its defaults).

    ``judge_cfg`` is ``{kind, settings, name}`` for a judged task (None: the task's
    default offline judge; a task without a judge ignores it). ``cache_dir`` keeps an LLM
    judge's answers. ``code`` is the job's code fingerprint, recorded in the summary.
    """
    from novabench.dataset.read import load_nova

    spec = get_task(task)
    frame = load_nova(dataset, columns=[*KEY_COLUMNS, *SIZE_COLUMNS, *spec.reference_columns])
    records = read_predictions(predictions)
    check_filenames(records, frame, Path(predictions))
    frame, _ = scored_frame(spec, frame, Path(dataset))
    answers = Answers(read_answers(spec, records, answer_sizes(frame), options))
    check_statuses(list(answers.by_filename.values()), Path(predictions))
    judge_cfg = judge_cfg or spec.default_judge
    judge = None
    if spec.needs_judge:
        make_judge = importlib.import_module(JUDGE_FACTORY).make_judge
        judge = make_judge(judge_cfg, task, cache_dir=cache_dir)
    verdicts = verdict_records(frame, answers, spec.judge_answers(frame, answers, judge))
    # A judge that can check itself live (an LLM judge's hand-labelled sample) does so in
    # every reading job; past its bound it stops here, before anything is written.
    live_checks = judge.live_check() if hasattr(judge, "live_check") else []
    model = records[0]["model"] if records else Path(predictions).stem
    summary = reading_summary(
        spec,
        judge,
        verdicts,
        task=task,
        model=model,
        judge_cfg=judge_cfg,
        live_checks=live_checks,
        code=code,
        inputs=(Path(dataset), Path(predictions)),
    )
    write_jsonl(verdicts, out)
    atomic_write_text(summary_out, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def reading_summary(
    spec: Task,
    judge: Any,
    verdicts: Sequence[Mapping[str, Any]],
    *,
    task: str,
    model: str,
    judge_cfg: Mapping[str, Any] | None,
    live_checks: list[Any],
    code: str | None,
    inputs: tuple[Path, Path],
) -> dict[str, Any]:
    """The verdict file's summary: counts, the judge's identity and usage, the job's code
    and the sha256 of its inputs (``inputs``: the dataset and the predictions file)."""
    dataset, predictions = inputs
    statuses = Counter(r["status"] for r in verdicts)
    return {
        "task": task,
        "model": model,
        "judge": judge_name(spec, judge_cfg, judge),
        "identity": judge.identity() if judge is not None else None,
        "status_counts": {s: statuses[s] for s in STATUSES},
        "verdict_counts": spec.verdict_counts([r["verdict"] for r in verdicts]),
        # What scoring needs to know of the judge besides its verdicts (Task.reading_notes).
        "notes": spec.reading_notes(judge) if judge is not None else {},
        # An LLM judge's requests: how many were answered from the cache, failed, cost.
        "usage": judge.usage() if hasattr(judge, "usage") else None,
        "live_check": live_checks or None,
        "code": code,
        # The reading's own code: the judge figures measured on raw answers hold for it.
        "reader": reader_fingerprint(task),
        "inputs": {
            "dataset_sha256": sha256_file(dataset),
            "predictions_sha256": sha256_file(predictions),
        },
    }


def judge_name(spec: Task, judge_cfg: Mapping[str, Any] | None, judge: Any) -> str:
    """The ``{judge}`` of a verdict file: the judge's config name, or the task's reader
    name (``Task.reader``) for a task without a judge."""
    if judge is None:
        return spec.reader
    return str((judge_cfg or {}).get("name") or judge.identity().get("name") or "judge")
