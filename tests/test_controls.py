"""Controls as live checks: the gold control must score 100 where that is defined under
every judge, the random control must stay under its bound; otherwise scoring stops with one
line naming the task, the judge and the metric (``models.<name>.control_check: false``
scores anyway). A broken judge is played by a scripted chat server that never matches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from novabench.config import plan_from_files
from novabench.controls import check_control, controls_note
from novabench.errors import NovaError
from novabench.predict import run_predictions
from novabench.reading import read_predictions_file
from novabench.score import score_verdicts
from novabench.tasks import get_task
from openai_server import FakeOpenAI, Reply
from support import NO_LIVE_CHECK, ROOT

LOCALIZATION = get_task("localization").metrics


def test_a_control_outside_its_bounds_is_one_line_naming_the_judge_and_the_metric():
    metrics = {"mAP@50": 100.0, "Hit@30": 87.5, "Hit@50": 80.0, "FNR": 12.5, "mAP@30": None}
    with pytest.raises(NovaError) as stop:
        check_control("localization", "gold", "boxes", metrics, LOCALIZATION, {"at_least": 100})
    message = str(stop.value)
    assert "\n" not in message
    assert message.startswith(
        "control gold scored Hit@30 87.5 on localization under judge boxes, where it must "
        "score at least 100 (and 1 more metrics)"
    )
    assert "models.gold.control_check: false" in message


def test_only_defined_ceiling_metrics_are_checked_and_the_override_records():
    # FNR is no ceiling metric (lower is better); mAP@30 is undefined here.
    metrics = {"mAP@50": 100.0, "Hit@30": 100.0, "FNR": 55.0, "mAP@30": None}
    passed = check_control(
        "localization", "gold", "boxes", metrics, LOCALIZATION, {"at_least": 100}
    )
    assert passed["passed"] and passed["metrics"] == ["mAP@50", "Hit@30"]
    random = {"mAP@50": 30.0, "Hit@30": 10.0}
    bounds = {"at_most": 25, "stop": False}
    recorded = check_control("localization", "random", "boxes", random, LOCALIZATION, bounds)
    assert not recorded["passed"]
    assert recorded["failed"] == [{"metric": "mAP@50", "value": 30.0, "must_be": "at most 25"}]
    assert check_control("localization", "m", "boxes", random, LOCALIZATION, {}) is None


def test_the_adapters_declare_the_bounds_and_a_model_can_override_the_stop(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "models:\n  gold: {adapter: gold, control_check: false}\n"
        "  random: {adapter: random, tasks: [localization]}\n"
    )
    plan = plan_from_files(ROOT, [config])
    assert plan.control_bounds("gold") == {"at_least": 100.0, "stop": False}
    assert plan.control_bounds("random") == {"at_most": 25.0, "stop": True}
    assert plan.control_bounds("classical") == {}  # a model under test
    assert plan.control_bounds("not-configured") == {}  # a score file of an earlier run


def test_the_note_says_which_controls_were_checked_or_that_none_was():
    assert controls_note({"m": {"control_check": None}}).startswith("No control in this run")
    check = {"model": "gold", "bounds": {"at_least": 100.0}, "metrics": ["Top-1", "Top-5"]}
    note = controls_note({"gold": {"control_check": {**check, "passed": True}}})
    assert (
        note == "Controls checked on every run: gold within its bound (at least 100) on 2 metrics."
    )


def gold_diagnoses(tmp_path: Path, dataset: Path) -> Path:
    out = tmp_path / "gold.jsonl"
    run_predictions(
        dataset=dataset,
        task="diagnosis",
        model_name="gold",
        model_cfg={"adapter": "gold", "tasks": ["diagnosis"]},
        prompt_path=ROOT / "config" / "prompts" / "diagnosis-v1.txt",
        out=out,
        summary_out=tmp_path / "gold.summary.json",
    )
    return out


def test_gold_under_a_judge_that_never_matches_stops_the_scoring(tmp_path, dataset):
    backend = {"model": "judge-llm", "api_key_env": None, "max_attempts": 1}
    with FakeOpenAI(lambda seen: Reply(json.dumps({"first_match": 0}))) as server:
        judge = {
            "name": "broken-judge",
            "kind": "llm",
            "settings": {"backend": {**backend, "base_url": server.base_url}, **NO_LIVE_CHECK},
        }
        read_predictions_file(
            task="diagnosis",
            dataset=dataset,
            predictions=gold_diagnoses(tmp_path, dataset),
            out=tmp_path / "gold.verdicts.jsonl",
            summary_out=tmp_path / "gold.verdicts.summary.json",
            judge_cfg=judge,
            cache_dir=tmp_path / "cache",
        )

    def score(bounds):
        return score_verdicts(
            task="diagnosis",
            dataset=dataset,
            verdicts=tmp_path / "gold.verdicts.jsonl",
            verdict_summary=tmp_path / "gold.verdicts.summary.json",
            out_json=tmp_path / "scores.json",
            out_csv=tmp_path / "scores.csv",
            control=bounds,
        )

    with pytest.raises(NovaError) as stop:
        score({"at_least": 100.0, "stop": True})
    assert "control gold scored Top-1 0.0 on diagnosis under judge broken-judge" in str(stop.value)
    assert not (tmp_path / "scores.json").exists()
    score({"at_least": 100.0, "stop": False})
    recorded = json.loads((tmp_path / "scores.json").read_text())["control_check"]
    assert not recorded["passed"] and [f["metric"] for f in recorded["failed"]] == [
        "Top-1",
        "Top-5",
    ]
