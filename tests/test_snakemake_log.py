"""Snakemake's job lines stay readable: long file lists and reasons are shortened."""

from __future__ import annotations

import logging

from novabench.score import metrics_text
from novabench.snakemake_log import ShortJobLines, install, short_list, short_reason

FILES = [f"results/sample/scores/localization/model-{n:03d}.json" for n in range(120)]


def test_a_long_list_keeps_its_first_files_and_counts_the_rest():
    shown = short_list(FILES)
    assert shown[0] == FILES[0] and shown[-1] == f"and {len(FILES) - len(shown) + 1} more"
    assert len(", ".join(shown)) < 350
    assert short_list(FILES[:3]) == FILES[:3]
    assert short_list(["x" * 1000]) == ["x" * 1000]  # one file is always shown


def test_a_reason_keeps_every_part_with_short_lists():
    params = "Params have changed since last execution: before: sha256:0 now: sha256:1 "
    reason = f"Input files updated by another job: {', '.join(FILES)}; {params}"
    short = short_reason(reason)
    assert len(short) <= 440
    assert short.startswith(f"Input files updated by another job: {FILES[0]}, ")
    assert "more; Params have changed since last execution" in short
    assert short_reason("Missing output files: a.json") == "Missing output files: a.json"


def test_the_filter_shortens_snakemakes_job_records(caplog):
    logger = logging.getLogger("novabench.test.snakemake")
    install(logger)
    install(logger)  # once only
    assert sum(isinstance(f, ShortJobLines) for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info(
            "job", extra={"input": FILES, "reason": "Updated input files: " + ", ".join(FILES)}
        )
    (record,) = caplog.records
    assert len(", ".join(record.input)) < 350 and record.input[-1].endswith("more")
    assert len(record.reason) <= 440


def test_the_scored_line_names_the_first_metrics_and_counts_the_rest():
    metrics = {f"metric_{n}": n * 1.5 for n in range(80)}
    text = metrics_text(metrics)
    assert len(text) < 450 and text.startswith("metric_0=0, metric_1=1.5, ")
    shown = text.count("=")
    assert text.endswith(f", and {80 - shown} more in the score file")
    assert metrics_text({"Top-1": 88.4615, "n_ok": 26}) == "Top-1=88.46, n_ok=26"
