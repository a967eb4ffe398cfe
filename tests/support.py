"""What many test modules share: where the checkout and the tests' own files are, running
Snakemake on a workflow, a free loopback port, an LLM judge's backend on the test chat
server and what the judge's prompts carry, a prediction job over a file of answers.
Importable from every test module (pytest's ``pythonpath`` holds tests/), wherever the
module lies under tests/."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

# The checkout, and the test suite's folders in it.
ROOT = Path(__file__).resolve().parents[1]
# An LLM judge's settings that switch its live check off, for tests that count the judge's
# own requests (the check has tests of its own: tests/judges/test_live_check.py).
NO_LIVE_CHECK = {"live_check": {"diagnosis_pairs": 0, "caption_pairs": 0}}
TESTS = ROOT / "tests"
DATA = TESTS / "data"
SNAPSHOTS = TESTS / "snapshots"
SCRIPTS = ROOT / "scripts"
VALIDATION = ROOT / "validation"
# This interpreter's Snakemake, whichever environment runs the tests.
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def empty_home_environment(checkout: Path, home: Path) -> dict[str, str]:
    """This process's environment with HOME ``home`` and no cache folder of its own."""
    from novabench.job_env import job_environment

    # The Hub cache stays the user's (a cached BERTScore encoder is still found).
    hub = os.environ.get("HF_HUB_CACHE") or job_environment(checkout)["HF_HUB_CACHE"]
    env = {**os.environ, "HOME": str(home), "HF_HUB_CACHE": hub}
    for name in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    return env


def snakemake(
    workdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 1200,
) -> subprocess.CompletedProcess:
    """``snakemake --cores 2 ARGS`` in a subprocess, its output captured (``--cores`` in
    ``args`` overrides the 2). A copy of the checkout (``workdir`` holds a Snakefile) runs
    its own workflow, in it; any other folder is the working directory (``-d``) of this
    checkout's workflow. ``env``: its environment (None: this process's)."""
    workdir = Path(workdir)
    copy = (workdir / "Snakefile").is_file()
    where = [] if copy else ["-s", str(ROOT / "Snakefile"), "-d", str(workdir)]
    return subprocess.run(
        [*SNAKEMAKE, *where, "--cores", "2", *args],
        cwd=workdir if copy else ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def vllm_stand_in(folder: Path, monkeypatch) -> dict[str, Path]:
    """An executable ``vllm`` in ``folder`` that runs tests/vllm_stand_in.py, and the files
    where the stand-in counts its starts and writes its pids (set in the environment)."""
    wrapper = folder / "vllm"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/tests/vllm_stand_in.py" "$@"\n')
    wrapper.chmod(0o755)
    files = {"vllm": wrapper, "starts": folder / "starts", "pids": folder / "pids.json"}
    monkeypatch.setenv("VLLM_STAND_IN_STARTS", str(files["starts"]))
    monkeypatch.setenv("VLLM_STAND_IN_PIDS", str(files["pids"]))
    return files


def free_port() -> int:
    """A loopback TCP port no one listens on (now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def judge_backend(server, **settings) -> dict:
    """An LLM judge's backend settings for the test chat server ``server``: model
    "judge-llm", no key, quick retries (two attempts), ``settings`` over them."""
    return {
        "base_url": server.base_url,
        "model": "judge-llm",
        "api_key_env": None,
        "backoff_base_s": 0.01,
        "timeout_s": 5,
        "max_attempts": 2,
        **settings,
    }


def diagnosis_of(prompt: str) -> tuple[str, list[str]]:
    """(reference, candidates) as the diagnosis judge's prompt lists them."""
    reference = prompt.split("Reference diagnosis:\n", 1)[1].split("\n\n", 1)[0]
    block = prompt.split("most likely first:\n", 1)[1].split("\n\n", 1)[0]
    return reference, [re.sub(r"^\d+\. ", "", line) for line in block.splitlines()]


def pair_of(prompt: str) -> tuple[str, str]:
    """(reference, prediction) as the paired caption judge's prompt carries them."""
    reference = prompt.split("Reference description (GT):\n", 1)[1].split("\n\n", 1)[0]
    prediction = prompt.split("Predicted description (Pred):\n", 1)[1].split("\n\nAnswer", 1)[0]
    return reference, prediction


def predict_from_file(
    dataset: Path, answers: Path, task: str, out: Path, name: str = "m", **model
) -> dict:
    """The prediction job of model ``name`` (the predictions-file adapter over ``answers``,
    ``model``: more of its config) on ``task``: its records in ``out``, its summary beside
    them (``<out stem>.summary.json``), which it returns."""
    from novabench.predict import run_predictions

    settings = {"path": str(answers)}
    cfg = {"adapter": "predictions_file", "tasks": [task], **model, "settings": settings}
    return run_predictions(
        dataset=dataset,
        task=task,
        model_name=name,
        model_cfg=cfg,
        prompt_path=None,
        out=out,
        summary_out=out.with_suffix(".summary.json"),
    )


class RecordingJudge:
    """A judge that records what it is asked, and answers "no keywords" / "no match":
    what reading asks a task's judge, compared with what the estimate counts."""

    def __init__(self):
        self.asked = []

    def judge_pairs(self, pairs):
        from novabench.judges import KeywordSet

        self.asked += list(pairs)
        return [(KeywordSet(frozenset(), False), KeywordSet(frozenset(), False)) for _ in pairs]

    def match_ranked_many(self, pairs):
        self.asked += [(list(ranked), reference) for ranked, reference in pairs]
        return [(False, False) for _ in pairs]

    def identity(self):
        return {"name": "recording"}
