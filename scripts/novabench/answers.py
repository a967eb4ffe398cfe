"""Reading one answer: a prediction record in, what the text says out.

In this order: the request's status (an error, a missing answer, a refusal the API
flagged), a refusal written in the text (:mod:`novabench.refusals`), then the task's parser
(``Task.parse``). The reading stage (:mod:`novabench.reading`) reads every answer so
before judging it; a prediction job whose prompt takes an upstream model's answers
(diagnosis from a captioning model) loads this module by name and reads them so, which
makes this module and the upstream task's parser part of that job's code only.

A record that carries a ``parsed`` value (another harness's record, or one of this
pipeline from before reading was a stage of its own) is read as it is: its status and
``parsed`` are taken, and its ``raw`` is not parsed again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from novabench.code_fingerprint import code_graph
from novabench.records import read_predictions
from novabench.refusals import refusal_reason
from novabench.tasks import AnswerContext, Answers, Task, get_task

SIZE_COLUMNS = ["width", "height"]


def reader_fingerprint(task: str) -> str:
    """The fingerprint of the code that reads ``task``'s answers (this module, what it
    imports, the task's parse stage): figures measured on raw answers hold for this
    reading only, and are quoted only while it stays the same."""
    graph = code_graph()
    # A task of a plug-in outside the package has no fingerprint here (as in Plan.code_roots).
    modules = [m for m in get_task(task).code_modules("parse") if graph.module_file(m)]
    return graph.fingerprint([__name__, *modules])


def answer_sizes(frame: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """(width, height) of each image of a dataset frame: what reading boxes needs."""
    if not set(SIZE_COLUMNS) <= set(frame.columns):
        return {}
    rows = frame[["filename", *SIZE_COLUMNS]].itertuples(index=False)
    return {r.filename: (int(r.width), int(r.height)) for r in rows}


def read_answer(
    task: Task,
    record: Mapping[str, Any],
    size: tuple[int, int] | None,
    options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One prediction record as read: ``{filename, case_id, status, error, read}``
    (``options``: the task's reading options; None: its defaults)."""
    key = {"filename": record["filename"], "case_id": record.get("case_id")}
    status, error = record["status"], record.get("error")
    options = task.reading_options({}) if options is None else options
    if "parsed" in record:  # read elsewhere already: taken as it is, within the task's caps
        read = record["parsed"]
        return {**key, "status": status, "error": error, "read": task.capped(read, options)}
    raw = record.get("raw")
    if status == "ok" and raw is None:
        status, error = "error", "no answer"
    if status != "ok":
        return {**key, "status": status, "error": error, "read": None}
    if why := refusal_reason(raw):
        return {**key, "status": "refusal", "error": why, "read": None}
    if size is None and task.needs_box_format:  # boxes are read against the image's size
        raise ValueError(f"no width and height given for {record['filename']}")
    width, height = size or (0, 0)
    frame = record.get("frame_size")
    context = AnswerContext(
        width,
        height,
        (record.get("request") or {}).get("box_format"),
        (int(frame[0]), int(frame[1])) if frame else None,
        options,
    )
    # A task's parser never raises on any text: an exception here is a bug and crashes.
    parsed = task.parse(raw, context)
    return {**key, "status": parsed.status, "error": parsed.error, "read": parsed.value}


def read_answers(
    task: Task,
    records: Sequence[Mapping[str, Any]],
    sizes: Mapping[str, tuple[int, int]],
    options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every prediction record as read (:func:`read_answer`), in order."""
    options = task.reading_options({}) if options is None else options
    return [read_answer(task, r, sizes.get(r["filename"]), options) for r in records]


def read_file(task: str, predictions: Path, frame: pd.DataFrame) -> Answers:
    """A prediction file's answers as read, by filename (``frame``: the dataset, for the
    image sizes that reading boxes needs)."""
    spec = get_task(task)
    return Answers(read_answers(spec, read_predictions(predictions), answer_sizes(frame)))
