"""Scores predictions made elsewhere, without running anything.

Settings: ``path`` (one JSONL file for every task the model runs) or ``paths``
(``{task: file}``). Each line needs ``filename`` and ``raw`` (the model's answer text,
exactly as the model wrote it, or null); other fields are ignored. The answers are parsed
with the model's declared ``box_format`` like any other model's. An image missing from
the file gets status ``missing``.

The whole file is read before anything is scored, and every problem comes in one report
(:class:`FileReport`): unreadable lines (line number, reason in words), repeated and
unknown filenames, missing images, and how the task reads the answers (parse errors and
refusals counted per status). The job stops on any unreadable, repeated or unknown line,
and when more images are missing or answered with ``raw`` null than the model's
``max_error_rate`` (a fraction of images, 0 by default) allows; ``novabench validate``
prints the same report line by line.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from novabench.errors import ConfigError, NovaError
from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample
from novabench.records import json_lines

# Reads an answer's text as the reading stage does; loaded by name, so that a parser fix
# re-runs no prediction job (the report only explains a job that stops).
ANSWER_READER = "novabench.answers"
# Statuses of the report's counts: how the reading stage will take each image.
REPORT_STATUSES = ("ok", "no_finding", "parse_error", "refusal", "error", "missing")
# Statuses of answers the task cannot take, each with its label in the report.
FAILURES = {"parse_error": "answer(s) the task cannot read", "refusal": "refusal(s)"}
# Lines and filenames quoted per kind of problem in the one-line error; the rest counted.
QUOTED = 3
QUOTED_CHARS = 160


class LineProblem(ValueError):
    """Why one line of a predictions file cannot be read, in words."""


def predictions_path(name: str, settings: dict, task: str) -> Path:
    if "paths" in settings and task in settings["paths"]:
        return Path(settings["paths"][task])
    if "path" in settings:
        return Path(settings["path"])
    raise ConfigError(
        f"models.{name}.settings needs `path` or `paths.{task}` for the predictions_file adapter",
        "name the JSONL file holding this model's answers",
    )


def answer_fields(record: Any) -> tuple[str, str | None]:
    """One decoded line's ``(filename, raw)``; :class:`LineProblem` says in words what is
    wrong with it."""
    if not isinstance(record, dict):
        raise LineProblem(f"a JSON {type(record).__name__}, not an object with filename and raw")
    absent = [key for key in ("filename", "raw") if key not in record]
    if absent:
        raise LineProblem(f"no {' and no '.join(absent)} field")
    filename, raw = record["filename"], record["raw"]
    if not isinstance(filename, str) or not filename:
        raise LineProblem(f"filename is a {type(filename).__name__}, not a non-empty string")
    if raw is not None and not isinstance(raw, str):
        raise LineProblem(f"raw is a {type(raw).__name__}, not a string or null")
    return filename, raw


@dataclass
class AnswerFile:
    """A predictions file read whole: its answers and the lines that could not be taken."""

    path: Path
    answers: dict[str, str | None] = field(default_factory=dict)
    line_of: dict[str, int] = field(default_factory=dict)
    unreadable: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)
    repeated: list[tuple[int, str]] = field(default_factory=list)  # (line, filename)


def read_answer_file(path: Path) -> AnswerFile:
    path = Path(path)
    if not path.is_file():
        raise NovaError(f"predictions file {path} does not exist", "fix the model's settings.path")
    read = AnswerFile(path)
    # One decoder for every JSON Lines file a user gives (records.json_lines): a line that
    # is not UTF-8, not JSON or nested too deeply is a problem named by its line.
    for number, record, problem in json_lines(path):
        try:
            if problem is not None:
                raise LineProblem(problem)
            filename, raw = answer_fields(record)
        except LineProblem as why:
            read.unreadable.append((number, str(why)))
            continue
        if filename in read.answers:
            read.repeated.append((number, filename))
            continue
        read.answers[filename] = raw
        read.line_of[filename] = number
    return read


def _quoted(items: Sequence[str]) -> str:
    """The first :data:`QUOTED` items, each cut to :data:`QUOTED_CHARS` (a filename or a
    reason comes from the file), and how many more."""
    clipped = [i if len(i) <= QUOTED_CHARS else i[: QUOTED_CHARS - 3] + "..." for i in items]
    more = f" and {len(items) - QUOTED} more" if len(items) > QUOTED else ""
    return ", ".join(clipped[:QUOTED]) + more


@dataclass
class FileReport:
    """Everything wrong with a predictions file for one task and dataset."""

    file: AnswerFile
    unknown: list[str]
    missing: list[str]
    n_images: int
    counts: Counter
    # Per status that is not an answer (parse_error, refusal): (line, filename, why).
    failures: dict[str, list[tuple[int, str, str]]]
    # Images of the dataset whose line has ``raw`` null: (line, filename). The job takes
    # them as failed requests (status error), so they count with the missing ones.
    null_raws: list[tuple[int, str]] = field(default_factory=list)

    def unanswered(self) -> int:
        """Images the job will record without an answer: missing, or with ``raw`` null."""
        return len(self.missing) + len(self.null_raws)

    def stops(self, max_error_rate: float) -> bool:
        """The problems that stop a job: any unreadable, repeated or unknown line, more
        images missing or null than ``max_error_rate`` (a fraction of images) allows, as
        the job's own check of its records (novabench.predict.check_error_rate) counts."""
        too_many = self.n_images and self.unanswered() / self.n_images > max_error_rate
        return bool(self.file.unreadable or self.file.repeated or self.unknown or too_many)

    def problems(self) -> list[str]:
        """One phrase per kind of problem, in the file's words."""
        file, phrases = self.file, []
        if file.unreadable:
            lines = [f"line {n} {why}" for n, why in file.unreadable]
            phrases.append(f"{len(lines)} unreadable line(s): {_quoted(lines)}")
        if file.repeated:
            lines = [
                f"line {n} repeats {name} of line {file.line_of[name]}" for n, name in file.repeated
            ]
            phrases.append(f"{len(lines)} repeated filename(s): {_quoted(lines)}")
        if self.unknown:
            phrases.append(
                f"{len(self.unknown)} filename(s) not in the dataset: {_quoted(self.unknown)}"
            )
        if self.missing:
            phrases.append(
                f"{len(self.missing)} of {self.n_images} images missing: {_quoted(self.missing)}"
            )
        if self.null_raws:
            lines = [f"line {n} {name}" for n, name in self.null_raws]
            phrases.append(f"{len(lines)} answer(s) with raw null: {_quoted(lines)}")
        for status, label in FAILURES.items():
            found = self.failures.get(status) or []
            if found:
                lines = [f"line {n} {name} ({why})" for n, name, why in found]
                phrases.append(f"{len(found)} {label}: {_quoted(lines)}")
        return phrases

    def counts_text(self) -> str:
        return ", ".join(f"{self.counts[s]} {s}" for s in REPORT_STATUSES if self.counts[s])

    def error(self, model: str) -> NovaError:
        """The one-line error of a job that stops on this file."""
        return NovaError(
            f"models.{model}: {self.file.path}: "
            + "; ".join(self.problems())
            + f" (images: {self.counts_text()})",
            "correct the file (`novabench validate` lists every line), or set "
            f"models.{model}.max_error_rate (a fraction of images) to score absent images "
            "as missing" + (" and null answers as errors" if self.null_raws else ""),
        )


def file_report(
    file: AnswerFile,
    task: str,
    sizes: Mapping[str, tuple[int, int]] | None,
    box_format: str | None,
    options: Mapping[str, Any] | None = None,
) -> FileReport:
    """``file`` against the dataset's images of ``task`` (``sizes``: filename -> (width,
    height); None: no dataset, so nothing is unknown or missing and boxes are not read),
    each answer read as the reading stage will read it (``options``: the task's reading
    options, ``Task.reading_options``; None: its defaults)."""
    reader = importlib.import_module(ANSWER_READER)
    from novabench.tasks import get_task

    spec = get_task(task)
    known = file.answers if sizes is None else sizes
    missing = [name for name in known if name not in file.answers]
    counts: Counter = Counter(missing=len(missing))
    failures: dict[str, list[tuple[int, str, str]]] = {}
    null_raws = [
        (file.line_of[n], n) for n, raw in file.answers.items() if n in known and raw is None
    ]
    readable = sizes is not None or not spec.needs_box_format
    for name, raw in file.answers.items():
        if name not in known or not readable:
            continue
        record = {"filename": name, "raw": raw, "status": "ok"}
        record["request"] = {"box_format": box_format}
        size = None if sizes is None else sizes[name]
        answer = reader.read_answer(spec, record, size, options)
        counts[answer["status"]] += 1
        if answer["status"] in FAILURES:
            failures.setdefault(answer["status"], []).append(
                (file.line_of[name], name, str(answer["error"]))
            )
    return FileReport(
        file=file,
        unknown=[name for name in file.answers if name not in known],
        missing=missing,
        n_images=len(known),
        counts=counts if readable else Counter(),
        failures=failures,
        null_raws=null_raws,
    )


class Adapter(BaseAdapter):
    #: A file that lacks images is most often made for another subset or cut short: by
    #: default no image may be missing (models.<name>.max_error_rate allows some).
    max_error_rate: ClassVar[float] = 0.0

    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "paths": {
                "type": "object",
                "additionalProperties": {"type": "string", "minLength": 1},
            },
        },
    }

    @classmethod
    def input_file(cls, name: str, settings: dict, task: str) -> Path:
        return predictions_path(name, settings, task)

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        if not samples:
            return
        path = predictions_path(self.name, self.settings, samples[0].task)
        file = read_answer_file(path)
        sizes = {s.filename: (s.width, s.height) for s in samples}
        report = file_report(file, samples[0].task, sizes, self.model_cfg.get("box_format"))
        if report.stops(float(self.model_cfg.get("max_error_rate", self.max_error_rate))):
            raise report.error(self.name)
        for sample in samples:
            if sample.filename not in file.answers:
                yield Response(
                    raw=None, error=f"{sample.filename} is missing from {path}", missing=True
                )
            elif file.answers[sample.filename] is None:
                line = file.line_of[sample.filename]
                yield Response(raw=None, error=f"raw is null on line {line} of {path}")
            else:
                yield Response(raw=file.answers[sample.filename])
