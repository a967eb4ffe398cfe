"""Score files of models the config does not run: found, named, or shown."""

from __future__ import annotations

import json
from pathlib import Path

from novabench.report.scored import (
    Scored,
    left_out_line,
    recorded_adapters,
    scored_elsewhere,
    shown_elsewhere,
)


def touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}")


def test_score_files_of_unplanned_models_are_found_with_what_they_lack(tmp_path):
    touch(
        tmp_path,
        "scores/localization/gold.json",  # planned
        "scores/localization/rater-r1.json",  # the dataset's raters
        "scores/localization/old.json",
        "scores/localization/old.images.csv",
        "verdicts/localization/boxes/old.jsonl",
        "scores/diagnosis/half.json",  # its per-image CSV and verdicts are gone
        "verdicts/diagnosis/other-judge/half.jsonl",  # another judge's: not the scored ones
        "scores/captioning/other.json",  # a task this config does not run
    )
    tasks = {"localization": "boxes", "diagnosis": "matcher"}
    found = scored_elsewhere(tmp_path, tasks, [("localization", "gold")])
    assert found == [
        Scored("localization", "old", ()),
        Scored(
            "diagnosis",
            "half",
            ("scores/diagnosis/half.images.csv", "verdicts/diagnosis/matcher/half.jsonl"),
        ),
    ]
    assert shown_elsewhere(found, include=False) == []
    assert shown_elsewhere(found, include=True) == [found[0]]
    assert left_out_line(found, include=False) == (
        "Not shown: 2 score file(s) under this results folder, their models are not in this "
        "config's models:; reporting.models: all shows them: scores/localization/old.json, "
        "scores/diagnosis/half.json."
    )
    assert left_out_line(found, include=True) == (
        "Not shown: 1 score file(s) under this results folder, they lack files the report "
        "reads: scores/diagnosis/half.json (lacks scores/diagnosis/half.images.csv and "
        "verdicts/diagnosis/matcher/half.jsonl)."
    )
    assert left_out_line(found[:1], include=True) is None
    assert scored_elsewhere(tmp_path / "nothing", {"localization": "boxes"}, []) == []


def test_an_unplanned_model_is_grouped_by_its_recorded_adapter(tmp_path):
    summary = tmp_path / "predictions" / "localization" / "old.summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(json.dumps({"adapter": "random", "model": "old"}))
    found = [Scored("localization", "old", ()), Scored("diagnosis", "lost", ())]
    assert recorded_adapters(tmp_path, found) == {
        "old": {"adapter": "random"},
        "lost": {"adapter": "unknown"},
    }
