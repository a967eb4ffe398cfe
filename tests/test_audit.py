"""The judge audit: the draw, the stratified prediction-powered estimate, the sheet's
errors, and `novabench audit` end to end."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from novabench import cli
from novabench.audit import (
    allocate,
    audit_estimate,
    draw_indices,
    draw_sheet,
    read_judged,
    stratified_ppi,
)
from novabench.errors import NovaError
from novabench.tasks.diagnosis.metrics import COLUMNS
from support import ROOT

# The per-image table's columns, as the scorer writes them.
SCORE_COLUMNS = list(COLUMNS)


def score_file(path: Path, verdicts: list[tuple[bool, bool]], n_failed: int = 0) -> Path:
    """A diagnosis per-image score file as the scorer writes it: one image per verdict pair
    (status ok), then ``n_failed`` parse errors (no answer, judged False/False)."""
    rows = []
    for i, (top1, top5) in enumerate(verdicts):
        ranked = [f"diagnosis {i}", "glioma", "abscess"]
        rows.append([f"img{i:03d}.png", f"case{i // 3}", "glioma", ranked[0]])
        three = ["match" if v else "no_match" for v in (top1, top5)]
        rows[-1] += [" | ".join(ranked), top1, top5, *three, "exact", False, "ok"]
        rows[-1] += [ranked[0], "glioma"]  # the top-1 and reference labels
    for j in range(n_failed):
        rows.append([f"fail{j:03d}.png", "casef", "glioma", "", "", False, False])
        rows[-1] += ["", "", "", False, "parse_error", None, "glioma"]
    pd.DataFrame(rows, columns=SCORE_COLUMNS).to_csv(path, index=False)
    return path


def fill(sheet: Path, labels: dict[str, list[str]], out: Path) -> Path:
    """Write the person's labels: per stratum, its rows in item order get the labels given
    (the same for top-1 and top-5)."""
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    for stratum, values in labels.items():
        rows = frame.index[frame["stratum"] == stratum]
        assert len(rows) == len(values), (stratum, len(rows))
        frame.loc[rows, "human_top1"] = values
        frame.loc[rows, "human_top5"] = values
    frame.to_csv(out, index=False)
    return out


MATCH = "top-1 match, top-5 match"
NO = "top-1 no match, top-5 no match"


@pytest.fixture
def hand(tmp_path) -> tuple[Path, Path]:
    """10 answered images (4 matched by the judge, 6 not) and 2 parse errors; a draw of 5."""
    scores = score_file(tmp_path / "m.images.csv", [(True, True)] * 4 + [(False, False)] * 6, 2)
    sheet = tmp_path / "sheet.csv"
    draw_sheet(scores, sheet, size=5, seed=1)
    return scores, sheet


# --- the estimator, by hand ---------------------------------------------------------------


def test_stratified_ppi_equals_the_hand_computation():
    # N = 10: stratum m (judge 1) has 4 items, stratum n (judge 0) has 6.
    # Labelled: 2 of m with human [1, 0], 3 of n with human [0, 1, 1].
    # mean f = 4/10 = 0.4; rectifier m: [0, -1], mean -1/2; n: [0, 1, 1], mean 2/3.
    # theta = 0.4 + 0.4 * (-1/2) + 0.6 * (2/3) = 0.4 - 0.2 + 0.4 = 0.6.
    # Var: m: p~ = (1+1)/(2+2) = 1/2, 0.4^2 * (1 - 2/4) * 1/4 / 2 = 0.01;
    #      n: p~ = (2+1)/(3+2) = 3/5, 0.6^2 * (1 - 3/6) * 0.24 / 3 = 0.0144.
    # se = sqrt(0.0244) = 0.156205; half width 1.959964 * se = 0.306157.
    judge = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    strata = np.array(["m"] * 4 + ["n"] * 6)
    sample = np.array([0, 3, 4, 7, 9])
    human = np.array([1, 0, 0, 1, 1])
    estimate = stratified_ppi(judge, strata, sample, human)
    assert estimate.value == pytest.approx(0.6)
    assert estimate.se == pytest.approx(math.sqrt(0.0244))
    assert estimate.low == pytest.approx(0.6 - 0.306157, abs=1e-6)
    assert estimate.high == pytest.approx(0.6 + 0.306157, abs=1e-6)


def test_a_fully_labelled_population_has_no_sampling_error():
    judge = np.array([1, 1, 0, 0])
    human = np.array([1, 0, 1, 1])
    estimate = stratified_ppi(judge, np.array(["m", "m", "n", "n"]), np.arange(4), human)
    assert (estimate.value, estimate.se, estimate.low, estimate.high) == (0.75, 0, 0.75, 0.75)


def test_the_interval_is_clipped_to_proportions():
    judge = np.zeros(100)
    estimate = stratified_ppi(judge, np.array(["n"] * 100), np.arange(3), np.zeros(3))
    assert estimate.value == 0 and estimate.low == 0 and estimate.high > 0


def test_audit_estimate_equals_the_hand_computation(hand):
    scores, sheet = hand
    # The draw of 5 from strata of 4 and 6 takes 2 and 3 (see test_allocation), so the
    # labelled sample is that of test_stratified_ppi_equals_the_hand_computation: over the
    # 10 answered images 0.6 [0.6 -/+ 0.306157]; over all 12 images x 10/12.
    filled = fill(sheet, {MATCH: ["yes", "no"], NO: ["n", "1", "True"]}, sheet)
    result = audit_estimate(scores, filled)
    assert (result["n_images"], result["n_ok"], result["n_labelled"]) == (12, 10, 5)
    assert result["strata"] == {MATCH: {"size": 4, "labelled": 2}, NO: {"size": 6, "labelled": 3}}
    for metric in ("Top-1", "Top-5"):
        m = result["metrics"][metric]
        assert m["judged"] == pytest.approx(100 * 4 / 12)
        assert m["audited"] == pytest.approx(50.0)
        assert m["ci_low"] == pytest.approx(100 * (0.6 - 0.306157) * 10 / 12, abs=1e-4)
        assert m["ci_high"] == pytest.approx(100 * (0.6 + 0.306157) * 10 / 12, abs=1e-4)
        # Labelled only: 3 of 5 say match, x 10/12; Wilson interval of 3/5.
        wilson = binomtest(3, 5).proportion_ci(method="wilson")
        assert m["labelled_only"] == pytest.approx(50.0)
        assert m["labelled_only_ci_low"] == pytest.approx(100 * wilson.low * 10 / 12)
        assert m["labelled_only_ci_high"] == pytest.approx(100 * wilson.high * 10 / 12)
        # Judge vs person: m rows agree once (yes), n rows once (no).
        assert m["agreement"] == {"k": 2, "n": 5}
        assert m["false_match"] == {"k": 1, "n": 2}
        assert m["missed"] == {"k": 2, "n": 3}


# --- coverage ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("false_match", "missed"),
    # The second: strata whose labels often all agree with the judge, where the plain
    # sample variance is 0 and its interval covers in 82% of these audits.
    [(0.10, 0.05), (0.02, 0.01)],
)
def test_the_interval_covers_the_true_rate(false_match, missed):
    """1,000 audits of 100 items of a 3,000-item population judged with known error rates:
    the 95% interval holds the true (human) rate in at least 93% of them."""
    rng = np.random.default_rng(20231110)
    truth = rng.random(3000) < 0.3
    noise = rng.random(3000)
    judge = np.where(truth, noise >= missed, noise < false_match).astype(float)
    strata = np.where(judge == 1, "match", "no match")
    target = truth.mean()
    assert judge.mean() - target > 0.01  # the judge alone overstates the rate
    covered = 0
    for seed in range(1000):
        sample, _ = draw_indices(strata, 100, seed)
        estimate = stratified_ppi(judge, strata, sample, truth[sample])
        covered += estimate.low <= target <= estimate.high
    print(f"coverage {covered / 1000:.1%}")
    assert covered >= 930, covered


# --- the draw ---------------------------------------------------------------------------------


def test_allocation():
    # Strata of 1000, 100 and 5, n = 100: 10 each at least, so the 5 are all taken; the
    # other 75 proportional to 1000 : 100, i.e. 68.18 and 6.82 -> 68 and 6, and the last
    # one to the larger fraction -> 10 + 68 = 78, 10 + 7 = 17, 5.
    assert allocate({"a": 1000, "b": 100, "c": 5}, 100) == {"a": 78, "b": 17, "c": 5}
    # Too small for 10 each: the minimum shrinks to n // strata = 2; 5 - 4 = 1 left, to
    # the larger share (6/10 against 4/10).
    assert allocate({"m": 4, "n": 6}, 5) == {"m": 2, "n": 3}
    assert allocate({"m": 4, "n": 6}, 50) == {"m": 4, "n": 6}  # all of them
    with pytest.raises(NovaError) as error:
        allocate({"m": 4, "n": 6, "x": 2}, 2)
    assert str(error.value) == (
        "a sample of 2 cannot hold an item of each of the 3 verdict strata; "
        "fix: draw at least 3 items (--size)"
    )


def test_the_draw_is_seeded_stratified_and_skips_unanswered_images(tmp_path):
    verdicts = [(True, True)] * 30 + [(False, True)] * 20 + [(False, False)] * 150
    scores = score_file(tmp_path / "m.images.csv", verdicts, n_failed=7)
    first, again, other = (tmp_path / f"{name}.csv" for name in ("first", "again", "other"))
    drawn = draw_sheet(scores, first, size=40, seed=5)
    draw_sheet(scores, again, size=40, seed=5)
    draw_sheet(scores, other, size=40, seed=6)
    assert first.read_bytes() == again.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    # The score file's row order does not change the draw.
    shuffled = pd.read_csv(scores).sample(frac=1, random_state=0)
    shuffled.to_csv(tmp_path / "s.images.csv", index=False)
    draw_sheet(tmp_path / "s.images.csv", again, size=40, seed=5)
    assert (
        pd.read_csv(again)
        .drop(columns="scores_sha256")
        .equals(pd.read_csv(first).drop(columns="scores_sha256"))
    )
    sheet = pd.read_csv(first, keep_default_na=False)
    # 10 each at least, the other 10 proportional to 30 : 20 : 150 -> 1.5, 1, 7.5 -> 1, 1,
    # 7 and the last to the largest fraction (0.5 of the 30 before 0.5 of the 150 by name).
    expected = {MATCH: 12, "top-1 no match, top-5 match": 11, NO: 17}
    assert drawn["strata"] == {
        MATCH: {"size": 30, "drawn": 12},
        "top-1 no match, top-5 match": {"size": 20, "drawn": 11},
        NO: {"size": 150, "drawn": 17},
    }
    assert sheet["stratum"].value_counts().to_dict() == expected
    assert sheet.groupby("stratum")["stratum_size"].first().to_dict() == {
        MATCH: 30,
        "top-1 no match, top-5 match": 20,
        NO: 150,
    }
    assert not sheet["filename"].str.startswith("fail").any()
    assert sheet["item"].tolist() == list(range(1, 41))
    assert (sheet["n_drawn"] == 40).all()
    assert (sheet["human_top1"] == "").all() and (sheet["human_top5"] == "").all()
    row = sheet[sheet["stratum"] == "top-1 no match, top-5 match"].iloc[0]
    assert (row["judge_top1"], row["judge_top5"]) == ("no match", "match")
    assert row["predictions"].count(" | ") == 2 and row["reference"] == "glioma"


def test_a_verdict_column_with_undecided_reads_as_its_own_stratum(tmp_path):
    scores = score_file(tmp_path / "m.images.csv", [(True, True), (False, False)] * 3)
    frame = pd.read_csv(scores)
    # The scorer's verdict columns (the scored columns stay True / False).
    frame["top1_verdict"] = ["match", "no_match", "undecided", "no_match", "match", "no_match"]
    frame["top5_verdict"] = ["match", "no_match", "undecided", "undecided", "match", "no_match"]
    frame.to_csv(scores, index=False)
    judged = read_judged(scores)
    assert sorted(set(judged["stratum"])) == [
        MATCH,
        NO,
        "top-1 no match, top-5 undecided",
        "top-1 undecided, top-5 undecided",
    ]
    sheet = tmp_path / "sheet.csv"
    draw_sheet(scores, sheet, size=6)
    filled = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    filled["human_top1"] = filled["human_top5"] = "no"
    filled.to_csv(sheet, index=False)
    result = audit_estimate(scores, sheet)
    # Undecided scores as no match: the judge says 2 of 6 for both metrics.
    assert result["metrics"]["Top-5"]["judged"] == pytest.approx(100 * 2 / 6)
    assert result["metrics"]["Top-5"]["undecided"] == 2
    assert result["metrics"]["Top-5"]["audited"] == 0


# --- the filled sheet's errors -----------------------------------------------------------------


def _error(scores: Path, sheet: Path) -> str:
    with pytest.raises(NovaError) as error:
        audit_estimate(scores, sheet)
    return str(error.value)


def test_a_label_that_is_not_yes_or_no(hand):
    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", "maybe"], NO: ["no", "no", "no"]}, sheet)
    item = pd.read_csv(sheet).query("human_top1 == 'maybe'")["item"].iloc[0]
    assert _error(scores, sheet) == (
        f"{sheet}: item {item}: human_top1 is 'maybe', not yes or no; fix: write yes or no "
        "(y/n, 1/0 and true/false are read too)"
    )


def test_unlabelled_rows(hand):
    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", ""], NO: ["no", "", "no"]}, sheet)
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    first = frame.loc[frame["human_top1"] == "", "item"].iloc[0]
    assert _error(scores, sheet) == (
        f"{sheet}: 2 of 5 drawn rows are unlabelled (first: item {first}); fix: label "
        "human_top1 and human_top5 of every row: the estimate needs the whole random "
        "sample, not the rows that were easy to label"
    )


def test_top1_yes_with_top5_no(hand):
    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", "no"], NO: ["no", "no", "no"]}, sheet)
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    row = frame.index[frame["human_top1"] == "yes"][0]
    frame.loc[row, "human_top5"] = "no"
    frame.to_csv(sheet, index=False)
    assert _error(scores, sheet) == (
        f"{sheet}: item {frame.loc[row, 'item']}: human_top1 is yes but human_top5 is no "
        "(the top-1 diagnosis is one of the five); fix: correct the labels of that row"
    )


def test_a_sheet_drawn_from_other_predictions(hand):
    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", "no"], NO: ["no", "no", "no"]}, sheet)
    frame = pd.read_csv(scores)
    frame.loc[9, "predictions"] = "meningioma | glioma"  # re-run since the draw
    frame.to_csv(scores, index=False)
    assert _error(scores, sheet) == (
        f"{sheet} was drawn from other judged predictions than {scores} (the predictions "
        "or the judge's verdicts changed since the draw); fix: draw a new sheet with "
        f"`novabench audit draw --scores {scores}` and label it"
    )


def test_a_sheet_with_rows_removed(hand):
    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", "no"], NO: ["no", "no", "no"]}, sheet)
    pd.read_csv(sheet).iloc[:4].to_csv(sheet, index=False)
    assert _error(scores, sheet) == (
        f"{sheet} has 4 rows with 4 distinct images, but 5 were drawn; fix: restore the "
        "sheet's rows as drawn (each drawn image once)"
    )


@pytest.mark.parametrize("value", ["abc", "", "5.0", "-5", "99999999999999999999"])
def test_a_sheet_whose_n_drawn_is_not_a_count(hand, capsys, value):
    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", "no"], NO: ["no", "no", "no"]}, sheet)
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    frame["n_drawn"] = value
    frame.to_csv(sheet, index=False)
    expected = (
        f"{sheet}: n_drawn is {value[:40]!r}, not the number of rows drawn; fix: restore the "
        "n_drawn column as `novabench audit draw` wrote it"
    )
    assert _error(scores, sheet) == expected
    assert cli.main(["audit", "estimate", "--scores", str(scores), "--sheet", str(sheet)]) == 2
    assert capsys.readouterr().err == f"novabench: error: {expected}\n"


def test_a_sheet_saved_in_latin_1(hand):
    scores, sheet = hand
    fill(sheet, {MATCH: ["oui", "non"], NO: ["non", "non", "non"]}, sheet)
    sheet.write_bytes(sheet.read_bytes().replace(b"oui", b"o\xf9i"))
    assert _error(scores, sheet).startswith(
        f"the audit sheet {sheet} is not UTF-8 (byte 0xf9 at offset "
    )


def test_not_a_score_file(tmp_path):
    path = tmp_path / "x.images.csv"
    pd.DataFrame({"filename": ["a.png"]}).to_csv(path, index=False)
    with pytest.raises(NovaError) as error:
        draw_sheet(path, tmp_path / "sheet.csv")
    assert str(error.value) == (
        f"{path} is not a diagnosis score file (no column case_id, reference, predictions, "
        "top1_correct, top5_correct, status); fix: pass --scores "
        "results/<tag>/scores/diagnosis/<model>.images.csv"
    )


# --- the command --------------------------------------------------------------------------------


def test_cli_draw_then_estimate(tmp_path, capsys):
    scores = score_file(tmp_path / "m.images.csv", [(True, True)] * 4 + [(False, False)] * 6, 2)
    sheet = tmp_path / "sheet.csv"
    assert cli.main(["audit", "draw", "--scores", str(scores.with_suffix("").with_suffix(".json")),
                     "--out", str(sheet), "--size", "5", "--seed", "1"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith(
        f"wrote {sheet}: 5 of 10 answered images of m ({MATCH} 2 of 4; {NO} 3 of 6)\n"
    )
    assert cli.main(["audit", "estimate", "--scores", str(scores), "--sheet", str(sheet)]) == 2
    assert capsys.readouterr().err.startswith(f"novabench: error: {sheet}: 5 of 5 drawn rows")
    fill(sheet, {MATCH: ["yes", "no"], NO: ["n", "1", "True"]}, sheet)
    assert cli.main(["audit", "estimate", "--scores", str(scores), "--sheet", str(sheet)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "Judge audit of m: 5 labelled of 10 answered images (12 in all; 2 without an answer "
        "count as wrong and are not drawn)"
    )
    # judged 4/12; audited 50.0 [24.5, 75.5]; labelled only 50.0 with Wilson's 3/5.
    wilson = binomtest(3, 5).proportion_ci(method="wilson")
    alone = f"50.0 [{100 * wilson.low * 10 / 12:.1f}, {100 * wilson.high * 10 / 12:.1f}]"
    assert lines[2].split() == [
        "Top-1", "33.3", "50.0", "[24.5,", "75.5]", *alone.split(), "2/5", "1/2", "2/3"
    ]  # fmt: skip


# --- the diagnosis table and the config ---------------------------------------------------------


def _statistics(path: Path, models: dict[str, dict[str, float]]) -> Path:
    """A statistics table as the `statistics` rule writes it (CIs are placeholders)."""
    rows = [
        {"task": "diagnosis", "model": name, "group": "model", "metric": metric,
         "estimate": value, "ci_low": value - 1, "ci_high": value + 1, "confidence": 0.95,
         "n_resamples": 10, "n_defined": 12, "reference": "m", "difference": 0.0,
         "p_value": math.nan, "seed": 1, "n_images": 12, "n_cases": 4}
        for name, metrics in models.items()
        for metric, value in metrics.items()
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_diagnosis_table_shows_the_audit_beside_the_judged(hand, tmp_path):
    import json

    from novabench.report.tables import write_all_tables

    scores, sheet = hand
    fill(sheet, {MATCH: ["yes", "no"], NO: ["n", "1", "True"]}, sheet)
    metrics = {"Top-1": 100 * 4 / 12, "Top-5": 100 * 4 / 12, "Coverage": 50.0,
               "Label_recall": 50.0, "Entropy": 1.0, "n_images": 12}  # fmt: skip
    other = score_file(tmp_path / "other.images.csv", [(False, False)] * 12)
    for path in (scores, other):
        payload = {"task": "diagnosis", "model": path.name.split(".")[0], "metrics": metrics}
        path.with_name(path.name.replace(".images.csv", ".json")).write_text(json.dumps(payload))
    statistics = _statistics(tmp_path / "diagnosis.csv", {"m": metrics, "other": metrics})
    reference = tmp_path / "paper_reference.yaml"
    reference.write_text("sources: {}\nmodels: {}\nreported: []\n")
    out = tmp_path / "tables"
    write_all_tables(
        statistics={"diagnosis": statistics},
        scores={"diagnosis": [tmp_path / "m.json", tmp_path / "other.json"]},
        paper_reference=reference,
        dataset_manifest=None,
        out_dir=out,
        audits={"m": sheet},
    )
    table = pd.read_csv(out / "diagnosis.csv").set_index("model")
    columns = [c for c in table.columns if c.startswith("Top-")]
    assert columns[:10] == [
        "Top-1", "Top-1_ci_low", "Top-1_ci_high", "Top-1_p_value", "Top-1_best",
        "Top-1_audited", "Top-1_audited_ci_low", "Top-1_audited_ci_high",
        "Top-1_audited_p_value", "Top-1_audited_best",
    ]  # fmt: skip
    # The hand computation of test_audit_estimate_equals_the_hand_computation.
    assert table.loc["m", "Top-1_audited"] == pytest.approx(50.0)
    assert table.loc["m", "Top-5_audited_ci_low"] == pytest.approx(24.4869, abs=1e-3)
    assert math.isnan(table.loc["other", "Top-1_audited"])
    assert not table["Top-1_audited_best"].any()
    md = (out / "diagnosis.md").read_text()
    assert "| Top-1 ↑ | Top-1 (audited) | Top-5 ↑ | Top-5 (audited) |" in md
    row = next(line for line in md.splitlines() if line.startswith("| Models | m "))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2:6] == ["33.3 [32.3, 34.3]", "50.0 [24.5, 75.5]"] * 2
    assert "(m: 5 of 10 answered images labelled, Top-1 judge agreement 2/5)." in md


def _config(tmp_path, audit: str | None, tasks=("diagnosis",)):
    import copy

    import yaml

    from novabench.config import read_config

    root = ROOT
    config = yaml.safe_load((root / "config" / "config.yaml").read_text())
    config = copy.deepcopy(config)
    config["models"]["retrieval"] = {"adapter": "retrieval", "tasks": list(tasks)}
    if audit is not None:
        config["models"]["retrieval"]["audit"] = audit
    return read_config(config, root)


def test_a_model_entry_names_its_audit_sheet(tmp_path):
    from novabench.catalog import predict_params

    sheet = tmp_path / "sheet.csv"
    sheet.write_text("item\n")
    plan = _config(tmp_path, str(sheet))
    assert plan.audits() == {"retrieval": str(sheet)}
    # Naming a sheet re-runs no prediction.
    assert "audit" not in predict_params(plan.model("retrieval"))
    assert _config(tmp_path, None).audits() == {}
    with pytest.raises(NovaError) as error:
        _config(tmp_path, str(tmp_path / "absent.csv"))
    assert str(error.value) == (
        f"models.retrieval.audit: no audit sheet at {tmp_path / 'absent.csv'}; fix: draw "
        "one with `novabench audit draw` and label it, or remove the key"
    )
