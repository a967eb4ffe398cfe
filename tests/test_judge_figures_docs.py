"""The judges' current figures in docs/judges.md are generated from the record
(validation/judge_figures.json), never typed: a stale block fails here."""

from __future__ import annotations

import json

import pytest

from novabench.errors import NovaError
from novabench.judge_figures import RECORD
from novabench.judge_figures_docs import (
    BEGIN,
    END,
    PAGES,
    figures_block,
    rewrite,
    with_fresh_block,
)
from support import ROOT

PAGE = ROOT / "docs" / "judges.md"


@pytest.mark.parametrize("page", PAGES)
def test_each_page_shows_the_records_current_figures(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert with_fresh_block(text) == text, (
        f"{page} quotes stale judge figures: run python scripts/tools/docs_judge_figures.py"
    )


def test_every_set_of_every_judge_has_its_row_with_its_counts():
    block = figures_block()
    for entry in json.loads(RECORD.read_text())["judges"]:
        for measured in entry["sets"] + entry.get("end_to_end", {}).get("sets", []):
            assert f"| {measured['set']} ({measured['half']}) | {measured['n']} |" in block
    # The matcher's eighth set, as the judge report measured it.
    assert "accuracy 99.4% (358/360, 95% CI 98.0-99.8%)" in block


def test_a_re_measured_judge_makes_the_page_stale_and_rewriting_fixes_it(tmp_path):
    record = json.loads(RECORD.read_text())
    matcher = next(e for e in record["judges"] if e["task"] == "diagnosis")
    matcher["identity"]["code"] = "0123456789abcdef"
    matcher["sets"][0]["decided_accuracy"].update(k=300, n=348, rate=300 / 348)
    changed = tmp_path / "judge_figures.json"
    changed.write_text(json.dumps(record))
    page = tmp_path / "judges.md"
    page.write_text(PAGE.read_text(encoding="utf-8"))
    assert with_fresh_block(page.read_text(), changed) != page.read_text()
    assert rewrite(page, changed) is True
    assert "diagnosis-matcher (code 0123456789abcdef)" in page.read_text()
    assert "accuracy 86.2% (300/348" in page.read_text()
    assert rewrite(page, changed) is False


def test_a_page_without_the_markers_is_one_line_naming_them():
    with pytest.raises(NovaError, match=r"no judge-figures block.*fix: put <!-- judge-figures"):
        with_fresh_block("# Judges\n\nno block here\n")
