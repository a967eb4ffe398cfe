"""Integrity of the hand-labelled caption pairs that measure the captioning judges.

The set is data, not code: these tests check that every line is well formed, that the labels
follow the documented protocol's hard constraints, that the split is balanced per phenomenon,
and that the counts the README states are the file's counts.
"""

import json
import re
from collections import Counter

import pytest

from support import VALIDATION

SET_DIR = VALIDATION
CAPTIONS = SET_DIR / "captions.jsonl"
README = SET_DIR / "README-captions.md"

SPLITS = ("tune", "heldout")
# The paper's closed modality vocabulary; the labeller maps T1-/T2-weighted to t1/t2 and
# never writes the three spellings in UNUSED_MODALITY.
MODALITY_VOCABULARY = {"flair", "axial", "sagittal", "t1", "t2", "coronal", "dwi"}
UNUSED_MODALITY = {"t1w", "t2w", "weighted"}
RECORD_KEYS = {
    "id",
    "split",
    "phenomenon",
    "reference",
    "prediction",
    "reference_labels",
    "prediction_labels",
}
LABEL_KEYS = {"clinical", "modality", "abnormal"}
MIN_PER_SPLIT = 75
MIN_PAIRS = 160
MIN_PAIRS_WITH_NORMAL_CAPTION = 25


def _load_pairs() -> list[dict]:
    pairs = []
    for number, line in enumerate(CAPTIONS.read_text(encoding="utf-8").splitlines(), 1):
        try:
            pairs.append(json.loads(line))
        except json.JSONDecodeError as exc:
            pytest.fail(f"{CAPTIONS.name} line {number} is not JSON ({exc}); fix that line")
    return pairs


@pytest.fixture(scope="module")
def pairs() -> list[dict]:
    return _load_pairs()


def _labels(pairs: list[dict]):
    for pair in pairs:
        for side in ("reference_labels", "prediction_labels"):
            yield pair["id"], side, pair[side]


def test_every_record_has_the_documented_fields(pairs):
    assert len(pairs) >= MIN_PAIRS
    for pair in pairs:
        assert set(pair) == RECORD_KEYS, pair.get("id")
        assert re.fullmatch(r"cap-\d{3}", pair["id"]), pair["id"]
        assert pair["split"] in SPLITS, pair["id"]
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", pair["phenomenon"]), pair["id"]
        assert pair["reference"].strip() and pair["prediction"].strip(), pair["id"]
        for side in ("reference_labels", "prediction_labels"):
            assert set(pair[side]) == LABEL_KEYS, (pair["id"], side)


def test_ids_are_unique(pairs):
    repeated = [name for name, n in Counter(p["id"] for p in pairs).items() if n > 1]
    assert repeated == []


def test_both_splits_are_large_enough(pairs):
    per_split = Counter(p["split"] for p in pairs)
    assert all(per_split[split] >= MIN_PER_SPLIT for split in SPLITS), per_split


def test_keyword_lists_are_canonical_strings(pairs):
    for pair_id, side, labels in _labels(pairs):
        assert isinstance(labels["abnormal"], bool), (pair_id, side)
        for field in ("clinical", "modality"):
            keywords = labels[field]
            assert isinstance(keywords, list), (pair_id, side, field)
            assert all(isinstance(k, str) and k == k.strip().lower() and k for k in keywords), (
                pair_id,
                side,
                field,
            )
            assert len(keywords) == len(set(keywords)), (pair_id, side, field, keywords)


def test_modality_labels_are_within_the_closed_set(pairs):
    for pair_id, side, labels in _labels(pairs):
        assert set(labels["modality"]) <= MODALITY_VOCABULARY, (pair_id, side)
        assert not set(labels["modality"]) & UNUSED_MODALITY, (pair_id, side)
        # A modality word must never sit among the clinical keywords instead.
        assert not set(labels["clinical"]) & (MODALITY_VOCABULARY | UNUSED_MODALITY), (
            pair_id,
            side,
        )


def test_negated_keywords_keep_their_negation_as_no_prefix(pairs):
    negation_words = re.compile(r"\b(not|without|absent|non|unlikely|negative)\b")
    for pair_id, side, labels in _labels(pairs):
        for keyword in labels["clinical"]:
            assert not negation_words.search(keyword), (pair_id, side, keyword)


def test_every_phenomenon_appears_in_both_splits(pairs):
    splits_of = {}
    for pair in pairs:
        splits_of.setdefault(pair["phenomenon"], Counter())[pair["split"]] += 1
    missing = {name: dict(c) for name, c in splits_of.items() if set(c) != set(SPLITS)}
    assert missing == {}


def test_enough_pairs_have_a_normal_caption(pairs):
    with_normal = [
        p
        for p in pairs
        if not (p["reference_labels"]["abnormal"] and p["prediction_labels"]["abnormal"])
    ]
    assert len(with_normal) >= MIN_PAIRS_WITH_NORMAL_CAPTION


def _readme_counts() -> dict[str, tuple[int, int, int]]:
    """Rows of the README's `| phenomenon | tune | heldout | total |` table."""
    rows = {}
    in_table = False
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:4] == ["phenomenon", "tune", "heldout", "total"]:
            in_table = True
            continue
        if not in_table:
            continue
        if not line.startswith("|"):
            break
        if cells[0].startswith("---"):
            continue
        rows[cells[0]] = tuple(int(c) for c in cells[1:4])
    return rows


def test_readme_counts_equal_the_file(pairs):
    stated = _readme_counts()
    assert stated, f"{README.name} has no '| phenomenon | tune | heldout | total |' table"
    actual = {}
    for pair in pairs:
        tune, heldout, _ = actual.get(pair["phenomenon"], (0, 0, 0))
        if pair["split"] == "tune":
            tune += 1
        else:
            heldout += 1
        actual[pair["phenomenon"]] = (tune, heldout, tune + heldout)
    per_split = Counter(p["split"] for p in pairs)
    actual["all"] = (per_split["tune"], per_split["heldout"], len(pairs))
    assert stated == actual
