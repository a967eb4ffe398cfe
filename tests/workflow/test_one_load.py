"""One model load per model and run: a managed vLLM model on all three tasks of a sample
run starts one server (the stand-in of tests/vllm_stand_in.py counts its starts, each after
a start-up delay), a re-run of one task alone starts one server for that task only, and a
re-run whose answers are all cached loads no model."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from support import ROOT, snakemake
from test_serving import assert_gone

pytestmark = pytest.mark.slow

TASKS = ("localization", "captioning", "diagnosis")
TARGETS = [f"results/sample/predictions/{task}/served.jsonl" for task in TASKS]


def served_config(folder: Path) -> Path:
    vllm = folder / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/tests/vllm_stand_in.py" "$@"\n')
    vllm.chmod(0o755)
    config = {
        "dataset": {"source": "sample", "sample": {"n_cases": 3}},
        "models": {
            "classical": {"enabled": False},
            "retrieval": {"enabled": False},
            "served": {
                "adapter": "vllm",
                "tasks": list(TASKS),
                "box_format": "qwen25_bbox_2d",
                "prompts": {"localization": "config/prompts/localization-qwen25-v1.txt"},
                "settings": {
                    "model": "Qwen/Qwen2.5-VL-7B-Instruct",
                    "serve": {"gpus": 0, "mem_mb": 1000, "executable": str(vllm)},
                },
            },
        },
    }
    path = folder / "served.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def starts(folder: Path) -> int:
    path = folder / "starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("one-load")
    config = served_config(folder)
    env = {
        **os.environ,
        "VLLM_STAND_IN_STARTS": str(folder / "starts"),
        "VLLM_STAND_IN_PIDS": str(folder / "pids.json"),
        "VLLM_STAND_IN_STARTUP_S": "2",
    }

    def snakemake_run(*args: str):
        result = snakemake(folder / "work", *args, "--configfile", str(config), env=env)
        assert result.returncode == 0, result.stderr[-4000:]
        return result

    (folder / "work").mkdir()
    snakemake_run(*TARGETS)
    return folder, snakemake_run


def test_a_model_on_three_tasks_starts_one_server_that_stops_with_its_tasks(run):
    folder, _ = run
    assert starts(folder) == 1
    results = folder / "work" / "results" / "sample"
    for task in TASKS:
        summary = json.loads((results / "predictions" / task / "served.summary.json").read_text())
        assert summary["status_counts"]["ok"] == summary["n_images"] > 0, task
    assert_gone(folder / "pids.json")
    assert not list((folder / "work" / "results" / "servers").glob("*.json"))


def test_a_rerun_of_one_task_starts_one_server_and_runs_that_task_only(run):
    folder, snakemake_run = run
    results = folder / "work" / "results" / "sample" / "predictions"
    before = {task: (results / task / "served.jsonl").stat().st_mtime_ns for task in TASKS}
    before_starts = starts(folder)
    cache = folder / "work" / "results" / "cache"
    shutil.copytree(cache, folder / "cache-kept")
    shutil.rmtree(cache)  # answers to ask again
    result = snakemake_run(TARGETS[0], "--forcerun", "predict")
    shutil.copytree(folder / "cache-kept", cache, dirs_exist_ok=True)  # every answer again
    assert starts(folder) == before_starts + 1
    after = {task: (results / task / "served.jsonl").stat().st_mtime_ns for task in TASKS}
    assert after["localization"] != before["localization"]
    assert {t: after[t] for t in TASKS[1:]} == {t: before[t] for t in TASKS[1:]}
    assert "predict" in result.stdout + result.stderr


def test_a_rerun_whose_answers_are_all_cached_loads_no_model(run):
    folder, snakemake_run = run
    before_starts = starts(folder)
    result = snakemake_run(*TARGETS, "--forcerun", "predict")  # as after a code edit
    assert starts(folder) == before_starts
    assert (
        "no task asked for the server"
        in (folder / "work" / "results" / "sample" / "logs" / "serve" / "served.log").read_text()
    )
    assert result.returncode == 0
