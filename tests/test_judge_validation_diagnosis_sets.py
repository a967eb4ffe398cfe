"""Integrity of the second hand-labelled diagnosis set (all pairs held out).

The README beside the file states its counts; these tests recount the file and compare,
so an edit to either one that is not carried to the other fails here.
"""

import collections
import json
import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "data" / "judge_validation"
PAIRS_PATH = HERE / "diagnoses-2.jsonl"
README_PATH = HERE / "README-diagnoses-2.md"
FIELDS = {"id", "split", "phenomenon", "reference", "prediction", "match", "why"}


def _pairs() -> list[dict]:
    pairs = []
    for number, line in enumerate(PAIRS_PATH.read_text(encoding="utf-8").splitlines(), 1):
        try:
            pair = json.loads(line)
        except json.JSONDecodeError as err:
            pytest.fail(f"{PAIRS_PATH.name} line {number} is not JSON: {err}")
        pairs.append(pair)
    return pairs


def _table(heading: str) -> list[dict]:
    """Rows of the first Markdown table after `heading`, as dicts keyed by its header."""
    lines = README_PATH.read_text(encoding="utf-8").splitlines()
    if heading not in lines:
        pytest.fail(f"{README_PATH.name} has no heading {heading!r}")
    start = lines.index(heading) + 1
    table = []
    for line in lines[start:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip("|").split("|")])
        elif table:
            break
    header, rows = table[0], table[2:]  # table[1] is the |---| separator
    return [dict(zip(header, row, strict=True)) for row in rows]


def _counts(pairs: list[dict]) -> dict[str, int]:
    return {
        "pairs": len(pairs),
        "match": sum(p["match"] for p in pairs),
        "no match": sum(not p["match"] for p in pairs),
    }


def test_every_line_is_a_pair_with_the_documented_fields_and_types():
    for pair in _pairs():
        assert set(pair) == FIELDS, pair.get("id")
        assert re.fullmatch(r"dx-\d{3}", pair["id"]), pair["id"]
        assert pair["split"] in ("tune", "heldout"), pair["id"]
        assert isinstance(pair["match"], bool), pair["id"]
        for field in ("phenomenon", "reference", "prediction", "why"):
            assert isinstance(pair[field], str) and pair[field].strip(), (pair["id"], field)


def test_ids_are_unique():
    ids = [p["id"] for p in _pairs()]
    repeated = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert not repeated


def test_no_pair_is_written_twice():
    seen = collections.Counter(
        (p["reference"].casefold(), p["prediction"].casefold()) for p in _pairs()
    )
    assert [k for k, n in seen.items() if n > 1] == []


def test_size_and_balance_of_labels():
    pairs = _pairs()
    assert len(pairs) >= 200
    share = sum(p["match"] for p in pairs) / len(pairs)
    assert 0.45 <= share <= 0.55, f"{share:.1%} of pairs match"


def test_exact_pairs_differ_at_most_in_letter_case():
    exact = [p for p in _pairs() if p["phenomenon"] == "exact"]
    assert exact
    for pair in exact:
        assert pair["match"] is True, pair["id"]
        assert pair["reference"].casefold() == pair["prediction"].casefold(), pair["id"]


def test_readme_counts_per_split_and_label_equal_the_file():
    rows = _table("### Split")
    pairs = _pairs()
    stated = {
        row["split"]: {k: int(row[k]) for k in ("pairs", "match", "no match")} for row in rows
    }
    actual = {
        s: _counts([p for p in pairs if p["split"] == s]) for s in {p["split"] for p in pairs}
    }
    assert stated == actual


def test_readme_counts_per_phenomenon_equal_the_file():
    rows = _table("### Counts per phenomenon")
    stated = {
        row["phenomenon"]: {k: int(row[k]) for k in ("pairs", "match", "no match")} for row in rows
    }
    by_tag = collections.defaultdict(list)
    for pair in _pairs():
        by_tag[pair["phenomenon"]].append(pair)
    assert stated == {tag: _counts(tag_pairs) for tag, tag_pairs in by_tag.items()}


def test_the_split_alternates_within_each_phenomenon_and_label():
    seen = collections.Counter()
    for pair in _pairs():
        key = (pair["phenomenon"], pair["match"])
        expected = "tune" if seen[key] % 2 == 0 else "heldout"
        seen[key] += 1
        assert pair["split"] == expected, pair["id"]
