"""The caption judge's keyword snapshot (tests/snapshots/caption_keywords.jsonl).

Every caption validation pair's keywords and abnormal flags, recomputed with the
configured caption judge: a change to the judge or its lexicon that moves any of them
fails here with the list.
"""

import json

import pytest

from novabench.errors import NovaError
from novabench.judges import keyword_snapshot as snap
from novabench.judges import validation
from novabench.judges.keywords import RULE_IDS
from support import SNAPSHOTS

SNAPSHOT = SNAPSHOTS / "caption_keywords.jsonl"


@pytest.fixture(scope="module")
def configured():
    return snap.configured_caption_judge()


def test_no_extraction_moved(configured) -> None:
    moves = snap.moved(snap.read_snapshot(SNAPSHOT), snap.snapshot_rows(configured))
    assert not moves, snap.report(moves)


def test_the_snapshot_covers_every_caption_pair() -> None:
    vset = validation.SETS_BY_KEY["captioning"]
    path = validation.validation_folder() / vset.filename
    keys = [n for n, _ in validation.read_numbered_pairs(path, vset.fields)]
    rows = [r for r in snap.read_snapshot(SNAPSHOT) if r["set"] == vset.key]
    assert [r["line"] for r in rows] == keys
    assert len(keys) == 196


def test_hand_labels_play_no_part(configured, tmp_path) -> None:
    vset = validation.SETS_BY_KEY["captioning"]
    lines = (validation.validation_folder() / vset.filename).read_text("utf-8").splitlines()
    blank = {"clinical": [], "modality": [], "abnormal": False}
    pairs = [json.loads(x) for x in lines if x.strip()]
    pairs = [{**p, "reference_labels": blank, "prediction_labels": blank} for p in pairs]
    (tmp_path / vset.filename).write_text("".join(json.dumps(p) + "\n" for p in pairs))
    expected = [r for r in snap.read_snapshot(SNAPSHOT) if r["set"] == vset.key]
    assert snap.snapshot_rows(configured, tmp_path) == expected


def _row(line, ref_keys, ref_abnormal, pred_keys=("edema",), prediction="Edema."):
    return {
        "set": "captioning",
        "line": line,
        "id": f"cap-{line:03d}",
        "reference": "Oedema.",
        "prediction": prediction,
        "extracted": {
            "reference": {"keywords": list(ref_keys), "abnormal": ref_abnormal},
            "prediction": {"keywords": list(pred_keys), "abnormal": True},
        },
    }


def test_a_mismatch_lists_each_moved_caption_and_the_rewrite_command() -> None:
    old = [_row(1, ["edema"], True), _row(2, ["edema"], True), _row(3, ["edema"], True)]
    new = [_row(1, ["neg:edema", "normal"], False), _row(2, ["edema"], True, ["mass"]), old[2]]
    assert snap.report(snap.moved(old, new)) == (
        "2 captions of the keyword snapshot moved:\n"
        "  captioning:1 cap-001 reference 'Oedema.': +neg:edema, +normal; -edema; "
        "abnormal -> normal\n"
        "  captioning:2 cap-002 prediction 'Edema.': +mass; -edema\n"
        "If every move is intended, rewrite the snapshot: "
        "python scripts/tools/judge_snapshots.py captions"
    )
    assert snap.moved(old, old) == []


def test_an_edited_validation_set_is_named_as_such() -> None:
    old = [_row(1, ["edema"], True), _row(2, ["edema"], True)]
    new = [_row(1, ["edema"], True, prediction="Oedema.")]
    assert snap.moved(old, new) == [
        "captioning:1 the pair itself changed: the validation set was edited",
        "captioning:2 the pair itself changed: the validation set was edited",
    ]


def test_a_config_without_a_caption_judge_is_named(tmp_path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("tasks: {captioning: {judge: llm}}\njudges: {keywords: {kind: x}}\n")
    with pytest.raises(NovaError) as caught:
        snap.configured_caption_judge(config)
    assert str(caught.value) == (
        f"cannot find the captioning judge of {config} (KeyError: 'llm'); fix: give the "
        "config tasks.captioning.judge naming an entry of judges:"
    )


def test_a_moved_rule_is_listed_even_when_the_keywords_stay() -> None:
    old = _row(1, ["edema"], True)
    old["extracted"]["reference"].update(rules=["phrase.concept"], decided="verdict.abnormal")
    new = _row(1, ["edema"], True)
    new["extracted"]["reference"].update(
        rules=["phrase.compound", "verdict.normal"], decided="verdict.normal"
    )
    assert snap.moved([old], [new]) == [
        "captioning:1 cap-001 reference 'Oedema.': rules +phrase.compound, +verdict.normal, "
        "-phrase.concept; decided by verdict.abnormal -> verdict.normal"
    ]


def test_every_recorded_rule_is_a_rule_of_the_engine() -> None:
    sides = [r["extracted"][s] for r in snap.read_snapshot(SNAPSHOT) for s in snap.SIDES]
    assert {rule for side in sides for rule in side["rules"]} <= set(RULE_IDS)
    assert {side["decided"] for side in sides} == {"verdict.abnormal", "verdict.normal"}
