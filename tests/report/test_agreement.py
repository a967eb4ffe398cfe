"""Judge agreement: Cohen's kappa by hand, the agreement of hand-written verdict files, and
the config checks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from novabench.config import check_reporting
from novabench.errors import ConfigError, NovaError
from novabench.report.agreement import (
    AGREEMENT_COLUMNS,
    cohen_kappa,
    group_verdict_files,
    task_agreement,
    verdict_labels,
    write_agreement,
)
from novabench.spreadsheet import read_csv
from upstream import IMAGES


def test_cohen_kappa_by_hand():
    a = [1, 1, 0, 0, 1, 0, 1, 1]
    b = [1, 0, 0, 0, 1, 1, 1, 1]
    # observed 6/8; chance (5/8)^2 + (3/8)^2 = 34/64; kappa = (48/64 - 34/64) / (30/64)
    assert cohen_kappa(a, b) == pytest.approx(14 / 30)
    assert cohen_kappa(a, a) == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([True] * 3, [True] * 3) == 1.0  # one label only: no chance term
    assert math.isnan(cohen_kappa([], []))
    # three categories: observed 3/5, chance (2*2 + 2*1 + 1*2)/25 = 8/25
    assert cohen_kappa(list("aabbc"), list("abbcc")) == pytest.approx((3 / 5 - 8 / 25) / (17 / 25))


def write_verdicts(path: Path, labels: dict[str, dict[str, bool | None]]) -> Path:
    """A verdict file as the reading stage writes it, holding the given labels per image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [
        {"filename": name, "case_id": name[0], "status": "ok", "error": None, "read": None,
         "verdict": None, "labels": values}
        for name, values in labels.items()
    ]  # fmt: skip
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def by_hand_kappa(a: list[bool], b: list[bool]) -> float:
    """Cohen's kappa of two yes/no raters written out: (observed - chance) / (1 - chance)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    yes_a, yes_b = sum(a) / n, sum(b) / n
    chance = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    return (observed - chance) / (1 - chance)


# Two diagnosis judges on model m's answers; "strict" gave e.png no verdict (null labels).
MATCHER = {
    "a.png": {"top1_correct": True, "top5_correct": True},
    "b.png": {"top1_correct": True, "top5_correct": True},
    "c.png": {"top1_correct": False, "top5_correct": True},
    "d.png": {"top1_correct": False, "top5_correct": False},
    "e.png": {"top1_correct": True, "top5_correct": True},
    "f.png": {"top1_correct": False, "top5_correct": False},
}
STRICT = {
    "b.png": {"top1_correct": True, "top5_correct": True},  # another order than the matcher's
    "a.png": {"top1_correct": False, "top5_correct": True},
    "c.png": {"top1_correct": False, "top5_correct": False},
    "d.png": {"top1_correct": False, "top5_correct": False},
    "e.png": {"top1_correct": None, "top5_correct": None},
    "f.png": {"top1_correct": False, "top5_correct": True},
}


def test_the_agreement_of_two_judges_verdict_files(tmp_path):
    root = tmp_path / "verdicts" / "diagnosis"
    paths = [
        write_verdicts(root / "strict" / "m.jsonl", STRICT),
        write_verdicts(root / "matcher" / "m.jsonl", MATCHER),
    ]
    verdicts = group_verdict_files(paths, {"diagnosis": ["matcher", "strict"]})
    # The task's own judge first, whatever the order of the files.
    assert list(verdicts["diagnosis"]["m"]) == ["matcher", "strict"]
    table = write_agreement(
        verdicts=verdicts, out_csv=tmp_path / "a.csv", out_md=tmp_path / "a.md"
    ).set_index("label")
    assert list(table.columns) == [c for c in AGREEMENT_COLUMNS if c != "label"]
    labelled = ["a.png", "b.png", "c.png", "d.png", "f.png"]  # e.png: strict gave no label
    for label in ("top1_correct", "top5_correct"):
        a = [MATCHER[name][label] for name in labelled]
        b = [STRICT[name][label] for name in labelled]
        row = table.loc[label]
        assert (row["judge_a"], row["judge_b"], row["n_images"]) == ("matcher", "strict", 5)
        assert row["kappa"] == pytest.approx(by_hand_kappa(a, b))
        assert row["agreement"] == pytest.approx(sum(x == y for x, y in zip(a, b, strict=True)) / 5)
        assert (row["positive_a"], row["positive_b"]) == (sum(a), sum(b))
    # top-1: matcher 1,1,0,0,0 against strict 0,1,0,0,0: observed 4/5, chance 2/25 + 12/25
    assert table.loc["top1_correct", "kappa"] == pytest.approx((4 / 5 - 14 / 25) / (11 / 25))
    assert "| diagnosis | m | top1_correct | matcher vs strict |" in (tmp_path / "a.md").read_text()
    assert read_csv(tmp_path / "a.csv")["n_images"].tolist() == [5, 5]


def test_three_judges_give_every_pair_and_each_model_its_own_rows(tmp_path):
    root = tmp_path / "verdicts" / "captioning"
    abnormal = {
        "keywords": [True, True, False, False],
        "llm": [True, False, False, False],
        "other": [True, True, True, False],
    }
    paths = [
        write_verdicts(
            root / judge / f"{model}.jsonl",
            {f"{i}.png": {"abnormal": value} for i, value in enumerate(values)},
        )
        for model in ("m1", "m2")
        for judge, values in abnormal.items()
    ]
    verdicts = group_verdict_files(paths, {"captioning": ["keywords", "llm", "other"]})
    table = write_agreement(verdicts=verdicts, out_csv=tmp_path / "a.csv", out_md=tmp_path / "a.md")
    pairs = list(zip(table["model"], table["judge_a"], table["judge_b"], strict=True))
    assert pairs == [
        (m, a, b) for m in ("m1", "m2") for a, b in [("keywords", "llm"), ("keywords", "other"),
                                                     ("llm", "other")]
    ]  # fmt: skip
    first = table.iloc[0]
    assert first["kappa"] == pytest.approx(by_hand_kappa(abnormal["keywords"], abnormal["llm"]))
    assert first["agreement"] == 0.75 and first["n_images"] == 4


def test_agreement_reads_verdicts_and_builds_no_judge(tmp_path, monkeypatch):
    import novabench.judges

    def no_judge(*args, **kwargs):
        raise AssertionError("judge agreement built a judge")

    monkeypatch.setattr(novabench.judges, "make_judge", no_judge)
    monkeypatch.setattr(novabench.judges, "judge_kind", no_judge)
    root = tmp_path / "verdicts" / "diagnosis"
    paths = [write_verdicts(root / j / "m.jsonl", MATCHER) for j in ("matcher", "copy")]
    verdicts = group_verdict_files(paths, {"diagnosis": ["matcher", "copy"]})
    table = write_agreement(verdicts=verdicts, out_csv=tmp_path / "a.csv", out_md=tmp_path / "a.md")
    assert table["kappa"].tolist() == [1.0, 1.0] and table["agreement"].tolist() == [1.0, 1.0]


def test_verdict_files_that_cannot_be_compared_say_so(tmp_path):
    root = tmp_path / "verdicts" / "diagnosis"
    matcher = write_verdicts(root / "matcher" / "m.jsonl", MATCHER)
    fewer = write_verdicts(root / "strict" / "m.jsonl", dict(list(STRICT.items())[:3]))
    with pytest.raises(NovaError, match="no verdicts of judge strict on diagnosis/m"):
        group_verdict_files([matcher], {"diagnosis": ["matcher", "strict"]})
    verdicts = group_verdict_files([matcher, fewer], {"diagnosis": ["matcher", "strict"]})
    with pytest.raises(NovaError, match="hold different images"):
        task_agreement("diagnosis", verdicts["diagnosis"])
    unlabelled = write_verdicts(root / "x" / "m.jsonl", {"a.png": {"top1_correct": True}})
    with pytest.raises(NovaError, match=r"a.png lacks labels.*re-run the `read` rule"):
        verdict_labels(unlabelled, ("top1_correct", "top5_correct"))
    (root / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(NovaError, match=r"verdict file .*bad\.jsonl is corrupt"):
        verdict_labels(root / "bad.jsonl", ("top1_correct",))


def config(**reporting):
    return {
        "tasks": {"captioning": {"judge": "keywords"}, "diagnosis": {"judge": "matcher"}},
        "judges": {
            "keywords": {"kind": "keyword-lexicon"},
            "matcher": {"kind": "diagnosis-matcher"},
            "strict": {"kind": "diagnosis-matcher"},
        },
        "models": {"m": {"adapter": "gold"}},
        "reporting": reporting,
    }


def test_reporting_config_checks():
    check_reporting(config(agreement_judges={"diagnosis": ["strict"]}, reference_model="m"))
    with pytest.raises(ConfigError, match="reference_model names 'x'"):
        check_reporting(config(reference_model="x"))
    with pytest.raises(ConfigError, match="controls names 'y'"):
        check_reporting(config(controls=["m", "y"]))
    with pytest.raises(ConfigError, match="not under judges"):
        check_reporting(config(agreement_judges={"diagnosis": ["nope"]}))
    with pytest.raises(
        ConfigError, match=r"\(kind keyword-lexicon\) judges captioning, not diagnosis"
    ):
        check_reporting(config(agreement_judges={"diagnosis": ["keywords"]}))
    with pytest.raises(ConfigError, match="the task's own judge"):
        check_reporting(config(agreement_judges={"diagnosis": ["matcher"]}))


def test_the_agreement_table_names_its_dataset(tmp_path):
    root = tmp_path / "verdicts" / "captioning"
    labels = {f"{i}.png": {"abnormal": i % 2 == 0} for i in range(len(IMAGES))}
    paths = [write_verdicts(root / j / "gold.jsonl", labels) for j in ("lexicon", "lexicon-2")]
    table = write_agreement(
        verdicts=group_verdict_files(paths, {"captioning": ["lexicon", "lexicon-2"]}),
        out_csv=tmp_path / "agreement.csv",
        out_md=tmp_path / "agreement.md",
        dataset_label="synthetic sample (not NOVA)",
    )
    md = (tmp_path / "agreement.md").read_text()
    assert md.startswith("## Judge agreement on synthetic sample (not NOVA)\n")
    # one comparison: the gold captions, abnormal labels, the two judges; every image
    assert list(table["model"]) == ["gold"] and list(table["n_images"]) == [len(IMAGES)]
    assert "| captioning | gold | abnormal | lexicon vs lexicon-2 |" in md
