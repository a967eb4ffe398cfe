"""One server per model and run (novabench.serving): the service job that starts it, the
prediction jobs that attach to it. The server is the vLLM stand-in (tests/vllm_stand_in.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from novabench.errors import NovaError
from novabench.predict import run_predictions
from support import ROOT, vllm_stand_in

MODEL_ID = "Qwen/Qwen2.5-VL-7B-Instruct"
PROMPTS = {
    "localization": ROOT / "config" / "prompts" / "localization-qwen25-v1.txt",
    "captioning": ROOT / "config" / "prompts" / "captioning-v1.txt",
}


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> dict[str, Path]:
    """The stand-in ``vllm``; where it counts its starts and writes its pids."""
    files = vllm_stand_in(tmp_path, monkeypatch)
    monkeypatch.setenv("VLLM_STAND_IN_STARTUP_S", "1")
    return files


def model_cfg(stand_in: dict[str, Path]) -> dict:
    return {
        "adapter": "vllm",
        "tasks": list(PROMPTS),
        "box_format": "qwen25_bbox_2d",
        "settings": {
            "model": MODEL_ID,
            "max_attempts": 1,
            "serve": {
                "gpus": 0,
                "startup_timeout_s": 30,
                "stop_grace_s": 5,
                "executable": str(stand_in["vllm"]),
            },
        },
    }


def assert_gone(pids: Path, within_s: float = 5.0) -> None:
    """The stand-in server and its engine worker have exited."""
    record = json.loads(pids.read_text())
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(record[k]) for k in ("server", "worker")):
        time.sleep(0.05)
    assert not alive(record["server"]) and not alive(record["worker"])


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def start_service(tmp_path: Path, cfg: dict) -> tuple[subprocess.Popen, Path]:
    """rule serve_model's command; returns the process and its service file."""
    service = tmp_path / "servers" / "served.json"
    process = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "serve.py"),
            *("--model", "served", "--settings", json.dumps(cfg), "--service", str(service)),
            *("--cache-dir", str(tmp_path / "results" / "cache")),
            *("--log", str(tmp_path / "serve.log")),
        ]
    )
    return process, service


def predict(dataset: Path, tmp_path: Path, task: str, cfg: dict, service: Path) -> dict:
    return run_predictions(
        dataset=dataset,
        task=task,
        model_name="served",
        model_cfg=cfg,
        prompt_path=PROMPTS[task],
        out=tmp_path / f"{task}.jsonl",
        summary_out=tmp_path / f"{task}.summary.json",
        cache_dir=tmp_path / "results" / "cache",
        shared_server=service,
    )


def test_the_tasks_of_a_model_share_one_server_that_stops_with_its_job(dataset, tmp_path, stand_in):
    cfg = model_cfg(stand_in)
    process, service = start_service(tmp_path, cfg)
    try:
        for task in PROMPTS:  # the jobs wait for the server, then send to it
            summary = predict(dataset, tmp_path, task, cfg, service)
            assert summary["status_counts"]["ok"] == summary["n_images"] > 0
        assert len(stand_in["starts"].read_text().splitlines()) == 1
    finally:
        process.send_signal(signal.SIGTERM)  # how Snakemake ends a service job
        process.wait(timeout=30)
    assert_gone(stand_in["pids"])
    assert not list((tmp_path / "results" / "servers").glob("*.json"))  # no pid file left


def test_a_server_that_fails_to_start_stops_the_waiting_jobs_at_once(
    dataset, tmp_path, stand_in, monkeypatch
):
    monkeypatch.setenv("VLLM_STAND_IN_CRASH", "1")
    cfg = model_cfg(stand_in)
    process, service = start_service(tmp_path, cfg)
    started = time.monotonic()
    with pytest.raises(NovaError, match=r"shared server did not start: models.served: the vLLM"):
        predict(dataset, tmp_path, "localization", cfg, service)
    assert time.monotonic() - started < 25  # not the start-up timeout (30 s) and its margin
    assert process.wait(timeout=30) == 1


def test_a_job_whose_answers_are_cached_does_not_wait_for_the_server(dataset, tmp_path, stand_in):
    cfg = model_cfg(stand_in)
    process, service = start_service(tmp_path, cfg)
    try:
        predict(dataset, tmp_path, "localization", cfg, service)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    # The service file of a server that is gone: never read, the answers are cached.
    summary = predict(dataset, tmp_path, "localization", cfg, tmp_path / "no-such-file.json")
    assert summary["n_cached"] == summary["n_images"]


def test_the_service_loads_nothing_until_a_task_asks(dataset, tmp_path, stand_in):
    cfg = model_cfg(stand_in)
    process, service = start_service(tmp_path, cfg)
    try:
        time.sleep(2)  # the service job runs, but no task has asked for the server
        assert not stand_in["starts"].exists()
        assert "base_url" not in json.loads(service.read_text())  # written, no address yet
        predict(dataset, tmp_path, "localization", cfg, service)  # this one asks
        assert len(stand_in["starts"].read_text().splitlines()) == 1
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert not (tmp_path / "servers" / "served.json.wanted").exists()


def test_the_servers_key_is_readable_by_its_user_alone_and_gone_with_the_server(
    dataset, tmp_path, stand_in
):
    cfg = model_cfg(stand_in)
    process, service = start_service(tmp_path, cfg)
    key = tmp_path / "servers" / "served.json.key"
    try:
        summary = predict(dataset, tmp_path, "localization", cfg, service)
        assert summary["status_counts"]["ok"] == summary["n_images"]  # each request keyed
        assert json.loads(stand_in["pids"].read_text())["keyed"]
        assert key.stat().st_mode & 0o777 == 0o600
        assert len(key.read_text()) >= 32 and key.read_text() not in service.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert not key.exists(), "the key outlived its server"


def test_a_job_sends_nothing_to_a_port_the_shared_server_does_not_hold(dataset, tmp_path):
    """The service file names a server process; another process answers on the port."""
    from openai_server import FakeOpenAI, Reply

    impostor = FakeOpenAI(lambda seen: Reply('[{"bbox_2d": [0, 0, 9, 9]}]'))
    sleeper = subprocess.Popen(["sleep", "30"])  # the process the record names
    service = tmp_path / "servers" / "served.json"
    service.parent.mkdir()
    (tmp_path / "servers" / "served.json.key").write_text("k" * 40)
    cfg = model_cfg({"vllm": tmp_path / "no-vllm"})
    try:
        with impostor:
            record = {"model": "served", "base_url": impostor.base_url, "pid": sleeper.pid}
            service.write_text(json.dumps(record))
            with pytest.raises(NovaError) as error:
                predict(dataset, tmp_path, "localization", cfg, service)
            assert impostor.requests == [], "a request went to the impostor"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert f"not by the run's shared vLLM server (process {sleeper.pid})" in str(error.value)
    assert "nothing was sent to it" in str(error.value) and "\n" not in str(error.value)
    assert not list((tmp_path / "results" / "cache").rglob("*.json")), "an answer was cached"
