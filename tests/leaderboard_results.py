"""Hand-written report inputs for the leaderboard tests, and a reader of its tables.

Two tasks with known numbers: localization (four models, two controls, one rater; one
model's name is HTML, one model has no mAP@30) and captioning (a judge whose name is HTML,
a refusal rate, BERT F1 not computed for a reason with HTML in it); one figure that is an
image and one that is not. The values are chosen so that numeric and text order differ (9.5 < 10.3
< 100.0, but "10.3" < "100.0" < "9.5").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
from PIL import Image, ImageDraw

EVIL = '<script>alert("x & y")'  # no slash: it is also a file name
# name: (group, mAP@30 or None, CI, FP30)
LOCALIZATION = {
    "model-b": ("model", 10.3, (8.0, 12.5), 7),
    EVIL: ("model", 100.0, (99.0, 100.0), 0),
    "model-a": ("model", 9.5, (5.0, 14.0), 12),
    "model-nan": ("model", None, None, 3),
    "gold": ("control", 100.0, (100.0, 100.0), 0),
    "random": ("control", 0.0, (0.0, 0.0), 40),
    "rater-r1": ("human", 88.0, (80.0, 95.0), 2),
}
# Status counts of localization score files (n_images 20); the rater's has none.
LOCALIZATION_STATUS = {
    "n_images": 20,
    "n_ok": 15,
    "n_no_finding": 3,
    "n_error": 2,
    "no_finding_rate": 15.0,
    "error_rate": 10.0,
}
CAPTIONING_JUDGE = {"name": "<judge>", "version": "2"}
# What the captioning scorer records when BERTScore's encoder is not available offline;
# HTML in it, as an encoder name from config could carry.
BERT_REASON = "BERT F1 not computed: the encoder <roberta> & co is not cached offline"
GIT = {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": True}


def _statistics_rows(task: str, metric: str, values: dict) -> list[dict]:
    rows = []
    for name, (group, value, ci, _) in values.items():
        if value is None:
            continue
        rows.append(
            {
                "task": task,
                "model": name,
                "group": group,
                "metric": metric,
                "estimate": value,
                "ci_low": ci[0],
                "ci_high": ci[1],
                "confidence": 0.95,
                "n_resamples": 500,
                "reference": "model-b",
                "p_value": None if name == "model-b" else 0.01,
                "n_images": 20,
                "n_cases": 8,
            }
        )
    return rows


def _write_json(path: Path, payload: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload))
    return path


def _write_localization_scores(root: Path) -> list[Path]:
    """One score file per localization model, rater and control."""
    paths = []
    for name, (_, value, _, fp30) in LOCALIZATION.items():
        metrics = {"FP30": fp30, **({} if name.startswith("rater-") else LOCALIZATION_STATUS)}
        if value is not None:
            metrics["mAP@30"] = value
        payload = {"task": "localization", "model": name, "metrics": metrics, "judge": None}
        paths.append(_write_json(root / "scores" / "localization" / f"{name}.json", payload))
    return paths


def _write_captioning(root: Path, stats_dir: Path) -> Path:
    """Captioning's statistics table (one model) and its score file, judged and with a refusal."""
    pd.DataFrame(
        [
            {
                "task": "captioning",
                "model": "model-a",
                "group": "model",
                "metric": "METEOR",
                "estimate": 31.26,
                "ci_low": 28.0,
                "ci_high": 34.5,
                "confidence": 0.95,
                "n_resamples": 500,
                "reference": "model-a",
                "p_value": None,
                "n_images": 20,
                "n_cases": 8,
            }
        ]
    ).to_csv(stats_dir / "captioning.csv", index=False)
    captioning = {
        "task": "captioning",
        "model": "model-a",
        "metrics": {
            "METEOR": 31.26,
            "n_images": 20,
            "n_ok": 19,
            "n_refusal": 1,
            "refusal_rate": 5.0,
            "BERT_F1": None,
            "bertscore": {
                "status": "unavailable",
                "reason": f"{BERT_REASON}; fix: download it once with the internet",
            },
        },
        "judge": CAPTIONING_JUDGE,
    }
    return _write_json(root / "scores" / "captioning" / "model-a.json", captioning)


def write_results(root: Path) -> dict:
    """Statistics, score files, a dataset manifest and figure files under ``root``;
    returns the keyword arguments of ``write_leaderboard`` (without ``out``)."""
    stats_dir = root / "statistics"
    stats_dir.mkdir(parents=True)
    rows = _statistics_rows("localization", "mAP@30", LOCALIZATION)
    pd.DataFrame(rows).to_csv(stats_dir / "localization.csv", index=False)
    scores: dict[str, list[Path]] = {
        "localization": _write_localization_scores(root),
        "captioning": [_write_captioning(root, stats_dir)],
    }
    manifest = _write_json(
        root / "dataset" / "manifest.json",
        {"source": "hf", "repo_id": "c-i-ber/Nova", "resolved_revision": "abc123", "n_images": 20},
    )
    figures = [root / "figures" / f"{n}.png" for n in ("localization_metrics", "judge_agreement")]
    figures[0].parent.mkdir(parents=True, exist_ok=True)
    # A figure (1050 x 700 px, as a 3.5 in figure at 300 dpi), and a file that is no image.
    figure = Image.new("RGB", (1050, 700), "white")
    ImageDraw.Draw(figure).rectangle((100, 100, 600, 300), fill="#0072B2")
    figure.save(figures[0])
    figures[1].write_bytes(b"\x89PNG\r\n\x1a\n")
    return {
        "statistics": {t: stats_dir / f"{t}.csv" for t in scores},
        "scores": scores,
        "dataset_manifest": manifest,
        "figures": figures,
        "git": GIT,
    }


@dataclass
class Table:
    headers: list[str] = field(default_factory=list)
    # per row: (group, cell texts, cell data-values)
    rows: list[tuple[str, list[str], list[str | None]]] = field(default_factory=list)

    def column(self, label: str, group: str = "model") -> list[str]:
        index = self.headers.index(label)
        return [texts[index] for g, texts, _ in self.rows if g == group]


class TableReader(HTMLParser):
    """Every ``table.board`` of a page: header texts and, per entry row, its group, cell
    texts and ``data-value`` attributes."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, Table] = {}
        self._table: Table | None = None
        self._group = ""
        self._row: tuple[list[str], list[str | None]] | None = None
        self._cell: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and "board" in (attrs.get("class") or ""):
            self._table = self.tables.setdefault(attrs["id"].removeprefix("table-"), Table())
        elif self._table is None:
            return
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._group = attrs.get("data-group", "")
        elif tag == "tr" and attrs.get("class") == "entry":
            self._row = ([], [])
        elif tag in ("th", "td") and (self._in_head or self._row is not None):
            self._cell = []
            if self._row is not None:
                self._row[1].append(attrs.get("data-value"))

    def handle_endtag(self, tag):
        if self._table is None:
            return
        if tag in ("th", "td") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            (self._table.headers if self._in_head else self._row[0]).append(text)
            self._cell = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "tr" and self._row is not None:
            self._table.rows.append((self._group, *self._row))
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def read_tables(html: str) -> dict[str, Table]:
    reader = TableReader()
    reader.feed(html)
    return reader.tables
