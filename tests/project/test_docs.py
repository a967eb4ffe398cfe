"""The documentation site (mkdocs.yml, docs/): it builds with --strict (a broken link or a
missing page fails), every page is in the navigation, and every section of the README it
grew out of has a home: its headings and the bold topics of its paragraphs (no fact lost
when the README was cut to a newcomer's five minutes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import yaml

from support import ROOT

DOCS = ROOT / "docs"

# Every heading of the README before the docs site (commit 966f9fc), and the file whose
# heading it now is. A section removed from its home fails the last test.
HOMES = {
    "NOVA benchmark pipeline": "README.md",
    "What you get": "README.md",
    "Running it on NOVA": "docs/getting-started.md",
    "Add your model": "docs/models.md",
    "Outputs": "docs/outputs.md",
    "The dataset file": "docs/outputs.md",
    "Prediction records": "docs/outputs.md",
    "Verdict records": "docs/outputs.md",
    "Reproducing the paper": "docs/paper.md",
    "Running it on a cluster or a workstation": "docs/cluster.md",
    "Metric decisions where the public record is ambiguous": "docs/metrics.md",
    "Development": "docs/development.md",
    "Tests": "docs/development.md",
    "Benchmarks": "docs/performance.md",
    "Layout of this repository": "docs/development.md",
    "Extending it": "docs/extending.md",
    "Scoring without Snakemake": "docs/scoring.md",
    "Reproducibility": "docs/reproducibility.md",
    "Reliability: what is refused": "docs/reliability.md",
    "Data licence and citation": "README.md",
}


# The bold lead of every paragraph and list item of that README (its topics), and the page
# that now holds it.
TOPICS = {
    "Try a model on a few images first.": "docs/getting-started.md",
    "Before spending money": "docs/getting-started.md",
    "Interrupted runs.": "docs/getting-started.md",
    "A full disk.": "docs/getting-started.md",
    "From the catalog.": "docs/models.md",
    "An API or a server of your own": "docs/models.md",
    "Predictions made elsewhere.": "docs/models.md",
    "Live check of every LLM judge.": "docs/outputs.md",
    "Controls as live checks.": "docs/outputs.md",
    "vLLM servers started by hand": "docs/paper.md",
    "SLURM.": "docs/cluster.md",
    "vLLM on the GPU nodes.": "docs/cluster.md",
    "Internet from compute nodes.": "docs/cluster.md",
    "GPU nodes in their own partition.": "docs/cluster.md",
    "No SLURM accounting (no `slurmdbd`).": "docs/cluster.md",
    "Overrides.": "docs/cluster.md",
    "Overhead.": "docs/cluster.md",
    "A workstation with 8 cores and one GPU:": "docs/cluster.md",
    "Data": "docs/metrics.md",
    "Localization": "docs/metrics.md",
    "Captioning": "docs/metrics.md",
    "Diagnosis": "docs/metrics.md",
    "Undecided.": "docs/metrics.md",
    "How far the judges can be trusted.": "docs/judges.md",
    "Which captions the keyword judge reads well.": "docs/judges.md",
    "The judge's error beside every score.": "docs/judges.md",
    "Reading a raw diagnosis answer.": "docs/judges.md",
    "The judge's error on raw answers, end to end.": "docs/judges.md",
    "Auditing the judge on one model's own answers.": "docs/judges.md",
    "Statistics": "docs/metrics.md",
    "The embedded sample": "docs/metrics.md",
    "On a GPU (not measured yet).": "docs/performance.md",
    "A model": "docs/extending.md",
    "A judge kind": "docs/extending.md",
    "A task": "docs/extending.md",
    "A plug-in outside the package": "docs/extending.md",
    "A metric": "docs/extending.md",
    "Pinned software.": "docs/reproducibility.md",
    "Same inputs, same results.": "docs/reproducibility.md",
    "Cheap re-runs.": "docs/reproducibility.md",
    "Every number follows its code.": "docs/reproducibility.md",
    "A managed vLLM server must be the job's own.": "docs/reliability.md",
    "Pid files under `results/servers/`": "docs/reliability.md",
    "Credentials in an address": "docs/reliability.md",
    "Waiting is bounded": "docs/reliability.md",
    "Command-line output paths": "docs/reliability.md",
    "YAML the project reads from users": "docs/reliability.md",
    "Names": "docs/reliability.md",
    "Predictions files": "docs/reliability.md",
    "Audit sheets": "docs/reliability.md",
}


def headings(markdown: str) -> set[str]:
    """The ATX headings of a Markdown text, outside code fences."""
    without_code = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", without_code, re.M)}


def nav_pages(nav: list) -> set[str]:
    pages = set()
    for item in nav:
        for value in item.values() if isinstance(item, dict) else [item]:
            pages |= nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_the_site_builds_with_strict_checks(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (tmp_path / "judges" / "index.html").is_file()
    assert (tmp_path / "config" / "index.html").is_file()  # config/README.md, borrowed


def test_every_page_of_docs_is_in_the_navigation():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages <= nav_pages(config["nav"]), pages - nav_pages(config["nav"])


def test_every_section_of_the_old_readme_has_a_home():
    homeless = [
        f"{heading!r} (expected in {home})"
        for heading, home in HOMES.items()
        if heading not in headings((ROOT / home).read_text(encoding="utf-8"))
    ]
    assert not homeless, f"sections of the README without a home: {homeless}"


def test_every_topic_of_the_old_readme_has_a_home():
    homeless = [
        f"{topic!r} (expected in {home})"
        for topic, home in TOPICS.items()
        if f"**{topic}**" not in (ROOT / home).read_text(encoding="utf-8")
    ]
    assert not homeless, f"topics of the README without a home: {homeless}"


def test_the_readme_stays_a_five_minute_read_that_links_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    pages = {p.relative_to(ROOT).as_posix() for p in DOCS.glob("*.md")} - {"docs/index.md"}
    unlinked = [page for page in sorted(pages) if f"]({page})" not in readme]
    assert not unlinked, f"README links no docs page {unlinked}"
