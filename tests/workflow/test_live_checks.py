"""The live checks in a real run: the embedded sample, diagnosis judged by the cascade of
config/paper-cascade.yaml (the offline matcher, then the LLM judge, here the project's
test chat server answering from the hand labels). The LLM judge's live check and the gold
control's check reach the score files, the table caption and the leaderboard; a judge that
then drifts (another served model, wrong on purpose) stops the next run with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from hand_label_judge import DriftingJudge
from openai_server import FakeOpenAI
from support import ROOT, snakemake

pytestmark = pytest.mark.slow


def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "nova"
    ignore = shutil.ignore_patterns("__pycache__", ".snakemake", "results", ".venv")
    root.mkdir()
    shutil.copy2(ROOT / "Snakefile", root / "Snakefile")
    for folder in ("workflow", "scripts", "config", "envs", "validation"):
        shutil.copytree(ROOT / folder, root / folder, ignore=ignore)
    return root


def run_config(tmp_path: Path, server: FakeOpenAI) -> list[str]:
    """Diagnosis only, judged by config/paper-cascade.yaml's cascade whose second stage,
    ``gpt-4o-judge``, is the test server."""
    backend = {"base_url": server.base_url, "model": "judge-llm", "api_key_env": None}
    config = {
        "tasks": {"localization": {"enabled": False}, "captioning": {"enabled": False}},
        "judges": {"gpt-4o-judge": {"kind": "llm", "settings": {"backend": backend}}},
    }
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(config))
    return ["--cores", "2", "--configfile", str(path), "config/paper-cascade.yaml"]


def newcomer(tmp_path: Path, results: Path) -> dict:
    """A model (answers from a file) whose every diagnosis the matcher leaves undecided."""
    import pandas as pd

    frame = pd.read_parquet(results / "dataset" / "nova.parquet", columns=["filename"])
    raw = json.dumps({"most_likely_diagnosis": "frobnication of widgets"})
    answers = tmp_path / "newcomer.jsonl"
    answers.write_text(
        "".join(json.dumps({"filename": f, "raw": raw}) + "\n" for f in frame.filename)
    )
    model = {
        "adapter": "predictions_file",
        "tasks": ["diagnosis"],
        "settings": {"path": str(answers)},
    }
    return {"newcomer": model}


def test_the_live_checks_reach_scores_tables_and_leaderboard_and_a_drift_stops(tmp_path):
    work = checkout(tmp_path)
    results = work / "results" / "sample"
    judge = DriftingJudge()
    with FakeOpenAI(judge) as server:
        args = run_config(tmp_path, server)
        ran = snakemake(work, *args, timeout=1200)
        assert ran.returncode == 0, ran.stderr[-4000:]
        gold = json.loads((results / "scores" / "diagnosis" / "gold.json").read_text())
        (check,) = gold["judge_live_check"]
        assert (check["judge"], check["n_pairs"], check["value"]) == ("gpt-4o-judge", 40, 100.0)
        assert check["served"]["model"] == ["judge-v1"]
        assert gold["control_check"]["passed"] and gold["control_check"]["bounds"] == {
            "at_least": 100.0
        }
        retrieval = json.loads((results / "scores" / "diagnosis" / "retrieval.json").read_text())
        assert retrieval["control_check"] is None
        table = (results / "tables" / "diagnosis.md").read_text()
        page = (results / "leaderboard.html").read_text()
        for text in (table, page):
            assert "live check of gpt-4o-judge: agreement 100.0% with hand labels" in text
            assert "gold within its bound (at least 100)" in text

        # The served model changes and judges wrongly. A new model's answers, which the
        # matcher cannot decide, are sent to it: the cached check is not that model's
        # figure, so it is asked again, and the run stops.
        judge.drifted = True
        sent = len(server.requests)
        args += ["--config", f"models={json.dumps(newcomer(tmp_path, results))}"]
        failed = snakemake(work, *args, timeout=1200)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0 and len(server.requests) > sent
    assert "Traceback" not in output
    line = next(x for x in output.splitlines() if "live check of gpt-4o-judge" in x)
    assert "agreement 0.0% with hand labels (bound >= 75%) on 40 pairs" in line
    assert "served judge-v2, fp_2, BELOW THE BOUND" in line
