"""Fixtures shared by several test modules, and the skip rule of the `gpu` mark.

The marks themselves (`slow`, `slurm`, `gpu`) are declared in pyproject.toml; the fast
subset is ``pytest -m "not slow and not slurm"``.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

import pytest

from support import ROOT, SNAKEMAKE, empty_home_environment

# For tests of this file's own hooks (test_markers.py).
pytest_plugins = ["pytester"]


@functools.cache
def cuda_missing() -> str | None:
    """Why no CUDA device can be used here, or None when one can."""
    try:
        import torch
    except ImportError:
        return "needs torch with CUDA (torch is not installed)"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU (torch.cuda.is_available() is false)"
    return None


def pytest_collection_modifyitems(config, items):
    # torch is imported only when a collected test asks for a GPU: it takes seconds.
    for item in items:
        if item.get_closest_marker("gpu") is not None and cuda_missing():
            item.add_marker(pytest.mark.skip(reason=cuda_missing()))


@pytest.fixture(scope="session")
def nltk_data(tmp_path_factory) -> Path:
    """WordNet 3.0 for METEOR, copied once per session from Debian's packages."""
    from novabench.wordnet import DEBIAN_WORDNET_DIR, ensure_wordnet

    if not (DEBIAN_WORDNET_DIR / "index.sense").is_file():
        pytest.skip("needs `apt-get install wordnet-base wordnet-sense-index`")
    return ensure_wordnet(tmp_path_factory.mktemp("nltk_data"))


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> Path:
    """The four images of ``upstream.IMAGES`` built into nova.parquet; tests only read it."""
    from upstream import build_local_dataset

    return build_local_dataset(tmp_path_factory.mktemp("nova"))


@pytest.fixture(scope="session")
def matcher():
    """The offline diagnosis matcher without its embedding model (rules only)."""
    from novabench.judges.diagnosis_matcher import DiagnosisMatcher

    return DiagnosisMatcher(embedding_fallback=False)


@pytest.fixture(scope="session")
def sample_checkout(tmp_path_factory) -> Path:
    """A copy of the checkout after one full run on the embedded sample (the default
    config), shared by the slow workflow tests: one sample run per session instead of one
    per module. A test that edits a file of it restores the file before it returns. HOME
    is an empty folder beside it (``home``), to show that no job writes there."""
    root = tmp_path_factory.mktemp("checkout") / "nova"
    home = root.parent / "home"
    home.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", ".snakemake", "results", ".venv")
    root.mkdir()
    shutil.copy2(ROOT / "Snakefile", root / "Snakefile")
    for folder in ("workflow", "scripts", "config", "envs", "validation"):
        shutil.copytree(ROOT / folder, root / folder, ignore=ignore)
    result = subprocess.run(
        [*SNAKEMAKE, "--cores", "2"],
        cwd=root,
        env=empty_home_environment(root, home),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    return root
