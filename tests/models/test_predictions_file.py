"""The predictions_file adapter reads a file written elsewhere: every line that is not an
answer is named by its line in the file's report, and stops the job in one line (never a
traceback)."""

from __future__ import annotations

import re

import pytest

from novabench.errors import NovaError
from novabench.models.predictions_file import read_answer_file
from support import predict_from_file

GOOD = b'{"filename": "a.png", "raw": "fine"}\n'


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"filename": "b.png", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too"),
        (b'{"filename": "b.png", "raw": "caf\xe9"}', r"not UTF-8 \(byte 0xe9 at column 34\)"),
        (b'{"filename": ["b.png"], "raw": "x"}', "filename is a list, not a non-empty string"),
        (b'{"filename": "b.png", "raw": {"boxes": []}}', "raw is a dict, not a string or null"),
        (b'{"filename": "b.png"}', "no raw field"),
        (b"[1, 2]", "a JSON list, not an object with filename and raw"),
        (b"{broken", r"not valid JSON at column 2 \(Expecting property name"),
        (b'{"filename": "b.png", "raw": "cut', "not valid JSON: the line ends inside"),
        (b'{"filename": "b.png", "raw": ' + b"9" * 4301 + b"}", "an integer of over 4300 digits"),
    ],
)
def test_a_line_that_is_not_an_answer_is_named_by_its_line(tmp_path, line, problem):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(GOOD + b"\n" + line + b"\n")
    read = read_answer_file(path)
    assert read.answers == {"a.png": "fine"}
    ((number, why),) = read.unreadable
    assert number == 3 and re.match(problem, why), why


def test_the_prediction_job_stops_in_one_line_naming_file_and_line(dataset, tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"filename": "x.png", "raw": "caf\xe9"}\n')
    where = re.escape(f"models.m: {path}: 1 unreadable line(s): line 1 not UTF-8")
    with pytest.raises(NovaError, match=rf"^{where}"):
        predict_from_file(dataset, path, "captioning", tmp_path / "m.jsonl")
