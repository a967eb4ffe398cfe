"""Scores predictions made elsewhere, without running anything.

Settings: ``path`` (one JSONL file for every task the model runs) or ``paths``
(``{task: file}``). Each line needs ``filename`` and ``raw`` (the model's answer text,
exactly as the model wrote it); other fields are ignored. The answers are parsed with
the model's declared ``box_format`` like any other model's. An image missing from the
file gets status ``missing``; the job stops when any image is missing unless the model's
``max_error_rate`` (percent of images) allows that many.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from novabench.errors import ConfigError, NovaError
from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample


def predictions_path(name: str, settings: dict, task: str) -> Path:
    if "paths" in settings and task in settings["paths"]:
        return Path(settings["paths"][task])
    if "path" in settings:
        return Path(settings["path"])
    raise ConfigError(
        f"models.{name}.settings needs `path` or `paths.{task}` for the predictions_file adapter",
        "name the JSONL file holding this model's answers",
    )


def read_answers(path: Path) -> dict[str, str]:
    if not path.is_file():
        raise NovaError(f"predictions file {path} does not exist", "fix the model's settings.path")
    answers: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                filename, raw = record["filename"], record["raw"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise NovaError(
                    f"{path}:{number} is not a JSON object with `filename` and `raw` ({exc})",
                    "see the prediction file format in README.md",
                ) from exc
            if filename in answers:
                raise NovaError(f"{path}:{number} repeats {filename}", "keep one answer per image")
            answers[str(filename)] = raw if raw is None else str(raw)
    return answers


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
