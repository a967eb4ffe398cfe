"""Where files live: production code reads nothing under tests/, the validation sets are
indexed, and each prompt exists once."""

from __future__ import annotations

import os
import re
from pathlib import Path

from support import ROOT

# What the pipeline and the package run. scripts/tools/ and scripts/benchmarks/ are not
# here: they are developer tools run from a checkout (the API benchmarks start the loopback
# test server tests/openai_server.py on purpose, to measure the adapter against it), and
# are checked apart below.
PRODUCTION = [
    *sorted((ROOT / "scripts" / "novabench").rglob("*")),
    *sorted((ROOT / "scripts").glob("*.py")),
    *sorted((ROOT / "workflow").rglob("*")),
    ROOT / "Snakefile",
    *sorted((ROOT / "config").rglob("*")),
]
DEV_TOOLS = [
    *sorted((ROOT / "scripts" / "tools").rglob("*.py")),
    *sorted((ROOT / "scripts" / "benchmarks").rglob("*.py")),
]
# A path under tests/, written out or joined from parts. A pointer to the test module that
# checks a claim (tests/test_x.py, tests/judges/test_x.py) is documentation, not something
# the code reads.
TESTS_PATH = re.compile(r"\btests/(?!(?:\w+/)*test_\w+\.py\b)|[\"']tests[\"']")
TESTS_DATA = re.compile(r"\btests/data\b|[\"']tests[\"']\s*/\s*[\"']data[\"']")


# Images (the HTML report's example figure) name no path.
BINARY = {".png", ".jpg", ".gif", ".pdf", ".parquet", ".gz", ".pyc"}


def _text_files(paths: list[Path]) -> list[Path]:
    return [p for p in paths if p.is_file() and p.suffix not in BINARY]


def _hits(paths: list[Path], pattern: re.Pattern) -> list[str]:
    hits = []
    for path in _text_files(paths):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return hits


def test_no_production_file_names_a_path_under_tests():
    assert len(_text_files(PRODUCTION)) > 100  # the globs found the tree
    assert _hits(PRODUCTION, TESTS_PATH) == []


def test_the_pattern_catches_a_written_and_a_joined_tests_path():
    assert TESTS_PATH.search('FOLDER = "tests/data/judge_validation"')
    assert TESTS_PATH.search('ROOT / "tests" / "data"')
    assert not TESTS_PATH.search("see tests/test_refusals.py, which prints precision")
    assert not TESTS_PATH.search("(tests/judges/test_diagnosis_matcher.py)")
    assert TESTS_PATH.search('"tests/judges/data.yaml"')


def test_dev_tools_read_no_test_data():
    assert DEV_TOOLS
    assert _hits(DEV_TOOLS, TESTS_DATA) == []


def test_the_validation_index_names_every_file_of_the_folder():
    folder = ROOT / "validation"
    index = (folder / "README.md").read_text(encoding="utf-8")
    files = sorted(p.name for p in folder.iterdir() if p.name != "README.md")
    assert "captions.jsonl" in files and "refusals.jsonl" in files
    assert [name for name in files if f"`{name}`" not in index] == []


# Folders that are not the repository's own files (runs, environments, builds).
NOT_SOURCE = {".git", ".snakemake", ".venv", "results", "build", "dist", "__pycache__"}


def prompt_files() -> list[Path]:
    """Every prompt template: a .txt file in a folder named prompts."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if d not in NOT_SOURCE]  # results/ is large
        if Path(folder).name == "prompts":
            found += [Path(folder) / f for f in files if f.endswith(".txt")]
    return sorted(found)


def test_each_prompt_exists_once():
    prompts = prompt_files()
    # The model prompts of the workflow and the judges' defaults in the package.
    assert ROOT / "config" / "prompts" / "diagnosis-v1.txt" in prompts
    assert ROOT / "scripts" / "novabench" / "resources" / "prompts" / "judge-diagnosis-v1.txt" in (
        prompts
    )
    by_name: dict[str, list[str]] = {}
    by_content: dict[bytes, list[str]] = {}
    for path in prompts:
        where = str(path.relative_to(ROOT))
        by_name.setdefault(path.name, []).append(where)
        by_content.setdefault(path.read_bytes(), []).append(where)
    assert [w for w in by_name.values() if len(w) > 1] == []
    assert [w for w in by_content.values() if len(w) > 1] == []
