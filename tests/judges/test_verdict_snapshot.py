"""The diagnosis matcher's verdict snapshot (tests/snapshots/diagnosis_verdicts.jsonl).

Every validation pair's verdict and deciding rule, recomputed with the configured matcher:
a change to the matcher or its tables that moves any of them fails here with the list.
"""

import json

import pytest

from novabench.errors import NovaError
from novabench.judges import validation
from novabench.judges import verdict_snapshot as snap
from novabench.judges.diagnosis_matcher import RULE_IDS
from support import SNAPSHOTS

SNAPSHOT = SNAPSHOTS / "diagnosis_verdicts.jsonl"


@pytest.fixture(scope="module")
def configured():
    return snap.configured_matcher()


def test_no_verdict_moved(configured) -> None:
    moves = snap.moved(snap.read_snapshot(SNAPSHOT), snap.snapshot_rows(configured))
    assert not moves, snap.report(moves)


def test_the_snapshot_covers_every_diagnosis_pair() -> None:
    rows = snap.read_snapshot(SNAPSHOT)
    for vset in validation.VALIDATION_SETS:
        path = validation.validation_folder() / vset.filename
        if not path.is_file():  # a set listed before its file is added
            assert not [r for r in rows if r["set"] == vset.key], vset.key
            continue
        keys = [(vset.key, n) for n, _ in validation.read_numbered_pairs(path, vset.fields)]
        mine = [(r["set"], r["line"]) for r in rows if r["set"] == vset.key]
        snapshotted = vset.task == "diagnosis" and vset.measure is validation.MEASURES["match"]
        assert mine == (keys if snapshotted else []), vset.key


def test_every_recorded_rule_is_a_rule_of_the_tables() -> None:
    ids = {r["rule"] for r in snap.read_snapshot(SNAPSHOT)}
    per_group = {i for i, grouped in RULE_IDS.items() if grouped}
    assert {i if i in RULE_IDS else i.rsplit(".", 1)[0] for i in ids} <= set(RULE_IDS)
    assert all(i.rsplit(".", 1)[0] in per_group for i in ids if i not in RULE_IDS)


def test_the_configured_matcher_runs_without_its_embedding_model(configured) -> None:
    assert configured.identity()["embedding_fallback"] is False
    assert configured.identity()["embedding_model"] is None


def test_hand_labels_play_no_part(configured, tmp_path) -> None:
    # The same texts with every label flipped give the same snapshot rows.
    vset = validation.SETS_BY_KEY["diagnosis"]
    lines = (validation.validation_folder() / vset.filename).read_text("utf-8").splitlines()
    flipped = [{**json.loads(x), "match": not json.loads(x)["match"]} for x in lines if x.strip()]
    (tmp_path / vset.filename).write_text("".join(json.dumps(p) + "\n" for p in flipped))
    rows = snap.snapshot_rows(configured, tmp_path, ["diagnosis"])
    assert rows == [r for r in snap.read_snapshot(SNAPSHOT) if r["set"] == "diagnosis"]


def _row(line, verdict, rule, prediction="GBM"):
    return {
        "set": "diagnosis-2",
        "line": line,
        "id": f"d2-{line:03d}",
        "prediction": prediction,
        "reference": "Glioblastoma",
        "verdict": verdict,
        "rule": rule,
    }


def test_a_mismatch_lists_each_moved_pair_and_the_rewrite_command() -> None:
    old = [
        _row(1, True, "concept.same"),
        _row(2, False, "undecided"),
        _row(3, True, "concept.same"),
    ]
    new = [_row(1, False, "qualifier.conflict.type"), _row(2, False, "negation.core"), old[2]]
    assert snap.report(snap.moved(old, new)) == (
        "2 pairs of the verdict snapshot moved, 1 of them to the other verdict:\n"
        "  diagnosis-2:1 d2-001 'GBM' vs 'Glioblastoma': match -> no match; "
        "rule concept.same -> qualifier.conflict.type\n"
        "  diagnosis-2:2 d2-002 'GBM' vs 'Glioblastoma': no match; "
        "rule undecided -> negation.core\n"
        "If every move is intended, rewrite the snapshot: "
        "python scripts/tools/judge_snapshots.py diagnosis"
    )
    assert snap.moved(old, old) == []


def test_three_valued_verdicts_move_and_read_old_snapshots() -> None:
    # A snapshot of two-valued verdicts (True / False) against one of three values.
    old = [_row(1, True, "concept.same"), _row(2, False, "concept.different"), _row(3, True, "x")]
    new = [
        _row(1, "undecided", "undecided.unknown-kind"),
        _row(2, "no_match", "concept.different"),
        _row(3, "match", "x"),
    ]
    assert [line for line, _ in snap.moved(old, new)] == [
        "diagnosis-2:1 d2-001 'GBM' vs 'Glioblastoma': match -> undecided; "
        "rule concept.same -> undecided.unknown-kind"
    ]
    rows = snap.read_snapshot(SNAPSHOT)
    assert {r["verdict"] for r in rows} == {"match", "no_match", "undecided"}
    assert all(r["verdict"] == "undecided" for r in rows if r["rule"].startswith("undecided"))


def test_an_edited_validation_set_is_named_as_such() -> None:
    old = [_row(1, True, "concept.same"), _row(2, True, "concept.same")]
    new = [_row(1, True, "concept.same", prediction="glioblastoma")]
    assert [line for line, _ in snap.moved(old, new)] == [
        "diagnosis-2:1 the pair itself changed: the validation set was edited",
        "diagnosis-2:2 the pair itself changed: the validation set was edited",
    ]


def test_a_config_without_a_diagnosis_judge_is_named(tmp_path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("tasks: {diagnosis: {judge: strict}}\njudges: {matcher: {kind: x}}\n")
    with pytest.raises(NovaError) as caught:
        snap.configured_matcher(config)
    assert str(caught.value) == (
        f"cannot find the diagnosis judge of {config} (KeyError: 'strict'); fix: give the "
        "config tasks.diagnosis.judge naming an entry of judges:"
    )
