"""Tests of the embedded NOVA-like sample dataset (novabench.sample)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from pycocotools import mask as coco_mask

from novabench.errors import ConfigError
from novabench.sample import generate_sample
from novabench.sample.anatomy import BRAIN_CENTRE_MM, load_template
from novabench.sample.render import (
    DWI,
    FLAIR,
    T1C,
    T1W,
    T2W,
    SliceView,
    base_signal,
    finish_image,
    sample_channels,
)

SEED = 20250520


def _generate(root: Path, **kwargs) -> tuple[Path, dict]:
    summary = generate_sample(root, **kwargs)
    return root, summary


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, dict]:
    """The default sample, generated once for the module."""
    return _generate(tmp_path_factory.mktemp("sample"))


@pytest.fixture(scope="module")
def rows(sample) -> list[dict]:
    return pq.read_table(sample[0] / "data" / "nova-v1.parquet").to_pylist()


def _gold(row: dict) -> list[dict]:
    return [box for box in row["bboxes"] or () if box["source"] == "gold"]


def test_layout_and_schema(sample, rows):
    root, summary = sample
    table = pq.read_table(root / "data" / "nova-v1.parquet")
    box = pa.struct(
        [
            ("x", pa.float64()),
            ("y", pa.float64()),
            ("width", pa.float64()),
            ("height", pa.float64()),
            ("source", pa.string()),
        ]
    )
    assert table.schema.names == [
        "filename",
        "case_id",
        "scan_id",
        "caption_text",
        "image_path",
        "meta",
        "bboxes",
    ]
    for name in ("filename", "case_id", "scan_id", "caption_text", "image_path"):
        assert table.schema.field(name).type == pa.string()
    assert table.schema.field("bboxes").type == pa.list_(box)
    meta_fields = {f.name for f in table.schema.field("meta").type}
    assert {"clinical_history", "final_diagnosis", "sequence", "plane", "age", "sex"} <= meta_fields

    # Small enough for CI, big enough to be a benchmark: tens of images over >= 10 cases.
    cases = {row["case_id"] for row in rows}
    assert len(cases) == 12 and 20 <= len(rows) <= 48
    assert summary["n_cases"] == 12 and summary["n_images"] == len(rows)

    pngs = sorted(p.name for p in (root / "images").iterdir())
    assert pngs == sorted(row["filename"] for row in rows)
    for row in rows:
        match = re.fullmatch(r"case(\d{4})_(\d{3})\.png", row["filename"])
        assert match, row["filename"]
        assert row["case_id"] == f"case{match[1]}"
        assert row["scan_id"] == f"scan{match[1]}_{match[2]}"
        assert row["image_path"] == f"images/{row['filename']}"
        with Image.open(root / row["image_path"]) as image:
            assert image.format == "PNG" and image.mode == "L" and image.size == (480, 480)

    per_case: dict[str, list[dict]] = {}
    for row in rows:
        per_case.setdefault(row["case_id"], []).append(row)
    for case_rows in per_case.values():
        assert 1 <= len(case_rows) <= 4
        assert len({r["meta"]["final_diagnosis"] for r in case_rows}) == 1
        assert len({r["meta"]["clinical_history"] for r in case_rows}) == 1
        numbers = sorted(int(r["filename"][9:12]) for r in case_rows)
        assert numbers == list(range(1, len(case_rows) + 1))


def test_rows_are_not_in_filename_order(rows):
    filenames = [row["filename"] for row in rows]
    assert filenames != sorted(filenames)
    assert len(set(filenames)) == len(filenames)


def test_same_seed_gives_identical_bytes(sample, tmp_path):
    root, _ = sample
    again, _ = _generate(tmp_path / "again")
    assert (again / "data/nova-v1.parquet").read_bytes() == (
        root / "data/nova-v1.parquet"
    ).read_bytes()
    names = sorted(p.name for p in (root / "images").iterdir())
    assert names == sorted(p.name for p in (again / "images").iterdir())
    for name in names:
        assert (again / "images" / name).read_bytes() == (root / "images" / name).read_bytes()


def test_case_prefix_is_stable_and_seed_matters(sample, tmp_path):
    root, _ = sample
    small, _ = _generate(tmp_path / "small", n_cases=3)
    # Re-running with fewer cases in the same folder leaves no stale images behind.
    small, _ = _generate(tmp_path / "small", n_cases=2)
    names = sorted(p.name for p in (small / "images").iterdir())
    assert {name[:8] for name in names} == {"case0001", "case0002"}
    for name in names:  # case k does not depend on n_cases
        assert (small / "images" / name).read_bytes() == (root / "images" / name).read_bytes()

    other, _ = _generate(tmp_path / "other", n_cases=2, seed=SEED + 1)
    old = pq.read_table(small / "data/nova-v1.parquet").to_pylist()
    new = pq.read_table(other / "data/nova-v1.parquet").to_pylist()
    assert sorted(r["caption_text"] for r in old) != sorted(r["caption_text"] for r in new)
    first = (other / "images" / "case0001_001.png").read_bytes()
    assert first != (root / "images" / "case0001_001.png").read_bytes()


def test_boxes_are_inside_the_image_and_well_formed(rows):
    n_gold = 0
    for row in rows:
        boxes = row["bboxes"]
        if boxes is None:
            assert row["meta"]["n_lesions"] == 0
            continue
        assert {box["source"] for box in boxes} <= {"gold", "rater1", "rater2"}
        gold = _gold(row)
        assert len(gold) == row["meta"]["n_lesions"] >= 1
        n_gold += len(gold)
        for box in boxes:
            assert box["width"] > 0 and box["height"] > 0
            assert box["x"] >= 0 and box["x"] + box["width"] <= 480
            assert box["y"] >= 0 and box["y"] + box["height"] <= 480
    assert n_gold >= 10


def test_normal_images_have_null_boxes(sample, rows):
    root, summary = sample
    table = pq.read_table(root / "data/nova-v1.parquet")
    normal = [row for row in rows if row["meta"]["lesion_kind"] == "normal"]
    assert normal, "the default sample must contain a normal case"
    assert all(row["bboxes"] is None for row in normal)
    # Null, not an empty list, as upstream.
    assert table.column("bboxes").null_count == summary["n_normal_images"] >= len(normal)
    assert all(len(value) > 0 for value in table.column("bboxes").to_pylist() if value)


def test_rater_boxes_are_perturbed_gold_boxes(rows):
    matched, total, identical = 0, 0, 0
    for row in rows:
        gold = [[b["x"], b["y"], b["width"], b["height"]] for b in _gold(row)]
        for source in ("rater1", "rater2"):
            drawn = [
                [b["x"], b["y"], b["width"], b["height"]]
                for b in row["bboxes"] or ()
                if b["source"] == source
            ]
            if not drawn:
                continue
            iou = coco_mask.iou(drawn, gold, [0] * len(gold))
            matched += int((iou.max(axis=1) >= 0.3).sum())
            identical += int((iou.max(axis=1) > 0.999).sum())
            total += len(drawn)
    assert total >= 10
    assert matched / total >= 0.75  # mostly the same lesions...
    assert identical < total / 2  # ...but not copies of the gold boxes


def _contrast(image: np.ndarray, box: dict, others: np.ndarray, margin: int = 8) -> float:
    """(mean in box - median of a band around it) / median of the band."""
    x, y, w, h = (int(box[k]) for k in ("x", "y", "width", "height"))
    band = np.zeros(image.shape, dtype=bool)
    band[max(y - margin, 0) : y + h + margin, max(x - margin, 0) : x + w + margin] = True
    band &= ~others
    reference = float(np.median(image[band]))
    return (float(image[y : y + h, x : x + w].mean()) - reference) / max(reference, 1.0)


def test_gold_boxes_sit_on_lesion_signal(sample, rows):
    """Lesions without edema stand out from the brain around their gold box."""
    root, _ = sample
    checked = 0
    for row in rows:
        kind, sequence = row["meta"]["lesion_kind"], row["meta"]["sequence"]
        if kind not in ("white_matter_lesions", "infarct", "cyst") or not _gold(row):
            continue
        if sequence not in (FLAIR, T2W, DWI):
            continue
        image = np.asarray(Image.open(root / row["image_path"]), dtype=float)
        boxed = np.zeros(image.shape, dtype=bool)
        for box in _gold(row):
            x, y, w, h = (int(box[k]) for k in ("x", "y", "width", "height"))
            boxed[y : y + h, x : x + w] = True
        for box in _gold(row):
            contrast = _contrast(image, box, boxed)
            if kind == "cyst" and sequence == FLAIR:
                assert contrast < -0.15, row["filename"]  # fluid is dark on FLAIR
            else:
                assert contrast > 0.15, (row["filename"], contrast)
            checked += 1
    assert checked >= 3


def _read_sequence(caption: str) -> str:
    """Which sequence a caption names (independent of the generator's vocabulary)."""
    if "FLAIR" in caption:
        return FLAIR
    if "DWI" in caption or "diffusion-weighted" in caption:
        return DWI
    if "T1" in caption:
        return T1C if re.search(r"contrast|gadolinium", caption) else T1W
    if "T2" in caption:
        return T2W
    raise AssertionError(f"no sequence in {caption!r}")


def test_captions_name_the_rendered_sequence_and_plane(rows):
    labels = 0
    for row in rows:
        caption, meta = row["caption_text"], row["meta"]
        match = re.match(r"(\((\d)([a-z])\) )?(Axial|Coronal|Sagittal) ", caption)
        assert match, caption
        assert match[4].lower() == meta["plane"]
        assert _read_sequence(caption) == meta["sequence"], caption
        labels += bool(match[1])
        if meta["n_lesions"] == 1:
            assert meta["location"] in caption
        if meta["n_lesions"] == 0:
            assert meta["location"] is None
        assert caption.endswith(".")
        assert not re.search(r"\ba [aeiou]|\ban [^aeiou8]|\bthe both\b", caption, re.I), caption
    assert 0 < labels < len(rows)  # panel labels on some legends only


def test_clinical_history_matches_patient(rows):
    for row in rows:
        meta = row["meta"]
        history = meta["clinical_history"]
        assert re.search(rf"\b{meta['age']}\b", history), history
        words = set(re.findall(r"[a-z]+", history.lower()))
        female, male = {"woman", "female", "girl"}, {"man", "male", "boy"}
        assert words & (female if meta["sex"] == "F" else male), history
        assert not words & (male if meta["sex"] == "F" else female), history


def test_summary_counts_match_the_table(sample, rows):
    _, summary = sample
    boxes = [box for row in rows for box in row["bboxes"] or ()]
    assert summary["n_gold_boxes"] == sum(box["source"] == "gold" for box in boxes)
    assert summary["n_rater_boxes"] == sum(box["source"] != "gold" for box in boxes)
    assert sum(summary["cases_per_kind"].values()) == summary["n_cases"]
    assert summary["cases_per_kind"]["normal"] >= 1


def test_sequences_have_distinct_tissue_contrast():
    """CSF darker than white matter on T1, FLAIR and DWI, brighter on T2; WM > GM on T1."""
    template = load_template()
    centre = BRAIN_CENTRE_MM.copy()
    centre[2] = 15.0  # through the lateral ventricles
    view = SliceView("axial", centre, pixel_mm=0.47, angle_deg=0.0)
    channels = sample_channels(template, view)
    # Tissue masks from the template's own probability maps, not from any contrast.
    wm = channels.white_matter(slice(None), slice(None)) > 0.95
    csf = (channels.brain > 0.99) & (channels.t1 < 0.35)
    assert wm.sum() > 1000 and csf.sum() > 500
    means = {}
    for sequence in (T1W, T1C, T2W, FLAIR, DWI):
        rng = np.random.default_rng(0)
        image = finish_image(base_signal(channels, sequence), channels.brain, sequence, rng)
        means[sequence] = (image[csf].mean(), image[wm].mean())
    for sequence in (T1W, T1C, FLAIR, DWI):
        assert means[sequence][0] < 0.5 * means[sequence][1], sequence
    assert means[T2W][0] > 1.5 * means[T2W][1]


def test_loads_with_the_documented_hugging_face_loader(sample, tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    root, summary = sample
    ds = datasets.load_dataset(
        "parquet",
        data_files=str(root / "data" / "nova-v1.parquet"),
        split="train",
        cache_dir=str(tmp_path / "hf"),
    )
    assert ds.num_rows == summary["n_images"]
    assert set(ds.column_names) >= {"filename", "case_id", "caption_text", "meta", "bboxes"}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_cases": 0},
        {"n_cases": 2.5},
        {"seed": -1},
        {"images_per_case": (3, 1)},
        {"images_per_case": (0, 2)},
        {"images_per_case": "many"},
    ],
)
def test_bad_arguments_raise_config_error(tmp_path, kwargs):
    with pytest.raises(ConfigError, match="fix:"):
        generate_sample(tmp_path, **kwargs)
    assert not (tmp_path / "data").exists()
