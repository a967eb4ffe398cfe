"""The marks of pyproject.toml and the `gpu` skip rule of conftest.py, in nested runs."""

from __future__ import annotations

import os
import tomllib

import pytest

from support import TESTS

MARKERS = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["tool"]["pytest"][
    "ini_options"
]["markers"]

GPU_TEST = """
import pytest

@pytest.mark.gpu
def test_on_the_gpu():
    pass

def test_anywhere():
    pass
"""
# Stands in for torch in the nested run, so the rule is checked with and without CUDA.
FAKE_TORCH = """
class cuda:
    @staticmethod
    def is_available():
        return {available}
"""


@pytest.fixture
def nested(pytester, monkeypatch):
    """A separate pytest run with this suite's conftest and registered marks."""
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    pytester.makeini(
        "[pytest]\naddopts = --strict-markers\nmarkers =\n    " + "\n    ".join(MARKERS)
    )
    pytester.makepyfile(test_gpu=GPU_TEST)
    paths = [str(TESTS), str(TESTS.parent / "scripts"), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    return pytester


def test_the_marks_are_registered_with_a_description():
    names = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in MARKERS}
    assert {"slow", "slurm", "gpu"} <= set(names)
    assert all(names.values())


def test_a_gpu_test_is_skipped_with_the_reason_without_cuda(nested):
    nested.makepyfile(torch=FAKE_TORCH.format(available=False))
    result = nested.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*needs a CUDA GPU (torch.cuda.is_available() is false)*"])


def test_a_gpu_test_runs_where_cuda_is_available(nested):
    nested.makepyfile(torch=FAKE_TORCH.format(available=True))
    nested.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
