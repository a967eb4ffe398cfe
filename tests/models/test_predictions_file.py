"""The predictions_file adapter reads a file written elsewhere: every line that is not an
answer stops the job in one line naming file and line (never a traceback)."""

from __future__ import annotations

import re

import pytest

from novabench.errors import NovaError
from novabench.models.predictions_file import read_answers

GOOD = b'{"filename": "a.png", "raw": "fine"}\n'


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"filename": "b.png", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too"),
        (b'{"filename": "b.png", "raw": "caf\xe9"}', r"not UTF-8 \(byte 0xe9 at column 34\)"),
        (b'{"filename": ["b.png"], "raw": "x"}', "filename must be a non-empty string, not list"),
        (b'{"filename": "b.png", "raw": {"boxes": []}}', "raw must be a string or null, not dict"),
        (b'{"filename": "b.png"}', "not a JSON object with `filename` and `raw`"),
        (b"[1, 2]", "not a JSON object with `filename` and `raw`"),
        (b"{broken", r"not valid JSON \(Expecting property name"),
    ],
)
def test_a_line_that_is_not_an_answer_names_file_and_line(tmp_path, line, problem):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(GOOD + b"\n" + line + b"\n")
    with pytest.raises(NovaError, match=rf"^{re.escape(str(path))}:3: {problem}") as raised:
        read_answers(path)
    assert "\n" not in str(raised.value)


def test_the_prediction_job_stops_in_one_line_naming_file_and_line(dataset, tmp_path):
    from novabench.predict import run_predictions

    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"filename": "x.png", "raw": "caf\xe9"}\n')
    model = {
        "adapter": "predictions_file",
        "tasks": ["captioning"],
        "settings": {"path": str(path)},
    }
    with pytest.raises(NovaError, match=rf"^{re.escape(str(path))}:1: not UTF-8"):
        run_predictions(
            dataset=dataset,
            task="captioning",
            model_name="m",
            model_cfg=model,
            prompt_path=None,
            out=tmp_path / "m.jsonl",
            summary_out=tmp_path / "m.summary.json",
        )
