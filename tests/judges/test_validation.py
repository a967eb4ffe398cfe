"""The judge report: judges measured against hand-labelled pairs (novabench.judges.validation).

The numbers are checked against values worked out by hand from the fixture in
tests/data/judge_report/ and the stub judges' verdicts below.
"""

import json
import math

import pytest

from novabench import paths
from novabench.cli import main
from novabench.errors import NovaError
from novabench.judges.base import KeywordSet
from novabench.judges.validation import (
    caption_agreement,
    diagnosis_agreement,
    read_pairs,
    validation_folder,
    write_report,
)
from openai_server import FakeOpenAI, Reply
from support import DATA, ROOT

FIXTURE = DATA / "judge_report"


def wilson_by_formula(k: int, n: int, z: float = 1.959963984540054) -> list[float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [centre - half, centre + half]


def pairs(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURE / name).read_text().splitlines()]


# --- diagnosis ------------------------------------------------------------------------------

# The stub's top-1 verdict per pair id: f-02 and f-08 are false matches, f-03 is missed.
STUB_VERDICTS = {
    "f-01": True,
    "f-02": True,
    "f-03": False,
    "f-04": False,
    "f-05": True,
    "f-06": True,
    "f-07": False,
    "f-08": True,
}


class StubDiagnosisJudge:
    def __init__(self, rows):
        self.verdicts = {(r["prediction"], r["reference"]): STUB_VERDICTS[r["id"]] for r in rows}

    def match_ranked(self, ranked, reference):
        verdict = self.verdicts[(ranked[0], reference)]
        return verdict, verdict


def test_diagnosis_rates_counts_and_intervals():
    rows = pairs("diagnoses.jsonl")
    report = diagnosis_agreement(StubDiagnosisJudge(rows), rows)
    held = report["heldout"]
    # Held-out: 5 pairs, 3 true matches (f-01, f-03, f-05), 2 true non-matches.
    assert held["n"] == 5
    assert (held["accuracy"]["k"], held["accuracy"]["n"]) == (3, 5)
    assert (held["false_match"]["k"], held["false_match"]["n"]) == (1, 2)
    assert (held["missed"]["k"], held["missed"]["n"]) == (1, 3)
    assert held["accuracy"]["rate"] == pytest.approx(0.6)
    assert held["accuracy"]["ci95"] == pytest.approx(wilson_by_formula(3, 5))
    assert held["false_match"]["ci95"] == pytest.approx(wilson_by_formula(1, 2))
    assert [(e["id"], e["error"]) for e in held["errors"]] == [
        ("f-02", "false match"),
        ("f-03", "missed"),
    ]
    tune = report["tune"]
    assert (tune["accuracy"]["k"], tune["false_match"]["k"], tune["missed"]["k"]) == (2, 1, 0)
    assert (tune["false_match"]["n"], tune["missed"]["n"]) == (2, 1)
    assert tune["missed"]["ci95"] == pytest.approx(wilson_by_formula(0, 1))


def test_the_matcher_names_the_rule_behind_each_error(matcher):
    rows = pairs("diagnoses.jsonl")
    flipped = [{**r, "match": not r["match"]} if r["id"] == "f-02" else r for r in rows]
    errors = diagnosis_agreement(matcher, flipped)["heldout"]["errors"]
    # Left vs right: the matcher refuses on the laterality qualifier.
    assert [(e["id"], e["error"], e["rule"]) for e in errors] == [
        ("f-02", "missed", "qualifier.conflict.laterality")
    ]


# --- captioning -----------------------------------------------------------------------------


def kw(*words, abnormal=True):
    return KeywordSet(frozenset(words), abnormal)


# What a stub caption judge extracts from each fixture caption (by pair id, reference first).
STUB_KEYWORDS = {
    "c-01": (
        kw("hyperintense", "lesion", "temporal lobe", "axial", "flair"),
        kw("hyperintense", "temporal lobe", "axial", "t2"),
    ),
    "c-02": (kw("Ring-enhancing", "mass", "coronal", "t1"), kw("coronal", "t1", "normal")),
    "c-03": (
        kw("sagittal", "t1", "neg:hemorrhages", abnormal=False),
        kw("sagittal", "t1", "hemorrhage"),
    ),
    "c-04": (
        kw("restricted diffusion", "left", "thalamus", "dwi"),
        kw("restricted diffusion", "left", "thalamus", "dwi"),
    ),
    "c-05": (kw("axial", "t2", abnormal=False), kw("axial", "t2", "unremarkable", abnormal=False)),
}


class StubCaptionJudge:
    def __init__(self, rows):
        self.by_text = {}
        for row in rows:
            ref, pred = STUB_KEYWORDS[row["id"]]
            self.by_text[row["reference"]] = ref
            self.by_text[row["prediction"]] = pred

    def extract(self, text):
        return self.by_text[text]


def test_caption_f1_differences_keywords_and_labels():
    rows = pairs("captions.jsonl")
    report = caption_agreement(StubCaptionJudge(rows), rows)
    held = report["heldout"]
    # c-01: hand clinical F1 100, judge 2*2/(3+2) = 80; modality 50 on both sides.
    # c-02 and c-03: clinical 0 on both sides, modality 100 on both sides.
    assert held["clinical_f1_mad"] == pytest.approx(20 / 3)
    assert held["modality_f1_mad"] == pytest.approx(0.0)
    assert (held["clinical_f1_n"], held["clinical_f1_undefined_mismatch"]) == (3, 0)
    # Clinical keywords only, compared after cleaning ("Ring-enhancing" = "ring enhancing"),
    # with the judge's negation written as the hand labels write it and words stemmed
    # ("neg:hemorrhages" = "no hemorrhage"). Per caption (judge/hand/shared): c-01 3/3/3
    # and 2/3/2, c-02 2/2/2 and 1 ("normal")/0/0, c-03 1/1/1 and 1/1/1: 9 shared of 10.
    assert (held["keyword_precision"]["k"], held["keyword_precision"]["n"]) == (9, 10)
    assert (held["keyword_recall"]["k"], held["keyword_recall"]["n"]) == (9, 10)
    assert (held["clinical_f1_within_5"]["k"], held["clinical_f1_within_5"]["n"]) == (2, 3)
    # Dataset means: hand (100 + 0 + 0) / 3, judge (80 + 0 + 0) / 3.
    assert held["clinical_f1_mean_hand"] == pytest.approx(100 / 3)
    assert held["clinical_f1_mean_judge"] == pytest.approx(80 / 3)
    # Six captions; the judge calls c-02's normal prediction abnormal.
    assert (held["abnormal_accuracy"]["k"], held["abnormal_accuracy"]["n"]) == (5, 6)
    assert [w["id"] for w in held["worst"]] == ["c-01"]
    assert held["worst"][0]["clinical_f1"] == {"hand": 100.0, "judge": 80.0}
    tune = report["tune"]
    # c-05: no hand clinical keyword on either side (undefined), the judge has one.
    assert (tune["clinical_f1_n"], tune["clinical_f1_undefined_mismatch"]) == (1, 1)
    assert tune["clinical_f1_mad"] == pytest.approx(0.0)
    assert [w["id"] for w in tune["worst"]] == ["c-05"]


def test_hand_modality_keywords_outside_the_benchmark_set_are_refused():
    rows = pairs("captions.jsonl")
    rows[0]["reference_labels"]["modality"].append("swi")
    with pytest.raises(NovaError, match=r"hand modality keywords \['swi'\] are outside"):
        caption_agreement(StubCaptionJudge(pairs("captions.jsonl")), rows)


def test_a_pair_without_its_fields_names_the_line(tmp_path):
    path = tmp_path / "diagnoses.jsonl"
    path.write_text('{"id": "x", "split": "heldout"}\n')
    with pytest.raises(NovaError, match=r"diagnoses.jsonl:1 lacks phenomenon"):
        read_pairs(path, ("id", "split", "phenomenon"))
    path.write_text('{"id": "x", "split": "train", "phenomenon": "exact"}\n')
    with pytest.raises(NovaError, match=r"diagnoses.jsonl:1 split 'train'"):
        read_pairs(path, ("id", "split", "phenomenon"))


# --- the whole report -----------------------------------------------------------------------

OFFLINE_JUDGES = {
    "matcher": {"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}},
    "keywords": {"kind": "keyword-lexicon"},
}


def _check_first_two_sets(report: dict) -> None:
    # The matcher decides every fixture pair as labelled.
    held = report["judges"]["matcher"]["tasks"]["diagnosis"]["heldout"]
    assert (held["accuracy"]["k"], held["accuracy"]["n"], held["errors"]) == (5, 5, [])
    second = report["judges"]["matcher"]["tasks"]["diagnosis-2"]
    assert (second["heldout"]["accuracy"]["k"], second["heldout"]["accuracy"]["n"]) == (4, 4)
    assert (second["heldout"]["false_match"]["n"], second["heldout"]["missed"]["n"]) == (2, 2)
    assert (second["tune"]["accuracy"]["k"], second["tune"]["accuracy"]["n"]) == (2, 2)
    sets = report["validation_sets"]
    assert (sets["diagnosis"]["heldout"], sets["diagnosis"]["tune"]) == (5, 3)
    assert (sets["diagnosis-2"]["heldout"], sets["diagnosis-2"]["tune"]) == (4, 2)
    assert sets["diagnosis-2"]["path"].endswith("diagnoses-2.jsonl")


def _check_fifth_set(report: dict) -> None:
    # The fifth set is all held out: 4 of 5 right, the description of an eponym missed.
    # h-05 repeats a first-set pair (letter case and spaces aside): it is counted in the
    # held-out half and left out of the new pairs.
    sets = report["validation_sets"]
    fifth = report["judges"]["matcher"]["tasks"]["diagnosis-5"]
    assert (sets["diagnosis-5"]["heldout"], sets["diagnosis-5"]["tune"]) == (5, 0)
    assert sets["diagnosis-5"]["seen_in_tuning"] == 1
    assert (fifth["heldout"]["accuracy"]["k"], fifth["tune"]["n"]) == (4, 0)
    assert [(e["id"], e["error"]) for e in fifth["heldout"]["errors"]] == [("h-04", "missed")]
    # A second rater labelled the same pairs blind and differs on h-03 only: 4 of 5
    # held-out pairs, 3 of the 4 new ones.
    assert sets["diagnosis-5"]["second_rater"]["n"] == 5
    second = fifth["heldout"]["second_rater"]
    assert (second["k"], second["n"]) == (4, 5)
    new_rater = fifth["heldout-new"]["second_rater"]
    assert (new_rater["k"], new_rater["n"]) == (3, 4)
    assert "second_rater" not in report["judges"]["matcher"]["tasks"]["diagnosis"]["heldout"]
    new = fifth["heldout-new"]
    assert (new["n"], new["accuracy"]["k"], new["false_match"]["n"]) == (4, 3, 2)
    assert "diagnosis-2" not in {k for k, v in sets.items() if "seen_in_tuning" in v}


def _check_markdown(md: str) -> None:
    assert "## Judge `matcher` (kind diagnosis-matcher)" in md
    assert "### diagnosis (diagnoses.jsonl)" in md
    # The first two sets were used whole for tuning: no half of theirs reads plainly
    # "held-out half"; the fifth set's does, and it has no tuning half to show.
    tuned = "(used to tune the judges: not an independent measurement)"
    assert f"#### Diagnosis, first set, held-out half {tuned} (n = 5)" in md
    assert "| accuracy as scored (undecided = no match) | 100.0% | 5/5 | 56.6% to 100.0% |" in md
    assert f"#### Diagnosis, first set, tuning half {tuned} (n = 3)" in md
    assert "### diagnosis-2 (diagnoses-2.jsonl)" in md
    assert f"#### Diagnosis, second set, held-out half {tuned} (n = 4)" in md
    assert f"#### Diagnosis, second set, tuning half {tuned} (n = 2)" in md
    assert "#### Diagnosis, fifth set, held-out half (n = 5)" in md
    assert (
        "#### Diagnosis, fifth set, held-out half, only the pairs that repeat no pair of a "
        "tuning set (n = 4)"
    ) in md
    assert "1 repeat a pair of a tuning set (reported apart)" in md
    assert "| a second rater's agreement with the labels | 80.0% | 4/5 |" in md
    assert "fifth set, tuning half" not in md
    assert "#### Captioning, tuning half (used to tune the judges" in md
    assert "#### Captioning, held-out half (n = 3)" in md
    # 4/4: Wilson interval by the formula, as in the first test.
    low = wilson_by_formula(4, 4)[0]
    assert (
        f"| accuracy as scored (undecided = no match) | 100.0% | 4/4 | {100 * low:.1f}% to 100.0% |"
        in md
    )


def test_report_runs_each_judge_on_the_tasks_it_judges(tmp_path):
    report = write_report(OFFLINE_JUDGES, FIXTURE, tmp_path / "r.json", tmp_path / "r.md")
    on_disk = json.loads((tmp_path / "r.json").read_text())
    assert on_disk == json.loads(json.dumps(report))
    # Every diagnosis set is measured, each in its own section.
    assert set(report["judges"]["matcher"]["tasks"]) == {"diagnosis", "diagnosis-2", "diagnosis-5"}
    assert set(report["judges"]["keywords"]["tasks"]) == {"captioning"}
    _check_first_two_sets(report)
    _check_fifth_set(report)
    assert report["judges"]["matcher"]["identity"]["diagnosis"]["name"] == "diagnosis-matcher"
    _check_markdown((tmp_path / "r.md").read_text())


def test_a_broken_second_rater_line_names_the_line(tmp_path):
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "diagnoses-5.jsonl").write_text((FIXTURE / "diagnoses-5.jsonl").read_text())
    (folder / "diagnoses-5-second-rater.jsonl").write_text('{"id": "h-01", "match": "yes"}\n')
    with pytest.raises(
        NovaError, match=r"diagnoses-5-second-rater.jsonl:1 lacks an id or a true/false"
    ):
        write_report(OFFLINE_JUDGES, folder, tmp_path / "r.json", tmp_path / "r.md")
    # A line that is no JSON, or JSON but no object, stops with its number too.
    second = folder / "diagnoses-5-second-rater.jsonl"
    second.write_text('{"id": "h-01", "match": true}\n{"id": "h-02", match\n')
    with pytest.raises(NovaError, match=r"diagnoses-5-second-rater.jsonl:2 is not JSON"):
        write_report(OFFLINE_JUDGES, folder, tmp_path / "r.json", tmp_path / "r.md")
    second.write_text('["h-01", true]\n')
    with pytest.raises(NovaError, match=r"second-rater.jsonl:1 lacks an id or a true/false"):
        write_report(OFFLINE_JUDGES, folder, tmp_path / "r.json", tmp_path / "r.md")


def test_a_missing_caption_set_is_one_line(tmp_path):
    folder = tmp_path / "sets"
    folder.mkdir()
    (folder / "diagnoses.jsonl").write_text((FIXTURE / "diagnoses.jsonl").read_text())
    report = write_report(OFFLINE_JUDGES, folder, tmp_path / "r.json", tmp_path / "r.md")
    assert report["judges"]["keywords"]["tasks"] == {}
    assert set(report["judges"]["matcher"]["tasks"]) == {"diagnosis"}
    md = (tmp_path / "r.md").read_text()
    assert f"- captioning: no validation set at {folder / 'captions.jsonl'}; not measured." in md
    missing = folder / "diagnoses-2.jsonl"
    assert f"- diagnosis-2: no validation set at {missing}; not measured." in md


def llm_judge(base_url: str, key_env: str | None = None) -> dict:
    backend = {"base_url": base_url, "model": "judge-llm", "api_key_env": key_env}
    backend.update(timeout_s=5, max_attempts=1, backoff_base_s=0.01)
    # Per caption: the scripted answers below are per-caption keyword lists.
    return {"kind": "llm", "settings": {"backend": backend, "protocol": "per-caption"}}


def test_an_llm_judge_is_measured_through_its_endpoint(tmp_path):
    # The LLM names the first candidate as a match every time: every held-out pair is
    # judged a match, so both true non-matches are false matches. Every caption is
    # abnormal with the same keywords.
    def answer(seen):
        if "Reference diagnosis:" in seen.prompt:
            return Reply('{"first_match": 1}')
        return Reply('{"sequence": ["T1"], "plane": ["axial"], "label": "abnormal"}')

    with FakeOpenAI(answer) as server:
        judges = {"gpt": llm_judge(server.base_url)}
        report = write_report(
            judges, FIXTURE, tmp_path / "r.json", tmp_path / "r.md", cache_dir=tmp_path
        )
        sent = len(server.requests)
    held = report["judges"]["gpt"]["tasks"]["diagnosis"]["heldout"]
    assert (held["false_match"]["k"], held["false_match"]["n"]) == (2, 2)
    assert (held["missed"]["k"], held["accuracy"]["k"]) == (0, 3)
    second = report["judges"]["gpt"]["tasks"]["diagnosis-2"]["heldout"]
    assert (second["false_match"]["k"], second["false_match"]["n"]) == (2, 2)
    # Held-out hand labels: 4 of the 6 captions are abnormal.
    captions = report["judges"]["gpt"]["tasks"]["captioning"]["heldout"]
    assert (captions["abnormal_accuracy"]["k"], captions["abnormal_accuracy"]["n"]) == (4, 6)
    fifth = report["judges"]["gpt"]["tasks"]["diagnosis-5"]["heldout"]
    assert (fifth["false_match"]["k"], fifth["missed"]["k"]) == (3, 0)
    # One request per distinct diagnosis pair (8, 6 of the second set and 5 of the fifth:
    # h-05's letter case differs from f-02's) and per distinct caption (10).
    assert sent == 29


def test_an_llm_judge_without_its_key_is_skipped_with_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("NOVABENCH_TEST_NO_SUCH_KEY", raising=False)
    judges = {"gpt": llm_judge("http://127.0.0.1:9/v1", "NOVABENCH_TEST_NO_SUCH_KEY")}
    report = write_report(judges, FIXTURE, tmp_path / "r.json", tmp_path / "r.md")
    skipped = report["judges"]["gpt"]["skipped"]
    assert set(skipped) == {"diagnosis", "diagnosis-2", "diagnosis-5", "captioning"}
    assert "NOVABENCH_TEST_NO_SUCH_KEY" in skipped["diagnosis"]
    assert "\n" not in skipped["diagnosis"]
    md = (tmp_path / "r.md").read_text()
    assert f"- diagnosis: skipped, {skipped['diagnosis']}" in md


# --- the command ----------------------------------------------------------------------------


def test_cli_judge_report_writes_both_files(tmp_path, capsys):
    config = tmp_path / "config" / "config.yaml"
    config.parent.mkdir()
    config.write_text(json.dumps({"judges": OFFLINE_JUDGES}))
    out = tmp_path / "judges"
    argv = ["judge-report", "--config", str(config), "--validation-dir", str(FIXTURE)]
    assert main([*argv, "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    # A half that was held out and then tuned on says its numbers are tuning numbers.
    tuned = "tuning numbers: held-out half, since tuned on"
    assert (
        f"matcher (diagnosis, {tuned}, n=5): accuracy as scored 5/5, false matches 0/2, "
        "missed 0/3; undecided 0/5, decided accuracy 5/5; hand share of true matches inside "
        "the bracket: yes"
    ) in printed
    assert (
        f"matcher (diagnosis-2, {tuned}, n=4): accuracy as scored 4/4, false matches 0/2, "
        "missed 0/2; undecided 0/4, decided accuracy 4/4"
    ) in printed
    assert (
        "matcher (diagnosis-5, held-out measurement, n=5): accuracy as scored 4/5, false "
        "matches 0/3, missed 1/2; undecided 0/5, decided accuracy 4/5; hand share of true "
        "matches inside the bracket: no"
    ) in printed
    assert "matcher (diagnosis-5, held-out measurement, new pairs only, n=4): " in printed
    assert "tuned on n=" not in printed
    assert (
        "keywords (captioning, held-out measurement, n=3): Clinical F1 mean abs. difference "
        "0.0 (0.0 on 3 pairs read fully, n/a on 0 with unread words)"
    ) in printed
    assert json.loads((out / "report.json").read_text())["judges"]["matcher"]["kind"] == (
        "diagnosis-matcher"
    )
    assert (out / "report.md").read_text().startswith("# Judges against hand labels")


def test_cli_judge_report_without_judges_is_one_line(tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text("judges: {}\n")
    assert main(["judge-report", "--config", str(config), "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"novabench: error: {config} configures no judges; fix: add a `judges:` section\n"
    )


def test_the_default_validation_folder_is_the_repository_one():
    assert validation_folder() == ROOT / "validation"
    assert (validation_folder() / "diagnoses-5.jsonl").is_file()


def test_cli_judge_report_without_the_validation_folder_is_one_line(tmp_path, capsys, monkeypatch):
    # As an installed package runs outside a checkout: no validation/ beside it.
    from novabench import cli

    monkeypatch.setattr(paths, "VALIDATION", tmp_path / "validation")
    monkeypatch.setattr(cli, "WORKFLOW", None)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"judges": OFFLINE_JUDGES}))
    assert main(["judge-report", "--config", str(config), "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"novabench: error: no validation sets at {tmp_path / 'validation'} (the hand-labelled "
        "sets ship with the repository, not with the installed package); fix: run from a "
        "checkout of the repository, or pass --validation-dir DIR\n"
    )
    assert not (tmp_path / "report.json").exists()


# --- the registry of sets (resources/validation_sets.yaml) ---------------------------------


def test_the_registry_lists_every_set_file_and_each_listed_file_exists():
    from novabench.judges.validation import REGISTRY, VALIDATION_SETS

    folder = validation_folder()
    on_disk = {
        path.name
        for pattern in ("diagnoses*.jsonl", "captions*.jsonl", "raw-diagnoses*.jsonl")
        for path in folder.glob(pattern)
        if not path.stem.endswith("-second-rater")
    }
    assert {vset.filename for vset in VALIDATION_SETS} == on_disk, REGISTRY
    fifth = next(vset for vset in VALIDATION_SETS if vset.key == "diagnosis-5")
    assert fifth.tuned_on == ("tune",) and fifth.reported("heldout")  # the default half
    assert fifth.fields[-1] == "match"


REGISTERED = (
    "sets:\n  - {key: diagnosis-9, task: diagnosis, measure: match, file: diagnoses-9.jsonl, "
    "title: N}\n"
)


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("task: diagnosis", "task: staging", "at sets/0/task ('diagnosis-9'): 'staging' is not"),
        ("title: N", "tuned_on: [tune]", "at sets/0 ('diagnosis-9'): 'title' is a required"),
        ("measure: match, ", "", "at sets/0 ('diagnosis-9'): 'measure' is a required"),
        ("measure: match", "measure: bleu", "at sets/0/measure ('diagnosis-9'): 'bleu' is not"),
        ("title: N}", "title: N, tuned_on: [all]}", "at sets/0/tuned_on/0 ('diagnosis-9')"),
        ("file: diagnoses-9", "file: ../diagnoses-9", "at sets/0/file ('diagnosis-9')"),
        (
            "sets:",
            "sets:\n  - {key: diagnosis-9, task: diagnosis, measure: match, file: d.jsonl, "
            "title: N}\n#",
            "lists key 'diagnosis-9' twice",
        ),
        ("sets:", "set:", "at top level: Additional properties are not allowed"),
    ],
)
def test_a_malformed_registry_is_one_line_naming_the_set(tmp_path, old, new, error):
    from novabench.judges.validation import read_registry

    path = tmp_path / "validation_sets.yaml"
    path.write_text(REGISTERED.replace(old, new, 1))
    with pytest.raises(NovaError) as caught:
        read_registry(path)
    message = str(caught.value)
    assert error in message and f"registry {path}" in message and "\n" not in message
    assert message.endswith(
        "fix: correct validation_sets.yaml (its header says what each field holds)"
    )


def test_a_well_formed_registry_reads_into_sets(tmp_path):
    from novabench.judges.validation import CAPTION_FIELDS, MEASURES, read_registry

    path = tmp_path / "validation_sets.yaml"
    path.write_text(
        REGISTERED + "  - {key: c, task: captioning, measure: keywords, file: c.jsonl, "
        "title: C, tuned_on: []}\n"
    )
    ninth, caption = read_registry(path)
    assert (ninth.key, ninth.filename, ninth.tuned_on) == (
        "diagnosis-9",
        "diagnoses-9.jsonl",
        ("tune",),
    )
    # What a set's lines hold and how they measure a judge is its registry entry's measure.
    assert ninth.measure is MEASURES["match"] and caption.measure is MEASURES["keywords"]
    assert caption.fields == CAPTION_FIELDS and caption.tuned_on == ()
    assert caption.reported("heldout") and not ninth.reported("tune")
