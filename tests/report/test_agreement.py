"""Judge agreement: Cohen's kappa by hand, the agreement table, and the config checks."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from novabench.config import check_reporting
from novabench.errors import ConfigError
from novabench.report.agreement import agreement_table, cohen_kappa, judge_labels
from support import ROOT
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


class Lenient:
    """Top-1 when the reference's first word appears in the first answer."""

    def match_ranked(self, ranked, reference):
        word = reference.split()[0].lower()
        hits = [word in item.lower() for item in ranked]
        return hits[0], any(hits)


class Strict:
    def match_ranked(self, ranked, reference):
        hits = [item.lower() == reference.lower() for item in ranked]
        return hits[0], any(hits)


def test_agreement_table_from_two_judges(tmp_path):
    dataset = pd.DataFrame(
        {
            "filename": ["a.png", "b.png", "c.png", "d.png"],
            "final_diagnosis": ["Glioma low grade", "Abscess", "Glioma", "Cyst"],
        }
    )
    answers = {
        "a.png": ["Glioma"],  # lenient yes, strict no
        "b.png": ["Abscess"],  # both yes
        "c.png": ["Meningioma", "glioma"],  # top-5 only, both
        "d.png": None,  # parse error: wrong for both
    }
    path = tmp_path / "m.jsonl"
    with open(path, "w") as handle:
        for name, ranked in answers.items():
            record = {"filename": name, "status": "ok" if ranked else "parse_error",
                      "parsed": {"ranked": ranked} if ranked else None}  # fmt: skip
            handle.write(json.dumps(record) + "\n")
    labels = {
        "m": {
            "strict": judge_labels("diagnosis", Strict(), dataset, path),
            "lenient": judge_labels("diagnosis", Lenient(), dataset, path),
        }
    }
    assert labels["m"]["strict"]["top1_correct"].tolist() == [False, True, False, False]
    assert labels["m"]["lenient"]["top1_correct"].tolist() == [True, True, False, False]
    table = agreement_table("diagnosis", labels).set_index("label")
    top1 = table.loc["top1_correct"]
    assert (top1["judge_a"], top1["judge_b"]) == ("strict", "lenient")
    assert top1["agreement"] == 0.75
    # observed 3/4; chance (1/4)(2/4) + (3/4)(2/4) = 1/2 -> kappa 1/2
    assert top1["kappa"] == pytest.approx(0.5)
    assert table.loc["top5_correct", "kappa"] == pytest.approx(0.5)  # a.png differs again


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


def test_the_agreement_table_names_its_dataset(dataset, tmp_path):

    from novabench.predict import run_predictions
    from novabench.report.agreement import write_agreement

    root = ROOT
    predictions = tmp_path / "gold.jsonl"
    run_predictions(
        dataset=dataset,
        task="captioning",
        model_name="gold",
        model_cfg={"adapter": "gold", "tasks": ["captioning"]},
        prompt_path=root / "config" / "prompts" / "captioning-v1.txt",
        out=predictions,
        summary_out=tmp_path / "gold.summary.json",
    )
    judges = [{"name": name, "kind": "keyword-lexicon"} for name in ("lexicon", "lexicon-2")]
    table = write_agreement(
        dataset_path=dataset,
        predictions={"captioning": [predictions]},
        judges={"captioning": judges},
        out_csv=tmp_path / "agreement.csv",
        out_md=tmp_path / "agreement.md",
        cache_dir=None,
        dataset_label="synthetic sample (not NOVA)",
    )
    md = (tmp_path / "agreement.md").read_text()
    assert md.startswith("## Judge agreement on synthetic sample (not NOVA)\n")
    # one comparison: the gold captions, abnormal labels, the two judges; every image
    assert list(table["model"]) == ["gold"] and list(table["n_images"]) == [len(IMAGES)]
    assert "| captioning | gold | abnormal | lexicon vs lexicon-2 |" in md
