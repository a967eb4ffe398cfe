"""The task registry: a task registered from inside the test suite runs through predict,
score, statistics and tables with no other module edited (the proof that tasks are data).

The extra task is a yes/no question, "is there an anomaly in this image?", scored by
accuracy against "the image has a gold box".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from novabench.errors import ConfigError
from novabench.plugins import load_plugins
from novabench.predict import run_predictions
from novabench.records import read_predictions, read_verdicts
from novabench.report.bootstrap import weighted_mean
from novabench.report.inputs import report_models
from novabench.report.statistics import write_task_statistics
from novabench.report.tables import write_all_tables
from novabench.score import score_predictions
from novabench.tasks import (
    get_task,
    register_task,
    task_module,
    task_names,
    unregister_task,
)
from support import ROOT
from upstream import IMAGES

# The toy task's folder (tests/plugins/anomaly/): a plug-in outside the package.
ANOMALY = ROOT / "tests" / "plugins" / "anomaly"


@pytest.fixture
def anomaly_task():
    (module,) = load_plugins([str(ANOMALY)])
    task = register_task(module.TASK)  # again, after an earlier test unregistered it
    yield task
    unregister_task(task.name)


def test_builtin_tasks_are_registered_in_workflow_order():
    assert task_names()[:3] == ("localization", "captioning", "diagnosis")
    with pytest.raises(ConfigError, match="unknown task 'nope'; fix: use one of localization"):
        get_task("nope")


def test_a_task_is_loaded_on_first_use_and_alone():
    # A fresh interpreter: this one has imported every task already.
    code = (
        "import sys\n"
        "import novabench.tasks as t\n"
        "names = t.builtin_task_names()\n"
        "loaded = lambda: sorted(n for n in names if t.task_module(n) in sys.modules)\n"
        "print(loaded())\n"
        "print(t.get_task('captioning').title, loaded())\n"
        "print(t.get_task('captioning') is sys.modules[t.task_module('captioning')].TASK)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")},
    )
    assert done.stdout.splitlines() == ["[]", "Image captioning ['captioning']", "True"]


def test_task_module_names_the_package_that_defines_the_task():
    assert task_module("diagnosis") == "novabench.tasks.diagnosis"
    assert get_task("diagnosis").__module__.startswith(task_module("diagnosis"))


def test_a_task_registered_by_hand_comes_after_the_builtin_ones(anomaly_task):
    assert task_names() == ("localization", "captioning", "diagnosis", "anomaly")
    assert get_task("anomaly") is anomaly_task


def test_the_config_schema_lists_the_registered_tasks(anomaly_task):
    from novabench.config import config_schema

    schema = config_schema(ROOT)
    assert tuple(schema["$defs"]["task"]["enum"]) == task_names()
    assert tuple(schema["properties"]["tasks"]["properties"]) == task_names()
    assert task_names()[-1] == "anomaly"
    block = schema["properties"]["tasks"]["properties"]["anomaly"]
    assert block["properties"]["prompt"]["default"] == str(ANOMALY / "anomaly-v1.txt")
    assert block["properties"]["min_boxes"]["default"] == 1


def _hand_written_models(tmp_path) -> tuple[dict, dict[str, bool], list[str]]:
    """The gold control and a hand-written model: right on two images, wrong on one,
    unreadable on one; returns the models, each image's truth and the sorted names."""
    truth = {name: any(b[4] == "gold" for b in boxes or ()) for name, _, _, boxes in IMAGES}
    names = sorted(truth)
    answers = {
        names[0]: "yes" if truth[names[0]] else "no",
        names[1]: "Yes." if truth[names[1]] else "No.",
        names[2]: "no" if truth[names[2]] else "yes",
        names[3]: "I cannot tell",
    }
    answers_file = tmp_path / "answers.jsonl"
    answers_file.write_text(
        "".join(json.dumps({"filename": f, "raw": r}) + "\n" for f, r in answers.items())
    )
    models = {
        "gold": {"adapter": "gold", "tasks": ["anomaly"]},
        "hand": {
            "adapter": "predictions_file",
            "tasks": ["anomaly"],
            "settings": {"path": str(answers_file)},
        },
    }
    return models, truth, names


def _predict_and_score(dataset, models: dict, prompt, tmp_path) -> dict[str, dict]:
    """Each model's anomaly predictions and score file; returns the metrics by model."""
    scores = {}
    for name, cfg in models.items():
        out = tmp_path / f"{name}.jsonl"
        run_predictions(
            dataset=dataset,
            task="anomaly",
            model_name=name,
            model_cfg=cfg,
            prompt_path=prompt,
            out=out,
            summary_out=tmp_path / f"{name}.summary.json",
        )
        scores[name] = score_predictions(
            task="anomaly",
            dataset=dataset,
            predictions=out,
            out_json=tmp_path / "scores" / "anomaly" / f"{name}.json",
            out_csv=tmp_path / "scores" / "anomaly" / f"{name}.images.csv",
        )
    return scores


def _check_anomaly_tables(tmp_path, score_paths) -> None:
    tables = write_all_tables(
        statistics={"anomaly": tmp_path / "statistics" / "anomaly.csv"},
        scores={"anomaly": score_paths},
        paper_reference=_paper_reference(tmp_path),
        dataset_manifest=_sample_manifest(tmp_path),
        out_dir=tmp_path / "tables",
    )
    assert list(tables["anomaly"]["model"]) == ["hand", "gold"]  # models first, then controls
    markdown = (tmp_path / "tables" / "anomaly.md").read_text()
    assert markdown.startswith("## Anomaly presence on synthetic sample (not NOVA)")
    assert re.search(r"\| Models \| hand \| 50\.0 \[", markdown), markdown
    assert "| Controls | gold | 100.0" in markdown
    assert "Anomaly presence: Accuracy" in (tmp_path / "tables" / "summary.md").read_text()
    latex = (tmp_path / "tables" / "anomaly.tex").read_text()
    assert "\\caption{Anomaly presence on synthetic sample (not NOVA)." in latex
    assert "Accuracy$\\uparrow$" in latex


def test_a_task_registered_in_a_test_runs_end_to_end(anomaly_task, dataset, tmp_path):
    prompt = tmp_path / "anomaly-v1.txt"
    prompt.write_text("Is there an anomaly in this {width}x{height} image? Answer yes or no.")
    models, truth, names = _hand_written_models(tmp_path)
    scores = _predict_and_score(dataset, models, prompt, tmp_path)
    # What the reading stage read, beside the score file (novabench.score.score_predictions).
    verdicts = {n: tmp_path / "scores" / "anomaly" / f"{n}.verdicts.jsonl" for n in models}
    hand = {r["filename"]: r for r in read_verdicts(verdicts["hand"])}
    assert hand[names[3]]["status"] == "parse_error"
    assert hand[names[1]]["read"] == {"abnormal": truth[names[1]]}
    assert {r["status"] for r in read_predictions(tmp_path / "hand.jsonl")} == {"ok"}
    assert scores["gold"]["Accuracy"] == 100.0
    assert scores["hand"]["Accuracy"] == pytest.approx(100 * 2 / len(names))

    score_paths = [tmp_path / "scores" / "anomaly" / f"{n}.json" for n in models]
    statistics = write_task_statistics(
        task="anomaly",
        dataset_path=dataset,
        score_paths=score_paths,
        verdicts=verdicts,
        models=report_models(models),  # as the workflow passes them
        reporting={"bootstrap": {"resamples": 200, "seed": 1, "confidence": 0.95}},
        out=tmp_path / "statistics" / "anomaly.csv",
        breakdown_out=tmp_path / "statistics" / "anomaly_breakdown.csv",
    )
    hand_row = statistics.set_index("model").loc["hand"]
    assert hand_row["metric"] == "Accuracy" and hand_row["estimate"] == pytest.approx(50.0)
    assert hand_row["ci_low"] <= 50.0 <= hand_row["ci_high"]
    _check_anomaly_tables(tmp_path, score_paths)


def _sample_manifest(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text('{"source": "sample", "n_images": 4}')
    return path


def _paper_reference(tmp_path):
    path = tmp_path / "paper_reference.yaml"
    path.write_text("models: {}\nsources: {}\nreported: []\n")
    return path


def test_weighted_accuracy_replicates_by_hand():
    # Two resamples over three images: (1, 1, 1) and (2, 0, 1).
    weights = np.array([[1, 1, 1], [2, 0, 1]])
    values = weighted_mean(weights, [1.0, 0.0, 1.0], 100.0)
    assert values.tolist() == pytest.approx([200 / 3, 100.0])
