"""The managed vLLM server (adapter ``vllm``): a prediction job starts, uses and stops it.

No GPU and no vLLM here: a stand-in ``vllm`` executable (tests/vllm_stand_in.py) implements
the part of vLLM's command line the job uses and serves the project's OpenAI-compatible
test server, with an "engine worker" child like vLLM's. The tests run the real job code
against it: start, health wait, answers parsed and scored, stop after success, failure,
SIGTERM and ``kill -9`` of the job, and the errors of a server that never becomes healthy,
crashes or dies mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from novabench import vllm_server
from novabench.dataset.read import load_nova
from novabench.errors import ConfigError, NovaError
from novabench.models.base import load_adapter
from novabench.predict import build_samples, load_prompt, run_predictions
from novabench.score import score_predictions
from novabench.tasks import get_task
from read_back import read_back
from support import ROOT

PROMPT = ROOT / "config" / "prompts" / "localization-qwen25-v1.txt"
MODEL_ID = "Qwen/Qwen2.5-VL-7B-Instruct"
COMMIT = "0" * 40


def managed(**serve) -> dict:
    return {
        "adapter": "vllm",
        "tasks": ["localization"],
        "box_format": "qwen25_bbox_2d",
        "settings": {
            "model": MODEL_ID,
            "concurrency": 2,
            "max_attempts": 1,
            "serve": {"gpus": 0, "startup_timeout_s": 30, "stop_grace_s": 5, **serve},
        },
    }


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """``vllm`` on PATH; returns the file where the stand-in writes its pids."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "vllm"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/tests/vllm_stand_in.py" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    pids = tmp_path / "stand-in-pids.json"
    monkeypatch.setenv("VLLM_STAND_IN_PIDS", str(pids))
    return pids


def predict(dataset, tmp_path, cfg, name="qwen-managed"):
    out = tmp_path / f"{name}.jsonl"
    summary = run_predictions(
        dataset=dataset,
        task="localization",
        model_name=name,
        model_cfg=cfg,
        prompt_path=PROMPT,
        out=out,
        summary_out=tmp_path / f"{name}.summary.json",
        cache_dir=tmp_path / "results" / "cache",
    )
    return read_back(out, dataset), summary, out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited: only its parent has not collected it yet.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[-1].split()[0] == "Z")


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def assert_gone(pids_file: Path, within_s: float = 0.0) -> None:
    """The stand-in server and its worker have exited and the port is closed."""
    record = json.loads(pids_file.read_text())
    port = int(record["argv"][record["argv"].index("--port") + 1])
    deadline = time.monotonic() + within_s
    while any(alive(record[k]) for k in ("server", "worker")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(record["server"]), "the server outlived the job"
    assert not alive(record["worker"]), "the engine worker outlived the job"
    assert port_free(port)


# -- the command line -----------------------------------------------------------------------


def test_serve_command_carries_the_entrys_settings():
    serve = vllm_server.resolve_serve(
        "m",
        {
            "revision": COMMIT,
            "gpus": 4,
            "max_model_len": 32768,
            "dtype": "bfloat16",
            "images_per_prompt": 1,
            "trust_remote_code": True,
            "extra_args": ["--gpu-memory-utilization", "0.9"],
        },
    )
    command = vllm_server.serve_command("OpenGVLab/InternVL3-78B", serve, 41000)
    assert command[:3] == ["vllm", "serve", "OpenGVLab/InternVL3-78B"]
    flags = dict(zip(command[3::2], command[4::2], strict=False))
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "41000"
    assert flags["--served-model-name"] == "OpenGVLab/InternVL3-78B"
    assert flags["--tensor-parallel-size"] == "4"  # from the GPU count
    assert flags["--revision"] == COMMIT and flags["--max-model-len"] == "32768"
    assert flags["--dtype"] == "bfloat16"
    assert json.loads(flags["--limit-mm-per-prompt"]) == {"image": 1}
    assert "--trust-remote-code" in command
    assert command[-2:] == ["--gpu-memory-utilization", "0.9"]
    assert vllm_server.job_cpus(serve) == 16 and vllm_server.job_mem_mb(serve) == 128000


def test_extra_args_may_not_repeat_a_flag_the_job_sets():
    with pytest.raises(ConfigError, match=r"extra_args sets --port, which the job sets itself"):
        vllm_server.resolve_serve("m", {"extra_args": ["--port=9000"]})
    with pytest.raises(ConfigError, match=r"set serve.max_model_len instead"):
        vllm_server.resolve_serve("m", {"extra_args": ["--max-model-len", "10"]})


def test_extra_args_may_not_put_a_key_on_the_servers_command_line():
    with pytest.raises(ConfigError, match=r"extra_args sets --api-key, which the job sets itself"):
        vllm_server.resolve_serve("m", {"extra_args": ["--api-key", "hunter2-hunter2"]})


def test_remote_code_needs_a_pinned_commit_before_the_run():
    cfg = managed(trust_remote_code=True)
    adapter = load_adapter("internvl", cfg)
    with pytest.raises(NovaError, match=r"serve.revision must pin a commit .* not main"):
        type(adapter).check_environment("internvl", cfg["settings"])
    pinned = managed(trust_remote_code=True, revision=COMMIT)
    type(adapter).check_environment("internvl", pinned["settings"])  # no error


def test_a_missing_executable_says_how_to_install_vllm(dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NovaError) as error:
        predict(dataset, tmp_path, managed())
    message = str(error.value)
    assert "'vllm' is not on its PATH" in message and "\n" not in message
    assert f"pip install vllm=={vllm_server.VLLM_VERSION}" in message


# -- the lifecycle --------------------------------------------------------------------------


def test_managed_job_answers_are_scored_cached_as_a_hand_started_servers_and_it_stops(
    dataset, tmp_path, stand_in, caplog
):
    caplog.set_level("INFO", logger="novabench")
    records, summary, out = predict(dataset, tmp_path, managed())
    # The server's own output is in the job's log, line by line.
    assert f"vllm: INFO stand-in vLLM serving {MODEL_ID} (tp 1)" in caplog.text
    assert "vllm: INFO shutting down the engine" in caplog.text
    assert summary["status_counts"]["ok"] == len(records) == 4
    assert summary["identity"]["adapter"] == "vllm"
    # The stand-in's box [100, 120, 160, 160] of the 476x476 frame, back in 480x480 pixels.
    box = records[0]["read"]["boxes"][0]
    scale = 480 / 476
    assert (box["x"], box["y"]) == pytest.approx((100 * scale, 120 * scale))
    scores = score_predictions(
        task="localization",
        dataset=dataset,
        predictions=out,
        out_json=tmp_path / "s.json",
        out_csv=tmp_path / "s.csv",
    )
    assert 0 <= scores["mAP@30"] <= 100
    assert_gone(stand_in)
    argv = json.loads(stand_in.read_text())["argv"]
    assert argv[:2] == ["serve", MODEL_ID] and argv[argv.index("--tensor-parallel-size") + 1] == "1"
    assert not list((tmp_path / "results" / "servers").glob("*.json")), "pid file left"

    # A hand-started server of the same model at the entry's address of record, under the
    # same name, finds every answer in the cache.
    hand_started = load_adapter(
        "qwen-managed",
        {
            "adapter": "openai_compatible",
            "settings": {
                "base_url": "http://localhost:8000/v1",
                "model": MODEL_ID,
                "api_key_env": None,
            },
        },
        cache_dir=tmp_path / "results" / "cache",
    )
    spec = get_task("localization")
    template, _, _ = load_prompt(PROMPT)
    frame, _ = spec.scored_rows(load_nova(dataset))
    samples = build_samples(frame, spec, template, str(PROMPT))
    assert all(hand_started.cached(r) for r in hand_started.requests_for(samples))

    # Everything answered: a re-run starts no server at all.
    stand_in.unlink()
    records, summary, _ = predict(dataset, tmp_path, managed())
    assert summary["n_cached"] == 4 and not stand_in.exists()


def test_the_server_stops_when_the_job_fails(dataset, tmp_path, stand_in, monkeypatch):
    monkeypatch.setenv("VLLM_STAND_IN_ANSWER", "")  # blank answers: every request fails
    with pytest.raises(NovaError, match=r"4 of 4 requests failed"):
        predict(dataset, tmp_path, managed())
    assert_gone(stand_in)


def test_a_server_that_never_becomes_healthy_ends_the_job_in_one_line(
    dataset, tmp_path, stand_in, monkeypatch
):
    monkeypatch.setenv("VLLM_STAND_IN_NEVER_HEALTHY", "1")
    started = time.monotonic()
    with pytest.raises(NovaError) as error:
        predict(dataset, tmp_path, managed(startup_timeout_s=1.5))
    assert time.monotonic() - started < 1.5 + 10
    message = str(error.value)
    assert "did not become healthy within 1.5 s (serve.startup_timeout_s)" in message
    assert "stand-in vLLM serving" in message  # the server's last lines
    assert "\n" not in message
    assert_gone(stand_in)


@pytest.mark.parametrize(
    ("env", "extra_args", "expected"),
    [
        ({"VLLM_STAND_IN_CRASH": "1"}, [], "exited with code 1; its last lines: .*CUDA out of"),
        ({}, ["--no-such-flag"], "exited with code 2; its last lines: .*unrecognized arguments"),
    ],
    ids=["crash-while-loading", "unknown-flag"],
)
def test_a_server_that_exits_while_starting_is_named_with_its_last_lines(
    dataset, tmp_path, stand_in, monkeypatch, env, extra_args, expected
):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(NovaError, match=expected) as error:
        predict(dataset, tmp_path, managed(extra_args=extra_args))
    assert "\n" not in str(error.value)


def test_a_server_that_dies_mid_run_keeps_the_answers_it_gave(
    dataset, tmp_path, stand_in, monkeypatch
):
    monkeypatch.setenv("VLLM_STAND_IN_DIE_AFTER", "2")
    cfg = managed()
    cfg["settings"]["concurrency"] = 1
    with pytest.raises(NovaError) as error:
        predict(dataset, tmp_path, cfg)
    message = str(error.value)
    assert "the vLLM server exited with code 1" in message
    assert "engine died after 2 requests" in message
    assert "2 of 4 requests were answered (cached), 2 failed" in message
    assert_gone(stand_in, within_s=5)
    entries = list((tmp_path / "results" / "cache" / "qwen-managed").rglob("*.json"))
    assert len(entries) == 2

    # The next run asks only what is missing.
    monkeypatch.delenv("VLLM_STAND_IN_DIE_AFTER")
    _, summary, _ = predict(dataset, tmp_path, cfg)
    assert summary["status_counts"]["ok"] == 4 and summary["n_cached"] == 2


# -- signals and kill -9 --------------------------------------------------------------------

JOB = textwrap.dedent(
    """
    import json, logging, sys
    from pathlib import Path
    sys.path[:0] = [{scripts!r}]
    from novabench.predict import run_predictions
    logging.basicConfig(level=logging.INFO)
    tmp = Path({tmp!r})
    run_predictions(
        dataset=Path({dataset!r}), task="localization", model_name="qwen-managed",
        model_cfg=json.loads({cfg!r}), prompt_path=Path({prompt!r}),
        out=tmp / "out.jsonl", summary_out=tmp / "out.summary.json",
        cache_dir=tmp / "results" / "cache",
    )
    """
)


def start_job(dataset, tmp_path, monkeypatch) -> subprocess.Popen:
    """A prediction job in its own process whose server answers slowly, once it serves."""
    monkeypatch.setenv("VLLM_STAND_IN_ANSWER", '[{"bbox_2d": [1, 2, 30, 40]}]')
    cfg = managed()
    cfg["settings"]["concurrency"] = 1
    cfg["settings"]["timeout_s"] = 60
    script = JOB.format(
        scripts=str(ROOT / "scripts"),
        tmp=str(tmp_path),
        dataset=str(dataset),
        cfg=json.dumps(cfg),
        prompt=str(PROMPT),
    )
    job = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    return job


def wait_until_serving(job: subprocess.Popen, pids: Path) -> None:
    for line in job.stderr:
        if "vLLM server ready" in line:
            return
    pytest.fail(f"the job ended before its server was ready (exit {job.wait()})")


@pytest.fixture
def slow_answers(monkeypatch):
    # Each answer takes a while, so that the job is still asking when it is stopped.
    monkeypatch.setenv("VLLM_STAND_IN_DELAY_S", "5")


@pytest.mark.parametrize(
    ("signum", "exit_codes"),
    # SIGTERM (Snakemake, scancel) ends the job with 143; Ctrl-C's SIGINT as Python does.
    [(signal.SIGTERM, {143}), (signal.SIGINT, {130, -signal.SIGINT})],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_signal_to_the_job_stops_its_server(
    dataset, tmp_path, stand_in, monkeypatch, slow_answers, signum, exit_codes
):
    job = start_job(dataset, tmp_path, monkeypatch)
    wait_until_serving(job, stand_in)
    job.send_signal(signum)
    assert job.wait(20) in exit_codes
    assert_gone(stand_in)
    assert not list((tmp_path / "results" / "servers").glob("*.json")), "pid file left"


def test_kill_9_of_the_job_leaves_no_server_behind(
    dataset, tmp_path, stand_in, monkeypatch, slow_answers
):
    job = start_job(dataset, tmp_path, monkeypatch)
    wait_until_serving(job, stand_in)
    job.kill()
    job.wait()
    # The parent-death signal reaches the server, which stops its worker.
    assert_gone(stand_in, within_s=10)


def test_the_next_job_stops_a_server_whose_job_is_gone(tmp_path, stand_in):
    """Where the parent-death signal did not reach (another OS, a worker that ignored it),
    the pid file under results/servers/ lets the next job on the node stop the group."""
    # A job that started a server without the parent-death signal, then was killed.
    port = vllm_server.free_port()
    starter = (
        "import subprocess, sys, time; subprocess.Popen(sys.argv[1:], "
        "start_new_session=True, stdout=subprocess.DEVNULL); time.sleep(60)"
    )
    command = vllm_server.serve_command(MODEL_ID, vllm_server.resolve_serve("m", {}), port)
    owner = subprocess.Popen([sys.executable, "-c", starter, *command])
    deadline = time.monotonic() + 10
    while not stand_in.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # the file is written at once, not in one piece
    server = json.loads(stand_in.read_text())["server"]
    folder = tmp_path / "results" / "servers"
    vllm_server.PidFile(folder / f"{owner.pid}.json").write(server, owner.pid, command)
    # While its job runs, the server is left alone ...
    assert vllm_server.reap_orphans(folder) == []
    assert alive(server)
    # ... once the job is gone, the next job stops it and its worker.
    owner.kill()
    owner.wait()
    assert alive(server)
    assert vllm_server.reap_orphans(folder, grace_s=5) == [server]
    assert_gone(stand_in)
    assert not list(folder.glob("*.json"))


def test_the_server_code_follows_only_the_managed_models_jobs():
    # Editing the server's lifecycle re-runs the prediction jobs of managed models only:
    # the adapter vllm reaches it through its imports, openai_compatible does not.
    from novabench.code_fingerprint import code_graph

    managed_files = code_graph().listing(["predict", "novabench.models.vllm"])
    api_files = code_graph().listing(["predict", "novabench.models.openai_compatible"])
    assert "novabench/vllm_server.py" in managed_files
    assert "novabench/vllm_server.py" not in api_files
    assert set(api_files) < set(managed_files)


def test_a_pid_file_never_stops_a_process_that_took_the_servers_number_later(tmp_path):
    # The recorded server is gone and its pid now belongs to another group leader (whose
    # start time differs): the next job must leave that process alone.
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder = tmp_path / "servers"
    folder.mkdir()
    record = {
        "host": socket.gethostname(),
        "pgid": other.pid,
        "start_time": "1",  # not the start time of `other`
        "command": ["serve", MODEL_ID],
        "owner": dead.pid,
        "owner_start_time": None,
    }
    (folder / "1.json").write_text(json.dumps(record))
    try:
        assert vllm_server.reap_orphans(folder) == []
        assert other.poll() is None
        assert not list(folder.glob("*.json")), "the stale record is removed"
    finally:
        other.kill()
        other.wait()


def test_a_hand_started_server_elsewhere_shares_the_managed_routes_cache_keys(tmp_path):
    # A hand-started server on another node, cached under the catalog's address: the keys
    # are the managed entry's, so either route answers from what the other asked.
    from novabench.models.openai_compatible import Adapter as Client
    from novabench.models.openai_compatible import ChatRequest
    from novabench.models.vllm import Adapter as Managed

    model = "Qwen/Qwen2.5-VL-7B-Instruct"
    catalog = {"base_url": "http://localhost:8000/v1", "model": model, "api_key_env": None}
    moved = {**catalog, "base_url": "http://gpu-node:8000/v1"}
    request = ChatRequest("a.png", "p", None, b"\x89PNG")
    managed = Managed("m", {**catalog, "serve": {}}, cache_dir=tmp_path)
    key = managed.request_identity(request)
    assert Client("h", {**moved, "cache_url": catalog["base_url"]}).request_identity(request) == key
    assert Client("h", moved).request_identity(request) != key


# -- a server that is ours before we trust it -----------------------------------------------

JOB_KEY = "job-key-" + "7" * 32


def test_the_server_checks_the_jobs_key_which_no_command_line_or_log_holds(
    dataset, tmp_path, stand_in, monkeypatch, caplog
):
    caplog.set_level("INFO", logger="novabench")
    monkeypatch.setattr(vllm_server.secrets, "token_urlsafe", lambda n: JOB_KEY)
    # A server printing what it was given: the job's key and a token it inherits.
    monkeypatch.setenv("HF_TOKEN", "hub-token-8c1f2e")
    monkeypatch.setenv("VLLM_STAND_IN_PRINT", f"args: api_key={JOB_KEY} HF_TOKEN=hub-token-8c1f2e")
    _, summary, _ = predict(dataset, tmp_path, managed())
    assert summary["status_counts"]["ok"] == 4  # every request carried the key
    record = json.loads(stand_in.read_text())
    assert record["keyed"], "the server was started without a key"
    assert not any(JOB_KEY in arg for arg in record["argv"])
    assert "vllm: args: api_key=[redacted] HF_TOKEN=[redacted]" in caplog.text
    assert JOB_KEY not in caplog.text and "hub-token-8c1f2e" not in caplog.text


def test_the_stand_in_refuses_a_request_without_the_key_as_vllm_does(tmp_path):
    import urllib.error
    import urllib.request

    port = vllm_server.free_port()
    command = [sys.executable, str(ROOT / "tests" / "vllm_stand_in.py"), "serve", MODEL_ID]
    env = {**os.environ, "VLLM_API_KEY": JOB_KEY}
    server = subprocess.Popen([*command, "--port", str(port)], env=env, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while vllm_server._get(f"{url}/health") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert vllm_server._get(f"{url}/health") is not None  # health needs no key
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/v1/models", timeout=5)
        assert refused.value.code == 401
        assert MODEL_ID in vllm_server._served_models(
            vllm_server._get(f"{url}/v1/models", api_key=JOB_KEY)
        )
    finally:
        server.terminate()
        server.wait()


def test_an_impostor_on_the_port_ends_the_job_before_any_request_or_cache_entry(
    dataset, tmp_path, stand_in, monkeypatch
):
    """Another local process binds the port while vLLM is still loading, and answers as a
    vLLM server would: the job must not send it anything, nor cache what it says."""
    from openai_server import FakeOpenAI, Reply
    from vllm_stand_in import add_vllm_routes

    impostor = FakeOpenAI(lambda seen: Reply('[{"bbox_2d": [0, 0, 476, 476]}]'))
    add_vllm_routes(impostor, MODEL_ID)
    port = int(impostor.base_url.rsplit(":", 1)[1].split("/")[0])
    monkeypatch.setattr(vllm_server, "free_port", lambda: port)
    monkeypatch.setenv("VLLM_STAND_IN_LOAD_S", "3")  # still importing when the impostor binds
    with impostor, pytest.raises(NovaError) as error:
        predict(dataset, tmp_path, managed())
    message = str(error.value)
    assert f"port {port} is served by {os.getpid()}, not by the vLLM server" in message
    assert "nothing was sent to it" in message and "\n" not in message
    assert impostor.requests == [], "a request went to the impostor"
    assert not list((tmp_path / "results" / "cache").rglob("*.json")), "its answer was cached"


def planted_pid_file(folder: Path, group: int, **fields) -> Path:
    """A pid file naming ``group``, whose owner is gone, as someone could write it."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder.mkdir(exist_ok=True)
    record = {"host": socket.gethostname(), "pgid": group, "owner": dead.pid, **fields}
    path = folder / "planted.json"
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize(
    "fields",
    [{}, {"command": ["serve", MODEL_ID]}, {"start_time": "leader"}],
    ids=["neither", "no-start-time", "no-command-line"],
)
def test_a_pid_file_without_start_time_and_command_line_is_ignored_in_one_line(
    tmp_path, caplog, fields
):
    sleeper = subprocess.Popen(["setsid", "sleep", "30"])
    try:
        time.sleep(0.2)  # setsid execs sleep in its own session and group
        if fields.get("start_time") == "leader":
            fields = {"start_time": vllm_server.process_start_time(sleeper.pid)}
        path = planted_pid_file(tmp_path / "servers", sleeper.pid, **fields)
        assert vllm_server.reap_orphans(path.parent, grace_s=1) == []
        assert sleeper.poll() is None, "an unrelated process group was stopped"
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1 and "ignoring server pid file" in warnings[0]
        assert "names no start time and command line" in warnings[0]
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize(
    "command",
    [
        ["serve", MODEL_ID, "--host", "127.0.0.1", "--port", "8000", "--served-model-name", "m"],
        ["30"],  # the sleeper's own arguments, copied: not a server's
    ],
    ids=["a-servers-command-line", "the-sleepers-own"],
)
def test_a_pid_file_whose_group_leader_is_not_a_server_we_started_stops_nothing(tmp_path, command):
    # Start time right (read from the process): still not a server the project started.
    sleeper = subprocess.Popen(["setsid", "sleep", "30"])
    try:
        time.sleep(0.2)
        start = vllm_server.process_start_time(sleeper.pid)
        path = planted_pid_file(
            tmp_path / "servers", sleeper.pid, start_time=start, command=command
        )
        assert vllm_server.reap_orphans(path.parent, grace_s=1) == []
        assert sleeper.poll() is None, "an unrelated process group was stopped"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_answers_from_whoever_takes_the_port_after_the_server_died_are_not_kept(
    dataset, tmp_path, stand_in, monkeypatch
):
    import threading

    from openai_server import FakeOpenAI, Reply

    monkeypatch.setenv("VLLM_STAND_IN_DIE_AFTER", "2")
    taken: list[FakeOpenAI] = []

    def take_the_port_when_free() -> None:
        deadline = time.monotonic() + 30
        while not stand_in.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # written at once, not in one piece
        argv = json.loads(stand_in.read_text())["argv"]
        port = int(argv[argv.index("--port") + 1])
        while time.monotonic() < deadline:
            try:
                impostor = FakeOpenAI(lambda seen: Reply('[{"bbox_2d": [0, 0, 9, 9]}]'), port=port)
            except OSError:
                time.sleep(0.005)
                continue
            taken.append(impostor.start())
            return

    thief = threading.Thread(target=take_the_port_when_free, daemon=True)
    thief.start()
    cfg = managed()
    cfg["settings"].update(concurrency=1, max_attempts=6, backoff_base_s=0.5, backoff_max_s=0.5)
    try:
        with pytest.raises(NovaError, match=r"2 of 4 requests were answered \(cached\), 2 failed"):
            predict(dataset, tmp_path, cfg)
    finally:
        thief.join(5)
        for impostor in taken:
            impostor.stop()
    assert taken and taken[0].requests, "the impostor never answered: the test proves nothing"
    entries = list((tmp_path / "results" / "cache" / "qwen-managed").rglob("*.json"))
    assert len(entries) == 2
    assert not any("[0, 0, 9, 9]" in entry.read_text() for entry in entries)


# -- replicas (vLLM data parallel) ----------------------------------------------------------


def test_replicas_must_fit_the_gpus_asked_for_at_plan_time():
    cfg = managed(gpus=4, replicas=4, tensor_parallel_size=2)
    with pytest.raises(ConfigError, match=r"4 replicas x tensor_parallel_size 2 need 8 GPUs"):
        load_adapter("q", cfg).check_settings("q", cfg["settings"])
    fits = managed(gpus=4, replicas=2)
    load_adapter("q", fits).check_settings("q", fits["settings"])  # no error
    serve = vllm_server.resolve_serve("q", fits["settings"]["serve"])
    command = vllm_server.serve_command(MODEL_ID, serve, 41000)
    # each replica on two of the four GPUs, behind one endpoint
    assert command[command.index("--tensor-parallel-size") + 1] == "2"
    assert command[command.index("--data-parallel-size") + 1] == "2"
    with pytest.raises(ConfigError, match=r"set serve.replicas instead"):
        vllm_server.resolve_serve("q", {"extra_args": ["--data-parallel-size=2"]})


def test_a_server_with_replicas_starts_them_behind_one_endpoint(dataset, tmp_path, stand_in):
    records, summary, _ = predict(dataset, tmp_path, managed(replicas=3))
    assert summary["status_counts"]["ok"] == len(records)
    argv = json.loads(stand_in.read_text())["argv"]
    assert argv[argv.index("--data-parallel-size") + 1] == "3"
    assert_gone(stand_in)
