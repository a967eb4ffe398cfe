"""The error path of every rule script (`novabench.rules.run`).

A NovaError is a problem the user can fix: one line (problem; fix: ...) on stderr and in
the rule's log, no traceback, a non-zero exit. Any other exception is a bug: its
traceback is kept, in the log too.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from novabench.errors import ConfigError, NovaError
from novabench.rules import log, run
from support import ROOT, SNAKEMAKE
from upstream import write_current

ONE_LINE = "models.m.settings.path: no such file; fix: point it at the answers file"


def call(body, log_file: Path | None = None, output=()) -> int | None:
    """Run ``body`` as a rule script would; return the exit code (None: no exit)."""
    snakemake = SimpleNamespace(log=[] if log_file is None else [log_file], output=list(output))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        run(snakemake, body)
    except SystemExit as exc:
        return exc.code
    finally:
        # run() reconfigures the root logger for a one-shot process; undo it for the suite.
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    return None


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def only_line(text: str) -> str:
    found = lines(text)
    assert len(found) == 1, text
    return found[0]


def fail_with(error: Exception):
    def body(smk):
        raise error

    return body


def test_a_user_error_is_one_line_on_stderr_and_in_the_log(tmp_path, capsys):
    log_file = tmp_path / "predict.log"
    error = ConfigError("models.m.settings.path: no such file", "point it at the answers file")
    code = call(fail_with(error), log_file)
    assert code not in (None, 0)
    err = only_line(capsys.readouterr().err)
    logged = only_line(log_file.read_text())
    assert err == logged
    assert err.endswith(f"ERROR novabench: {ONE_LINE}")


def test_the_cause_of_a_user_error_is_not_shown(tmp_path, capsys):
    def body(smk):
        try:
            json.loads("{not json")
        except json.JSONDecodeError as exc:
            raise NovaError("answers.jsonl:1 is not JSON", "fix line 1") from exc

    log_file = tmp_path / "rule.log"
    assert call(body, log_file) == 1
    for text in (capsys.readouterr().err, log_file.read_text()):
        line = only_line(text)
        assert line.endswith("answers.jsonl:1 is not JSON; fix: fix line 1")
        assert "Traceback" not in text and "JSONDecodeError" not in text


def test_a_message_over_several_lines_is_printed_on_one(tmp_path, capsys):
    code = call(fail_with(NovaError("the dataset\n  has no images", "build it\nagain")))
    assert code == 1
    line = only_line(capsys.readouterr().err)
    assert line.endswith("the dataset has no images; fix: build it again")


def test_lines_logged_before_the_error_stay_and_the_error_is_the_last(tmp_path, capsys):
    def body(smk):
        log.info("loaded 4 images")
        raise NovaError("2 of 4 requests failed", "re-run")

    log_file = tmp_path / "rule.log"
    log_file.write_text("a previous run's log\n")
    assert call(body, log_file) == 1
    logged = lines(log_file.read_text())
    assert len(logged) == 2  # the previous run's log was replaced
    assert logged[0].endswith("INFO novabench: loaded 4 images")
    assert logged[1].endswith("ERROR novabench: 2 of 4 requests failed; fix: re-run")
    assert lines(capsys.readouterr().err) == logged


def test_a_bug_keeps_its_traceback_in_the_log_and_exits_non_zero(tmp_path, capsys):
    def body(smk):
        return {}["missing key"]

    log_file = tmp_path / "rule.log"
    code = call(body, log_file)
    assert code not in (None, 0)
    for text in (capsys.readouterr().err, log_file.read_text()):
        assert "ERROR novabench: unexpected failure" in text
        assert "Traceback (most recent call last)" in text
        assert "KeyError: 'missing key'" in text
        assert len(lines(text)) > 3


def test_a_body_that_succeeds_does_not_exit(tmp_path, capsys):
    seen = []
    log_file = tmp_path / "rule.log"
    assert call(lambda smk: seen.append(smk.log), log_file) is None
    assert seen == [[log_file]]
    assert log_file.read_text() == ""
    assert capsys.readouterr().err == ""


# --- the same through Snakemake, as a user sees it ------------------------------------------


@pytest.mark.slow
def test_a_rule_script_user_error_through_snakemake(tmp_path):
    """A predictions_file model whose answers file has a malformed line."""
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        json.dumps({"filename": "case0001_001.png", "raw": "Axial FLAIR image."})
        + '\n{"filename": "case0001_002.png", "raw": oops}\n'
    )
    config = tmp_path / "config.yaml"
    model = {"adapter": "predictions_file", "tasks": ["captioning"]}
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": {"source": "local", "local_path": str(write_current(tmp_path / "repo"))},
                "models": {"bad": {**model, "settings": {"path": str(answers)}}},
            }
        )
    )
    workdir = tmp_path / "work"
    target = "results/local-repo/predictions/captioning/bad.jsonl"
    result = subprocess.run(
        [*SNAKEMAKE, target, "-d", str(workdir), "--cores", "1", "--configfile", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-3000:]
    log = (workdir / "results/local-repo/logs/predict/captioning/bad.log").read_text()
    # The progress line says where the job stopped; the problem is one ERROR line.
    logged = only_line("\n".join(line for line in log.splitlines() if " ERROR " in line))
    assert "captioning/bad: stopped at 0/4" in log
    # The whole file in one report: the unreadable line and the images it lacks.
    report = (
        f"{answers}: 1 unreadable line(s): line 2 not valid JSON at column 41 (Expecting "
        "value); 3 of 4 images missing: case0001_002.png, case0002_001.png, case0003_001.png"
    )
    assert f"ERROR novabench: models.bad: {report} (images: 1 ok, 3 missing); fix: " in logged
    assert logged in output.splitlines()
    assert "Traceback" not in output
    assert not (workdir / target).exists()
    # `novabench score` stops on the same file at the same gate, in the same words.
    dataset = workdir / "results/local-repo/dataset/nova.parquet"
    score = ["score", "--task", "captioning", "--predictions", str(answers)]
    result = subprocess.run(
        [sys.executable, "-m", "novabench", *score, "--dataset", str(dataset)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.startswith(f"novabench: error: {report}; fix: "), result.stderr


def test_a_full_disk_anywhere_in_a_job_is_one_line_naming_the_folder(tmp_path, capsys):
    full = tmp_path / "figures" / "metrics.png"
    full.parent.mkdir()
    full.symlink_to("/dev/full")

    def body(smk):
        with open(full, "wb") as handle:  # a writer that does not go through novabench.io
            handle.write(b"\0" * 100_000)

    assert call(body, tmp_path / "figure.log", output=[full]) == 1
    line = only_line(capsys.readouterr().err)
    assert f"ERROR novabench: no space left on the device of {full.parent} (" in line
    assert line.endswith("only the failed jobs re-run)")
