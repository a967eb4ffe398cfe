"""Every number follows its code: an edit re-plans exactly the jobs that run it.

A copy of the checkout runs the sample once; then one file at a time is edited (content,
not only its time), a dry run must plan exactly the jobs whose code or data changed and
those reading their outputs, and restoring the file makes the dry run a no-op again.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

import pytest

import support
from novabench.code_fingerprint import code_fingerprint, syntax_digest
from support import ROOT

pytestmark = pytest.mark.slow

# What a code edit may re-run downstream of the jobs it touches directly.
REPORT_JOBS = {
    "statistics",
    "tables",
    "leaderboard",
    "manifest",
    "figure_metrics",
    "figure_breakdown",
    "figure_task",
    "all",
}


def snakemake(checkout: Path, *args: str) -> str:
    result = support.snakemake(checkout, *args, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout + result.stderr


def planned(checkout: Path) -> set[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run plans; empty when nothing is to be done."""
    output = snakemake(checkout, "-n")
    jobs = set()
    for block in re.split(r"^(?=rule |checkpoint )", output, flags=re.M)[1:]:
        rule = block.split(":", 1)[0].split()[-1]
        wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        jobs.add((rule, wildcards.group(1) if wildcards else ""))
    return jobs


def rules(jobs: set[tuple[str, str]]) -> set[str]:
    return {rule for rule, _ in jobs}


@pytest.fixture(scope="module")
def checkout(sample_checkout):
    """A copy of the checkout after a full sample run."""
    assert planned(sample_checkout) == set()
    return sample_checkout


def module_file(checkout: Path, module: str) -> Path:
    path = checkout / "scripts" / Path(*module.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


class edited:
    """A file with one more line, for the length of a ``with`` block (a module's line is
    code: a comment counts for nothing, see below)."""

    def __init__(self, path: Path, line: str = "EDITED = True\n"):
        self.path, self.line = path, line

    def __enter__(self):
        self.original = self.path.read_bytes()
        self.path.write_bytes(self.original + self.line.encode())
        return self.path

    def __exit__(self, *exc):
        self.path.write_bytes(self.original)


class rewritten(edited):
    """A file with its first ``old`` replaced by ``new``, for the length of a ``with`` block."""

    def __init__(self, path: Path, old: str, new: str):
        self.path, self.old, self.new = path, old, new

    def __enter__(self):
        self.original = self.path.read_bytes()
        text = self.original.decode()
        assert self.old in text, f"{self.old!r} not in {self.path}"
        self.path.write_text(text.replace(self.old, self.new, 1))
        return self.path


JUDGE_MODULES = (
    "novabench.judges.diagnosis_matcher",
    "novabench.judges.keywords",
    "novabench.judges.cascade",
    "novabench.judges.llm",
)


@pytest.mark.parametrize("module", JUDGE_MODULES)
def test_editing_a_judges_comments_and_docstrings_plans_nothing(checkout, module):
    path = module_file(checkout, module)
    with (
        rewritten(path, '"""', '"""Reworded, at more length.\n\n'),
        edited(path, "\n# A closing comment.\n"),
    ):
        assert planned(checkout) == set()


def test_editing_a_localization_scorer_rescores_localization_only(checkout):
    with edited(module_file(checkout, "novabench.tasks.localization.metrics")):
        jobs = planned(checkout)
    assert "predict" not in rules(jobs)
    scores = {w for rule, w in jobs if rule == "score"}
    assert scores and all(w.startswith("task=localization,") for w in scores)
    assert {rule for rule, _ in jobs} - REPORT_JOBS <= {"score", "score_rater"}
    assert ("score_rater", "task=localization, rater=rater1") in jobs
    assert planned(checkout) == set()


def test_editing_a_line_of_the_matchers_synonyms_rescores_diagnosis_only(checkout):
    graph_root = checkout / "scripts"
    (synonyms,) = graph_root.rglob("diagnosis_synonyms.yaml")
    with rewritten(synonyms, "  - possibly\n", "  - possibly\n  - conceivably\n"):
        jobs = planned(checkout)
    # The judge runs when answers are read; scoring counts the new verdicts.
    assert {(r, w) for r, w in jobs if r in ("predict", "read", "score", "score_rater")} == {
        ("read", "task=diagnosis, judge=matcher, model=gold"),
        ("read", "task=diagnosis, judge=matcher, model=retrieval"),
        ("score", "task=diagnosis, model=gold"),
        ("score", "task=diagnosis, model=retrieval"),
    }
    assert planned(checkout) == set()


def test_editing_the_diagnosis_parser_rereads_diagnosis_and_predicts_nothing(checkout):
    with edited(module_file(checkout, "novabench.tasks.diagnosis.parser")):
        jobs = planned(checkout)
    assert "predict" not in rules(jobs)
    assert {(r, w) for r, w in jobs if r in ("read", "score", "score_rater")} == {
        ("read", "task=diagnosis, judge=matcher, model=gold"),
        ("read", "task=diagnosis, judge=matcher, model=retrieval"),
        ("score", "task=diagnosis, model=gold"),
        ("score", "task=diagnosis, model=retrieval"),
    }
    assert rules(jobs) - REPORT_JOBS == {"read", "score"}
    assert planned(checkout) == set()


def test_editing_the_captioning_parser_rereads_captioning_and_predicts_nothing(checkout):
    with edited(module_file(checkout, "novabench.tasks.captioning.parser")):
        jobs = planned(checkout)
    # Only a diagnosis chained on captioning's answers (tasks.diagnosis.findings:
    # captioning) parses them when predicting; the sample's diagnosis reads the reference.
    assert "predict" not in rules(jobs)
    assert {(r, w) for r, w in jobs if r in ("read", "score", "score_rater")} == {
        ("read", "task=captioning, judge=keywords, model=classical"),
        ("read", "task=captioning, judge=keywords, model=gold"),
        ("score", "task=captioning, model=classical"),
        ("score", "task=captioning, model=gold"),
    }
    assert rules(jobs) - REPORT_JOBS == {"read", "score"}
    assert planned(checkout) == set()


def test_editing_a_diagnosis_scorer_rescores_without_rereading(checkout):
    with edited(module_file(checkout, "novabench.tasks.diagnosis.metrics")):
        jobs = planned(checkout)
    assert {(r, w) for r, w in jobs if r in ("predict", "read", "score")} == {
        ("score", "task=diagnosis, model=gold"),
        ("score", "task=diagnosis, model=retrieval"),
    }
    assert planned(checkout) == set()


def test_editing_the_judge_figures_rescores_the_judged_tasks_only(checkout):
    with edited(checkout / "validation" / "judge_figures.json", "\n"):
        jobs = planned(checkout)
    # Looked up when scoring: the verdicts stand.
    assert {(r, w) for r, w in jobs if r in ("predict", "read", "score", "score_rater")} == {
        ("score", "task=captioning, model=classical"),
        ("score", "task=captioning, model=gold"),
        ("score", "task=diagnosis, model=gold"),
        ("score", "task=diagnosis, model=retrieval"),
    }
    assert planned(checkout) == set()


def test_editing_figure_code_redraws_figures_and_the_page_of_their_thumbnails_only(checkout):
    with edited(module_file(checkout, "novabench.report.figures")):
        jobs = planned(checkout)
    figures = {"figure_metrics", "figure_breakdown", "figure_task"}
    assert rules(jobs) <= {*figures, "leaderboard", "all"}
    assert {"figure_task", "leaderboard"} <= rules(jobs)
    assert planned(checkout) == set()


def test_editing_statistics_code_reruns_statistics_not_scoring(checkout):
    with edited(module_file(checkout, "novabench.report.bootstrap")):
        jobs = planned(checkout)
    assert {"statistics", "tables"} <= rules(jobs)
    assert not {"predict", "score", "score_rater", "dataset", "sample"} & rules(jobs)
    assert planned(checkout) == set()


def test_editing_leaderboard_code_rewrites_the_leaderboard_only(checkout):
    with edited(module_file(checkout, "novabench.report.leaderboard")):
        assert rules(planned(checkout)) == {"leaderboard", "all"}
    assert planned(checkout) == set()


def test_editing_a_tasks_figures_redraws_that_tasks_figures_only(checkout):
    with edited(module_file(checkout, "novabench.tasks.diagnosis.figures")):
        assert planned(checkout) == {
            ("figure_task", "task=diagnosis, family=labels"),
            ("leaderboard", ""),  # it embeds the figure's thumbnail
            ("all", ""),
        }
    assert planned(checkout) == set()


def test_editing_a_tasks_replicates_reruns_its_statistics_only(checkout):
    with edited(module_file(checkout, "novabench.tasks.captioning.bootstrap")):
        jobs = planned(checkout)
    assert {w for rule, w in jobs if rule == "statistics"} == {"task=captioning"}
    assert not {"predict", "score", "score_rater", "figure_task"} & rules(jobs)
    assert planned(checkout) == set()


def test_editing_the_classical_detector_reruns_its_predictions_only(checkout):
    with edited(module_file(checkout, "novabench.models.classical.detector")):
        jobs = planned(checkout)
    predictions = {w for rule, w in jobs if rule == "predict"}
    assert predictions == {"task=localization, model=classical"} or predictions == {
        "task=localization, model=classical",
        "task=captioning, model=classical",
    }
    assert planned(checkout) == set()


def test_a_moved_checkout_reruns_nothing(checkout, tmp_path):
    moved = tmp_path / "moved" / "nova"
    moved.parent.mkdir()
    checkout.rename(moved)
    try:
        assert planned(moved) == set()
    finally:
        moved.rename(checkout)


def test_score_files_and_the_manifest_record_the_code(checkout):
    from novabench.config import plan_from_files

    plan = plan_from_files(ROOT, [ROOT / "config" / "config.yaml"])
    results = checkout / "results" / "sample"
    score = json.loads((results / "scores" / "diagnosis" / "gold.json").read_text())
    # The copy's files are byte-identical to this checkout's: the same fingerprint.
    assert score["code"] == plan.code("score", task="diagnosis")
    assert score["judge"]["code"] == code_fingerprint("novabench.judges.diagnosis_matcher")
    verdicts = json.loads(
        (results / "verdicts" / "diagnosis" / "matcher" / "gold.summary.json").read_text()
    )
    assert verdicts["code"] == plan.code("read", task="diagnosis", model="gold", judge="matcher")
    assert verdicts["identity"] == score["judge"] and verdicts["judge"] == "matcher"
    summary_file = results / "predictions" / "localization" / "classical.summary.json"
    summary = json.loads(summary_file.read_text())
    assert summary["code"] == plan.code("predict", task="localization", model="classical")
    manifest = json.loads((results / "manifest.json").read_text())
    files = manifest["code"]["files"]
    # A module by its syntax (comments and docstrings out), a data file by its bytes.
    entry = ast.parse((ROOT / "scripts" / "score.py").read_bytes())
    assert files["score.py"] == syntax_digest(entry)
    (synonyms,) = (ROOT / "scripts").rglob("diagnosis_synonyms.yaml")
    data = next(v for k, v in files.items() if k.endswith("/diagnosis_synonyms.yaml"))
    assert data == hashlib.sha256(synonyms.read_bytes()).hexdigest()
    assert any(name.startswith("novabench/models/classical") for name in files)


def test_a_rerun_after_a_code_edit_prints_no_line_over_500_characters(checkout):
    """Snakemake prints each job's files and reason: the manifest's code listing shows as
    a digest, and the lists of its many inputs are shortened (novabench.snakemake_log)."""
    with edited(module_file(checkout, "novabench.tasks.captioning.bootstrap")):
        output = snakemake(checkout)
    # The manifest's code listing changed: its reason names the parameter's old and new text.
    manifest = output[output.index("rule manifest:") :].splitlines()
    reason = next(line for line in manifest if line.lstrip().startswith("reason:"))
    assert "Params have changed since last execution" in reason
    longest = max(output.splitlines(), key=len)
    assert len(longest) <= 500, longest[:500]
    snakemake(checkout)  # the manifest of the restored code, for the next tests
    assert planned(checkout) == set()
