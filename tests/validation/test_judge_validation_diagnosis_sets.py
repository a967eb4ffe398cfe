"""Integrity of the hand-labelled diagnosis sets after the first.

The README beside each file states its counts; these tests recount the file and compare,
so an edit to either one that is not carried to the other fails here. (The first set has
its own tests, test_judge_validation_diagnoses.py: its README's tables differ.)
"""

import collections
import json
import re

import pytest

from support import VALIDATION

HERE = VALIDATION
FIELDS = {"id", "split", "phenomenon", "reference", "prediction", "match", "why"}
# Per set: the id pattern.
SETS = {
    "diagnoses-2": (r"dx-\d{3}",),
    "diagnoses-3": (r"dx3-[ab]-\d{3}",),
    "diagnoses-4": (r"dx4-[ab]-\d{3}",),
    "diagnoses-5": (r"dx5-[ab]-\d{3}",),
    "diagnoses-6": (r"dx6-\d{3}",),
    "diagnoses-7": (r"dx7-\d{3}",),
    "diagnoses-8": (r"dx8-\d{3}",),
}
every_set = pytest.mark.parametrize("name", sorted(SETS))
# Sets split by alternation after their first measurement; the fourth is all held out.
split_sets = pytest.mark.parametrize("name", ["diagnoses-2", "diagnoses-3", "diagnoses-5"])
two_author_sets = pytest.mark.parametrize("name", ["diagnoses-3", "diagnoses-4", "diagnoses-5"])


def _pairs(name: str) -> list[dict]:
    path = HERE / f"{name}.jsonl"
    pairs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            pair = json.loads(line)
        except json.JSONDecodeError as err:
            pytest.fail(f"{path.name} line {number} is not JSON: {err}")
        pairs.append(pair)
    return pairs


def _table(name: str, heading: str) -> list[dict]:
    """Rows of the first Markdown table after `heading`, as dicts keyed by its header."""
    readme = HERE / f"README-{name}.md"
    lines = readme.read_text(encoding="utf-8").splitlines()
    if heading not in lines:
        pytest.fail(f"{readme.name} has no heading {heading!r}")
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


@every_set
def test_every_line_is_a_pair_with_the_documented_fields_and_types(name):
    for pair in _pairs(name):
        assert set(pair) == FIELDS, pair.get("id")
        assert re.fullmatch(SETS[name][0], pair["id"]), pair["id"]
        assert pair["split"] in ("tune", "heldout"), pair["id"]
        assert isinstance(pair["match"], bool), pair["id"]
        for field in ("phenomenon", "reference", "prediction", "why"):
            assert isinstance(pair[field], str) and pair[field].strip(), (pair["id"], field)


@every_set
def test_ids_are_unique(name):
    ids = [p["id"] for p in _pairs(name)]
    repeated = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert not repeated


@every_set
def test_no_pair_is_written_twice(name):
    seen = collections.Counter(
        (p["reference"].casefold(), p["prediction"].casefold()) for p in _pairs(name)
    )
    assert [k for k, n in seen.items() if n > 1] == []


@every_set
def test_size_and_balance_of_labels(name):
    pairs = _pairs(name)
    assert len(pairs) >= 200
    share = sum(p["match"] for p in pairs) / len(pairs)
    # The eighth set's author weighted near-misses (55%): 43.8% match.
    low = 0.43 if name == "diagnoses-8" else 0.45
    assert low <= share <= 0.55, f"{share:.1%} of pairs match"


@every_set
def test_exact_pairs_differ_at_most_in_letter_case_and_a_full_stop(name):
    exact = [p for p in _pairs(name) if p["phenomenon"] == "exact"]
    assert exact
    for pair in exact:
        assert pair["match"] is True, pair["id"]
        # (a final full stop, as a model may write one, is not a difference)
        same = [text.casefold().rstrip(".") for text in (pair["reference"], pair["prediction"])]
        assert same[0] == same[1], pair["id"]


@every_set
def test_readme_counts_per_split_and_label_equal_the_file(name):
    rows = _table(name, "### Split")
    pairs = _pairs(name)
    stated = {
        row["split"]: {k: int(row[k]) for k in ("pairs", "match", "no match")} for row in rows
    }
    actual = {
        s: _counts([p for p in pairs if p["split"] == s]) for s in {p["split"] for p in pairs}
    }
    assert stated == actual


@two_author_sets
def test_counts_per_part_equal_the_readme(name):
    pairs = _pairs(name)
    rows = _table(name, "### Counts per part")
    stated = {row["part"]: {k: int(row[k]) for k in ("pairs", "match", "no match")} for row in rows}
    parts = {part: [p for p in pairs if p["id"][4] == part] for part in "ab"}
    assert stated == {"a": _counts(parts["a"]), "b": _counts(parts["b"]), "all": _counts(pairs)}


@every_set
def test_readme_counts_per_phenomenon_equal_the_file(name):
    rows = _table(name, "### Counts per phenomenon")
    stated = {
        row["phenomenon"]: {k: int(row[k]) for k in ("pairs", "match", "no match")} for row in rows
    }
    by_tag = collections.defaultdict(list)
    for pair in _pairs(name):
        by_tag[pair["phenomenon"]].append(pair)
    assert stated == {tag: _counts(tag_pairs) for tag, tag_pairs in by_tag.items()}


@pytest.mark.parametrize("name", ["diagnoses-4", "diagnoses-6", "diagnoses-7", "diagnoses-8"])
def test_the_sets_measured_whole_are_all_held_out(name):
    assert {p["split"] for p in _pairs(name)} == {"heldout"}


@pytest.mark.parametrize("name", ["diagnoses-6", "diagnoses-7", "diagnoses-8"])
def test_half_of_the_pairs_of_the_last_sets_are_near_misses(name):
    # Every no match but the unrelated controls is a near miss (their READMEs).
    pairs = _pairs(name)
    near = [p for p in pairs if not p["match"] and p["phenomenon"] != "unrelated"]
    assert len(near) >= len(pairs) / 2


@split_sets
def test_the_split_alternates_within_each_phenomenon_and_label(name):
    seen = collections.Counter()
    for pair in _pairs(name):
        key = (pair["phenomenon"], pair["match"])
        expected = "tune" if seen[key] % 2 == 0 else "heldout"
        seen[key] += 1
        assert pair["split"] == expected, pair["id"]
