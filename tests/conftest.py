"""Fixtures shared by several test modules, and the skip rule of the `gpu` mark.

The marks themselves (`slow`, `slurm`, `gpu`) are declared in pyproject.toml; the fast
subset is ``pytest -m "not slow and not slurm"``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

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
