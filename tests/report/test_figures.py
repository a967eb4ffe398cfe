"""Figures: the caption parser, the numbers behind the figures, and that every family
writes a PNG and a PDF of paper-column size."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from novabench.report import figures
from novabench.report.bootstrap import draw_cases
from novabench.report.imaging import MULTIPLE, UNSPECIFIED, parse_plane, parse_sequence
from novabench.report.inputs import Entry
from novabench.report.statistics import breakdown_table
from novabench.sample.text import SEQUENCE_NAMES
from novabench.tasks import get_task
from novabench.tasks.diagnosis import figures as diagnosis_figures
from novabench.tasks.localization import figures as localization_figures


@pytest.mark.parametrize("sequence", sorted(SEQUENCE_NAMES))
def test_parser_reads_back_every_way_the_sample_names_a_sequence(sequence):
    for name in SEQUENCE_NAMES[sequence]:
        caption = f"(2b) Coronal {name} image shows a mass in the left frontal lobe."
        assert parse_sequence(caption) == sequence, caption
        assert parse_plane(caption) == "coronal"


@pytest.mark.parametrize(
    ("caption", "sequence", "plane"),
    [
        ("Axial T2 and FLAIR images show edema.", MULTIPLE, "axial"),
        ("Axial T2* GRE shows blooming.", "SWI/GRE", "axial"),
        ("Sagittal T1+C image shows enhancement.", "T1 post-contrast", "sagittal"),
        ("Apparent diffusion coefficient map.", "DWI", UNSPECIFIED),
        ("Axial image of an extra-axial mass.", UNSPECIFIED, "axial"),
        ("An intra-axial lesion with restricted diffusion.", UNSPECIFIED, UNSPECIFIED),
        ("Coronal and axial FLAIR images.", "FLAIR", MULTIPLE),
        ("T2-weighted image without contrast enhancement.", "T2", UNSPECIFIED),
    ],
)
def test_parser_edge_cases(caption, sequence, plane):
    assert (parse_sequence(caption), parse_plane(caption)) == (sequence, plane)


def test_lesion_hits_by_hand():
    gold = {"a.png": [[0, 0, 10, 10], [100, 100, 40, 40]], "b.png": []}
    predicted = {"a.png": [{"x": 0, "y": 0, "width": 10, "height": 20}]}  # IoU 0.5 with 1st
    hits = localization_figures.lesion_hits(gold, predicted)
    assert hits["size"].tolist() == [10.0, 40.0]
    assert hits["hit"].tolist() == [True, False]


def test_breakdown_table_means_and_counts():
    per_image = pd.DataFrame(
        {"clinical_f1": [100.0, 50.0, np.nan, 0.0], "case_id": ["c1", "c1", "c2", "c3"]}
    )
    categories = pd.Series(["FLAIR", "FLAIR", "T1", "T1"])
    weights = draw_cases(list(per_image["case_id"]), 200, seed=0).weights(
        list(per_image["case_id"])
    )
    entry = Entry("m", "model", {"metrics": {}}, per_image)
    table = breakdown_table(get_task("captioning"), categories, [entry], weights, 0.95)
    table = table.set_index("category")
    assert set(table["label"]) == {"Clinical F1 (%)"}
    assert table.loc["FLAIR", "value"] == 75.0 and table.loc["FLAIR", "n_images"] == 2
    # T1: only the defined image counts
    assert table.loc["T1", "value"] == 0.0 and table.loc["T1", "n_images"] == 1
    # both FLAIR images belong to one case: a case resample keeps them together
    assert table.loc["FLAIR", "ci_low"] == table.loc["FLAIR", "ci_high"] == 75.0


def test_pick_examples_is_seeded_and_spreads_over_cases():
    frame = pd.DataFrame(
        {
            "filename": [f"c{c}_{i}.png" for c in range(6) for i in range(3)],
            "case_id": [f"c{c}" for c in range(6) for _ in range(3)],
            "gold_boxes": [[{"x": 1}] if (c + i) % 2 else [] for c in range(6) for i in range(3)],
        }
    )
    picks = localization_figures.pick_examples(frame, 4, seed=3)
    assert picks == localization_figures.pick_examples(frame, 4, seed=3)
    assert len({p.split("_")[0] for p in picks}) == 4
    with_gold = set(frame.loc[frame["gold_boxes"].map(len) > 0, "filename"])
    assert set(picks) <= with_gold


def test_lesion_hit_rates_and_cis_are_those_of_resampled_cases():
    from novabench.report.bootstrap import draw_cases

    rng = np.random.default_rng(4)
    sizes = [10, 20, 30, 50, 70, 90, 140]
    gold = {f"c{i // 3}_{i}.png": [[5.0, 5.0, s, s]] for i, s in enumerate(sizes * 3)}
    predicted = {
        f: [{"x": 5.0, "y": 5.0, "width": b[0][2], "height": b[0][3]}]
        for f, b in gold.items()
        if rng.random() < 0.6
    }
    case_of = {f: f.split("_")[0] for f in gold}
    hits = localization_figures.lesion_hits(gold, predicted)
    table = localization_figures.lesion_hit_rates(
        {"m": hits}, case_of, n_resamples=300, seed=7, confidence=0.9
    ).set_index("size")
    assert list(table.index) == ["<16", "16–32", "32–64", "64–128", "≥128"]
    # by hand: the bins, and each resample's hit rate over the lesions of the drawn cases
    edges = [0, 16, 32, 64, 128, np.inf]
    resamples = draw_cases(list(case_of.values()), 300, 7)
    for label, low, high in zip(table.index, edges[:-1], edges[1:], strict=True):
        inside = hits[(hits["size"] >= low) & (hits["size"] < high)]
        assert table.loc[label, "n_lesions"] == len(inside)
        assert table.loc[label, "value"] == pytest.approx(100 * inside["hit"].mean())
        rates = []
        for drawn in resamples.indices:
            counts = pd.Series([resamples.cases[i] for i in drawn]).value_counts()
            w = inside["filename"].map(case_of).map(counts).fillna(0).to_numpy()
            if w.sum():
                rates.append(100 * (w * inside["hit"]).sum() / w.sum())
        ci = np.quantile(rates, [0.05, 0.95])
        assert (table.loc[label, "ci_low"], table.loc[label, "ci_high"]) == pytest.approx(ci)


@pytest.fixture
def drawn(monkeypatch):
    """The figures a plot function draws, instead of files."""
    shown = []
    for module in (figures, localization_figures, diagnosis_figures):
        monkeypatch.setattr(module, "save", lambda fig, png, pdf, dpi=None: shown.append(fig))
    return shown


def test_controls_and_raters_are_told_apart_beyond_their_greys(drawn, tmp_path):
    groups = {"m": "model", "gold": "control", "random": "control", "r1": "human", "r2": "human"}
    styles = figures.entry_styles(list(groups), groups)
    for pair in (("gold", "random"), ("r1", "r2")):
        a, b = (styles[n] for n in pair)
        assert a.colour != b.colour
        assert (a.marker, a.linestyle, a.hatch) != (b.marker, b.linestyle, b.hatch)
        assert a.marker != b.marker and a.linestyle != b.linestyle
    assert styles["gold"].hatch and styles["random"].hatch != styles["gold"].hatch
    stats = pd.DataFrame(
        [
            {"model": m, "group": g, "metric": c.key, "estimate": 50.0, "ci_low": 40.0,
             "ci_high": 60.0}
            for m, g in groups.items()
            for c in figures_columns("captioning")
        ]
    )  # fmt: skip
    figures.plot_metric_bars("captioning", stats, tmp_path / "a.png", tmp_path / "a.pdf")
    bars = drawn[0].axes[0].patches
    assert [bar.get_hatch() for bar in bars] == [styles[n].hatch for n in groups]


def test_every_axis_with_a_quantity_names_its_unit(drawn, tmp_path):
    rng = np.random.default_rng(0)
    out = (tmp_path / "f.png", tmp_path / "f.pdf")
    for task in ("localization", "diagnosis"):
        stats = pd.DataFrame(
            [
                {"model": "m", "group": "model", "metric": c.key, "estimate": 3.0,
                 "ci_low": 2.0, "ci_high": 4.0}
                for c in figures_columns(task)
            ]
        )  # fmt: skip
        figures.plot_metric_bars(task, stats, *out)
    localization_figures.plot_iou_distribution([("m", "model", _per_image(rng, 20))], *out)
    table = pd.DataFrame(
        [{"model": "m", "bin": 1, "size": "16–32", "n_lesions": 3, "value": 50.0,
          "ci_low": 20.0, "ci_high": 80.0}]
    )  # fmt: skip
    localization_figures.plot_hit_by_lesion_size(table, {"m": "model"}, *out)
    diagnosis_figures.plot_diagnosis_labels([("m", "model", ["a", "b"])], ["a", "b"], *out)
    metric_units = [ax.get_xlabel() for fig in drawn[:2] for ax in fig.axes if ax.axison]
    # localization: 7 metrics; diagnosis: Top-1, Top-5, Coverage, Label recall, Entropy
    assert metric_units == ["%"] * 7 + ["%", "%", "%", "%", "bits"]
    iou, lesion, labels = (fig.axes[0] for fig in drawn[2:])
    assert iou.get_xlabel().endswith("(overlap ratio, 0–1)")
    assert iou.get_ylabel().endswith("(%)")
    assert lesion.get_xlabel().endswith("(pixels)") and lesion.get_ylabel().endswith("(%)")
    assert labels.get_ylabel().endswith("(%)")


@pytest.mark.parametrize(
    "predicted",
    [
        ["a", "a", "b", "c", "d", "d", "d", "e"] * 3 + ["f"],  # 4% to 38% of the images
        ["a", "b", "c", "d"] * 6 + ["e"],  # all labels about equally frequent
    ],
)
def test_the_label_plot_labels_several_ticks_on_each_axis(drawn, tmp_path, predicted):
    reference = sorted(predicted)
    entries = [("m", "model", predicted)]
    diagnosis_figures.plot_diagnosis_labels(
        entries, reference, tmp_path / "l.png", tmp_path / "l.pdf"
    )
    ax = drawn[0].axes[0]
    drawn[0].canvas.draw()
    assert ax.get_yscale() == "log" and ax.get_xscale() == "linear"
    low, high = ax.get_ylim()
    y_labels = [
        t.get_text()
        for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True)
        if low <= v <= high and t.get_text()
    ]
    assert len(y_labels) >= 2, y_labels
    assert all(float(t) in (1, 2, 5, 10, 20, 50, 100) for t in y_labels)
    x_labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(x_labels) >= 3 and all(t.lstrip("−-").isdigit() for t in x_labels)


def test_colours_are_colour_blind_safe_and_grouped():
    groups = {"a": "model", "b": "model", "gold": "control", "rater-1": "human"}
    colours = figures.entry_colours(list(groups), groups)
    assert colours["a"] in figures.OKABE_ITO and colours["b"] in figures.OKABE_ITO
    assert colours["a"] != colours["b"]
    assert colours["gold"] in figures.CONTROL_GREYS
    assert colours["rater-1"] in figures.HUMAN_COLOURS


def _per_image(rng, n):
    best = rng.uniform(0, 1, n)
    return pd.DataFrame({"n_gold": rng.integers(0, 3, n), "best_iou": best, "hit30": best >= 0.3})


def test_every_family_writes_column_sized_png_and_pdf(tmp_path):
    rng = np.random.default_rng(0)
    stats = pd.DataFrame(
        [
            {
                "model": m,
                "group": g,
                "metric": c.key,
                "estimate": v,
                "ci_low": v - 5,
                "ci_high": v + 5,
            }
            for m, g, v in [
                ("m1", "model", 40.0),
                ("gold", "control", 100.0),
                ("rater-a", "human", 70.0),
            ]
            for c in figures_columns("localization")
        ]
    )
    outputs = {}
    outputs["metrics"] = _draw(tmp_path, "metrics", figures.plot_metric_bars, "localization", stats)
    entries = [("m1", "model", _per_image(rng, 30)), ("gold", "control", _per_image(rng, 30))]
    outputs["iou"] = _draw(tmp_path, "iou", localization_figures.plot_iou_distribution, entries)
    gold = {f"i{i}.png": [[10.0 * i, 10.0, 8.0 + 10 * i, 12.0]] for i in range(12)}
    predicted = {
        "m1": {
            f"i{i}.png": [{"x": 10.0 * i, "y": 10.0, "width": 9.0 + 10 * i, "height": 12.0}]
            for i in range(0, 12, 2)
        }
    }
    hits = {"m1": localization_figures.lesion_hits(gold, predicted["m1"])}
    case_of = {f: f"c{i // 2}" for i, f in enumerate(gold)}
    table = localization_figures.lesion_hit_rates(
        hits, case_of, n_resamples=50, seed=0, confidence=0.95
    )
    outputs["lesion_size"] = _draw(
        tmp_path,
        "lesion_size",
        localization_figures.plot_hit_by_lesion_size,
        table,
        {"m1": "model"},
    )
    labels = [("m1", "model", ["a", "a", "b", None]), ("m2", "model", ["c", "c", "c", "c"])]
    outputs["labels"] = _draw(
        tmp_path, "labels", diagnosis_figures.plot_diagnosis_labels, labels, ["a", "b", "b", "d"]
    )
    for name, (png, pdf) in outputs.items():
        with Image.open(png) as image:
            width = image.size[0]
        # 3.5 in at 300 dpi, give or take the tight bounding box
        assert 800 <= width <= 1200, (name, width)
        assert pdf.read_bytes().startswith(b"%PDF")
    # no timestamps: drawing again gives the same bytes
    png, _ = outputs["metrics"]
    again = _draw(tmp_path / "again", "metrics", figures.plot_metric_bars, "localization", stats)
    assert again[0].read_bytes() == png.read_bytes()


def test_examples_grid(tmp_path):
    image = np.zeros((480, 480), dtype=np.uint8)
    image[100:200, 100:200] = 200
    png, pdf = _draw(
        tmp_path,
        "examples",
        localization_figures.plot_examples,
        {"a.png": image},
        {"a.png": [[100, 100, 100, 100]]},
        {"a.png": [[95, 95, 100, 100]]},
        {"m1": {"a.png": [{"x": 90, "y": 90, "width": 120, "height": 120}]}},
    )
    with Image.open(png) as shown:
        # two panels (reference, one model) of a quarter text width each, at 200 dpi
        assert 650 <= shown.size[0] <= 800
    assert pdf.stat().st_size < 2_000_000


def figures_columns(task):
    return get_task(task).table_metrics


def _draw(directory, name, function, *args):
    directory.mkdir(parents=True, exist_ok=True)
    png, pdf = directory / f"{name}.png", directory / f"{name}.pdf"
    function(*args, png, pdf)
    return png, pdf


def test_a_family_the_task_does_not_draw_is_refused(tmp_path):
    with pytest.raises(ValueError) as caught:
        figures.make_figure(
            "labels", png=tmp_path / "a.png", pdf=tmp_path / "a.pdf", task="captioning"
        )
    assert str(caught.value) == (
        "unknown figure family 'labels'; one of ['breakdown', 'judge_agreement', 'metrics']"
    )
    assert not (tmp_path / "a.png").exists()


def test_a_model_keeps_its_colour_whatever_else_is_configured():
    import hashlib

    def preferred(name: str) -> str:
        digest = hashlib.sha256(name.encode()).digest()[:4]
        return figures.OKABE_ITO[int.from_bytes(digest, "big") % len(figures.OKABE_ITO)]

    def colours(names):
        return figures.entry_colours(names, {})

    alone = colours(["gpt-4o"])
    assert alone["gpt-4o"] == preferred("gpt-4o")
    # Another run with other models, in another order: the same colour (a name whose
    # colour an alphabetically earlier one holds takes the next free one).
    later = colours(["qwen2.5-vl-72b", "gpt-4o", "random"])
    assert later["gpt-4o"] == alone["gpt-4o"]
    if preferred("qwen2.5-vl-72b") != preferred("gpt-4o"):
        assert later["qwen2.5-vl-72b"] == preferred("qwen2.5-vl-72b")
    # Up to the palette's size, never two entries of one colour.
    names = [f"model-{i}" for i in range(len(figures.OKABE_ITO))]
    assert len(set(colours(names).values())) == len(names)


def test_a_metric_no_entry_has_gets_no_empty_panel(drawn, tmp_path):
    # BERT F1 without its encoder: a row per entry, no value (as the statistics write it).
    columns = figures_columns("captioning")
    stats = pd.DataFrame(
        [
            {"model": m, "group": "model", "metric": c.key,
             "estimate": math.nan if c.key == "BERT_F1" else 50.0,
             "ci_low": math.nan if c.key == "BERT_F1" else 40.0,
             "ci_high": math.nan if c.key == "BERT_F1" else 60.0}
            for m in ("a", "b")
            for c in columns
        ]
    )  # fmt: skip
    figures.plot_metric_bars("captioning", stats, tmp_path / "a.png", tmp_path / "a.pdf")
    fig = drawn[0]
    titles = [ax.get_title() for ax in fig.axes if ax.axison]
    drawable = [c for c in columns if c.decimals != 0 and c.figure]
    assert "BERT_F1" in [c.key for c in drawable]
    assert titles == [f"{c.label} {c.arrow}" for c in drawable if c.key != "BERT_F1"]
    assert any("Not computed for any entry (no panel): BERT F1." in t.get_text() for t in fig.texts)
