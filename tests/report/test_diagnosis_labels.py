"""Diagnosis labels in the report: Coverage, Label recall, Entropy and the labels figure
count the canonical labels of the per-image score table, and no report job builds a judge."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import novabench.judges
from novabench.errors import NovaError
from novabench.report.bootstrap import unit_weights
from novabench.report.inputs import Entry
from novabench.report.statistics import task_statistics
from novabench.tasks import get_task
from novabench.tasks.diagnosis import figures as diagnosis_figures
from support import ROOT

# Five images in three cases. The raw texts differ from their labels ("GBM" and
# "Glioblastoma multiforme" are one label), so counting the texts gives other numbers.
PER_IMAGE = pd.DataFrame(
    {
        "filename": ["a.png", "b.png", "c.png", "d.png", "e.png"],
        "case_id": ["c1", "c1", "c2", "c3", "c3"],
        "reference": ["Glioblastoma multiforme", "Glioblastoma", "Abscess", "Brain abscess",
                      "Meningioma"],
        "top1_prediction": ["GBM", "glioblastoma", np.nan, np.nan, "Glioma"],
        "top1_correct": [True, True, False, False, False],
        "top5_correct": [True, True, False, False, True],
        "top1_verdict": ["match", "match", np.nan, np.nan, "no_match"],
        "top5_verdict": ["match", "match", np.nan, np.nan, "match"],
        "top1_label": ["glioblastoma", "glioblastoma", np.nan, np.nan, "glioma"],
        "reference_label": ["glioblastoma", "glioblastoma", "abscess", "abscess", "meningioma"],
    }
)  # fmt: skip


def bits(*counts: int) -> float:
    total = sum(counts)
    return -sum(c / total * math.log2(c / total) for c in counts)


# By hand: predicted labels {glioblastoma: 2, glioma: 1}, reference labels {glioblastoma: 2,
# abscess: 2, meningioma: 1}; only glioblastoma is recalled (a, b top-1 correct).
BY_HAND = {
    "Top-1": 40.0,
    "Top-5": 60.0,
    "Coverage": 100 * 2 / 3,
    "Label_recall": 100 * 1 / 3,
    "Entropy": bits(2, 1),
    "Entropy_reference": bits(2, 2, 1),
}


def entry(name: str = "m", per_image: pd.DataFrame = PER_IMAGE, metrics=None) -> Entry:
    scores = {"task": "diagnosis", "metrics": {"unit": "image", **(metrics or {})}}
    return Entry(name, "model", scores, per_image.copy())


@pytest.fixture
def no_judge(monkeypatch):
    """Building or loading any judge fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a report job built a judge")

    for name in ("make_judge", "judge_kind"):
        monkeypatch.setattr(novabench.judges, name, refuse)


def test_the_bootstrap_counts_the_tables_labels(no_judge):
    point = get_task("diagnosis").replicates(entry(), PER_IMAGE, unit_weights(len(PER_IMAGE)))
    for metric, value in BY_HAND.items():
        assert point[metric][0] == pytest.approx(value), metric
    # Counting the texts instead would give 3 predicted of 5 reference labels.
    assert point["Coverage"][0] != pytest.approx(60.0)


def test_statistics_equal_the_score_file_without_a_judge(no_judge):
    dataset = PER_IMAGE[["filename", "case_id"]]
    table = task_statistics(
        "diagnosis",
        [entry("m", metrics=BY_HAND), entry("n", metrics=BY_HAND)],
        dataset,
        n_resamples=50,
        seed=3,
        confidence=0.95,
        reference="m",
    )
    estimates = table[table["model"] == "m"].set_index("metric")["estimate"]
    for metric, value in BY_HAND.items():
        assert estimates[metric] == pytest.approx(value), metric
    # A score file whose labels the table does not hold is caught (the point check).
    with pytest.raises(NovaError, match="Coverage recomputed from the per-image data"):
        task_statistics(
            "diagnosis",
            [entry("m", metrics={**BY_HAND, "Coverage": 60.0})],
            dataset,
            n_resamples=5,
            seed=3,
            confidence=0.95,
            reference=None,
        )


def test_a_table_without_labels_asks_for_a_new_score():
    old = PER_IMAGE.drop(columns=["top1_label", "reference_label"])
    with pytest.raises(NovaError, match=r"diagnosis/old have no top1_label and reference_label"):
        get_task("diagnosis").replicates(entry("old", old), old, unit_weights(len(old)))
    gap = PER_IMAGE.assign(reference_label=["x", "x", np.nan, "y", "z"])
    with pytest.raises(NovaError, match=r"no reference_label on every image.*re-run `read`"):
        get_task("diagnosis").replicates(entry("gap", gap), gap, unit_weights(len(gap)))


def test_the_labels_figure_draws_the_tables_labels(no_judge, monkeypatch, tmp_path):
    drawn = {}

    def capture(entries, reference, png, pdf):
        drawn.update(entries=entries, reference=reference)

    monkeypatch.setattr(diagnosis_figures, "plot_diagnosis_labels", capture)
    other = PER_IMAGE.assign(top1_label=["abscess", np.nan, "abscess", np.nan, "glioma"])
    context = SimpleNamespace(
        entries=lambda: [entry("m"), entry("n", other)], png=tmp_path / "a", pdf=tmp_path / "b"
    )
    diagnosis_figures.FAMILIES["labels"](context)
    assert drawn["reference"] == list(PER_IMAGE["reference_label"])
    assert drawn["entries"] == [
        ("m", "model", ["glioblastoma", "glioblastoma", None, None, "glioma"]),
        ("n", "model", ["abscess", None, "abscess", None, "glioma"]),
    ]


def test_no_report_job_fingerprints_a_judge():

    from novabench.config import plan_from_files
    from novabench.judges import judge_kinds

    plan = plan_from_files(ROOT, [ROOT / "config" / "config.yaml"])
    modules = {type(kind).__module__ for kind in judge_kinds().values()}
    for job in ("statistics", "task_figure", "figure"):
        roots = plan.code_roots(job, task="diagnosis")
        assert modules.isdisjoint(roots), job
        assert "novabench.tasks.diagnosis.verdicts" not in roots, job
    agreement = plan.code_roots("agreement", tasks=("diagnosis", "captioning"))
    assert modules.isdisjoint(agreement)
    assert "novabench.judges.diagnosis_matcher" in plan.code_roots("read", task="diagnosis")
