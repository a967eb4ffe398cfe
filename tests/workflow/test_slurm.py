"""The cluster and workstation profiles: their settings as Snakemake applies them, and the
SLURM profile end to end on a real single-node SLURM cluster started on localhost.

The cluster test needs root (it starts daemons and installs the Debian packages with
apt-get when they are missing); elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from novabench.catalog import expand_models
from slurm_cluster import install_packages, local_slurm, skip_reason
from support import ROOT, SNAKEMAKE

PROFILES = ROOT / "workflow" / "profiles"

# The shallow DAG of the cluster test: sample -> dataset -> (predict + read + score) per model.
MODELS = ("gold", "random")
# The cluster run adds a model whose job starts its own vLLM server: the stand-in `vllm`
# of tests/vllm_stand_in.py, on no GPU (the test cluster has none).
SERVED = "served"
CLUSTER_MODELS = (*MODELS, SERVED)
TARGETS = [f"results/sample/scores/localization/{model}.json" for model in CLUSTER_MODELS]
# The served model runs all three tasks on one server, in one SLURM job.
SERVED_TASKS = ("localization", "captioning", "diagnosis")
RUN_TARGETS = TARGETS + [
    f"results/sample/predictions/{task}/{SERVED}.jsonl" for task in SERVED_TASKS[1:]
]
SMALL_CONFIG = {
    "dataset": {"source": "sample", "sample": {"n_cases": 3}},
    # The served model's diagnosis is read by the matcher's rules only (no encoder to fetch).
    "judges": {"matcher": {"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}}},
    "models": {
        "gold": {"adapter": "gold", "tasks": ["localization"]},
        "random": {
            "adapter": "random",
            "tasks": ["localization"],
            "settings": {"seed": 0, "max_boxes": 3},
        },
        "classical": {"adapter": "classical", "tasks": ["localization"], "enabled": False},
        "retrieval": {"adapter": "retrieval", "tasks": ["diagnosis"], "enabled": False},
    },
}
# Wall-clock bound of one Snakemake run; `timeout -k` also kills a hung executor plugin.
RUN_TIMEOUT_S = 420


def snakemake_command(workdir: Path, *args: str, snakefile: Path | None = None) -> list[str]:
    """A Snakemake run under `timeout -k`, which also kills a hung executor plugin."""
    command = [*SNAKEMAKE, "-d", str(workdir), *args]
    if snakefile:
        command += ["--snakefile", str(snakefile)]
    return ["timeout", "-k", "15", str(RUN_TIMEOUT_S), *command]


def snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None, snakefile: Path | None = None
) -> subprocess.CompletedProcess:
    """One Snakemake run from the repository root (relative profile paths resolve there)."""
    return subprocess.run(
        snakemake_command(workdir, *args, snakefile=snakefile),
        cwd=ROOT,
        env={**clean_env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )


def clean_env() -> dict[str, str]:
    """This environment without SLURM's or the profile's variables (they would leak in)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NOVA_SLURM_"))}


def tail(result: subprocess.CompletedProcess, n: int = 6000) -> str:
    return (result.stdout + result.stderr)[-n:]


# --- the profiles as Snakemake applies them (no cluster needed) ---------------------------

# The pipeline with one model of each kind: a local VLM (GPU), an API model, a control.
MIXED_CONFIG = {
    **SMALL_CONFIG,
    "models": {
        **SMALL_CONFIG["models"],
        "vlm": {
            "adapter": "hf_local",
            "tasks": ["localization"],
            "box_format": "qwen25_bbox_2d",
            "settings": {"model": "Qwen/Qwen2.5-VL-7B-Instruct"},
        },
        # A model whose job starts its own vLLM server on four GPUs.
        "served": {
            "adapter": "vllm",
            "tasks": ["localization"],
            "box_format": "qwen25_bbox_2d",
            "settings": {"model": "Qwen/Qwen2.5-VL-72B-Instruct", "serve": {"gpus": 4}},
        },
        "gpt": {
            "adapter": "openai_compatible",
            "tasks": ["localization"],
            "box_format": "pixel_xyxy",
            "settings": {
                "base_url": "https://api.openai.com/v1",
                "model": "gpt-4o-2024-08-06",
                "api_key_env": "OPENAI_API_KEY",
                "provider": "openai",
            },
        },
    },
}


def planned_jobs(output: str) -> list[dict]:
    """The jobs a dry run prints: rule, group, wildcards and resources of each."""
    jobs: list[dict] = []
    group = None
    for line in output.splitlines():
        if m := re.search(r"Group job (\w+)", line):
            group = m.group(1)
        elif m := re.match(r"(\s*)(?:local)?(?:rule|checkpoint) (\w+):", line):
            # jobs of a group are printed indented under its header
            group = group if m.group(1) else None
            jobs.append({"rule": m.group(2), "group": group, "wildcards": {}, "resources": {}})
        elif jobs and (m := re.match(r"\s*(wildcards|resources): (.*)", line)):
            jobs[-1][m.group(1)] = dict(item.split("=", 1) for item in m.group(2).split(", "))
    return jobs


def dry_run_on_slurm(workdir: Path, env: dict[str, str] | None = None) -> dict[tuple, dict]:
    config = workdir / "mixed.yaml"
    config.write_text(yaml.safe_dump(MIXED_CONFIG))
    result = snakemake(
        workdir / "run",
        "-n",
        "--workflow-profile",
        "workflow/profiles/slurm",
        "--configfile",
        str(config),
        env=env,
    )
    assert result.returncode == 0, tail(result)
    jobs = planned_jobs(result.stdout + result.stderr)
    return {(j["rule"], j["wildcards"].get("model")): j for j in jobs}


def test_no_machine_profile_applies_itself_silently():
    # Snakemake applies profiles/default next to the Snakefile (or in the working
    # directory) without being asked: it sets only what keeps a plain run resumable; the
    # machine profiles must be named to take effect, and set that too.
    default = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    assert default == {"rerun-incomplete": True}
    assert sorted(p.name for p in (ROOT / "profiles").iterdir()) == ["default"]
    assert sorted(p.name for p in PROFILES.iterdir()) == ["slurm", "workstation"]
    for profile in PROFILES.iterdir():
        settings = yaml.safe_load((profile / "config.yaml").read_text())
        assert settings["rerun-incomplete"] is True, profile.name


def test_slurm_profile_sizes_jobs_by_model_kind_and_groups_scoring(tmp_path):
    env = {"NOVA_SLURM_PARTITION": "gpu-a100", "NOVA_SLURM_ACCOUNT": "lab42"}
    jobs = dry_run_on_slurm(tmp_path, env)
    local_vlm, api, control, served = (
        jobs["predict", m]["resources"] for m in ("vlm", "gpt", "gold", "served")
    )
    # the local VLM gets a GPU (sbatch --gpus=1) and the memory to load its weights ...
    assert local_vlm["gpu"] == "1" and int(local_vlm["mem_mb"]) >= 16000
    # ... a model's shared vLLM server its GPUs, CPUs and memory for a 72B model, asked for
    # once, in the group of its tasks' jobs, which ask for none; no provider's cap (no
    # endpoint is shared) ...
    server = jobs["serve_model", "served"]
    assert (server["resources"]["gpu"], server["resources"]["mem_mb"]) == ("4", "128000")
    assert server["resources"]["cpus_per_task"] == "16" and server["group"] == "model"
    assert served["gpu"] == "0" and served["api_openai"] == "0"
    # ... an API model neither, but one unit of its provider's cap
    assert api["gpu"] == "0" and int(api["mem_mb"]) <= 4000 and api["api_openai"] == "1"
    assert control["gpu"] == "0" and control["api_openai"] == "0"
    for job in jobs.values():
        if job["resources"]:
            assert job["resources"]["slurm_partition"] == "gpu-a100", job
            assert job["resources"]["slurm_account"] == "lab42", job
    # each model's reading and scoring share the SLURM job of its prediction
    for model in ("vlm", "served", "gpt", "gold", "random"):
        groups = {jobs[rule, model]["group"] for rule in ("predict", "read", "score")}
        assert groups == {"model"}, model
    # an LLM judge runs where the answers are read; scoring counts verdicts
    assert (
        jobs["read", "gpt"]["resources"]["runtime"],
        jobs["score", "gpt"]["resources"]["runtime"],
    ) == ("60", "30")
    assert jobs["sample", None]["group"] is None

    # Without the variables the cluster's default partition and account apply.
    jobs = dry_run_on_slurm(tmp_path)
    for job in jobs.values():
        assert not {"slurm_partition", "slurm_account"} & set(job["resources"]), job


@pytest.mark.slow  # a dry run of the whole paper DAG
def test_the_paper_plans_on_slurm_with_gpus_for_the_qwen_models_and_no_server_to_start(tmp_path):
    # One command runs the paper's four models: the two Qwen models' jobs start their own
    # vLLM servers on four GPUs each, so nothing needs a hand-started server or its address.
    result = snakemake(
        tmp_path,
        "-n",
        "--workflow-profile",
        "workflow/profiles/slurm",
        "--configfile",
        "config/paper.yaml",
    )
    assert result.returncode == 0, tail(result)
    jobs = planned_jobs(result.stdout + result.stderr)
    predict, servers = {}, {}
    for job in jobs:
        if job["rule"] in ("predict", "serve_model"):
            found = predict if job["rule"] == "predict" else servers
            found.setdefault(job["wildcards"]["model"], []).append(job["resources"])
    for model in ("qwen2.5-vl-72b", "qwen2-vl-72b"):
        assert len(predict[model]) == 3, model  # the three tasks ...
        assert {r["gpu"] for r in predict[model]} == {"0"}
        for resources in predict[model]:
            assert not any(v == "1" for k, v in resources.items() if k.startswith("api_"))
        # ... on one server, whose GPUs are asked for once
        assert [(r["gpu"], r["mem_mb"]) for r in servers[model]] == [("4", "128000")], model
    for model in ("gpt-4o", "gemini-2.0-flash"):
        assert {r["gpu"] for r in predict[model]} == {"0"}
    # The estimate prints the managed models' tokens and time (with their GPU time).
    output = result.stdout + result.stderr
    assert re.search(
        r"qwen2\.5-vl-72b\s+\(all\)\s+2,718\s+2,718\s+[\d,]+\s+[\d,]+\s+-\s+.*GPU", output
    )


# A stand-in for the prediction rule: its GPU claim per model as the real rule makes it
# (1 for a local VLM, 0 otherwise). Each job records when it ran, to see what overlapped.
STAND_IN = textwrap.dedent(
    """
    MODELS = ["vlm-a", "vlm-b", "api-a", "api-b"]

    rule all:
        input: expand("done/{model}.txt", model=MODELS)

    rule predict:
        output: "done/{model}.txt"
        resources: gpu=lambda wildcards: int(wildcards.model.startswith("vlm"))
        shell: "date +%s.%N > {output}; sleep 1.5; date +%s.%N >> {output}"
    """
)


def intervals(workdir: Path, kind: str) -> list[tuple[float, ...]]:
    files = sorted((workdir / "done").glob(f"{kind}-*.txt"))
    return [tuple(map(float, f.read_text().split())) for f in files]


def test_workstation_profile_runs_one_local_vlm_job_at_a_time(tmp_path):
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(STAND_IN)
    result = snakemake(
        tmp_path / "run",
        "--workflow-profile",
        "workflow/profiles/workstation",
        snakefile=snakefile,
    )
    assert result.returncode == 0, tail(result)
    (a_start, a_end), (b_start, b_end) = intervals(tmp_path / "run", "vlm")
    # one GPU: the two local-VLM jobs never overlap ...
    assert a_end <= b_start or b_end <= a_start
    # ... while jobs without a GPU do run side by side
    (c_start, c_end), (d_start, d_end) = intervals(tmp_path / "run", "api")
    assert max(c_start, d_start) < min(c_end, d_end)


def test_api_caps_are_the_same_in_both_profiles():
    def caps(name: str) -> dict[str, int]:
        text = (PROFILES / name / "config.yaml").read_text()
        resources = yaml.safe_load(text)["resources"]
        return {k: v for k, v in resources.items() if k.startswith("api_")}

    slurm, workstation = caps("slurm"), caps("workstation")
    assert slurm == workstation
    # one per provider named in the paper's configuration
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    expand_models(paper, ROOT / "config" / "models")  # the paper's models are catalog names
    providers = {
        "api_" + m["settings"]["provider"]
        for m in paper["models"].values()
        if m["adapter"] == "openai_compatible"
    }
    assert providers <= set(slurm)


# A job that outlives Snakemake: a separate process, it finishes after Snakemake is killed.
SLOW_JOB = textwrap.dedent(
    """
    rule all:
        input: "done.txt"

    rule slow:
        output: "done.txt"
        shell: "sleep 2; date +%s.%N > {output}"
    """
)


@pytest.mark.slow
def test_after_kill_9_unlock_then_the_profiles_rerun_the_jobs_that_were_running(tmp_path):
    snakefile, workdir = tmp_path / "Snakefile", tmp_path / "run"
    snakefile.write_text(SLOW_JOB)
    # Runs without a profile name none: profiles/default (rerun-incomplete) would apply.
    bare = ("--workflow-profile", "none")
    command = snakemake_command(workdir, "--cores", "1", *bare, snakefile=snakefile)
    killed = subprocess.Popen(command[4:], cwd=ROOT, env=clean_env(), stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list((workdir / ".snakemake" / "incomplete").glob("*")):
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    killed.kill()  # Snakemake only; its job runs on and writes its output
    killed.wait()
    while not (workdir / "done.txt").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    first = (workdir / "done.txt").read_text()

    # Snakemake cannot tell the lock of a killed run from one still running: --unlock once.
    locked = snakemake(workdir, "--cores", "1", *bare, snakefile=snakefile)
    assert locked.returncode != 0
    assert "IncompleteFilesException" in tail(locked) or "LockException" in tail(locked)
    assert snakemake(workdir, "--unlock", "--cores", "1", snakefile=snakefile).returncode == 0
    # Without a profile the marked output still stops the run ...
    plain = snakemake(workdir, "--cores", "1", *bare, snakefile=snakefile)
    assert plain.returncode != 0 and "IncompleteFilesException" in tail(plain)
    # ... with either profile the job is planned again (the SLURM one in a dry run) and run.
    planned = snakemake(
        workdir, "-n", "--workflow-profile", "workflow/profiles/slurm", snakefile=snakefile
    )
    assert planned.returncode == 0 and "rule slow:" in tail(planned), tail(planned)
    rerun = snakemake(
        workdir, "--workflow-profile", "workflow/profiles/workstation", snakefile=snakefile
    )
    assert rerun.returncode == 0, tail(rerun)
    assert (workdir / "done.txt").read_text() != first


# --- the SLURM profile on a real SLURM ----------------------------------------------------


@pytest.fixture(scope="module")
def timings() -> dict[str, float]:
    return {}


@pytest.fixture(scope="module")
def cluster(timings):
    """A single-node SLURM cluster on localhost for this module, always torn down."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    start = time.monotonic()
    install_packages()
    timings["install"] = time.monotonic() - start
    start = time.monotonic()
    with local_slurm() as cluster:
        timings["setup"] = time.monotonic() - start
        yield cluster
        start = time.monotonic()
    timings["teardown"] = time.monotonic() - start
    print(f"\nSLURM test timings (s): {json.dumps({k: round(v, 1) for k, v in timings.items()})}")


def _config_with_a_served_model(folder: Path) -> Path:
    """SMALL_CONFIG plus the SERVED model on the vLLM stand-in; returns the config file."""
    vllm = folder / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/tests/vllm_stand_in.py" "$@"\n')
    vllm.chmod(0o755)
    served = {
        "adapter": "vllm",
        "tasks": list(SERVED_TASKS),
        "box_format": "qwen25_bbox_2d",
        "prompts": {"localization": "config/prompts/localization-qwen25-v1.txt"},
        "settings": {
            "model": "Qwen/Qwen2.5-VL-7B-Instruct",
            "serve": {"gpus": 0, "mem_mb": 1000, "executable": str(vllm)},
        },
    }
    config = folder / "small.yaml"
    config.write_text(
        yaml.safe_dump({**SMALL_CONFIG, "models": {**SMALL_CONFIG["models"], SERVED: served}})
    )
    return config


@pytest.fixture(scope="module")
def runs(cluster, timings, tmp_path_factory) -> dict:
    """The same targets run locally and through the SLURM profile."""
    folder = tmp_path_factory.mktemp("config")
    config = _config_with_a_served_model(folder)
    local, on_slurm = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("slurm")
    # Where each run's stand-in server writes its pids, to check that none is left.
    pids = {"local": folder / "pids-local.json", "slurm": folder / "pids-slurm.json"}
    starts = {where: folder / f"starts-{where}" for where in pids}

    # The local reference run shares the machine with the SLURM run (whose main process
    # mostly sleeps between status checks) instead of adding its full length.
    local_log = local / "snakemake.log"
    start = time.monotonic()
    with open(local_log, "w") as log_file:
        local_run = subprocess.Popen(
            snakemake_command(local, *RUN_TARGETS, "--cores", "1", "--configfile", str(config)),
            cwd=ROOT,
            env={
                **clean_env(),
                "VLLM_STAND_IN_PIDS": str(pids["local"]),
                "VLLM_STAND_IN_STARTS": str(starts["local"]),
            },
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        result = snakemake(
            on_slurm,
            *RUN_TARGETS,
            "--workflow-profile",
            "workflow/profiles/slurm",
            "--configfile",
            str(config),
            # Poll every few seconds instead of the cluster default; this cluster is idle.
            "--slurm-init-seconds-before-status-checks",
            "2",
            env={
                "NOVA_SLURM_ACCOUNT": cluster.account,
                "NOVA_SLURM_PARTITION": cluster.partition,
                "VLLM_STAND_IN_PIDS": str(pids["slurm"]),
                "VLLM_STAND_IN_STARTS": str(starts["slurm"]),
            },
        )
        timings["slurm_run"] = time.monotonic() - start
        local_returncode = local_run.wait(RUN_TIMEOUT_S + 30)
        timings["both_runs"] = time.monotonic() - start
    finally:
        if local_run.poll() is None:
            local_run.terminate()  # `timeout` passes it on to Snakemake
            local_run.wait(30)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"{tail(result)}\n{cluster.logs()}"
    assert local_returncode == 0, local_log.read_text()[-6000:]
    return {"local": local, "slurm": on_slurm, "log": log, "pids": pids, "starts": starts}


@pytest.mark.slow
@pytest.mark.slurm
def test_every_job_ran_as_a_slurm_job_recorded_in_accounting(cluster, runs):
    log = runs["log"]
    run_id = re.search(r"SLURM run ID: (\S+)", log)
    assert run_id, "the SLURM executor did not run"
    run_id = run_id.group(1)
    submitted = set(re.findall(r"submitted with SLURM jobid (\d+)", log))
    # sample, dataset, and one job per model holding its predict, read and score jobs (the
    # served model's three tasks and its one server too: its GPUs asked for once)
    assert len(submitted) == 2 + len(CLUSTER_MODELS)

    # slurmdbd records asynchronously; give it a moment.
    deadline = time.monotonic() + 30
    while True:
        records = cluster.sacct("--name", run_id)
        if {r["JobID"] for r in records} >= submitted or time.monotonic() > deadline:
            break
        time.sleep(1)

    assert {r["JobID"] for r in records} == submitted
    for record in records:
        assert (record["State"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
        assert record["Account"] == cluster.account
        assert record["Partition"] == cluster.partition
        assert Path(record["WorkDir"]) == runs["slurm"]
    comments = sorted(r["Comment"] for r in records)
    assert comments == sorted(
        ["rule_sample", "rule_dataset", "rule_model_predict_read_score_serve_model"]
        + ["rule_model_predict_read_score"] * len(MODELS)
    )


@pytest.mark.slow
@pytest.mark.slurm
def test_slurm_outputs_equal_a_local_run(runs):
    for model in MODELS:
        for suffix in (".json", ".images.csv"):
            name = f"results/sample/scores/localization/{model}{suffix}"
            on_slurm = (runs["slurm"] / name).read_bytes()
            assert on_slurm == (runs["local"] / name).read_bytes(), name
        predictions = f"results/sample/predictions/localization/{model}.jsonl"
        assert (runs["slurm"] / predictions).read_bytes() == (
            runs["local"] / predictions
        ).read_bytes()

    # The managed model's answers (their latencies aside) and scores equal a local run's.
    def answers(root: Path) -> list:
        lines = (root / f"results/sample/predictions/localization/{SERVED}.jsonl").read_text()
        records = [json.loads(line) for line in lines.splitlines()]
        return [(r["filename"], r["status"], r["raw"], r.get("frame_size")) for r in records]

    assert answers(runs["slurm"]) == answers(runs["local"])
    assert {status for _, status, _, _ in answers(runs["slurm"])} == {"ok"}
    name = f"results/sample/scores/localization/{SERVED}.images.csv"
    assert (runs["slurm"] / name).read_bytes() == (runs["local"] / name).read_bytes()
    gold = json.loads((runs["slurm"] / TARGETS[0]).read_text())["metrics"]
    assert gold["mAP@30"] == pytest.approx(100.0)


@pytest.mark.slow
@pytest.mark.slurm
def test_no_vllm_server_outlives_its_slurm_job(runs):
    from test_serving import alive

    for where, pids in runs["pids"].items():
        record = json.loads(pids.read_text())  # the server ran ...
        assert record["argv"][:2] == ["serve", "Qwen/Qwen2.5-VL-7B-Instruct"], where
        # ... and neither it nor its worker is left once its job is done
        assert not alive(record["server"]) and not alive(record["worker"]), where
        # one server for the model's three tasks
        assert len(runs["starts"][where].read_text().splitlines()) == 1, where
    leftovers = list((runs["slurm"] / "results" / "servers").glob("*"))
    assert not leftovers, leftovers
