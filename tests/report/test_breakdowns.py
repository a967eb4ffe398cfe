"""Breakdown axes (pathology category, lesion size) and the per-case table, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd

from novabench.report.breakdowns import (
    AXES,
    NO_GOLD_BOX,
    case_table,
    largest_box_size,
    lesion_size,
    pathology_category,
)
from novabench.report.figures import breakdown_order
from novabench.report.inputs import Entry
from novabench.tasks import get_task


def box(width, height):
    return {"x": 0, "y": 0, "width": width, "height": height}


def test_largest_box_size_is_the_square_root_of_the_largest_area():
    assert largest_box_size([box(4, 9), box(10, 10)]) == 10.0
    assert np.isnan(largest_box_size([]))


def test_lesion_size_tertiles():
    # sizes 2, 4, 6, 8, 10, 12 (square boxes) and one image without a box
    frame = pd.DataFrame({"gold_boxes": [[box(s, s)] for s in (2, 4, 6, 8, 10, 12)] + [[]]})
    labels = lesion_size(frame).tolist()
    # numpy's linear quantiles: 1/3 -> 5.33, 2/3 -> 8.67
    low, high = np.quantile([2, 4, 6, 8, 10, 12], [1 / 3, 2 / 3])
    assert (round(low, 2), round(high, 2)) == (5.33, 8.67)
    assert labels == [
        "small ≤5 px",
        "small ≤5 px",
        "medium 5–9 px",
        "medium 5–9 px",
        "large >9 px",
        "large >9 px",
        NO_GOLD_BOX,
    ]
    order = breakdown_order("lesion_size", labels)
    assert order == ["small ≤5 px", "medium 5–9 px", "large >9 px", NO_GOLD_BOX]


def test_pathology_category_uses_the_vocabulary():
    frame = pd.DataFrame({"final_diagnosis": ["Glioblastoma", "Herpes simplex encephalitis", "?"]})
    assert pathology_category(frame).tolist() == ["neoplasm", "infection", "unknown"]
    assert set(AXES) == {"category", "sequence", "plane", "lesion_size"}


def test_case_table_means_per_case():
    dataset = pd.DataFrame(
        {
            "case_id": ["c1", "c1", "c2"],
            "final_diagnosis": ["Glioblastoma", "Glioblastoma", "?"],
        }
    )
    per_image = pd.DataFrame({"clinical_f1": [100.0, 50.0, np.nan]})
    entry = Entry("m", "model", {"metrics": {}}, per_image)
    table = case_table(get_task("captioning"), [entry], dataset).set_index("case_id")
    assert table.loc["c1", "value"] == 75.0 and table.loc["c1", "n_images"] == 2
    assert table.loc["c1", "category"] == "neoplasm" and table.loc["c1", "n_defined"] == 2
    assert np.isnan(table.loc["c2", "value"]) and table.loc["c2", "n_defined"] == 0
    assert set(table["label"]) == {"Clinical F1 (%)"} and set(table["model"]) == {"m"}


def test_figures_off_the_nova_release_carry_the_dataset_line(tmp_path, monkeypatch):
    from novabench.report import figures
    from novabench.report.labels import figure_note

    assert figure_note({"source": "sample"}) == "Dataset: synthetic sample (not NOVA)"
    release = {"source": "hf", "repo_id": "c-i-ber/Nova", "revision": "main", "n_images": 906}
    assert figure_note(release) is None  # figures for a paper stay clean
    subset = {**release, "subset": {"description": "limit=5"}}
    assert figure_note(subset) == "Dataset: NOVA c-i-ber/Nova @ main + subset: limit=5"

    table = tmp_path / "breakdown.csv"
    pd.DataFrame(
        {
            "breakdown": ["plane"],
            "model": ["m"],
            "group": ["model"],
            "category": ["axial"],
            "value": [50.0],
            "ci_low": [40.0],
            "ci_high": [60.0],
            "n_images": [3],
            "label": ["Top-1 (%)"],
        }
    ).to_csv(table, index=False)
    closed = []
    monkeypatch.setattr(figures.plt, "close", closed.append)
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    note = "Dataset: synthetic sample (not NOVA)"
    figures.make_figure(
        "breakdown", png=png, pdf=pdf, task="diagnosis", table=table, axis="plane", note=note
    )
    assert png.stat().st_size > 0
    assert note in [t.get_text() for t in closed[0].texts]
    figures.make_figure("breakdown", png=png, pdf=pdf, task="diagnosis", table=table, axis="plane")
    assert note not in [t.get_text() for t in closed[1].texts]  # no note leaks to the next
