"""Undecided diagnosis verdicts in every number: the scorer's bounds and shares, worked by
hand on a small table, the bootstrap's agreement with them, and the tables, summary and
leaderboard that show them."""

import json
import math
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from novabench.judges.base import RankedVerdict, Verdict, ranked_verdict
from novabench.report.inputs import Entry
from novabench.report.leaderboard import write_leaderboard
from novabench.report.statistics import task_statistics
from novabench.report.tables import write_all_tables
from novabench.tasks import get_task
from novabench.tasks.diagnosis.metrics import COLUMNS, score_diagnosis


class TernaryJudge:
    """A judge with three verdicts: equal text matches, a candidate starting "maybe" is
    undecided, anything else does not match; "judge-down" stands for a failed request.
    Candidates written "second: ..." are decided by a second stage (as a cascade's)."""

    name = "ternary"

    def judge_ranked(self, ranked, reference) -> RankedVerdict:
        if ranked[0] == "judge-down":
            return RankedVerdict("undecided", "undecided", self.name, failed=True)
        stage = "second" if ranked[0].startswith("second: ") else self.name
        verdicts: list[Verdict] = []
        for item in ranked[:5]:
            item = item.removeprefix("second: ")
            if item.startswith("maybe"):
                verdicts.append("undecided")
            else:
                verdicts.append("match" if item == reference else "no_match")
        return ranked_verdict(verdicts, stage)

    def identity(self):
        return {"name": self.name}


def _record(filename, case_id, predictions, status="ok", reference="Glioblastoma"):
    return {
        "filename": filename,
        "case_id": case_id,
        "reference": reference,
        "predictions": predictions,
        "status": status,
    }


# 8 images in 3 cases; per image (top-1, top-5) verdicts:
#   case1: a (match, match)  b (undecided, match)  c (no match, undecided)
#   case2: d (no match, no match; second stage)  e parse error  f judge failed (undecided)
#   case3: g (undecided, undecided)  h API error
RECORDS = [
    _record("a.png", "case1", ["Glioblastoma"]),
    _record("b.png", "case1", ["maybe GBM", "Glioblastoma"]),
    _record("c.png", "case1", ["Metastasis", "maybe glioma"]),
    _record("d.png", "case2", ["second: Lymphoma"]),
    _record("e.png", "case2", [], "parse_error"),
    _record("f.png", "case2", ["judge-down"]),
    _record("g.png", "case3", ["maybe glioma"]),
    _record("h.png", "case3", [], "error"),
]


@pytest.fixture(scope="module")
def scored():
    return score_diagnosis(RECORDS, TernaryJudge())


def test_scored_upper_bound_and_undecided_share_by_hand(scored) -> None:
    summary, _ = scored
    # Image level: matches a (top-1), a, b (top-5); undecided b, f, g (top-1), c, f, g
    # (top-5); the parse and API errors are wrong answers, not undecided.
    assert summary["Top-1"] == pytest.approx(100 * 1 / 8)
    assert summary["Top-5"] == pytest.approx(100 * 2 / 8)
    assert summary["Top-1_upper"] == pytest.approx(100 * 4 / 8)
    assert summary["Top-5_upper"] == pytest.approx(100 * 5 / 8)
    assert summary["Undecided_top1"] == summary["Undecided_top5"] == pytest.approx(37.5)
    assert summary["Top-1_upper_image"] == summary["Top-1_upper"]
    # Case level, the mean of per-case shares: case1 1/3 | 2/3, case2 0 | 0, case3 0 | 0;
    # undecided: case1 1/3 | 1/3, case2 1/3 | 1/3, case3 1/2 | 1/2.
    assert summary["Top-1_case"] == pytest.approx(100 * (1 / 3) / 3)
    assert summary["Top-5_case"] == pytest.approx(100 * (2 / 3) / 3)
    assert summary["Undecided_top1_case"] == pytest.approx(100 * (1 / 3 + 1 / 3 + 1 / 2) / 3)
    assert summary["Top-1_upper_case"] == pytest.approx(100 * (2 / 3 + 1 / 3 + 1 / 2) / 3)
    assert summary["Top-5_upper_case"] == pytest.approx(100 * (1 + 1 / 3 + 1 / 2) / 3)
    assert (summary["n_undecided_top1"], summary["n_undecided_top5"]) == (3, 3)
    assert (summary["n_judged"], summary["n_judge_failed"]) == (6, 1)
    # Both verdicts decided: a by the judge, d by its second stage.
    assert summary["decided_by"] == {"ternary": 1, "second": 1}


def test_the_case_unit_makes_case_bounds_the_headline() -> None:
    summary, _ = score_diagnosis(RECORDS, TernaryJudge(), unit="case")
    assert summary["Top-1_upper"] == pytest.approx(summary["Top-1_upper_case"])
    assert summary["Undecided_top5"] == pytest.approx(summary["Undecided_top5_case"])


def test_the_per_image_table_keeps_scored_values_and_verdicts(scored) -> None:
    _, table = scored
    assert list(table.columns) == list(COLUMNS)
    rows = table.set_index("filename")
    assert rows["top1_verdict"].to_dict() == {
        "a.png": "match", "b.png": "undecided", "c.png": "no_match", "d.png": "no_match",
        "e.png": "", "f.png": "undecided", "g.png": "undecided", "h.png": "",
    }  # fmt: skip
    assert rows.loc["c.png", "top5_verdict"] == "undecided"
    # The scored columns count undecided as no match.
    assert rows["top1_correct"].tolist() == [True] + [False] * 7
    assert rows["top5_correct"].tolist() == [True, True] + [False] * 6
    assert rows.loc["d.png", "decided_by"] == "second" and rows.loc["e.png", "decided_by"] == ""
    assert rows["judge_failed"].tolist() == [False] * 5 + [True, False, False]


def test_a_two_valued_judge_decides_every_image() -> None:
    class Exact:
        def match_ranked(self, ranked, reference):
            return ranked[0] == reference, reference in ranked

        def identity(self):
            return {"name": "exact"}

    summary, table = score_diagnosis(RECORDS, Exact())
    assert summary["Top-1_upper"] == summary["Top-1"]
    assert summary["Undecided_top1"] == 0.0 and summary["n_undecided_top5"] == 0
    assert set(table["top5_verdict"]) == {"match", "no_match", ""}
    assert summary["decided_by"] == {"exact": 6}


def test_gold_answers_score_100_with_nothing_undecided(matcher) -> None:
    references = ["Glioblastoma", "Giant cell glioblastoma", "Quillfeather-Marsh syndrome"]
    records = [
        _record(f"{i}.png", f"case{i}", [name], reference=name) for i, name in enumerate(references)
    ]
    summary, _ = score_diagnosis(records, matcher)
    assert summary["Top-1"] == summary["Top-5"] == 100.0
    assert summary["Top-1_upper"] == summary["Top-5_upper"] == 100.0
    assert summary["Undecided_top1"] == summary["Undecided_top5"] == 0.0
    assert summary["decided_by"] == {"diagnosis-matcher": 3}


def _entry(tmp_path, name, group, records):
    summary, table = score_diagnosis(records, TernaryJudge())
    # As the report reads them: from the files the scorer writes.
    table.to_csv(tmp_path / f"{name}.images.csv", index=False)
    payload = {"task": "diagnosis", "model": name, "metrics": summary, "judge": summary["judge"]}
    (tmp_path / f"{name}.json").write_text(json.dumps(payload))
    per_image = pd.read_csv(tmp_path / f"{name}.images.csv")
    return Entry(name, group, payload, per_image)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("undecided")
    gold = [{**r, "status": "ok", "predictions": [r["reference"]]} for r in RECORDS]
    surer = [{**r, "predictions": ["Glioblastoma"]} if r["filename"] == "b.png" else r
             for r in RECORDS]  # fmt: skip
    entries = [
        _entry(root, "model-a", "model", RECORDS),
        _entry(root, "model-b", "model", surer),
        _entry(root, "gold", "control", gold),
    ]
    dataset = pd.DataFrame({"filename": [r["filename"] for r in RECORDS]})
    dataset["case_id"] = [r["case_id"] for r in RECORDS]
    statistics = task_statistics(
        "diagnosis", entries, dataset, n_resamples=20, seed=1, confidence=0.95, reference=None
    )
    statistics.to_csv(root / "diagnosis.csv", index=False)
    (root / "paper_reference.yaml").write_text("sources: {}\nmodels: {}\nreported: []\n")
    manifest = root / "manifest.json"
    manifest.write_text(json.dumps({"source": "sample", "n_images": 8}))
    scores = {"diagnosis": [root / f"{e.name}.json" for e in entries]}
    out = root / "tables"
    write_all_tables(
        statistics={"diagnosis": root / "diagnosis.csv"},
        scores=scores,
        paper_reference=root / "paper_reference.yaml",
        dataset_manifest=manifest,
        out_dir=out,
    )
    write_leaderboard(
        statistics={"diagnosis": root / "diagnosis.csv"},
        scores=scores,
        dataset_manifest=manifest,
        figures=[],
        out=root / "leaderboard.html",
        git={},
        generated=datetime(2026, 1, 2, tzinfo=UTC),
    )
    return statistics, out, root / "leaderboard.html"


def test_the_bootstrap_recomputes_the_bounds_and_shares(report) -> None:
    statistics, _, _ = report
    rows = statistics.set_index(["model", "metric"])
    assert rows.loc[("model-a", "Top-1_upper"), "estimate"] == pytest.approx(50.0)
    assert rows.loc[("model-a", "Undecided_top1_case"), "estimate"] == pytest.approx(
        100 * (1 / 3 + 1 / 3 + 1 / 2) / 3
    )
    # Declared without an interval: no CI, no test.
    assert math.isnan(rows.loc[("model-a", "Undecided_top1"), "ci_low"])
    assert not np.isnan(rows.loc[("model-a", "Top-1"), "ci_low"])


def test_the_tables_show_the_bound_and_the_undecided_share(report) -> None:
    _, out, _ = report
    csv = pd.read_csv(out / "diagnosis.csv").set_index("model")
    assert csv.loc["model-a", "Top-1_upper"] == pytest.approx(50.0)
    assert csv.loc["model-a", "Undecided_top5"] == pytest.approx(37.5)
    # model-b's b.png answer is now a match: one undecided fewer at top-1.
    assert csv.loc["model-b", "Undecided_top1"] == pytest.approx(25.0)
    assert (csv.loc["gold", "Top-1"], csv.loc["gold", "Top-1_upper"]) == (100.0, 100.0)
    assert csv.loc["gold", "Undecided_top1"] == 0.0
    assert not csv["Undecided_top1_best"].any() and not csv["Top-1_upper_best"].any()
    md = (out / "diagnosis.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Group"))
    assert "| Top-1 ↑ | Top-5 ↑ | Top-1 upper | Top-5 upper | Undecided top-1 | Undecided " in (
        header
    )
    row = next(line for line in md.splitlines() if line.startswith("| Models | model-a "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4:8] == ["50.0", "62.5", "37.5", "37.5"]
    assert "undecided verdicts counted as matches" in md
    tex = (out / "diagnosis.tex").read_text()
    assert "Top-1 upper & Top-5 upper & Undecided top-1" in tex
    assert " & 50.0 & 62.5 & 37.5 & 37.5 & " in tex
    summary = (out / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| model-a "))
    assert "12.5 [" in row and "(≤ 50.0)" in row and "(≤ 62.5)" in row
    assert "| 37.5 | 37.5 |" in row
    gold = next(line for line in summary.splitlines() if line.startswith("| gold "))
    assert "100.0 [100.0, 100.0] (≤ 100.0)" in gold and "| 0.0 | 0.0 |" in gold
    assert "(≤ x): the upper bound of a judged score" in summary


def test_the_leaderboard_shows_the_bound_and_the_undecided_share(report) -> None:
    _, _, page = report
    html = page.read_text(encoding="utf-8")
    assert '<button type="button">Top-1 upper</button>' in html
    assert '<button type="button">Undecided top-1</button>' in html
    assert '<td data-value="50.0">50.0</td>' in html
    assert '<td data-value="37.5">37.5</td>' in html
    assert "undecided verdicts counted as matches" in html


def test_undecided_metrics_are_table_columns_without_best_or_figure() -> None:
    spec = get_task("diagnosis")
    keys = [m.key for m in spec.table_metrics]
    assert keys[:6] == [
        "Top-1", "Top-5", "Top-1_upper", "Top-5_upper", "Undecided_top1", "Undecided_top5",
    ]  # fmt: skip
    for key in keys[2:6]:
        metric = spec.metric(key)
        assert metric.better is None and not metric.interval and not metric.figure
