"""The judges' held-out figures recorded by judge identity (validation/judge_figures.json):
the committed record holds the pipeline's judges, a score file finds its judge's figures
or says "judge not validated", and the tables print one line of them."""

import json
import shutil

import pandas as pd
import pytest

from novabench import judge_figures as figures
from novabench.answers import reader_fingerprint
from novabench.cli import main
from novabench.judges import validation, validation_stats
from novabench.judges.verdict_snapshot import configured_judge
from novabench.report.tables import judge_line, table_note, task_table, write_task_tables
from support import DATA

FIXTURE = DATA / "judge_report"
OFFLINE_JUDGES = {
    "matcher": {"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}},
    "keywords": {"kind": "keyword-lexicon"},
}
STALE = f"re-measure the judges and rewrite the record: {figures.REMEASURE}"


# --- the committed record ----------------------------------------------------------------------


@pytest.mark.parametrize("task", ["captioning", "diagnosis"])
def test_the_record_holds_the_pipelines_judges(task):
    identity = configured_judge(task).identity()
    found = figures.lookup(identity, task)
    assert found["validated"], f"{task}: {found['reason']}; {STALE}"


@pytest.mark.parametrize("task", ["captioning", "diagnosis"])
def test_the_record_was_measured_on_the_current_held_out_sets(task):
    # Every held-out half that is a measurement, as the files are now: an added or edited
    # set makes the recorded figures stale.
    folder = validation.validation_folder()
    expected = []
    for vset in validation.VALIDATION_SETS:
        path = folder / vset.filename
        if vset.task != task or not vset.reported("heldout") or not path.is_file():
            continue
        pairs = validation.read_pairs(path, vset.fields)
        record = validation._file_record(path, pairs)
        if record["heldout"]:
            expected.append((vset.key, record["sha256"], record["heldout"]))
    entry = next(
        e
        for e in figures.read_record()
        if e["task"] == task
        and e["identity"] == figures.verdict_identity(configured_judge(task).identity())
    )
    sets = [*entry["sets"], *entry.get("end_to_end", {}).get("sets", [])]
    measured = sorted((s["set"], s["sha256"], s["n"]) for s in sets)
    assert measured == sorted(expected), STALE


def test_the_end_to_end_figures_were_measured_with_todays_reader():
    # The figures on raw answers hold for the reading they were measured with: an edit of
    # the parser, the refusal patterns or the reading module makes them stale.
    found = figures.lookup(
        configured_judge("diagnosis").identity(),
        "diagnosis",
        reader=reader_fingerprint("diagnosis"),
    )
    assert "end_to_end" in found, f"{found.get('end_to_end_reason')}; {STALE}"
    assert found["end_to_end"]["pooled"]["n"] >= 200


# --- looking a judge up ------------------------------------------------------------------------


def record_of(entry_identity, task="diagnosis", pooled=None, sets=()):
    pooled = pooled or {
        "decided_accuracy": {"k": 97, "n": 100, "rate": 0.97, "ci95": [0.915, 0.99]},
        "decided_false_match": {"k": 1, "n": 50, "rate": 0.02, "ci95": [0.004, 0.105]},
        "decided_missed": {"k": 2, "n": 50, "rate": 0.04, "ci95": [0.011, 0.135]},
        "undecided": {"k": 14, "n": 114, "rate": 14 / 114, "ci95": [0.07, 0.19]},
        "accuracy": {"k": 97, "n": 114, "rate": 97 / 114, "ci95": [0.77, 0.9]},
        "n": 114,
    }
    entry = {"task": task, "identity": entry_identity, "pooled": pooled, "sets": list(sets)}
    return {"about": "test", "judges": [entry]}


def test_a_matching_identity_finds_its_figures_and_a_changed_one_does_not(tmp_path, matcher):
    identity = matcher.identity()
    path = tmp_path / figures.RECORD_NAME
    path.write_text(json.dumps(record_of(figures.verdict_identity(identity))))
    found = figures.lookup(identity, "diagnosis", path)
    assert found["validated"] and found["figures"]["pooled"]["n"] == 114
    # Another task, or one edit of the matcher's code: not this judge.
    assert not figures.lookup(identity, "captioning", path)["validated"]
    changed = {**identity, "code": "0" * 16}
    missing = figures.lookup(changed, "diagnosis", path)
    assert missing == {
        "validated": False,
        "reason": "its identity is not in judge_figures.json (its code, tables or settings "
        "changed, or it was never measured); re-measure with `novabench judge-report --record`",
    }
    # What an LLM judge was served so far changes none of its verdicts.
    served = {**identity, "served": {"model": ["x"], "answers": 3}}
    assert figures.lookup(served, "diagnosis", path)["validated"]
    assert not figures.lookup(identity, "diagnosis", tmp_path / "none.json")["validated"]


def prop(k, n):
    return {"k": k, "n": n, "rate": k / n, "ci95": None}


def with_end_to_end(record, reader):
    labels = {
        "decided_accuracy": prop(189, 194),
        "decided_false_match": prop(0, 114),
        "decided_missed": prop(5, 80),
        "undecided": prop(6, 200),
        "accuracy": prop(195, 200),
    }
    top5 = {**labels, "decided_accuracy": prop(176, 186), "decided_false_match": prop(1, 73)}
    pooled = {
        "n": 200,
        "reader": reader,
        "reading": {"status": prop(195, 200), "status_and_top1": prop(183, 200)},
        "top1": labels,
        "top5": {**top5, "undecided": prop(14, 200)},
    }
    record["judges"][0]["end_to_end"] = {"pooled": pooled, "sets": [{"set": "raw-x", "n": 200}]}
    return record


def test_end_to_end_figures_are_quoted_only_for_the_reader_they_were_measured_with(
    tmp_path, matcher
):
    identity = matcher.identity()
    path = tmp_path / figures.RECORD_NAME
    record = record_of(figures.verdict_identity(identity), sets=[{"set": "diagnosis-5"}])
    path.write_text(json.dumps(with_end_to_end(record, "abc")))
    found = figures.lookup(identity, "diagnosis", path, reader="abc")
    assert found["end_to_end"]["pooled"]["n"] == 200
    assert judge_line(payload(identity, found)).endswith(
        "; end to end on raw answers (raw-x, n=200): the reading agrees with a person's on "
        "91.5% of answers, decided accuracy Top-1 97.4% and Top-5 94.6%, false matches 0.0% "
        "and 1.4%, undecided 3% and 7%"
    )
    # Another reader (the parser edited since), or a score file that names none.
    for reader in ("abd", None):
        stale = figures.lookup(identity, "diagnosis", path, reader=reader)
        assert stale["validated"] and "end_to_end" not in stale
        assert judge_line(payload(identity, stale)).endswith(
            "end to end on raw answers: not quoted (the answers were read by other code than "
            "the figures on raw answers were measured with; re-measure with `novabench "
            "judge-report --record`)"
        )


def test_an_unreadable_record_names_the_file_and_the_command(tmp_path, matcher):
    path = tmp_path / figures.RECORD_NAME
    path.write_text('{"judges": [{"task": "diagnosis"}]}')
    with pytest.raises(Exception, match=r"cannot read the judge figures .*judge-report --record"):
        figures.lookup(matcher.identity(), "diagnosis", path)


def payload(identity, validation_entry):
    return {
        "task": "diagnosis",
        "model": "m",
        "metrics": {"Top-1": 50.0, "Top-5": 60.0, "n_images": 4, "n_ok": 4},
        "judge": identity,
        "judge_validation": validation_entry,
    }


def test_the_line_gives_the_figures_or_says_judge_not_validated(tmp_path, matcher):
    identity = matcher.identity()
    path = tmp_path / figures.RECORD_NAME
    sets = [{"set": "diagnosis-5", "n": 114}]
    path.write_text(json.dumps(record_of(figures.verdict_identity(identity), sets=sets)))
    found = figures.lookup(identity, "diagnosis", path)
    code = identity["code"][:8]
    assert judge_line(payload(identity, found)) == (
        f"diagnosis-matcher (code {code}); held-out: decided accuracy 97.0% [91.5-99.0], "
        "false matches 2.0% and missed 4.0% of decided non-matches and matches, undecided "
        "12% (held-out pairs of diagnosis-5, n=114); end to end on raw answers: not quoted "
        "(not measured on raw answers)"
    )
    changed = {**identity, "code": "f" * 16}
    not_found = figures.lookup(changed, "diagnosis", path)
    assert judge_line(payload(changed, not_found)) == (
        "diagnosis-matcher (code ffffffff), judge not validated"
    )
    # A score file written before the record: no figures to show either.
    assert judge_line({"judge": identity}).endswith(", judge not validated")
    assert judge_line({"judge": None}) is None


def test_a_caption_judge_line_gives_its_error_on_pairs_read_fully_and_the_rest():
    pooled = {
        "clinical_f1": {"mad": 3.64, "n": 98},
        "clinical_f1_read_fully": {"mad": 1.7, "n": 16},
        "clinical_f1_not_read_fully": {"mad": 4.02, "n": 82},
        "unread_known": 98,
        "read_fully": 16,
        "n": 98,
    }
    found = {"validated": True, "figures": {"task": "captioning", "pooled": pooled, "sets": []}}
    assert figures.figures_line("keyword-lexicon (code 12345678)", found) == (
        "keyword-lexicon (code 12345678); held-out: Clinical F1 off by 1.7 points per pair "
        "read fully (n=16), 4.0 per pair with unread words (n=82) (n=98)"
    )


def test_the_rendered_table_says_judge_not_validated(tmp_path, matcher):
    identity = {**matcher.identity(), "code": "f" * 16}
    line = judge_line(payload(identity, figures.lookup(identity, "diagnosis", tmp_path / "x")))
    estimates = {"m": {"Top-1": 50.0, "Top-5": 60.0}}
    table = task_table("diagnosis", pd.DataFrame(columns=["model", "group"]), estimates)
    context = {"judge": line, "n_images": 4, "n_cases": 2}
    paths = write_task_tables("diagnosis", table, context, tmp_path)
    for ext in ("md", "tex"):
        assert "diagnosis-matcher (code ffffffff), judge not validated" in paths[ext].read_text()
    assert "Judge: diagnosis-matcher (code ffffffff), judge not validated." in table_note(
        "diagnosis", context
    )


# --- measuring and recording -----------------------------------------------------------------


def test_record_writes_the_measured_judges_and_keeps_the_others(tmp_path, capsys, matcher):
    folder = tmp_path / "validation"
    shutil.copytree(FIXTURE, folder)
    other = {"name": "llm/judge-llm", "code": "1" * 16}
    (folder / figures.RECORD_NAME).write_text(
        json.dumps(
            {
                "judges": [
                    {"task": "diagnosis", "identity": other, "pooled": {"n": 1}},
                    # An older matcher: replaced by the one measured now.
                    {
                        "task": "diagnosis",
                        "identity": {"name": "diagnosis-matcher", "code": "0" * 16},
                        "pooled": {"n": 1},
                    },
                ]
            }
        )
    )
    config = tmp_path / "config" / "config.yaml"
    config.parent.mkdir()
    config.write_text(json.dumps({"judges": OFFLINE_JUDGES}))
    argv = ["judge-report", "--config", str(config), "--validation-dir", str(folder)]
    assert main([*argv, "--out-dir", str(tmp_path / "out"), "--record"]) == 0
    assert "recorded the held-out figures of " in capsys.readouterr().out
    entries = figures.read_record(folder / figures.RECORD_NAME)
    names = sorted((e["task"], e["identity"]["name"]) for e in entries)
    assert names == [
        ("captioning", "keyword-lexicon"),
        ("diagnosis", "diagnosis-matcher"),
        ("diagnosis", "llm/judge-llm"),
    ]
    # Only the fifth set's held-out half is a measurement (the others were tuned on): 5
    # pairs, every one decided, 4 right; the missed one is a true match.
    found = figures.lookup(matcher.identity(), "diagnosis", folder / figures.RECORD_NAME)
    pooled = found["figures"]["pooled"]
    assert [s["set"] for s in found["figures"]["sets"]] == ["diagnosis-5"]
    assert (pooled["decided_accuracy"]["k"], pooled["decided_accuracy"]["n"]) == (4, 5)
    assert (pooled["decided_missed"]["k"], pooled["decided_missed"]["n"]) == (1, 2)
    assert (pooled["undecided"]["k"], pooled["n"]) == (0, 5)
    assert pooled["decided_accuracy"]["ci95"] == pytest.approx(validation_stats.wilson(4, 5))


def test_pooled_figures_sum_counts_and_weigh_means_by_pairs():
    # A held-out set beside the fifth's held-out half (the sixth set is tuned on now).

    def held(k, n, mad, n_f1):
        prop = {"k": k, "n": n, "rate": k / n, "ci95": None}
        return {
            "n": n,
            **dict.fromkeys(figures_keys(), prop),
            "clinical_f1_mad": mad,
            "clinical_f1_n": n_f1,
            "clinical_f1_read_fully": {"mad": mad, "n": n_f1},
            "clinical_f1_not_read_fully": {"mad": None, "n": 0},
            "unread_known": n,
            "read_fully": n,
            "confident": prop,
            "clinical_f1_confident": {"mad": mad / 2, "n": k},
        }

    def figures_keys():
        return validation.DIAGNOSIS_FIGURES

    results = {
        "diagnosis-5": {"heldout": held(3, 4, 2.0, 4)},
        "diagnosis-7": {"heldout": held(5, 6, 4.0, 6)},
    }
    files = {"diagnosis-5": {"sha256": "a"}, "diagnosis-7": {"sha256": "b"}}
    pooled = validation.heldout_figures("diagnosis", results, files)["pooled"]
    assert (pooled["decided_accuracy"]["k"], pooled["decided_accuracy"]["n"]) == (8, 10)
    assert pooled["decided_accuracy"]["ci95"] == pytest.approx(validation_stats.wilson(8, 10))
    captions = {
        "captioning": {"heldout": held(1, 4, 2.0, 4)},
        "captioning-2": {"heldout": held(1, 6, 4.0, 6)},
    }
    pooled = validation.heldout_figures(
        "captioning", captions, {"captioning": {"sha256": "a"}, "captioning-2": {"sha256": "b"}}
    )["pooled"]
    assert pooled["clinical_f1"] == {"mad": pytest.approx((2.0 * 4 + 4.0 * 6) / 10), "n": 10}
    assert (pooled["confident"]["k"], pooled["confident"]["n"]) == (2, 10)
    assert pooled["clinical_f1_confident"] == {"mad": pytest.approx(1.5), "n": 2}
    # A tuned-on half is no measurement: nothing to record.
    tuned = {"diagnosis-2": {"heldout": held(3, 4, 2.0, 4)}}
    assert validation.heldout_figures("diagnosis", tuned, {"diagnosis-2": {"sha256": "c"}}) is None
    tuned = {"diagnosis-6": {"heldout": held(3, 4, 2.0, 4)}}
    assert validation.heldout_figures("diagnosis", tuned, {"diagnosis-6": {"sha256": "d"}}) is None


def test_a_cascades_stages_are_looked_up_without_their_run_counts():
    # A cascade nests its stages' identities: what an LLM stage was served so far, and its
    # failure allowance, change no verdict at any depth.
    def cascade(answers):
        llm = {"name": "llm", "code": "c", "served": {"answers": answers}, "max_failure_rate": 0}
        return {"name": "cascade", "first": {"name": "m", "code": "a"}, "second": llm}

    assert figures.verdict_identity(cascade(40)) == figures.verdict_identity(cascade(7))
    assert "served" not in figures.verdict_identity(cascade(40))["second"]
