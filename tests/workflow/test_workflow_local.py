"""The workflow on a local folder in the current release's layout, as a user keeps one:
references missing, an image edited in place, a build that fails."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from novabench.provenance import sha256_file
from support import snakemake
from upstream import IMAGES, write_current

pytestmark = pytest.mark.slow

CONFIG = """\
dataset: {{source: local, local_path: {root}}}
judges:
  matcher: {{kind: diagnosis-matcher, settings: {{embedding_fallback: false}}}}
reporting: {{bootstrap: {{resamples: 10}}, examples: 2}}
models:
  random: {{enabled: false}}
  classical: {{enabled: false}}
  retrieval: {{enabled: false}}
"""


def blank_references(root: Path) -> None:
    """What the upstream build writes for a missing caption (""), and a null diagnosis."""
    path = root / "data" / "nova-v1.parquet"
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        if row["filename"] == "case0003_001.png":
            row["caption_text"] = ""
        if row["filename"] == "case0002_001.png":
            row["meta"] = {**row["meta"], "final_diagnosis": None}
    pq.write_table(pa.Table.from_pylist(rows), path)


def mtimes(results: Path) -> dict[str, int]:
    return {
        str(p.relative_to(results)): p.stat().st_mtime_ns
        for folder in ("scores", "predictions")
        for p in (results / folder).rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("local")
    root = write_current(base / "repo")
    blank_references(root)
    workdir = base / "work"
    workdir.mkdir()
    config = base / "config.yaml"
    config.write_text(CONFIG.format(root=root))
    result = snakemake(workdir, "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-5000:]
    return root, workdir, config


def test_missing_references_run_to_the_end_and_are_counted(first_run):
    _, workdir, _ = first_run
    results = workdir / "results" / "local-repo"
    manifest = json.loads((results / "dataset" / "manifest.json").read_text())
    assert manifest["n_excluded"] == {"captioning": 1, "diagnosis": 1}
    log = (results / "logs" / "dataset" / "dataset.log").read_text()
    assert "1 image(s) with no caption are left out of captioning (e.g. case0003_001.png)" in log
    for task, excluded in [
        ("localization", []),
        ("captioning", ["case0003_001.png"]),
        ("diagnosis", ["case0002_001.png"]),
    ]:
        scores = json.loads((results / "scores" / task / "gold.json").read_text())
        assert scores["excluded_images"] == excluded
        assert scores["n_images"] == len(IMAGES) - len(excluded)
    assert scores["metrics"]["Top-1"] == pytest.approx(100.0)  # diagnosis, scored images only
    caption_table = (results / "tables" / "captioning.md").read_text()
    assert "3 images from 2 cases. 1 image(s) without a reference caption excluded." in (
        caption_table
    )
    diagnosis_table = (results / "tables" / "diagnosis.tex").read_text()
    assert "1 image(s) without a reference final diagnosis excluded." in diagnosis_table


def test_an_edited_image_rebuilds_and_rescores_only_the_image_tasks(first_run):
    root, workdir, config = first_run
    results = workdir / "results" / "local-repo"
    ghost = results / "scores" / "localization" / "rater-ghost.json"
    ghost.write_text("{}")  # a rater of an earlier dataset
    before = mtimes(results)
    image = root / "images" / "case0001_002.png"
    pixels = np.asarray(Image.open(image)).copy()
    pixels[:10, :10] = 255 - pixels[:10, :10]
    Image.fromarray(pixels).save(image)

    result = snakemake(workdir, "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-5000:]
    after = mtimes(results)
    changed = {path for path in after if after[path] != before.get(path)}
    assert {
        "scores/localization/gold.json",
        "scores/captioning/gold.json",
        "predictions/localization/gold.jsonl",
        "predictions/captioning/gold.jsonl",
    } <= changed
    # diagnosis sends no image: its inputs did not change, nor did its results
    assert not any(
        path.startswith(("scores/diagnosis", "predictions/diagnosis")) for path in changed
    )
    manifest = json.loads((results / "dataset" / "manifest.json").read_text())
    assert manifest["image_sha256"]["case0001_002.png"] == sha256_file(image)  # the new pixels
    assert not ghost.exists()
    dry = snakemake(workdir, "--configfile", str(config), "--dry-run")
    assert "Nothing to be done" in dry.stdout + dry.stderr


def test_a_failed_build_keeps_the_dataset_and_every_score(first_run):
    root, workdir, config = first_run
    results = workdir / "results" / "local-repo"
    dataset = (results / "dataset" / "nova.parquet").read_bytes()
    before = mtimes(results)
    good = (root / "images" / "case0002_001.png").read_bytes()
    (root / "images" / "case0002_001.png").write_bytes(good[:300])  # truncated
    try:
        result = snakemake(workdir, "--configfile", str(config))
    finally:
        (root / "images" / "case0002_001.png").write_bytes(good)
    assert result.returncode != 0
    assert "case0002_001.png cannot be decoded" in result.stdout + result.stderr
    assert (results / "dataset" / "nova.parquet").read_bytes() == dataset
    assert mtimes(results) == before
    # The same file back (as a re-download writes it): the dataset is rebuilt, identical,
    # and no task re-predicts or re-scores (rater scores, cheap, follow every rebuild).
    result = snakemake(workdir, "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-5000:]
    assert "(Rule: dataset)" in result.stdout + result.stderr
    assert (results / "dataset" / "nova.parquet").read_bytes() == dataset
    models = {path: t for path, t in mtimes(results).items() if "/rater-" not in path}
    assert models == {path: t for path, t in before.items() if "/rater-" not in path}
