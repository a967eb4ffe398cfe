"""The HTML report's captions (which jobs a code edit re-plans:
tests/workflow/test_code_reruns.py)."""

from __future__ import annotations

import json

import pytest

from support import ROOT

# --- the HTML report's captions ----------------------------------------------------------


def render_caption(name: str, task: str, family: str = "iou", label: str = "") -> str:
    """A caption as Snakemake's report renders it: Jinja, then docutils to HTML."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    config = {
        "dataset": {"source": "sample"},
        "reporting": {
            "bootstrap": {"resamples": 1000, "seed": 1, "confidence": 0.95},
            "agreement_judges": {"diagnosis": ["matcher-strict"]},
        },
    }
    snakemake = SimpleNamespace(
        config=config,
        wildcards=SimpleNamespace(task=task, family=family, axis="category"),
        params=SimpleNamespace(dataset_label=label),
    )
    text = (ROOT / "workflow" / "report" / name).read_text()
    env = Environment(trim_blocks=True, lstrip_blocks=True)  # Snakemake's settings
    return publish_parts(env.from_string(text).render(snakemake=snakemake), writer="html")["body"]


@pytest.mark.parametrize("task", ["localization", "captioning", "diagnosis"])
def test_captions_name_the_dataset_and_link_nothing(task, tmp_path):
    from novabench.report.labels import DatasetLabel

    (tmp_path / "manifest.json").write_text(
        json.dumps({"source": "hf", "repo_id": "c-i-ber/Nova", "revision": "v1.0"})
    )
    label = DatasetLabel(tmp_path / "manifest.json")
    names = [p.name for p in (ROOT / "workflow" / "report").glob("*.rst")]
    families = ["iou", "lesion_size", "examples", "labels", "other"]
    for name in names:
        for family in families if name == "task_figures.rst" else ["-"]:
            html = render_caption(name, task, family, label)
            assert "mailto:" not in html, (name, family)  # "Hit@30" is not an address
            if name not in ("workflow.rst", "manifest.rst"):
                assert "NOVA c-i-ber/Nova &#64; v1.0" in html, (name, family)
    metrics = render_caption("metrics.rst", task, label="x")
    assert ("TP30" in metrics) == (task == "localization")
    breakdown = render_caption("breakdown.rst", task, label="x")
    headline = {"localization": "Hit&#64;30", "captioning": "Clinical F1", "diagnosis": "Top-1"}
    assert f"<p>{headline[task]}" in breakdown


def test_the_overview_says_when_the_numbers_are_not_nova():
    html = render_caption("workflow.rst", "localization")
    assert "<strong>synthetic sample, not NOVA</strong>" in html
