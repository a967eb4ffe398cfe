"""Integrity of the raw-answer diagnosis sets (validation/raw-diagnoses-*.jsonl): every line
well formed, the second rater's file about the same answers, and the counts each README
states recounted from its file."""

import collections
import json
import re

import pytest

from support import VALIDATION

SETS = ("raw-diagnoses-1", "raw-diagnoses-2")
STATUSES = {"ok", "parse_error", "refusal"}


def rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def check_reading(row: dict) -> None:
    read, label = row["hand_read"], row["hand_label"]
    assert read["status"] in STATUSES, row["id"]
    assert all(isinstance(name, str) and name.strip() for name in read["ranked"]), row["id"]
    # No ranking without a readable answer; a label needs a ranking to be true.
    assert bool(read["ranked"]) == (read["status"] == "ok"), row["id"]
    assert set(label) == {"top1", "top5"}, row["id"]
    assert not label["top1"] or label["top5"], f"{row['id']}: a top-1 match is a top-5 match"
    assert read["status"] == "ok" or not label["top5"], row["id"]


@pytest.mark.parametrize("name", SETS)
def test_every_answer_is_well_formed_and_its_reading_consistent(name):
    answers = rows(VALIDATION / f"{name}.jsonl")
    prefix = answers[0]["id"].rsplit("-", 1)[0]
    assert [a["id"] for a in answers] == [f"{prefix}-{i:03d}" for i in range(1, len(answers) + 1)]
    for answer in answers:
        assert {"id", "split", "style", "reference", "raw", "hand_read", "hand_label"} <= set(
            answer
        )
        assert answer["split"] == "heldout", answer["id"]
        assert isinstance(answer["raw"], str) and answer["reference"].strip()
        check_reading(answer)


@pytest.mark.parametrize("name", SETS)
def test_the_second_rater_read_the_same_answers(name):
    second = rows(VALIDATION / f"{name}-second-rater.jsonl")
    assert [r["id"] for r in second] == [a["id"] for a in rows(VALIDATION / f"{name}.jsonl")]
    for row in second:
        check_reading(row)


def statuses(answers: list[dict], status: str) -> int:
    return sum(r["hand_read"]["status"] == status for r in answers)


def readme_number(name: str, pattern: str) -> int:
    readme = VALIDATION / f"README-{name}.md"
    match = re.search(pattern, readme.read_text(encoding="utf-8"))
    assert match, f"{readme.name} no longer says {pattern!r}"
    return int(match.group(1))


@pytest.mark.parametrize(
    ("pattern", "count"),
    [
        (r"(\d+) answers in the\s+styles", lambda a: len(a)),
        (r"ok (\d+),", lambda a: statuses(a, "ok")),
        (
            r"parse_error (\d+),",
            lambda a: statuses(a, "parse_error"),
        ),
        (r"refusal (\d+)\.", lambda a: statuses(a, "refusal")),
        (r"top-1 match (\d+)\s", lambda a: sum(r["hand_label"]["top1"] for r in a)),
        (r"top-5 match (\d+)\s", lambda a: sum(r["hand_label"]["top5"] for r in a)),
        (r"(\d+)\s+distinct\s+references", lambda a: len({r["reference"] for r in a})),
    ],
)
@pytest.mark.parametrize("name", SETS)
def test_the_readme_counts_are_the_files(name, pattern, count):
    assert readme_number(name, pattern) == count(rows(VALIDATION / f"{name}.jsonl"))


@pytest.mark.parametrize("name", SETS)
def test_the_readme_counts_each_model_family(name):
    answers = rows(VALIDATION / f"{name}.jsonl")
    families = collections.Counter(r["style"].split("/")[0] for r in answers)
    assert len(families) >= 6
    assert readme_number(name, r"styles of (\d+) model\s+families") == len(families)
