"""The leaderboard page as written: the paper tables' numbers and CIs, failure rates read
from the score files, groups, escaping, provenance, and nothing loaded from elsewhere.

What a browser makes of it (rendering, sorting, console) is
tests/report/test_leaderboard_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from datetime import UTC, datetime
from html import escape

import pandas as pd
import pytest
from PIL import Image

from leaderboard_results import (
    BERT_REASON,
    CAPTIONING_JUDGE,
    EVIL,
    GIT,
    read_tables,
    write_results,
)
from novabench.errors import NovaError
from novabench.report.failures import Limits
from novabench.report.leaderboard import dataset_line, write_leaderboard

GENERATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
# The fixture's models answer 90% of the images (10% errors): within these limits they are
# not marked, so the best of a column is bold.
LENIENT = Limits(min_answered=0.85, max_error_rate=0.15)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("leaderboard")
    inputs = write_results(root)
    out = root / "leaderboard.html"
    write_leaderboard(**inputs, out=out, generated=GENERATED, limits=LENIENT)
    return out.read_text(encoding="utf-8")


def test_one_table_per_task_with_registry_headers_then_rates(page):
    tables = read_tables(page)
    assert list(tables) == ["localization", "captioning"]
    assert tables["localization"].headers == [
        "Model",
        "mAP@30 ↑",
        "mAP@50 ↑",
        "mAP@[50:95] ↑",
        "ACC50 ↑",
        "TP30 ↑",
        "FP30 ↓",
        "FNR ↓",
        "Hit@30 ↑",
        "Hit@50 ↑",
        "Boxes/image",
        "Answered %",
        "Errors %",
        "No finding %",
    ]
    assert tables["captioning"].headers[-2:] == ["Answered %", "Refusals %"]


def test_rows_by_group_with_values_cis_and_sort_keys(page):
    table = read_tables(page)["localization"]
    groups = [(group, texts[0]) for group, texts, _ in table.rows]
    assert groups == [
        ("model", "model-b"),
        ("model", EVIL),
        ("model", "model-a"),
        ("model", "model-nan"),
        ("control", "gold"),
        ("control", "random"),
        ("human", "rater-r1"),
    ]
    # The reference model (model-b) has no p-value; the others their paired test's.
    assert table.column("mAP@30 ↑") == [
        "10.3 [8.0, 12.5]",
        "100.0 [99.0, 100.0] p = 0.010",
        "9.5 [5.0, 14.0] p = 0.010",
        "–1",  # with its footnote's number
    ]
    # sorted by the point estimate, never by the text with its CI
    index = table.headers.index("mAP@30 ↑")
    assert [values[index] for g, _, values in table.rows if g == "model"] == [
        "10.3",
        "100.0",
        "9.5",
        "",
    ]
    assert table.column("FP30 ↓") == ["7", "0", "12", "3"]  # no CI: value only
    assert table.column("mAP@30 ↑", "control") == [
        "100.0 [100.0, 100.0] p = 0.010",
        "0.0 [0.0, 0.0] p = 0.010",
    ]


def test_best_model_is_bold_controls_and_raters_never(page):
    bold = re.findall(r"<strong>([^<]*)</strong>", page)
    # mAP@30: 100.0 of the HTML-named model; FP30 (lower is better): its 0. Gold's 100.0
    # and random's 0 do not count.
    assert bold == ["100.0", "0"]


def test_models_past_the_failure_limits_are_marked_and_never_bold(tmp_path):
    inputs = write_results(tmp_path)
    # The default limits (every image answered, at most 5% without an answer)
    write_leaderboard(**inputs, out=tmp_path / "page.html", generated=GENERATED)
    page = (tmp_path / "page.html").read_text()
    assert re.findall(r"<strong>([^<]*)</strong>", page) == []
    marked = re.findall(r'<th scope="row" data-value="([^"]*)">[^<]*<span class="flag"', page)
    assert "model-b" in marked and "gold" in marked


def test_failure_rates_are_read_from_the_score_files(page):
    localization, captioning = read_tables(page).values()
    # answered = (n_ok 15 + n_no_finding 3) / n_images 20
    assert localization.column("Answered %") == ["90.0"] * 4
    assert localization.column("Errors %") == ["10.0"] * 4
    assert localization.column("No finding %", "human") == ["–2"]  # the rater's file has none
    assert captioning.column("Answered %") == ["95.0"]  # 19 of 20
    assert captioning.column("Refusals %") == ["5.0"]
    assert captioning.column("METEOR ↑") == ["31.3 [28.0, 34.5]"]


def test_text_from_config_and_score_files_is_escaped(page):
    assert "<script>alert" not in page and "<judge>" not in page
    assert escape(EVIL) in page
    assert f"Judge: {escape(CAPTIONING_JUDGE['name'])} 2" in page
    assert "Judge: none (scored without a judge)" in page


def test_provenance_dataset_commit_and_date(page):
    assert "<dd>NOVA c-i-ber/Nova @ abc123 (20 images)</dd>" in page
    assert f'<code title="{GIT["commit"]}">0123456789ab</code> (with uncommitted changes)' in page
    assert '<time datetime="2026-01-02T03:04:05+00:00">2026-01-02 03:04 UTC</time>' in page


def test_figures_are_linked_relative_to_the_page_with_embedded_thumbnails(page):
    links = re.findall(r'<a href="([^"#]*)">(?:<img [^>]*>)?<span>([^<]*)</span></a>', page)
    assert links == [
        ("figures/localization_metrics.png", "metrics"),
        ("figures/judge_agreement.png", "judge agreement"),
    ]
    # The figure's preview is in the page (one file still); the file that is no image
    # has a link only.
    images = re.findall(
        r'<img src="data:image/png;base64,([^"]+)" width="(\d+)" height="(\d+)"', page
    )
    assert len(images) == 1
    preview = Image.open(io.BytesIO(base64.b64decode(images[0][0])))
    assert preview.format == "PNG" and preview.size == (360, 240) == tuple(map(int, images[0][1:]))
    # The blue rectangle of the figure (x 100-600, y 100-300 of 1050 x 700) is in it.
    assert preview.convert("RGB").getpixel((60, 60)) == (0x00, 0x72, 0xB2)
    assert preview.convert("RGB").getpixel((300, 200)) == (255, 255, 255)


def test_nothing_is_loaded_from_elsewhere(page):
    # Images only from the page itself (data: URIs); nothing else has a source.
    assert re.findall(r'\bsrc="([^",]*,)', page) == ["data:image/png;base64,"]
    assert not re.search(r"https?://|@import|url\(", page)
    assert page.count("<script>") == page.count("<style>") == 1
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    style = re.search(r"<style>(.*)</style>", page, re.S).group(1)

    def digest(text):
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert csp == (
        f"default-src 'none'; style-src 'sha256-{digest(style)}'; "
        f"script-src 'sha256-{digest(script)}'; img-src data:"
    )


def test_headers_are_accessible_sort_buttons(page):
    headers = re.findall(r'<th scope="col"[^>]*>', page)
    # localization: Model, 10 metrics (boxes per image included), 3 failure columns;
    # captioning: Model, 7 metrics, 2 failure columns
    assert len(headers) == 14 + 10
    assert all('aria-sort="none"' in h for h in headers)
    assert page.count('<th scope="row"') == 8
    assert page.count('<th scope="rowgroup"') == 4


def test_a_task_without_rows_says_so(tmp_path):
    inputs = write_results(tmp_path)
    header = pd.read_csv(inputs["statistics"]["captioning"]).iloc[:0]
    header.to_csv(inputs["statistics"]["captioning"], index=False)
    inputs["scores"]["captioning"] = []
    write_leaderboard(**inputs, out=tmp_path / "page.html", generated=GENERATED)
    page = (tmp_path / "page.html").read_text()
    section = page.split('<section id="task-captioning">')[1].split("</section>")[0]
    assert '<td colspan="8">No scores.</td>' in section  # Model + 7 metrics


def test_unreadable_dataset_manifest_names_the_fix(tmp_path):
    inputs = write_results(tmp_path)
    inputs["dataset_manifest"].write_text("{not json")
    with pytest.raises(NovaError, match=r"cannot read the dataset manifest .*fix: re-run"):
        write_leaderboard(**inputs, out=tmp_path / "page.html")
    assert not (tmp_path / "page.html").exists()


@pytest.mark.parametrize(
    ("manifest", "label"),
    [
        (
            {"source": "sample", "n_images": 30},
            "synthetic sample (not NOVA) (30 images)",
        ),
        ({"source": "local", "local_path": "/data/Nova"}, "local copy at /data/Nova"),
        (
            {"source": "hf-legacy", "repo_id": "Ano-2090/Nova", "revision": "v1"},
            "NOVA Ano-2090/Nova @ v1",
        ),
    ],
)
def test_dataset_line(manifest, label):
    assert dataset_line(manifest) == label


def _dash_cells(page: str, task: str) -> list[tuple[str, str]]:
    """(title, footnote anchor) of every "–" cell of a task's table."""
    section = page.split(f'<section id="task-{task}">')[1].split("</section>")[0]
    return re.findall(r'<td[^>]* title="([^"]*)">–<sup class="note"><a href="#([^"]+)">', section)


def test_every_dash_has_its_reason_on_hover_and_in_a_footnote(page):
    for task in ("localization", "captioning"):
        section = page.split(f'<section id="task-{task}">')[1].split("</section>")[0]
        cells = _dash_cells(page, task)
        # Every "–" of the table is such a cell, with a reason.
        assert len(cells) == section.count(">–<") > 0
        notes = dict(re.findall(r'<li id="([^"]+)">(“–” in .*?)</li>', section))
        for title, anchor in cells:
            assert title and notes[anchor].endswith(f": {title}.")
    captioning = dict((anchor, title) for title, anchor in _dash_cells(page, "captioning"))
    # BERT F1: the score file's reason, escaped, without its fix.
    assert escape(BERT_REASON) in captioning.values()
    assert "&lt;roberta&gt; &amp; co" in page and "<roberta>" not in page
    assert "download it once" not in page
    assert re.search(r"“–” in BERT F1: BERT F1 not computed: the encoder", page)
    localization = [title for title, _ in _dash_cells(page, "localization")]
    assert "a human rater&#x27;s boxes are not model answers" in " ".join(localization)


def test_p_values_beside_each_entry_but_the_reference(page):
    table = read_tables(page)["localization"]
    cells = dict(zip(table.column("Model"), table.column("mAP@30 ↑"), strict=True))
    assert cells["model-b"] == "10.3 [8.0, 12.5]"  # the reference: no test against itself
    assert cells["model-a"].endswith("p = 0.010")
    assert '<td data-value="9.5" title="p = 0.010 vs model-b">' in page
    caption = page.split('id="table-localization">')[1].split("</caption>")[0]
    assert "p: two-sided paired case-bootstrap test of each entry&#x27;s difference to model-b" in (
        caption
    )
    # Captioning has no other model to test against: no p-value, no line about them.
    captioning = page.split('id="table-captioning">')[1].split("</caption>")[0]
    assert "p: two-sided" not in captioning
    assert 'class="p"' not in page.split('<section id="task-captioning">')[1]
