"""The dataset can never go stale or silently wrong: what the build checks, converts,
counts and keeps, on fixtures in the exact upstream layouts."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from novabench.dataset.build import build_dataset
from novabench.dataset.fingerprint import source_fingerprint
from novabench.dataset.images import WINDOW
from novabench.dataset.read import decode_image, load_nova
from novabench.errors import DatasetError
from novabench.tasks import dataset_needs
from upstream import IMAGES, write_current, write_legacy

ALL_TASKS = ("localization", "captioning", "diagnosis")
MATCHER_RULES_ONLY = {"embedding_fallback": False}


def build(tmp_path, cfg, out="out"):
    folder = tmp_path / out
    manifest = build_dataset(
        cfg,
        folder / "nova.parquet",
        folder / "manifest.json",
        task_needs=dataset_needs(),
        out_tasks={task: folder / "tasks" / f"{task}.json" for task in ALL_TASKS},
        cache_dir=tmp_path / "cache",
    )
    return load_nova(folder / "nova.parquet"), manifest, folder


def local(path, **extra):
    return {"source": "local", "local_path": str(path), **extra}


def failure(tmp_path, cfg) -> str:
    with pytest.raises(DatasetError) as err:
        build(tmp_path, cfg)
    return str(err.value)


def rewrite_rows(root, change):
    path = root / "data" / "nova-v1.parquet"
    rows = pq.read_table(path).to_pylist()
    change({row["filename"]: row for row in rows})
    pq.write_table(pa.Table.from_pylist(rows), path)


def digest(folder, task):
    return json.loads((folder / "tasks" / f"{task}.json").read_text())


# --- item 2: a missing reference is found at build time, not after every prediction --------


def blank_references(root):
    def change(rows):
        rows["case0003_001.png"]["caption_text"] = ""
        rows["case0002_001.png"]["meta"] = {**rows["case0002_001.png"]["meta"]}
        rows["case0002_001.png"]["meta"]["final_diagnosis"] = None

    rewrite_rows(root, change)


def test_missing_references_are_excluded_per_task_and_counted(tmp_path):
    root = write_current(tmp_path / "repo")
    blank_references(root)
    frame, manifest, out = build(tmp_path, local(root))
    assert len(frame) == len(IMAGES)  # nothing is dropped from the dataset itself
    assert manifest["missing_reference"] == "exclude"
    assert manifest["n_excluded"] == {"captioning": 1, "diagnosis": 1}
    assert manifest["excluded"] == {
        "captioning": {"reason": "no caption", "filenames": ["case0003_001.png"]},
        "diagnosis": {"reason": "no final_diagnosis", "filenames": ["case0002_001.png"]},
    }
    assert digest(out, "captioning")["excluded"] == ["case0003_001.png"]
    assert digest(out, "diagnosis")["n_images"] == len(IMAGES) - 1
    assert digest(out, "localization")["n_excluded"] == 0


def test_missing_reference_error_stops_the_build_naming_the_images(tmp_path):
    root = write_current(tmp_path / "repo")
    blank_references(root)
    message = failure(tmp_path, local(root, missing_reference="error"))
    assert message == (
        "1 image(s) have no caption, which captioning needs (e.g. case0003_001.png); "
        "fix: fill in the missing caption, or set dataset.missing_reference: exclude to "
        "leave these images out of captioning only"
    )


def test_scoring_skips_and_counts_the_excluded_images(tmp_path):
    from novabench.predict import run_predictions
    from novabench.records import read_predictions
    from novabench.score import score_predictions

    root = write_current(tmp_path / "repo")
    blank_references(root)
    _, _, out = build(tmp_path, local(root))
    dataset = out / "nova.parquet"
    predictions = tmp_path / "gold.jsonl"
    summary = run_predictions(
        dataset=dataset,
        task="diagnosis",
        model_name="gold",
        model_cfg={"adapter": "gold", "tasks": ["diagnosis"]},
        prompt_path=None,
        out=predictions,
        summary_out=tmp_path / "gold.summary.json",
    )
    asked = [r["filename"] for r in read_predictions(predictions)]
    assert "case0002_001.png" not in asked and len(asked) == len(IMAGES) - 1
    assert summary["n_excluded"] == 1
    assert summary["status_counts"]["ok"] == len(IMAGES) - 1  # the control answers them all
    metrics = score_predictions(
        task="diagnosis",
        dataset=dataset,
        predictions=predictions,
        out_json=tmp_path / "s.json",
        out_csv=tmp_path / "s.csv",
        judge_cfg={
            "name": "m",
            "kind": "diagnosis-matcher",
            "settings": {"embedding_fallback": False},
        },
    )
    assert metrics["Top-1"] == pytest.approx(100.0)
    written = json.loads((tmp_path / "s.json").read_text())
    assert (written["n_images"], written["n_excluded"]) == (len(IMAGES) - 1, 1)
    assert written["excluded_images"] == ["case0002_001.png"]
    assert "case0002_001.png" not in set(pd.read_csv(tmp_path / "s.csv")["filename"])


# --- finer granularity: a task's digest changes only with what the task reads --------------


def changed_digests(tmp_path, change) -> set[str]:
    root = write_current(tmp_path / "repo")
    _, _, before = build(tmp_path, local(root), out="before")
    change(root)
    _, _, after = build(tmp_path, local(root), out="after")
    return {t for t in ALL_TASKS if digest(before, t)["sha256"] != digest(after, t)["sha256"]}


def test_an_edited_image_changes_only_the_tasks_that_send_images(tmp_path):
    def edit_image(root):
        path = root / "images" / "case0001_001.png"
        pixels = np.asarray(Image.open(path)).copy()
        pixels[0, 0] ^= 0xFF
        Image.fromarray(pixels).save(path)

    assert changed_digests(tmp_path, edit_image) == {"localization", "captioning"}


def test_an_edited_caption_changes_captioning_and_diagnosis_only(tmp_path):
    def edit_caption(root):
        rewrite_rows(root, lambda rows: rows["case0001_001.png"].update(caption_text="New."))

    assert changed_digests(tmp_path, edit_caption) == {"captioning", "diagnosis"}


def test_an_unrelated_metadata_edit_changes_no_task(tmp_path):
    def edit_meta(root):
        rewrite_rows(
            root, lambda rows: rows["case0001_001.png"].update(meta={**CASE1_META, "age": "46"})
        )

    assert changed_digests(tmp_path, edit_meta) == set()


CASE1_META = {
    "clinical_history": "45-year-old man with headaches and seizures.",
    "final_diagnosis": "Glioblastoma",
    "age": "45",
}


# --- item 1: the local source's fingerprint ---------------------------------------------------


def test_fingerprint_sees_every_change_of_the_local_folder(tmp_path):
    root = write_current(tmp_path / "repo")
    cfg = local(root)
    first = source_fingerprint(cfg)
    assert first.startswith("local:") and source_fingerprint(cfg) == first
    image = root / "images" / "case0001_002.png"
    stat = image.stat()
    # hidden bookkeeping folders of downloaders are not the dataset
    (root / ".cache").mkdir()
    (root / ".cache" / "x.lock").write_text("1")
    assert source_fingerprint(cfg) == first
    os.utime(image, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched (re-download)
    touched = source_fingerprint(cfg)
    assert touched != first
    # the metadata's content counts even with its size and time kept
    metadata = root / "data" / "nova-v1.parquet"
    data, meta_stat = bytearray(metadata.read_bytes()), metadata.stat()
    data[-10] ^= 0x01
    metadata.write_bytes(bytes(data))
    os.utime(metadata, ns=(meta_stat.st_atime_ns, meta_stat.st_mtime_ns))
    assert source_fingerprint(cfg) != touched
    assert source_fingerprint({"source": "sample"}) == ""


def test_manifest_records_every_image_hash_and_the_fingerprint(tmp_path):
    import hashlib

    root = write_current(tmp_path / "repo")
    _, manifest, _ = build(tmp_path, local(root))
    assert manifest["source_fingerprint"] == source_fingerprint(local(root))
    assert manifest["image_sha256"] == {
        name: hashlib.sha256((root / "images" / name).read_bytes()).hexdigest()
        for name, *_ in sorted(IMAGES)
    }


# --- item 3: nothing silently wrong ------------------------------------------------------------


def set_box(root, filename, number, **values):
    rewrite_rows(root, lambda rows: rows[filename]["bboxes"][number - 1].update(values))


def test_a_box_without_source_stops_the_build(tmp_path):
    root = write_current(tmp_path / "repo")
    set_box(root, "case0001_001.png", 2, source=None)
    assert failure(tmp_path, local(root)) == (
        "box 2 of case0001_001.png has no source (null or empty); fix: fill in the source "
        "(gold or the rater's id), or set dataset.box_source_default to the source such "
        "boxes have (e.g. gold)"
    )


def test_box_source_default_names_the_source_and_is_counted(tmp_path):
    root = write_current(tmp_path / "repo")
    set_box(root, "case0001_001.png", 2, source=None)  # the rater1 box
    frame, manifest, _ = build(tmp_path, local(root, box_source_default="rater1"))
    row = frame.set_index("filename").loc["case0001_001.png"]
    assert [b["rater"] for b in row["rater_boxes"]] == ["rater1"]
    assert len(row["gold_boxes"]) == 1
    assert manifest["boxes_with_default_source"] == 1


def test_a_legacy_rater_box_without_rater_stops_the_build(tmp_path):
    root = write_legacy(tmp_path / "repo")
    raters = pd.read_csv(root / "bboxes_raters.csv", dtype=str)
    raters.loc[1, "rater"] = ""
    raters.to_csv(root / "bboxes_raters.csv", index=False)
    assert failure(tmp_path, local(root)).startswith(
        "line 3 of bboxes_raters.csv (case0003_001.png) has no source (null or empty); fix: "
    )
    _, manifest, _ = build(tmp_path, local(root, box_source_default="rater9"))
    assert manifest["raters"] == ["rater1", "rater9"]
    assert manifest["boxes_with_default_source"] == 1


def test_image_path_and_filename_must_name_the_same_image(tmp_path):
    root = write_current(tmp_path / "repo")
    rewrite_rows(
        root, lambda rows: rows["case0001_001.png"].update(image_path="images/case0001_002.png")
    )
    assert failure(tmp_path, local(root)) == (
        "image_path images/case0001_002.png and filename case0001_001.png of one row name "
        "different images; fix: fix the metadata so that image_path ends in the row's filename"
    )


def save(root, name, img, fmt="PNG"):
    buffer = io.BytesIO()
    img.save(buffer, format=fmt)
    (root / "images" / name).write_bytes(buffer.getvalue())


def stored_pixels(frame, name):
    png = frame.set_index("filename").loc[name]["image"]["bytes"]
    with Image.open(io.BytesIO(png)) as img:
        assert img.mode == "L"
        return np.asarray(img)


def test_a_16_bit_image_is_windowed_not_clipped(tmp_path):
    root = write_current(tmp_path / "repo")
    rng = np.random.default_rng(0)
    values = rng.integers(0, 4096, size=(480, 480), dtype=np.uint16)  # a 12-bit MRI range
    save(root, "case0001_001.png", Image.fromarray(values))
    frame, manifest, _ = build(tmp_path, local(root))
    pixels = stored_pixels(frame, "case0001_001.png")
    low, high = np.percentile(values.astype(float), WINDOW)
    expected = np.round(np.clip((values - low) / (high - low), 0, 1) * 255).astype(np.uint8)
    assert np.array_equal(pixels, expected)
    assert (pixels == 255).mean() < 0.01  # clipping to 8 bits made 94% of these white
    png = frame.set_index("filename").loc["case0001_001.png"]["image"]["bytes"]
    assert np.array_equal(decode_image(png), expected)  # what every consumer decodes
    (conversion,) = manifest["converted_images"]
    assert conversion["filename"] == "case0001_001.png" and conversion["mode"] == "I;16"
    assert conversion["mapping"] == "percentile window"
    assert conversion["window"]["low"] == pytest.approx(low)
    assert manifest["n_converted_images"] == 1


def test_a_16_bit_image_of_8_bit_values_keeps_its_values(tmp_path):
    root = write_current(tmp_path / "repo")
    values = (np.arange(480 * 480) % 256).reshape(480, 480).astype(np.uint16)
    save(root, "case0001_001.png", Image.fromarray(values))
    frame, manifest, _ = build(tmp_path, local(root))
    assert np.array_equal(stored_pixels(frame, "case0001_001.png"), values.astype(np.uint8))
    assert manifest["converted_images"][0]["mapping"] == "cast (values in 0..255)"


def test_colour_palette_and_float_images_become_8_bit_grayscale(tmp_path):
    root = write_current(tmp_path / "repo")
    gray = np.asarray(Image.open(root / "images" / "case0001_001.png"))
    save(root, "case0001_001.png", Image.fromarray(gray).convert("RGB"))
    save(root, "case0001_002.png", Image.fromarray(gray).convert("RGBA"))
    save(root, "case0002_001.png", Image.fromarray(gray).convert("P"))
    ramp = np.linspace(0.0, 1.0, 480 * 480, dtype=np.float32).reshape(480, 480)
    save(root, "case0003_001.png", Image.fromarray(ramp), fmt="TIFF")  # decoded by content
    frame, manifest, _ = build(tmp_path, local(root))
    assert np.array_equal(stored_pixels(frame, "case0001_001.png"), gray)  # gray as RGB: same
    assert np.array_equal(stored_pixels(frame, "case0001_002.png"), gray)
    modes = {c["filename"]: (c["mode"], c["mapping"]) for c in manifest["converted_images"]}
    assert modes == {
        "case0001_001.png": ("RGB", "luma"),
        "case0001_002.png": ("RGBA", "luma"),
        "case0002_001.png": ("P", "luma"),
        "case0003_001.png": ("F", "percentile window"),
    }
    floats = stored_pixels(frame, "case0003_001.png")
    assert floats.min() == 0 and floats.max() == 255 and np.all(np.diff(floats.ravel()) >= 0)


# --- item 4: boxes given as JSON text ---------------------------------------------------------


def test_bboxes_as_json_text_read_like_structs(tmp_path):
    plain = write_current(tmp_path / "plain")
    as_json = write_current(tmp_path / "json")

    def to_json(rows):
        for row in rows.values():
            row["bboxes"] = None if row["bboxes"] is None else json.dumps(row["bboxes"])

    rewrite_rows(as_json, to_json)
    expected, _, _ = build(tmp_path, local(plain), out="a")
    frame, _, _ = build(tmp_path, local(as_json), out="b")
    assert list(frame["gold_boxes"]) == list(expected["gold_boxes"])
    assert list(frame["rater_boxes"]) == list(expected["rater_boxes"])


@pytest.mark.parametrize(
    ("bboxes", "message"),
    [
        ("[{", "bboxes of case0001_001.png is not valid JSON (Expecting property name"),
        ('{"x": 1}', "bboxes of case0001_001.png is a dict, expected a list of boxes; fix: "),
        ('["x"]', "box 1 of case0001_001.png is a str, expected an object; fix: "),
    ],
    ids=["invalid-json", "object", "not-a-box"],
)
def test_bad_bboxes_text_is_one_line(tmp_path, bboxes, message):
    root = write_current(tmp_path / "repo")

    def to_text(rows):
        for name, row in rows.items():
            row["bboxes"] = bboxes if name == "case0001_001.png" else json.dumps(row["bboxes"])

    rewrite_rows(root, to_text)
    assert failure(tmp_path, local(root)).startswith(message)


# --- item 5: a failed build keeps the previous dataset --------------------------------------


def test_a_failed_build_leaves_the_previous_outputs(tmp_path):
    root = write_current(tmp_path / "repo")
    _, _, out = build(tmp_path, local(root))
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (root / "images" / "case0002_001.png").write_bytes(b"not an image")
    failure(tmp_path, local(root))
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # same files, same bytes, no temporary file left


# --- item 7: the wording ------------------------------------------------------------------------


def test_a_metadata_parquet_without_rows_says_so(tmp_path):
    root = write_current(tmp_path / "repo")
    path = root / "data" / "nova-v1.parquet"
    pq.write_table(pq.read_table(path).slice(0, 0), path)
    assert failure(tmp_path, local(root)) == (
        f"metadata parquet {path} is readable but lists no images (0 rows); fix: re-download "
        "the dataset repository; this copy of the file is empty"
    )


def test_a_local_path_that_is_a_file_says_so(tmp_path):
    root = write_current(tmp_path / "repo")
    target = root / "data" / "nova-v1.parquet"
    assert failure(tmp_path, local(target)) == (
        f"dataset folder {target} is a file, not a folder; fix: set dataset.local_path to the "
        "folder holding the downloaded dataset repository (the one with data/nova-v1.parquet "
        "or captions.csv), not to a file in it"
    )


def test_legacy_case_ids_are_joined_without_surrounding_spaces(tmp_path):
    root = write_legacy(tmp_path / "repo")
    captions = pd.read_csv(root / "captions.csv", dtype=str)
    captions["case_id"] = captions["case_id"] + " "
    captions.to_csv(root / "captions.csv", index=False)
    cases = pd.read_csv(root / "case_metadata.csv", dtype=str)
    cases["case_id"] = " " + cases["case_id"]
    cases.to_csv(root / "case_metadata.csv", index=False)
    frame, _, _ = build(tmp_path, local(root))
    assert sorted(set(frame["case_id"])) == ["case0001", "case0002", "case0003"]
    assert frame.set_index("filename").loc["case0001_001.png"]["final_diagnosis"] == (
        "Glioblastoma"
    )
    cases.loc[cases["case_id"] == " case0003", "case_id"] = "case0009"
    cases.to_csv(root / "case_metadata.csv", index=False)
    assert failure(tmp_path, local(root)) == (
        "case 'case0003' of case0003_001.png is not in case_metadata.csv; fix: re-download "
        "the dataset repository; the metadata is incomplete"
    )


def test_stale_rater_scores_are_removed_and_current_ones_kept(tmp_path):
    from novabench.dataset.build import remove_stale_rater_scores

    names = ["rater-rater1.json", "rater-rater1.images.csv", "rater-old.json"]
    names += ["rater-old.images.csv", "gold.json", "gold.images.csv"]
    for name in names:
        (tmp_path / name).write_text("{}")
    removed = remove_stale_rater_scores(tmp_path, ["rater1"])
    assert sorted(p.name for p in removed) == ["rater-old.images.csv", "rater-old.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["rater-rater1.json", "rater-rater1.images.csv", "gold.json", "gold.images.csv"]
    )
