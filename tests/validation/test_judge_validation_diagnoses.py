"""Integrity of the hand-labelled diagnosis pairs that measure the diagnosis judge.

The pairs are data, not code: these checks keep the file well formed, the held-out half
where the README says it is, and the README's counts equal to the file's.
"""

import json
import re
from collections import Counter

import pytest

from support import VALIDATION

HERE = VALIDATION
PAIRS = HERE / "diagnoses.jsonl"
README = HERE / "README-diagnoses.md"
SECTION = "## Diagnosis pairs (diagnoses.jsonl)"
FIELDS = {"id", "split", "phenomenon", "reference", "prediction", "match", "why"}
SPLITS = ("tune", "heldout")


def _pairs():
    rows = []
    for number, line in enumerate(PAIRS.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            pytest.fail(f"{PAIRS.name} line {number} is not JSON: {exc}")
        rows.append((number, row))
    return rows


@pytest.fixture(scope="module")
def pairs():
    return [row for _, row in _pairs()]


def _section_tables():
    """The README tables of the diagnosis section, keyed by their first header cell."""
    text = README.read_text(encoding="utf-8")
    assert SECTION in text, f"README lacks the section {SECTION!r}"
    section = text.split(SECTION, 1)[1]
    section = re.split(r"^## ", section, flags=re.MULTILINE)[0]
    tables, header = {}, None
    for line in section.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables[cells[0]] = []
        elif not all(set(cell) <= set("-:") for cell in cells):
            tables[header[0]].append(dict(zip(header, cells, strict=True)))
    return tables


def test_every_line_is_a_pair_with_the_documented_fields():
    for number, row in _pairs():
        where = f"{PAIRS.name} line {number}"
        assert isinstance(row, dict), f"{where} is not a JSON object"
        assert set(row) == FIELDS, f"{where} has fields {sorted(row)}, expected {sorted(FIELDS)}"
        assert re.fullmatch(r"dx-\d{3,}", row["id"]), f"{where}: bad id {row['id']!r}"
        assert row["split"] in SPLITS, f"{where}: split {row['split']!r}"
        assert isinstance(row["match"], bool), f"{where}: match must be true or false"
        for field in ("phenomenon", "reference", "prediction", "why"):
            value = row[field]
            assert isinstance(value, str) and value.strip() == value and value, (
                f"{where}: {field} must be a non-empty trimmed string"
            )


def test_ids_are_unique_and_numbered_in_file_order(pairs):
    ids = [row["id"] for row in pairs]
    assert [id_ for id_, n in Counter(ids).items() if n > 1] == []
    assert ids == [f"dx-{n:03d}" for n in range(1, len(pairs) + 1)]


def test_no_pair_is_written_twice(pairs):
    seen = Counter((row["reference"], row["prediction"]) for row in pairs)
    assert [pair for pair, n in seen.items() if n > 1] == []


def test_each_split_holds_enough_pairs_of_both_labels(pairs):
    for split in SPLITS:
        labels = Counter(row["match"] for row in pairs if row["split"] == split)
        assert labels[True] + labels[False] >= 80, f"{split} holds {labels.total()} pairs"
        assert labels[True] > 0 and labels[False] > 0, f"{split} lacks a label: {labels}"


def test_every_phenomenon_appears_in_both_splits(pairs):
    splits_of = {}
    for row in pairs:
        splits_of.setdefault(row["phenomenon"], set()).add(row["split"])
    assert {tag: s for tag, s in splits_of.items() if s != set(SPLITS)} == {}


def test_exact_pairs_are_identical_and_the_others_are_not(pairs):
    for row in pairs:
        same = row["reference"].casefold() == row["prediction"].casefold()
        assert same == (row["phenomenon"] == "exact"), row["id"]
        if same:
            assert row["match"] is True, row["id"]


def test_split_follows_the_documented_alternation(pairs):
    # Each run of one phenomenon and one label alternates, starting in the split that so
    # far holds fewer pairs of that label (tune on a tie). Guards the held-out half.
    held = {True: Counter(), False: Counter()}
    previous, turn = None, None
    for row in pairs:
        run = (row["phenomenon"], row["match"])
        if run != previous:
            counts = held[row["match"]]
            turn = 1 if counts["heldout"] < counts["tune"] else 0
            previous = run
        expected = SPLITS[turn % 2]
        assert row["split"] == expected, f"{row['id']} is in {row['split']}, rule says {expected}"
        held[row["match"]][row["split"]] += 1
        turn += 1


def test_each_phenomenon_is_one_block_with_matches_first(pairs):
    tags = [row["phenomenon"] for row in pairs]
    blocks = [tag for i, tag in enumerate(tags) if i == 0 or tag != tags[i - 1]]
    assert [tag for tag, n in Counter(blocks).items() if n > 1] == []
    for tag in blocks:
        labels = [row["match"] for row in pairs if row["phenomenon"] == tag]
        assert labels == sorted(labels, reverse=True), f"{tag}: a match follows a non-match"


def test_readme_split_counts_equal_the_file(pairs):
    table = {row["split"]: row for row in _section_tables()["split"]}
    for split in (*SPLITS, "all"):
        rows = [r for r in pairs if split == "all" or r["split"] == split]
        matches = sum(r["match"] for r in rows)
        stated = table[split]
        assert (int(stated["match"]), int(stated["no match"]), int(stated["total"])) == (
            matches,
            len(rows) - matches,
            len(rows),
        ), f"README counts for {split} differ from {PAIRS.name}"


def test_readme_phenomenon_counts_equal_the_file(pairs):
    counted = {}
    for row in pairs:
        c = counted.setdefault(row["phenomenon"], Counter())
        c[row["split"]] += 1
        c["match" if row["match"] else "no match"] += 1
        c["total"] += 1
    stated = {
        row["phenomenon"]: Counter({k: int(v) for k, v in row.items() if k != "phenomenon"})
        for row in _section_tables()["phenomenon"]
    }
    # Unary plus drops zero counts, so a stated 0 equals an absent key.
    assert {tag: +c for tag, c in stated.items()} == {tag: +c for tag, c in counted.items()}


def test_readme_describes_every_phenomenon_tag(pairs):
    described = {row["tag"] for row in _section_tables()["tag"]}
    assert {row["phenomenon"] for row in pairs} == described
