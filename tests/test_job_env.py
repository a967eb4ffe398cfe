"""Jobs keep the libraries' state under results/: a run writes nothing in the home folder.

The whole workflow run of tests/workflow/test_workflow.py runs with HOME pointing to an empty folder
and checks the same of every job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from novabench.job_env import job_environment
from support import ROOT

# What a dataset job and a figure job do with the libraries that keep state: `datasets`
# reads the metadata, matplotlib draws and saves.
JOB = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from upstream import write_current
from novabench.dataset.build import build_dataset
from novabench.report.figures import apply_style
import matplotlib.pyplot as plt

work = Path(sys.argv[3])
root = write_current(work / "repo")
build_dataset({"source": "local", "local_path": str(root)}, work / "out" / "nova.parquet",
              work / "out" / "manifest.json")
apply_style()
fig, ax = plt.subplots()
ax.plot([0, 1], [0, 1], label="gold")
ax.legend()
fig.savefig(work / "out" / "figure.png")
"""


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def clean_environment(home: Path) -> dict[str, str]:
    """This process's environment with HOME elsewhere and no cache variables of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HF_", "MPL", "XDG_")) and k != "PYTHONPATH"
    }
    return {**env, "HOME": str(home)}


def run_job(tmp_path: Path, name: str, env: dict[str, str]) -> None:
    work = tmp_path / name
    work.mkdir()
    args = [str(ROOT / "scripts"), str(ROOT / "tests"), str(work)]
    result = subprocess.run(
        [sys.executable, "-c", JOB, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow  # two fresh interpreters build matplotlib's font cache
def test_a_job_with_the_workflow_environment_writes_nothing_in_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    # Without the workflow's variables matplotlib caches its fonts in the home folder: the
    # check below can see a write.
    run_job(tmp_path, "bare", clean_environment(home))
    assert any(name.startswith(".cache/matplotlib/") for name in files_under(home))

    home = tmp_path / "empty-home"
    home.mkdir()
    cache = tmp_path / "results" / "cache"
    env = clean_environment(home)
    run_job(tmp_path, "workflow", {**env, **job_environment(cache, env)})
    assert files_under(home) == []
    assert list((home).iterdir()) == []  # not even an empty folder
    assert any(name.startswith("matplotlib/fontlist") for name in files_under(cache))


def test_the_users_hub_cache_and_named_dataset_caches_are_kept(tmp_path):
    env = job_environment(tmp_path / "cache", {"HF_HOME": "/models/hf"})
    assert env["HF_HUB_CACHE"] == "/models/hf/hub"  # local models are found where they are
    assert env["MPLCONFIGDIR"] == str((tmp_path / "cache" / "matplotlib").resolve())
    assert env["HF_DATASETS_CACHE"] == str((tmp_path / "cache" / "datasets").resolve())
    named = {"HF_DATASETS_CACHE": "/scratch/ds", "HF_HUB_CACHE": "/scratch/hub"}
    env = job_environment(tmp_path / "cache", named)
    assert (env["HF_DATASETS_CACHE"], env["HF_HUB_CACHE"]) == ("/scratch/ds", "/scratch/hub")
    home_hub = Path("~/.cache/huggingface/hub").expanduser()
    assert job_environment(tmp_path, {})["HF_HUB_CACHE"] == str(home_hub)
    xdg = job_environment(tmp_path, {"XDG_CACHE_HOME": "/xdg"})
    assert xdg["HF_HUB_CACHE"] == "/xdg/huggingface/hub"
