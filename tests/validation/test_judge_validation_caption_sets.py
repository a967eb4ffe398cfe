"""Integrity of the caption sets written all held out (captions-2, captions-3) and their
second raters' files: every line well formed, the labels within the protocol's hard
constraints, and each README's counts the file's."""

import json
import re
from collections import Counter

import pytest

from support import VALIDATION

MODALITY = {"flair", "axial", "sagittal", "t1", "t2", "coronal", "dwi"}
KEYS = {"id", "split", "phenomenon", "reference", "prediction"}
KEYS |= {"reference_labels", "prediction_labels"}
# Set -> its id prefix and the fields it has beside KEYS.
SETS = {"captions-2": ("cap2", set()), "captions-3": ("cap3", {"style"})}


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_labels(row: dict) -> None:
    for side in ("reference_labels", "prediction_labels"):
        labels = row[side]
        assert set(labels) == {"clinical", "modality", "abnormal"}, (row["id"], side)
        assert isinstance(labels["abnormal"], bool), (row["id"], side)
        for field in ("clinical", "modality"):
            words = labels[field]
            assert all(w and w == w.strip().lower() for w in words), (row["id"], field)
            assert len(words) == len(set(words)), (row["id"], field)
        assert set(labels["modality"]) <= MODALITY, (row["id"], side)
        assert not set(labels["clinical"]) & MODALITY, (row["id"], side)


@pytest.mark.parametrize("name", SETS)
def test_every_record_is_a_held_out_pair_with_the_documented_fields(name):
    prefix, extra = SETS[name]
    pairs = read(VALIDATION / f"{name}.jsonl")
    assert len(pairs) >= 100
    assert len({p["id"] for p in pairs}) == len(pairs)
    for pair in pairs:
        assert set(pair) == KEYS | extra, pair.get("id")
        assert re.fullmatch(rf"{prefix}-\d{{3}}", pair["id"]), pair["id"]
        assert pair["split"] == "heldout", pair["id"]
        check_labels(pair)


@pytest.mark.parametrize("name", SETS)
def test_the_second_rater_labelled_the_same_pairs_by_the_same_constraints(name):
    second = read(VALIDATION / f"{name}-second-rater.jsonl")
    assert [r["id"] for r in second] == [p["id"] for p in read(VALIDATION / f"{name}.jsonl")]
    for row in second:
        assert set(row) == {"id", "reference_labels", "prediction_labels"}, row["id"]
        check_labels(row)


@pytest.mark.parametrize("name", SETS)
def test_readme_counts_per_phenomenon_equal_the_file(name):
    stated = {}
    readme = VALIDATION / f"README-{name}.md"
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[1].isdigit():
            stated[cells[0]] = int(cells[1])
    pairs = read(VALIDATION / f"{name}.jsonl")
    actual = dict(Counter(p["phenomenon"] for p in pairs))
    actual["all"] = len(pairs)
    assert stated == actual
