"""An open-weight LLM judge the reading job serves itself (``settings.serve``): its vLLM
server (the stand-in of tests/vllm_stand_in.py) starts when a request is to be sent, stops
after, and its answers are cached under the address of record, not the server's port."""

from __future__ import annotations

import json
import sys

import pytest

from novabench.errors import ConfigError, NovaError
from novabench.judges import judge_kind
from novabench.judges.llm import LLMDiagnosisJudge
from support import ROOT
from test_serving import assert_gone

JUDGE_MODEL = "Qwen/Qwen2.5-72B-Instruct"


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> dict:
    wrapper = tmp_path / "vllm"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/tests/vllm_stand_in.py" "$@"\n')
    wrapper.chmod(0o755)
    files = {"vllm": wrapper, "starts": tmp_path / "starts", "pids": tmp_path / "pids.json"}
    monkeypatch.setenv("VLLM_STAND_IN_STARTS", str(files["starts"]))
    monkeypatch.setenv("VLLM_STAND_IN_PIDS", str(files["pids"]))
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
