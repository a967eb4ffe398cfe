"""Text from outside that must not break the files people open: Markdown that would run
script, CSV cells a spreadsheet would run as formulas, figure text matplotlib would read
as TeX math."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from novabench.report.markdown import md_cell, md_row, md_text
from novabench.score import score_predictions
from novabench.spreadsheet import escape_cell, read_csv, unescape_cell, write_csv
from support import predict_from_file
from upstream import build_local_dataset

FORMULA = "=cmd|' /C calc'!A0"
SCRIPT = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
LINK = "[click](javascript:alert(3))"


def render(markdown: str) -> str:
    """HTML as a Markdown viewer makes it: raw HTML passes through, tables on."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


# --- Markdown ---------------------------------------------------------------------------


def test_markdown_cells_and_captions_render_as_their_text():
    hostile = f"local copy at /data/{SCRIPT}|{LINK}\nnext line \\"
    lines = [
        f"## Anomaly localization on {md_text(hostile)}",
        "",
        md_row(["Model", "Judge", "Value"]),
        md_row(["---", "---", "---:"]),
        md_row(["m1", hostile, "**1.0** [0.5, 2.0]"]),
        "",
        md_text(hostile),
    ]
    page = render("\n".join(lines))
    for tag in ("<script", "<img", "<a ", "</script"):
        assert tag not in page
    # One row, still three cells: the | and the line break stayed inside the cell.
    assert page.count("<tr>") == 2 and page.count("<td") == 3
    assert "<strong>1.0</strong> [0.5, 2.0]" in page  # the table's own emphasis is kept
    # The text shows as written, on one line.
    shown = "local copy at /data/&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"
    assert shown in page
    assert "|[click](javascript:alert(3)) next line \\" in page


def test_md_cell_escapes_what_ends_a_cell():
    assert md_cell("a|b\\") == "a\\|b\\\\"
    assert md_cell("x\ny") == "x y"
    assert md_text("<b>&") == "&lt;b&gt;&amp;"
    # A backslash from a note (a Windows path) must not escape the character after it.
    assert md_text("C:\\models\\x_1") == "C:\\\\models\\\\x_1"


def test_a_dataset_label_and_judge_name_in_the_tables_render_inert():
    """The tables' writers, given a dataset label and a note that hold markup."""
    from novabench.report.failures import Limits
    from novabench.report.tables import markdown_table, summary_markdown, task_table
    from novabench.tasks import get_task

    estimates = {"m1": {"Clinical F1": 24.2, "BLEU-4": 3.0, "n_images": 10, "ok_rate": 100.0}}
    empty = pd.DataFrame(columns=["model", "group", "metric", "ci_low", "ci_high", "p_value"])
    table = task_table("captioning", empty, estimates, Limits())
    columns = get_task("captioning").table_metrics
    md = markdown_table(table, columns, f"Captioning on {SCRIPT}", f"Judge: {LINK}.")
    summary = summary_markdown({"captioning": table}, dataset=f"local copy at {SCRIPT}")
    for page in map(render, (md, summary)):
        assert "<script" not in page and "<img" not in page and "<a " not in page
        assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page


# --- CSV --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "written"),
    [
        (FORMULA, "'" + FORMULA),
        ("+1+cmd", "'+1+cmd"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("'=already quoted", "''=already quoted"),
        ("-0.5", "-0.5"),  # a number is no formula
        ("glioblastoma", "glioblastoma"),
        ("'quoted", "'quoted"),
    ],
)
def test_formula_cells_get_a_quote_and_read_back_as_written(text, written):
    assert escape_cell(text) == written
    assert unescape_cell(written) == text


def test_write_csv_quotes_text_not_numbers_and_read_csv_gives_the_frame_back(tmp_path):
    frame = pd.DataFrame({"answer": [FORMULA, "ok", None], "value": [-1.5, 2.0, 3.0]})
    path = tmp_path / "t.csv"
    write_csv(frame, path, index=False)
    cells = list(csv.reader(path.open(newline="")))
    assert cells[1] == ["'" + FORMULA, "-1.5"]
    pd.testing.assert_frame_equal(read_csv(path), frame)


@pytest.mark.slow  # a dataset build, a prediction and a scoring job
def test_a_formula_answer_is_text_in_the_per_image_scores(tmp_path):
    nova = build_local_dataset(tmp_path / "nova")
    answers = tmp_path / "answers.jsonl"
    raw = json.dumps({"most_likely_diagnosis": FORMULA, "other_possible_diagnoses": []})
    answers.write_text(json.dumps({"filename": "case0001_001.png", "raw": raw}) + "\n")
    records = tmp_path / "records.jsonl"
    predict_from_file(nova, answers, "diagnosis", records, "harness", max_error_rate=1)
    out_csv = tmp_path / "harness.images.csv"
    score_predictions(
        task="diagnosis",
        dataset=nova,
        predictions=records,
        out_json=tmp_path / "harness.json",
        out_csv=out_csv,
        judge_cfg={"kind": "diagnosis-matcher", "settings": {"embedding_fallback": False}},
    )
    rows = {row["filename"]: row for row in csv.DictReader(out_csv.open(newline=""))}
    assert rows["case0001_001.png"]["top1_prediction"] == "'" + FORMULA
    assert not any(
        cell.startswith(("=", "+", "@")) for row in rows.values() for cell in row.values()
    )
    read_back = read_csv(out_csv).set_index("filename")
    assert read_back.loc["case0001_001.png", "top1_prediction"] == FORMULA


# --- figures ----------------------------------------------------------------------------


def test_figure_text_with_tex_math_is_drawn_as_written(tmp_path):
    import matplotlib.pyplot as plt

    from novabench.report.figures import apply_style

    apply_style()
    fig, ax = plt.subplots()
    label = ax.set_title(r"local copy at /data/$\input{x}$ and $5")
    fig.savefig(tmp_path / "f.png")  # mathtext would fail here on \input
    plt.close(fig)
    assert label.get_text() == r"local copy at /data/$\input{x}$ and $5"
    assert not label.get_parse_math()
