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
