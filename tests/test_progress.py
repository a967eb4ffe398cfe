"""Progress of long jobs: a bar on the terminal Snakemake shows, tenths in the log file."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from novabench import progress
from novabench.rules import run
from support import predict_from_file


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run_rule(body, log_file: Path, stderr: io.StringIO, monkeypatch) -> None:
    """``body`` as a rule script runs it: logging set up by ``rules.run``."""
    monkeypatch.setattr(sys, "stderr", stderr)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        run(SimpleNamespace(log=[log_file]), body)
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def count_items(smk) -> None:
    meter = progress.Progress(50, "work")
    for i in range(50):
        meter.update("odd" if i % 2 else "even")
    meter.close()


TENTHS = [
    f"work: {5 * k}/50 {{'even': {(5 * k + 1) // 2}, 'odd': {5 * k // 2}}}" for k in range(1, 11)
]


def messages(log_file: Path) -> list[str]:
    return [line.split(": ", 1)[1] for line in log_file.read_text().splitlines()]


def test_on_a_terminal_the_bar_shows_and_the_log_file_gets_tenths(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_S", 0)
    terminal, log_file = Terminal(), tmp_path / "job.log"
    run_rule(count_items, log_file, terminal, monkeypatch)
    assert messages(log_file) == [*TENTHS, "work: done, {'even': 25, 'odd': 25}"]
    shown = terminal.getvalue()
    assert re.search(r"work: 100%\|.*\| 50/50 \[.*img/s, even=25, odd=25\]", shown), shown
    # the tenths are on the bar already: not repeated on the terminal, only the result
    assert "work: 5/50" not in shown
    assert shown.count("work: done, {'even': 25, 'odd': 25}") == 1


def test_without_a_terminal_the_tenths_go_to_stderr_too(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_S", 0)
    stderr, log_file = io.StringIO(), tmp_path / "job.log"
    run_rule(count_items, log_file, stderr, monkeypatch)
    assert messages(log_file) == [*TENTHS, "work: done, {'even': 25, 'odd': 25}"]
    assert [line.split(": ", 1)[1] for line in stderr.getvalue().splitlines()] == messages(
        log_file
    )  # no bar characters in a file


def test_a_quick_job_logs_only_its_result(tmp_path, monkeypatch):
    terminal, log_file = Terminal(), tmp_path / "job.log"
    run_rule(count_items, log_file, terminal, monkeypatch)  # well within QUIET_S
    assert messages(log_file) == ["work: done, {'even': 25, 'odd': 25}"]
    assert terminal.getvalue().strip().endswith("work: done, {'even': 25, 'odd': 25}")
    assert "50/50" not in terminal.getvalue()  # no bar flashed


def test_a_failed_job_says_where_it_stopped(tmp_path, monkeypatch):
    def fail_halfway(smk):
        meter = progress.Progress(10, "work")
        try:
            for _ in range(5):
                meter.update("ok")
            raise ValueError("boom")
        finally:
            meter.close()

    log_file = tmp_path / "job.log"
    with pytest.raises(SystemExit):
        run_rule(fail_halfway, log_file, io.StringIO(), monkeypatch)
    text = log_file.read_text()
    assert "INFO novabench: work: stopped at 5/10, {'ok': 5}\n" in text
    assert "work: done" not in text and "ValueError: boom" in text


def test_a_prediction_job_counts_statuses_on_its_bar(dataset, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_S", 0)
    answers = tmp_path / "answers.jsonl"
    lines = [
        {"filename": "case0001_001.png", "raw": "Axial FLAIR image."},
        {"filename": "case0001_002.png", "raw": ""},
        {"filename": "case0002_001.png", "raw": "Normal."},
    ]
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))

    def predict(smk):
        predict_from_file(dataset, answers, "captioning", tmp_path / "p.jsonl", max_error_rate=0.25)

    terminal, log_file = Terminal(), tmp_path / "predict.log"
    run_rule(predict, log_file, terminal, monkeypatch)
    # How the requests went: the empty answer is the reading stage's to find unreadable.
    assert messages(log_file)[-1] == "captioning/m: done, {'ok': 3, 'missing': 1}"
    assert "4/4 [" in terminal.getvalue() and "missing=1" in terminal.getvalue()
