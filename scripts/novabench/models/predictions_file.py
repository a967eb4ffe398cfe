"""Scores predictions made elsewhere, without running anything.

Settings: ``path`` (one JSONL file for every task the model runs) or ``paths``
(``{task: file}``). Each line needs ``filename`` and ``raw`` (the model's answer text,
exactly as the model wrote it); other fields are ignored. The answers are parsed with
the model's declared ``box_format`` like any other model's. An image missing from the
file gets status ``missing``; the job stops when any image is missing unless the model's
``max_error_rate`` (percent of images) allows that many.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from novabench.errors import ConfigError, NovaError
from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample
from novabench.records import json_lines


def predictions_path(name: str, settings: dict, task: str) -> Path:
    if "paths" in settings and task in settings["paths"]:
        return Path(settings["paths"][task])
    if "path" in settings:
        return Path(settings["path"])
    raise ConfigError(
        f"models.{name}.settings needs `path` or `paths.{task}` for the predictions_file adapter",
        "name the JSONL file holding this model's answers",
    )


def read_answers(path: Path) -> dict[str, str | None]:
    """``{filename: raw}`` of a predictions file; NovaError naming file and line at the
    first line that is not an answer (not UTF-8 JSON, too deep, fields of the wrong type)."""
    if not path.is_file():
        raise NovaError(f"predictions file {path} does not exist", "fix the model's settings.path")
    answers: dict[str, str | None] = {}
    for number, record, problem in json_lines(path):
        problem = problem or _answer_problem(record)
        if problem is not None:
            raise NovaError(
                f"{path}:{number}: {problem}", "see the prediction file format in README.md"
            )
        if record["filename"] in answers:
            raise NovaError(
                f"{path}:{number} repeats {record['filename']}", "keep one answer per image"
            )
        answers[record["filename"]] = record["raw"]
    return answers


def _answer_problem(record: Any) -> str | None:
    """Why a parsed line is not an answer (``filename`` a non-empty string, ``raw`` a string
    or null), or None."""
    if not isinstance(record, dict) or not {"filename", "raw"} <= set(record):
        return "not a JSON object with `filename` and `raw`"
    if not isinstance(record["filename"], str) or not record["filename"]:
        return f"filename must be a non-empty string, not {type(record['filename']).__name__}"
    if record["raw"] is not None and not isinstance(record["raw"], str):
        return f"raw must be a string or null, not {type(record['raw']).__name__}"
    return None


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
        answers = read_answers(path)
        wanted = {s.filename for s in samples}
        unknown = sorted(set(answers) - wanted)
        if unknown:
            raise NovaError(
                f"{path} answers {len(unknown)} image(s) that are not in the dataset, "
                f"e.g. {unknown[0]}",
                "check that the file was made for this dataset",
            )
        for sample in samples:
            if sample.filename not in answers:
                yield Response(
                    raw=None, error=f"{sample.filename} is missing from {path}", missing=True
                )
            else:
                yield Response(raw=answers[sample.filename])
