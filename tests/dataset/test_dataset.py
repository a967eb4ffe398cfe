"""The dataset rule's code: every source, on fixtures in the exact upstream layouts."""

from __future__ import annotations

import io
import json
import time

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from PIL import Image

from novabench.dataset import hub
from novabench.dataset.build import build_dataset
from novabench.dataset.read import decode_image, load_nova
from novabench.errors import DatasetError, HubUnreachableError
from novabench.provenance import sha256_file
from upstream import CASES, IMAGES, png_bytes, write_current, write_legacy


def build(tmp_path, cfg):
    out = tmp_path / "out"
    manifest = build_dataset(
        cfg, out / "nova.parquet", out / "manifest.json", cache_dir=tmp_path / "cache"
    )
    return load_nova(out / "nova.parquet"), manifest, out


def local(path, **extra):
    return {"source": "local", "local_path": str(path), **extra}


@pytest.mark.parametrize("meta_as_json", [False, True])
def test_current_layout_joins_on_filename_not_row_order(tmp_path, meta_as_json):
    root = write_current(tmp_path / "repo", meta_as_json=meta_as_json)
    # the fixture's rows are reversed: position-based joins would mismatch everything
    raw = pq.read_table(root / "data" / "nova-v1.parquet").column("filename").to_pylist()
    assert raw != sorted(raw)

    frame, manifest, _ = build(tmp_path, local(root))

    assert list(frame["filename"]) == sorted(name for name, *_ in IMAGES)
    for i, (filename, case, caption, boxes) in enumerate(IMAGES):
        row = frame.set_index("filename").loc[filename]
        assert row["case_id"] == case
        assert row["caption"] == caption
        assert row["clinical_history"] == CASES[case][0]
        assert row["final_diagnosis"] == CASES[case][1]
        assert row["image"]["bytes"] == png_bytes(i)  # the image of this very filename
        gold = [(b["x"], b["y"], b["width"], b["height"]) for b in row["gold_boxes"]]
        assert gold == [(x, y, w, h) for x, y, w, h, s in boxes or [] if s == "gold"]
        raters = [(b["rater"], b["x"]) for b in row["rater_boxes"]]
        assert raters == [(s, x) for x, y, w, h, s in boxes or [] if s != "gold"]
        assert json.loads(row["meta"]) == {"age": "45"}  # other metadata kept
    assert manifest["layout"] == "current"
    assert manifest["n_images"] == 4 and manifest["n_cases"] == 3
    assert manifest["n_gold_boxes"] == 4
    assert manifest["n_images_without_gold_boxes"] == 1  # the null box list: a normal image
    assert manifest["raters"] == ["rater1", "rater2"]
    assert manifest["n_rater_boxes"] == {"rater1": 1, "rater2": 1}


def test_legacy_layout_gives_the_same_rows_as_current(tmp_path):
    current, _, _ = build(tmp_path / "a", local(write_current(tmp_path / "cur")))
    legacy, manifest, _ = build(tmp_path / "b", local(write_legacy(tmp_path / "leg")))
    assert manifest["layout"] == "legacy"
    cols = ["filename", "case_id", "caption", "clinical_history", "final_diagnosis", "width"]
    pd.testing.assert_frame_equal(current[cols], legacy[cols])
    assert list(current["gold_boxes"]) == list(legacy["gold_boxes"])
    assert list(current["rater_boxes"]) == list(legacy["rater_boxes"])
    assert [i["bytes"] for i in current["image"]] == [i["bytes"] for i in legacy["image"]]


def test_output_is_a_huggingface_image_dataset_with_page_checksums(tmp_path):
    import datasets

    _, manifest, out = build(tmp_path, local(write_current(tmp_path / "repo")))
    path = out / "nova.parquet"
    assert manifest["sha256"] == sha256_file(path)
    meta = pq.ParquetFile(path).schema_arrow.metadata
    assert json.loads(meta[b"huggingface"])["info"]["features"]["image"] == {"_type": "Image"}
    ds = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "hf"))
    first = ds[0]
    assert isinstance(first["image"], Image.Image) and first["image"].size == (480, 480)
    # page checksums are verified on read: flip one byte inside the data pages
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="re-run the `dataset` rule"):
        load_nova(path)


def test_build_is_deterministic(tmp_path):
    root = write_current(tmp_path / "repo")
    _, first, _ = build(tmp_path / "one", local(root))
    _, second, _ = build(tmp_path / "two", local(root))
    assert first["sha256"] == second["sha256"]


def test_unexpected_image_size_is_kept_and_recorded(tmp_path):
    root = write_current(tmp_path / "repo")
    (root / "images" / "case0002_001.png").write_bytes(png_bytes(9, size=(512, 400)))
    frame, manifest, _ = build(tmp_path, local(root))
    row = frame.set_index("filename").loc["case0002_001.png"]
    assert (row["width"], row["height"]) == (512, 400)
    assert manifest["images_with_unexpected_size"] == [
        {"filename": "case0002_001.png", "width": 512, "height": 400}
    ]


def test_hf_source_downloads_a_snapshot_and_reads_it_like_local(tmp_path, monkeypatch):
    root = write_current(tmp_path / "snapshot")
    calls = []

    def fake_download(repo_id, revision, cache_dir, timeout_s):
        calls.append((repo_id, revision))
        return root, "0123abcd"

    monkeypatch.setattr(hub, "download_snapshot", fake_download)
    cfg = {
        "source": "hf",
        "hf": {"timeout_s": 5, "current": {"repo_id": "c-i-ber/Nova", "revision": "v1"}},
    }
    frame, manifest, _ = build(tmp_path, cfg)
    assert calls == [("c-i-ber/Nova", "v1")]
    assert manifest["resolved_revision"] == "0123abcd" and manifest["layout"] == "current"
    assert len(frame) == len(IMAGES)


def test_hub_unreachable_fails_fast_naming_the_local_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    cfg = {
        "source": "hf",
        "hf": {"timeout_s": 3, "current": {"repo_id": "c-i-ber/Nova", "revision": "main"}},
    }
    started = time.monotonic()
    with pytest.raises(HubUnreachableError) as err:
        build(tmp_path, cfg)
    assert time.monotonic() - started < 10
    message = str(err.value)
    assert "Hub unreachable" in message and "dataset.source: local" in message
    assert "\n" not in message


def test_hub_offline_mode_is_reported(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnreachableError, match=r"HF_HUB_OFFLINE.*dataset\.source: local"):
        hub.check_hub_reachable("c-i-ber/Nova", 1)


# --- bad input: one clear line naming the problem and the fix ---------------------------


def corrupt_parquet(root):
    (root / "data" / "nova-v1.parquet").write_bytes(b"PAR1 this is not parquet PAR1")


def missing_parquet(root):
    (root / "data" / "nova-v1.parquet").unlink()


def missing_image(root):
    (root / "images" / "case0001_002.png").unlink()


def undecodable_image(root):
    (root / "images" / "case0001_002.png").write_bytes(png_bytes(1)[:300])  # truncated


def rewrite_rows(root, change):
    path = root / "data" / "nova-v1.parquet"
    rows = pq.read_table(path).to_pylist()
    change(rows)
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), path)


def duplicate_filename(root):
    rewrite_rows(root, lambda rows: rows.append(dict(rows[0])))


def set_first_gold(root, **values):
    def change(rows):
        for row in rows:
            if row["filename"] == "case0001_001.png":
                row["bboxes"][0].update(values)

    rewrite_rows(root, change)


@pytest.mark.parametrize(
    ("damage", "problem", "fix"),
    [
        (corrupt_parquet, "cannot read metadata parquet", "corrupt"),
        (missing_parquet, "holds neither data/nova-v1.parquet", "dataset.local_path"),
        (
            missing_image,
            "image images/case0001_002.png of case0001_002.png is missing",
            "re-download",
        ),
        (undecodable_image, "case0001_002.png cannot be decoded", "re-download that file"),
        (
            duplicate_filename,
            "filename case0003_001.png appears more than once",
            "remove the duplicate",
        ),
        (lambda r: set_first_gold(r, width=-5.0), "non-positive width or height", "clip_boxes"),
        (lambda r: set_first_gold(r, x=float("nan")), "non-finite coordinate", "clip_boxes"),
        (lambda r: set_first_gold(r, x=470.0), "outside the 480x480 image", "clip_boxes"),
    ],
    ids=[
        "corrupt-parquet",
        "missing-parquet",
        "missing-image",
        "undecodable-image",
        "duplicate",
        "negative-size",
        "nan",
        "outside",
    ],
)
def test_bad_current_layout_stops_with_one_line(tmp_path, damage, problem, fix):
    root = write_current(tmp_path / "repo")
    damage(root)
    with pytest.raises(DatasetError) as err:
        build(tmp_path, local(root))
    message = str(err.value)
    assert problem in message and "fix: " in message and fix in message
    assert "\n" not in message
    assert not (tmp_path / "out" / "nova.parquet").exists()


def test_clip_boxes_clips_and_drops_and_counts(tmp_path):
    root = write_current(tmp_path / "repo")
    set_first_gold(root, x=450.0)  # 450 + 60 overshoots 480 by 30 px
    frame, manifest, _ = build(tmp_path, local(root, clip_boxes=True))
    box = frame.set_index("filename").loc["case0001_001.png"]["gold_boxes"][0]
    assert (box["x"], box["width"]) == (450.0, 30.0)
    assert manifest["clipped_boxes"] == 1 and manifest["dropped_boxes"] == 0


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda r: (r / "bboxes_gold.csv").unlink(), "bboxes_gold.csv is missing"),
        (
            lambda r: (r / "captions.csv").write_text("name,text\na,b\n"),
            "captions.csv lacks columns",
        ),
        (
            lambda r: (r / "bboxes_gold.csv").write_text(
                "filename,x,y,width,height\nghost.png,1,1,2,2\n"
            ),
            "missing from captions.csv",
        ),
        (
            lambda r: (r / "bboxes_gold.csv").write_text(
                "filename,x,y,width,height\ncase0001_001.png,abc,1,2,2\n"
            ),
            "box coordinate 'abc' is not a number",
        ),
    ],
    ids=["missing-csv", "wrong-columns", "orphan-box", "non-numeric"],
)
def test_bad_legacy_layout_stops_with_one_line(tmp_path, damage, problem):
    root = write_legacy(tmp_path / "repo")
    damage(root)
    with pytest.raises(DatasetError, match="fix: ") as err:
        build(tmp_path, local(root))
    assert problem in str(err.value)


def test_decode_image_gives_grayscale_pixels():
    pixels = decode_image(png_bytes(3))
    expected = np.asarray(Image.open(io.BytesIO(png_bytes(3))))
    assert pixels.dtype == np.uint8 and np.array_equal(pixels, expected)


def test_column_list_matches_the_written_schema():
    from novabench.dataset.features import features
    from novabench.dataset.schema import COLUMNS

    assert tuple(features()) == COLUMNS
