"""An open-weight LLM judge the reading job serves itself (``settings.serve``): its vLLM
server (the stand-in of tests/vllm_stand_in.py) starts when a request is to be sent, stops
after, and its answers are cached under the address of record, not the server's port."""

from __future__ import annotations

import json

import pytest

from novabench.errors import ConfigError, NovaError
from novabench.judges import judge_kind
from novabench.judges.llm import LLMDiagnosisJudge
from support import ROOT, vllm_stand_in
from test_serving import assert_gone

JUDGE_MODEL = "Qwen/Qwen2.5-72B-Instruct"


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> dict:
    files = vllm_stand_in(tmp_path, monkeypatch)
    monkeypatch.setenv("VLLM_STAND_IN_ANSWER", '{"first_match": 1}')
    return files


def served_settings(stand_in: dict, **serve) -> dict:
    return {
        "backend": {"model": JUDGE_MODEL, "max_attempts": 1, "timeout_s": 10},
        "serve": {"gpus": 0, "startup_timeout_s": 30, "executable": str(stand_in["vllm"]), **serve},
    }


def test_a_served_judge_starts_its_server_for_uncached_requests_only(tmp_path, stand_in):
    settings = served_settings(stand_in)
    judge = LLMDiagnosisJudge("open-judge", settings, cache_dir=tmp_path / "results" / "cache")
    pairs = [(["Glioblastoma multiforme"], "Glioblastoma"), (["Abscess"], "Lymphoma")]
    assert judge.match_ranked_many(pairs) == [(True, True), (True, True)]
    assert len(stand_in["starts"].read_text().splitlines()) == 1
    assert_gone(stand_in["pids"])  # stopped once the requests were answered
    argv = json.loads(stand_in["pids"].read_text())["argv"]
    assert argv[:2] == ["serve", JUDGE_MODEL]
    # A second reading job: every answer cached under the address of record, no server.
    again = LLMDiagnosisJudge("open-judge", settings, cache_dir=tmp_path / "results" / "cache")
    assert again.match_ranked_many(pairs) == [(True, True), (True, True)]
    assert len(stand_in["starts"].read_text().splitlines()) == 1
    assert (again.usage()["cached"], again.usage()["sent"]) == (2, 0)


def test_a_served_judge_needs_no_address_before_the_run_and_its_failures_are_counted(
    tmp_path, stand_in, monkeypatch
):
    kind = judge_kind("llm")
    settings = served_settings(stand_in)
    assert kind.environment_problems("open-judge", settings, ["diagnosis"], str) == []
    monkeypatch.setenv("VLLM_STAND_IN_ANSWER", "no JSON here")
    judge = LLMDiagnosisJudge("open-judge", settings, cache_dir=tmp_path / "cache")
    with pytest.raises(NovaError, match=r"unreadable"):
        judge.match_ranked_many([(["A"], "B")])
    assert judge.counts["unreadable"] == 1
    assert_gone(stand_in["pids"])


def test_a_served_judges_replicas_must_fit_its_gpus(stand_in):
    settings = served_settings(stand_in, gpus=2, replicas=4)
    with pytest.raises(ConfigError, match=r"judges.open-judge.settings.serve: 4 replicas"):
        judge_kind("llm").check_settings("open-judge", settings, str)


# -- a judge that names a managed model entry (served_by) -------------------------------------


def test_the_open_judge_config_serves_a_catalog_checkpoint_in_gpu_reading_jobs():
    from novabench.config import plan_from_files

    plan = plan_from_files(
        ROOT, [ROOT / "config" / "paper.yaml", ROOT / "config" / "paper-open-judge.yaml"]
    )
    judge = plan.judge("diagnosis")
    assert judge["name"] == "open-judge" and "served_by" not in judge["settings"]
    assert judge["settings"]["backend"]["model"] == "Qwen/Qwen2.5-72B-Instruct"
    assert judge["settings"]["serve"]["gpus"] == 4
    # Its reading jobs hold the server's GPUs; a reading job without a judge none.
    assert plan.read_resources("diagnosis", "open-judge") == {
        "gpu": 4,
        "cpus": 16,
        "mem_mb": 128000,
    }
    assert plan.read_resources("localization", "boxes")["gpu"] == 0
    # The entry that holds its server settings runs no task as a model.
    assert "open-judge-model" not in {model for _, model in plan.jobs()}
    assert "api_vllm" not in str(plan.api_resources())


def test_served_by_must_name_a_managed_model_entry(tmp_path):
    from novabench.config import plan_from_files

    config = tmp_path / "judge.yaml"
    config.write_text(
        "judges:\n  j: {kind: llm, settings: {served_by: gold, backend: {}}}\n"
        "tasks: {diagnosis: {judge: j}}\n"
    )
    with pytest.raises(ConfigError, match=r"served_by names 'gold', which is not a models: entry"):
        plan_from_files(ROOT, [config])
