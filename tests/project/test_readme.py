"""README.md: its first two commands are the ones CI and users run, and every link in it
works on a fresh clone (it names files tracked by git, not run outputs)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from support import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
# [text](target) and ![alt](target), not inside code spans.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def tracked() -> set[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(listed.splitlines())


def test_every_relative_link_names_a_file_of_the_repository():
    files = tracked()
    folders = {str(Path(f).parent) for f in files} | {
        str(p) for f in files for p in Path(f).parents
    }
    targets = [t.split("#")[0] for t in LINK.findall(README)]
    relative = [t for t in targets if t and not re.match(r"[a-z]+:", t)]
    assert relative, "the README links no file of its own"
    broken = [t for t in relative if t.rstrip("/") not in files | folders]
    assert not broken, f"README links to files a fresh clone lacks: {broken}"


def test_the_first_two_commands_are_the_main_job_and_the_tests():
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    assert blocks[0].strip() == "bash scripts/setup.sh && .venv/bin/snakemake --cores 8"
    assert blocks[1].strip() == "bash scripts/setup.sh --dev && .venv/bin/python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1].strip() in ci


# A section of the README named in prose: `"Section" in the README`, `README, "Section"`.
SECTION_POINTER = re.compile(r'"([^"\n]+)" in the README|README, "([^"\n]+)"')
FORMAT_LINE = '{"filename": '  # how the README and docs/models.md give a raw-answers line


def readme_section(title: str) -> str | None:
    """The text under the README heading ``title`` (None where it has none)."""
    match = re.search(rf"^##+ {re.escape(title)}\n(.*?)(?=^##+ |\Z)", README, re.M | re.S)
    return match.group(1) if match else None


def pointers(text: str) -> list[str]:
    text = " ".join(text.split())  # a pointer may be broken over two lines
    return [a or b for a, b in SECTION_POINTER.findall(text)]


def test_every_readme_section_named_in_the_docs_and_code_is_a_heading_of_it():
    files = [f for f in tracked() if f.endswith((".md", ".py", ".smk")) and "tests/" not in f]
    named = {(f, s) for f in files for s in pointers((ROOT / f).read_text(encoding="utf-8"))}
    assert named, "no file points to a README section"
    missing = sorted((f, s) for f, s in named if readme_section(s) is None)
    assert not missing, f"README sections that are not there: {missing}"


def test_the_predictions_file_format_is_pointed_to_where_it_is_given():
    config_readme = (ROOT / "config" / "README.md").read_text(encoding="utf-8")
    row = next(r for r in config_readme.splitlines() if r.startswith("| `predictions_file` |"))
    cli = (ROOT / "scripts" / "novabench" / "cli.py").read_text(encoding="utf-8")
    cli_doc = cli.split('"""')[1]
    for text in (row, cli_doc):
        assert pointers(text) and "docs/models.md" in text, text
        for section in pointers(text):
            assert FORMAT_LINE in (readme_section(section) or ""), section
    assert FORMAT_LINE in (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
