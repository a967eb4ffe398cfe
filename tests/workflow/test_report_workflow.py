"""The HTML report's captions, and what the judge agreement job reads (which jobs a code edit
re-plans: tests/workflow/test_code_reruns.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from support import ROOT, snakemake

# --- the HTML report's captions ----------------------------------------------------------


# The figure family of a caption template, where it is one template's only one.
FIGURE_FAMILY = {"metrics.rst": "metrics", "breakdown.rst": "breakdown"}


def render_caption(name: str, task: str, family: str = "iou", label: str = "") -> str:
    """A caption as Snakemake's report renders it: Jinja, then docutils to HTML."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    from novabench.report.labels import TaskCaption

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
        # The figure rules' caption: the task's own text of the figure (common.smk).
        params=SimpleNamespace(
            dataset_label=label,
            caption=TaskCaption(task, FIGURE_FAMILY.get(name, family), label),
        ),
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


# --- judge agreement reads verdict files -------------------------------------------------


def agreement_dry_run(workdir: Path, config: Path) -> tuple[subprocess.CompletedProcess, str]:
    """A dry run of the judge agreement table in ``workdir`` with ``config`` added: the run,
    and the inputs it lists for the agreement job."""
    target = "results/sample/tables/judge_agreement.csv"
    result = snakemake(workdir, "-n", target, "--configfile", str(config), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (inputs,) = re.findall(r"rule judge_agreement:\n\s+input: (.*)\n", result.stdout)
    return result, inputs


def same_inputs(listed: str, expected: list[str]) -> bool:
    """Whether the job line's inputs are ``expected``: all of them, or (a long list the
    workflow's log filter shortens) its first ones and ``and N more`` for the rest."""
    shown = listed.split(", ")
    more = re.fullmatch(r"and (\d+) more", shown[-1])
    if more is None:
        return shown == expected
    kept = shown[:-1]
    return kept == expected[: len(kept)] and len(kept) + int(more.group(1)) == len(expected)


def test_judge_agreement_asks_the_read_rule_for_every_judges_verdicts(tmp_path):
    """The agreement job's inputs are the verdicts of the task's judge and of each listed
    judge on every model, which `read` jobs make; it reads no prediction file and waits
    for no score."""
    config = tmp_path / "agreement.yaml"
    config.write_text(
        "judges: {matcher-2: {kind: diagnosis-matcher, settings: {embedding_fallback: false}}}\n"
        "reporting: {agreement_judges: {diagnosis: [matcher-2]}}\n"
    )
    result, inputs = agreement_dry_run(tmp_path, config)
    expected = [
        f"results/sample/verdicts/diagnosis/{judge}/{model}.jsonl"
        for model in ("gold", "retrieval")
        for judge in ("matcher", "matcher-2")
    ]
    assert same_inputs(inputs, ["results/sample/dataset/manifest.json", *expected]), inputs
    reads = set(
        re.findall(r"wildcards: task=diagnosis, judge=([\w-]+), model=(\w+)", result.stdout)
    )
    assert reads == {(j, m) for j in ("matcher", "matcher-2") for m in ("gold", "retrieval")}
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, re.MULTILINE))
    assert "score" not in counts and "statistics" not in counts


def test_agreement_judges_read_the_models_of_earlier_runs_whose_predictions_are_there(tmp_path):
    """`reporting.models: all` shows models scored by earlier runs: an agreement judge
    reads their predictions (their own judge's verdicts stay as they are); a model whose
    predictions are gone is left out of agreement, in one line."""
    results = tmp_path / "results" / "sample"
    for model in ("other", "gone"):
        for name in (
            f"scores/captioning/{model}.json",
            f"scores/captioning/{model}.images.csv",
            f"verdicts/captioning/keywords/{model}.jsonl",
        ):
            (results / name).parent.mkdir(parents=True, exist_ok=True)
            (results / name).write_text("{}\n")
    (results / "predictions" / "captioning").mkdir(parents=True)
    (results / "predictions" / "captioning" / "other.jsonl").write_text("{}\n")
    config = tmp_path / "agreement.yaml"
    config.write_text(
        "judges: {keywords2: {kind: keyword-lexicon}}\n"
        "reporting: {models: all, agreement_judges: {captioning: [keywords2]}}\n"
    )
    result, inputs = agreement_dry_run(tmp_path, config)
    expected = [
        f"results/sample/verdicts/captioning/{judge}/{model}.jsonl"
        for model in ("gold", "classical", "other")
        for judge in ("keywords", "keywords2")
    ]
    assert same_inputs(inputs, ["results/sample/dataset/manifest.json", *expected]), inputs
    reads = set(
        re.findall(r"wildcards: task=captioning, judge=([\w-]+), model=(\w+)", result.stdout)
    )
    assert ("keywords2", "other") in reads and ("keywords", "other") not in reads
    assert not {judge for judge, model in reads if model == "gone"}
    assert (
        "Judge agreement leaves out 1 model(s) of earlier runs whose prediction files are "
        "gone, so that the agreement judges cannot read them: captioning/gone."
    ) in result.stdout + result.stderr
