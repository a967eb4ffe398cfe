"""Plotting is separate from scoring: editing figure code re-plans only figure jobs.

A copy of the workflow and a working directory in which every output of the DAG exists
and is up to date; then the mtime of one code file is moved forward and a dry run must
plan exactly the jobs that use it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from novabench.report.breakdowns import AXES as BREAKDOWN_AXES

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(workflow: Path, workdir: Path, *args: str) -> str:
    result = subprocess.run(
        [*SNAKEMAKE, "-s", str(workflow / "Snakefile"), "-d", str(workdir), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def planned_jobs(output: str) -> dict[str, int]:
    """The "Job stats" table of a dry run; empty when there is nothing to do."""
    if "Job stats:" not in output:
        return {}
    table = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.fixture(scope="module")
def up_to_date(tmp_path_factory):
    root = tmp_path_factory.mktemp("dag")
    workflow, workdir = root / "workflow", root / "work"
    ignore = shutil.ignore_patterns("__pycache__", ".snakemake", "results")
    workflow.mkdir()
    shutil.copy2(ROOT / "Snakefile", workflow / "Snakefile")
    for folder in ("workflow", "scripts", "config", "envs"):
        shutil.copytree(ROOT / folder, workflow / folder, ignore=ignore)
    # The dataset checkpoint's outputs decide the rater jobs; everything else is listed
    # by --summary and created empty.
    dataset = workdir / "results" / "sample" / "dataset"
    dataset.mkdir(parents=True)
    (dataset / "manifest.json").write_text(json.dumps({"raters": ["rater1", "rater2"]}))
    (dataset / "nova.parquet").touch()
    source = workdir / "results" / "sources" / "sample" / "data" / "nova-v1.parquet"
    source.parent.mkdir(parents=True)
    source.touch()
    (dataset / "tasks").mkdir()
    for task in ("localization", "captioning", "diagnosis"):
        (dataset / "tasks" / f"{task}.json").touch()
    summary = snakemake(workflow, workdir, "--summary")
    for line in summary.splitlines():
        fields = line.split("\t")
        if len(fields) > 4 and fields[4] == "missing":
            path = workdir / fields[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    now = time.time()
    for path in workflow.rglob("*"):
        os.utime(path, (now - 100, now - 100))
    for path in (workdir / "results").rglob("*"):
        os.utime(path, (now, now))
    assert planned_jobs(snakemake(workflow, workdir, "-n")) == {}
    return workflow, workdir, now


def edit(path: Path, when: float) -> None:
    os.utime(path, (when, when))


def test_editing_figure_code_plans_only_figure_jobs(up_to_date):
    workflow, workdir, now = up_to_date
    edit(workflow / "scripts" / "novabench" / "report" / "figures.py", now + 100)
    jobs = planned_jobs(snakemake(workflow, workdir, "-n"))
    assert jobs, "a figure change must re-plan the figures"
    assert set(jobs) - {"all"} <= {"figure_metrics", "figure_breakdown", "figure_task"}
    # one job per figure family and task, none per image: localization's iou, lesion_size
    # and examples and diagnosis' labels
    assert jobs["figure_task"] == 4
    # and one breakdown figure per axis
    assert jobs["figure_breakdown"] == len(BREAKDOWN_AXES) * jobs["figure_metrics"]
    assert jobs["figure_metrics"] <= 3


def test_editing_statistics_code_replans_statistics_not_scoring(up_to_date):
    workflow, workdir, now = up_to_date
    edit(workflow / "scripts" / "novabench" / "report" / "bootstrap.py", now + 200)
    jobs = planned_jobs(snakemake(workflow, workdir, "-n"))
    assert "statistics" in jobs and "tables" in jobs
    assert not {"predict", "score", "score_rater", "dataset", "sample"} & set(jobs)


def test_editing_leaderboard_code_replans_only_the_leaderboard(up_to_date):
    workflow, workdir, now = up_to_date
    # Newer than the earlier tests' edits, so that only this one is out of date.
    for path in (workdir / "results").rglob("*"):
        os.utime(path, (now + 250, now + 250))
    edit(workflow / "scripts" / "novabench" / "report" / "leaderboard.py", now + 300)
    assert planned_jobs(snakemake(workflow, workdir, "-n")) == {"leaderboard": 1, "all": 1}


def test_editing_a_task_folder_replans_that_task_only(up_to_date):
    workflow, workdir, now = up_to_date
    tasks = workflow / "scripts" / "novabench" / "tasks"
    for path in (workdir / "results").rglob("*"):
        os.utime(path, (now + 350, now + 350))
    # A task's own figures: its figure families only (diagnosis: labels).
    edit(tasks / "diagnosis" / "figures.py", now + 400)
    assert planned_jobs(snakemake(workflow, workdir, "-n")) == {"figure_task": 1, "all": 1}
    for path in (workdir / "results").rglob("*"):
        os.utime(path, (now + 450, now + 450))
    # Its replicates: its statistics and what reads them, not another task's.
    edit(tasks / "captioning" / "bootstrap.py", now + 500)
    jobs = planned_jobs(snakemake(workflow, workdir, "-n"))
    assert jobs["statistics"] == 1 and "figure_task" not in jobs
    assert not {"predict", "score", "score_rater"} & set(jobs)


# --- the HTML report's captions ----------------------------------------------------------


def render_caption(name: str, task: str, family: str = "iou", label: str = "") -> str:
    """A caption as Snakemake's report renders it: Jinja, then docutils to HTML."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    config = {
        "dataset": {"source": "sample"},
        "reporting": {
            "bootstrap": {"resamples": 1000, "seed": 1, "confidence": 0.95},
            "agreement_judges": {"diagnosis": ["matcher-strict"]},
        },
    }
    snakemake = SimpleNamespace(
        config=config,
        wildcards=SimpleNamespace(task=task, family=family, axis="category"),
        params=SimpleNamespace(dataset_label=label),
    )
    text = (ROOT / "workflow" / "report" / name).read_text()
    env = Environment(trim_blocks=True, lstrip_blocks=True)  # Snakemake's settings
    return publish_parts(env.from_string(text).render(snakemake=snakemake), writer="html")["body"]


@pytest.mark.parametrize("task", ["localization", "captioning", "diagnosis"])
def test_captions_name_the_dataset_and_link_nothing(task, tmp_path):
    from novabench.report.labels import DatasetLabel

    (tmp_path / "manifest.json").write_text(
        json.dumps({"source": "hf", "repo_id": "c-i-ber/Nova", "revision": "v1.0"})
    )
    label = DatasetLabel(tmp_path / "manifest.json")
    names = [p.name for p in (ROOT / "workflow" / "report").glob("*.rst")]
    families = ["iou", "lesion_size", "examples", "labels", "other"]
    for name in names:
        for family in families if name == "task_figures.rst" else ["-"]:
            html = render_caption(name, task, family, label)
            assert "mailto:" not in html, (name, family)  # "Hit@30" is not an address
            if name not in ("workflow.rst", "manifest.rst"):
                assert "NOVA c-i-ber/Nova &#64; v1.0" in html, (name, family)
    metrics = render_caption("metrics.rst", task, label="x")
    assert ("TP30" in metrics) == (task == "localization")
    breakdown = render_caption("breakdown.rst", task, label="x")
    headline = {"localization": "Hit&#64;30", "captioning": "Clinical F1", "diagnosis": "Top-1"}
    assert f"<p>{headline[task]}" in breakdown


def test_the_overview_says_when_the_numbers_are_not_nova():
    html = render_caption("workflow.rst", "localization")
    assert "<strong>synthetic sample, not NOVA</strong>" in html
