"""Integrity of the second caption set (all held out): every line well formed, the labels
within the protocol's hard constraints, and the README's counts the file's."""

import json
import re
from collections import Counter

import pytest

from support import VALIDATION

SET_DIR = VALIDATION
CAPTIONS = SET_DIR / "captions-2.jsonl"
README = SET_DIR / "README-captions-2.md"
MODALITY = {"flair", "axial", "sagittal", "t1", "t2", "coronal", "dwi"}
KEYS = {"id", "split", "phenomenon", "reference", "prediction"}
KEYS |= {"reference_labels", "prediction_labels"}


@pytest.fixture(scope="module")
def pairs() -> list[dict]:
    return [json.loads(line) for line in CAPTIONS.read_text(encoding="utf-8").splitlines()]


def test_every_record_is_a_held_out_pair_with_the_documented_fields(pairs):
    assert len(pairs) >= 100
    assert len({p["id"] for p in pairs}) == len(pairs)
    for pair in pairs:
        assert set(pair) == KEYS and re.fullmatch(r"cap2-\d{3}", pair["id"]), pair.get("id")
        assert pair["split"] == "heldout", pair["id"]
        for side in ("reference_labels", "prediction_labels"):
            labels = pair[side]
            assert set(labels) == {"clinical", "modality", "abnormal"}, (pair["id"], side)
            assert isinstance(labels["abnormal"], bool), (pair["id"], side)
            for field in ("clinical", "modality"):
                words = labels[field]
                assert all(w and w == w.strip().lower() for w in words), (pair["id"], field)
                assert len(words) == len(set(words)), (pair["id"], field)
            assert set(labels["modality"]) <= MODALITY, (pair["id"], side)
            assert not set(labels["clinical"]) & MODALITY, (pair["id"], side)


def test_readme_counts_per_phenomenon_equal_the_file(pairs):
    stated = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[1].isdigit():
            stated[cells[0]] = int(cells[1])
    actual = dict(Counter(p["phenomenon"] for p in pairs))
    actual["all"] = len(pairs)
    assert stated == actual
