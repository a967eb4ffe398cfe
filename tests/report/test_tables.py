"""Tables: their numbers are the score files', CIs come from the bootstrap, best is bold
only among models, the LaTeX compiles (pdflatex) and parses strictly, and the
reproduced-vs-reported comparison says whether the paper's value is inside our CI."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from novabench.report import failures
from novabench.report.failures import Limits
from novabench.report.inputs import load_entries, report_models
from novabench.report.statistics import task_statistics
from novabench.report.tables import (
    latex_escape,
    latex_text,
    load_paper_reference,
    task_table,
    write_all_tables,
)
from novabench.score import write_scores
from novabench.tasks import AnswerContext, Answers, ScoringContext, get_task, task_names
from novabench.tasks.localization.metrics import score_localization
from support import ROOT

# As the workflow passes them: each model's adapter and whether it answers as a control.
MODELS = report_models(
    {
        "model_a": {"adapter": "openai_compatible"},
        "model-b": {"adapter": "openai_compatible"},
        "gold": {"adapter": "gold"},
    }
)


def synthetic_dataset(seed: int = 0, n_cases: int = 10):
    """Images with gold and one rater's boxes, and three models' answers: a good model,
    a weaker one, and the gold control."""
    rng = np.random.default_rng(seed)
    rows, answers = [], {name: {} for name in MODELS}
    for case in range(n_cases):
        for image in range(int(rng.integers(1, 4))):
            name = f"case{case:03d}_{image:03d}.png"
            gold = [
                {"x": float(x), "y": float(y), "width": 40.0, "height": 30.0}
                for x, y in rng.uniform(0, 400, (int(rng.integers(0, 3)), 2))
            ]
            jitter = lambda b, s: {  # noqa: E731
                **b,
                "x": b["x"] + float(rng.normal(0, s)),
                "y": b["y"] + float(rng.normal(0, s)),
            }
            rows.append(
                {
                    "filename": name,
                    "case_id": f"case{case:03d}",
                    "caption": "Axial FLAIR image.",
                    "gold_boxes": gold,
                    "rater_boxes": [{"rater": "r1", **jitter(b, 4)} for b in gold],
                }
            )
            answers["gold"][name] = gold
            answers["model_a"][name] = [jitter(b, 8) for b in gold if rng.random() < 0.8]
            answers["model-b"][name] = [jitter(b, 20) for b in gold if rng.random() < 0.5]
    return pd.DataFrame(rows), answers


# The manifest of the full current release, as the dataset rule writes it.
HUB_RELEASE = {
    "source": "hf",
    "repo_id": "c-i-ber/Nova",
    "revision": "main",
    "resolved_revision": "3f2a1b9c" + "0" * 32,
    "n_images": 906,
    "subset": None,
}


def write_manifest(folder: Path, manifest: dict) -> Path:
    path = folder / "manifest.json"
    path.write_text(json.dumps(manifest))
    return path


def score_models(root: Path, frame: pd.DataFrame, answers: dict, missing=()) -> tuple:
    """Verdict and score files written by the real scorer for ``answers`` (model -> image
    -> boxes), and one rater's; images in ``missing`` have no answer (status missing), as
    the reading stage writes them for a predictions file that lacks them."""
    gold = {
        r.filename: [[b[k] for k in ("x", "y", "width", "height")] for b in r.gold_boxes]
        for r in frame.itertuples()
    }
    score_paths, verdicts = [], {}
    for name, boxes in answers.items():
        statuses = {
            f: "missing" if (name, f) in missing else ("ok" if b else "no_finding")
            for f, b in boxes.items()
        }
        verdict_path = root / "verdicts" / "localization" / "boxes" / f"{name}.jsonl"
        verdict_path.parent.mkdir(parents=True, exist_ok=True)
        with open(verdict_path, "w") as handle:
            for filename in sorted(boxes):
                status = statuses[filename]
                read = None if status == "missing" else {"boxes": boxes[filename]}
                record = {"filename": filename, "status": status, "read": read, "verdict": None}
                handle.write(json.dumps(record) + "\n")
        verdicts[name] = verdict_path
        shown = {f: [] if statuses[f] == "missing" else b for f, b in boxes.items()}
        metrics, per_image = score_localization(gold, shown, statuses)
        path = root / "scores" / "localization" / f"{name}.json"
        payload = {"task": "localization", "model": name, "metrics": metrics, "judge": None}
        write_scores(payload, per_image, path, path.with_name(f"{name}.images.csv"))
        score_paths.append(path)
    rater = {
        r.filename: [{k: b[k] for k in ("x", "y", "width", "height")} for b in r.rater_boxes]
        for r in frame.itertuples()
    }
    metrics, per_image = score_localization(gold, rater)
    path = root / "scores" / "localization" / "rater-r1.json"
    write_scores(
        {"task": "localization", "model": "rater-r1", "metrics": metrics},
        per_image,
        path,
        path.with_name("rater-r1.images.csv"),
    )
    score_paths.append(path)
    return score_paths, verdicts


def bootstrap_statistics(root: Path, frame, score_paths, verdicts, models) -> tuple:
    entries = load_entries("localization", score_paths, frame, models, None, verdicts)
    stats = task_statistics(
        "localization",
        entries,
        frame,
        n_resamples=200,
        seed=1,
        confidence=0.95,
        reference="model_a",
    )
    stats_path = root / "statistics" / "localization.csv"
    stats_path.parent.mkdir(parents=True)
    stats.to_csv(stats_path, index=False)
    return stats, stats_path


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Score files written by the real scorer, statistics by the real bootstrap, tables."""
    root = tmp_path_factory.mktemp("results")
    frame, answers = synthetic_dataset()
    score_paths, verdicts = score_models(root, frame, answers)
    stats, stats_path = bootstrap_statistics(root, frame, score_paths, verdicts, MODELS)

    table = stats.set_index(["model", "metric"])
    a30 = table.loc[("model_a", "mAP@30")]
    reference = {
        "sources": {"paper": "the paper"},
        "models": {"Paper Model A": "model_a", "Unconfigured": "not-here"},
        "reported": [
            # inside our CI by construction, then outside
            {
                "model": "Paper Model A",
                "task": "localization",
                "metric": "mAP@30",
                "value": round(float(a30.ci_low + a30.ci_high) / 2, 2),
                "source": "paper",
            },
            {
                "model": "Paper Model A",
                "task": "localization",
                "metric": "Hit@30",
                "value": -5.0,
                "source": "paper",
            },
            {
                "model": "Unconfigured",
                "task": "localization",
                "metric": "mAP@50",
                "value": 10.0,
                "source": "paper",
            },
            {
                "model": "Paper Model A",
                "task": "diagnosis",
                "metric": "Top-1",
                "value": 10.0,
                "source": "paper",
            },
        ],
    }
    reference_path = root / "paper_reference.yaml"
    reference_path.write_text(yaml.safe_dump(reference))
    out = root / "tables"
    write_all_tables(
        statistics={"localization": stats_path},
        scores={"localization": score_paths},
        paper_reference=reference_path,
        dataset_manifest=write_manifest(root, HUB_RELEASE),
        out_dir=out,
    )
    return {"root": root, "out": out, "scores": score_paths, "stats": stats}


def score_metrics(path: Path) -> dict:
    return json.loads(path.read_text())["metrics"]


def test_table_numbers_are_the_score_files(results):
    table = pd.read_csv(results["out"] / "localization.csv").set_index("model")
    assert list(table.index) == ["model_a", "model-b", "gold", "rater-r1"]
    assert list(table["group"]) == ["model", "model", "control", "human"]
    for path in results["scores"]:
        metrics = score_metrics(path)
        name = path.name.removesuffix(".json")
        for column in get_task("localization").table_metrics:
            assert table.loc[name, column.key] == metrics[column.key], (name, column.key)


def test_cis_and_p_values_come_from_the_bootstrap(results):
    table = pd.read_csv(results["out"] / "localization.csv").set_index("model")
    stats = results["stats"].set_index(["model", "metric"])
    for name in table.index:
        for column in get_task("localization").table_metrics:
            row = stats.loc[(name, column.key)]
            if not column.interval:  # boxes per image: a count shown without a CI
                assert np.isnan(table.loc[name, f"{column.key}_ci_low"])
                continue
            assert table.loc[name, f"{column.key}_ci_low"] == row["ci_low"]
            assert table.loc[name, f"{column.key}_ci_high"] == row["ci_high"]
            p = table.loc[name, f"{column.key}_p_value"]
            assert (np.isnan(p) and name == "model_a") or p == row["p_value"]
    # the point estimate lies in its CI for a model with variation
    assert table.loc["model_a", "Hit@30_ci_low"] <= table.loc["model_a", "Hit@30"]
    assert table.loc["model_a", "Hit@30"] <= table.loc["model_a", "Hit@30_ci_high"]


def test_best_is_bold_among_models_only(results):
    table = pd.read_csv(results["out"] / "localization.csv").set_index("model")
    a, b = score_metrics(results["scores"][0]), score_metrics(results["scores"][1])
    assert a["Hit@30"] > b["Hit@30"] and a["FNR"] < b["FNR"]  # model_a is the better one
    assert table.loc["model_a", "Hit@30_best"] and not table.loc["model-b", "Hit@30_best"]
    assert table.loc["model_a", "FNR_best"]  # lower is better
    assert not table.loc["gold", "Hit@30_best"] and not table.loc["rater-r1", "Hit@30_best"]
    tex = (results["out"] / "localization.tex").read_text()
    row_a = next(line for line in tex.splitlines() if line.startswith("model\\_a &"))
    hit30 = row_a.split(" & ")[8]
    assert f"\\textbf{{{a['Hit@30']:.1f}}}\\\\{{\\scriptsize [" in hit30  # CI under it
    row_gold = next(line for line in tex.splitlines() if line.startswith("gold &"))
    assert "\\textbf" not in row_gold


def test_markdown_has_the_same_numbers(results):
    md = (results["out"] / "localization.md").read_text()
    metrics = score_metrics(results["scores"][1])
    line = next(line for line in md.splitlines() if line.startswith("| Models | model-b |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[2].split(" [")[0].strip("*") == f"{metrics['mAP@30']:.1f}"
    assert cells[6].split(" [")[0].strip("*") == f"{metrics['TP30']:d}"
    summary = (results["out"] / "summary.md").read_text()
    assert "| rater-r1 | Human reference |" in summary


def md_row(md: str, name: str) -> dict[str, str]:
    """The Markdown table row of ``name`` as {header: cell}."""
    lines = [line for line in md.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    column = header.index("Model")
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[column].split(" ")[0] == name:
            return dict(zip(header, cells, strict=True))
    raise AssertionError(f"no row for {name}")


def _tables_with_a_model_missing_a_third(tmp_path) -> tuple[Path, dict[str, float]]:
    """Tables of three models, ``partial`` without an answer on a third of the images;
    returns the tables' folder and each model's FP30."""
    frame, answers = synthetic_dataset(seed=4)
    names = sorted(answers["gold"])
    # Exact boxes on two thirds of the images, none on the rest: no false positive at all,
    # so without the mark its FP30 would be the best of the column.
    missing = {("partial", f) for f in names[::3]}
    assert len(names) == 21 and len(missing) == 7
    answers["partial"] = dict(answers["gold"])
    models = {**MODELS, **report_models({"partial": {"adapter": "predictions_file"}})}
    score_paths, verdicts = score_models(tmp_path, frame, answers, missing)
    _, stats_path = bootstrap_statistics(tmp_path, frame, score_paths, verdicts, models)
    out = tmp_path / "tables"
    write_all_tables(
        statistics={"localization": stats_path},
        scores={"localization": score_paths},
        paper_reference=ROOT / "config" / "paper_reference.yaml",
        dataset_manifest=write_manifest(tmp_path, {"source": "sample", "n_images": 21}),
        out_dir=out,
    )
    return out, {p.stem: score_metrics(p)["FP30"] for p in score_paths}


def _score_blind_grid(root: Path, frame: pd.DataFrame, step: int) -> tuple[Path, Path, int]:
    """A model answering one grid of boxes (the gold boxes' size, every ``step`` pixels)
    for every image, read and scored as the pipeline does; (score file, verdicts, boxes
    per answer)."""
    grid = [[x, y, x + 40, y + 30] for y in range(0, 450, step) for x in range(0, 440, step)]
    raw = json.dumps([{"bbox_2d": box} for box in grid])
    task = get_task("localization")
    context = AnswerContext(480, 480, "pixel_xyxy", None, task.reading_options({}))
    parsed = task.parse(raw, context)
    records = [
        {"filename": f, "case_id": c, "status": parsed.status, "read": parsed.value}
        for f, c in zip(frame["filename"], frame["case_id"], strict=True)
    ]
    verdicts = root / "verdicts" / "localization" / "boxes" / "grid.jsonl"
    verdicts.write_text("".join(json.dumps({**r, "verdict": None}) + "\n" for r in records))
    metrics, per_image = task.score(frame, Answers(records), ScoringContext())
    path = root / "scores" / "localization" / "grid.json"
    payload = {"task": "localization", "model": "grid", "metrics": metrics, "judge": None}
    write_scores(payload, per_image, path, path.with_name("grid.images.csv"))
    return path, verdicts, len(grid)


def test_a_blind_grid_of_boxes_is_capped_counted_and_marked(tmp_path):
    frame, answers = synthetic_dataset(seed=4)
    score_paths, verdicts = score_models(tmp_path, frame, answers)
    grid_scores, verdicts["grid"], n_grid = _score_blind_grid(tmp_path, frame, step=5)
    uncapped = score_localization(
        {r.filename: [[b[k] for k in ("x", "y", "width", "height")] for b in r.gold_boxes]
         for r in frame.itertuples()},
        {f: [{"x": x, "y": y, "width": 40, "height": 30} for x in range(0, 440, 5)
             for y in range(0, 450, 5)] for f in frame["filename"]},
        {f: "ok" for f in frame["filename"]},
    )[0]  # fmt: skip
    models = {**MODELS, **report_models({"grid": {"adapter": "predictions_file"}})}
    _, stats_path = bootstrap_statistics(
        tmp_path, frame, [*score_paths, grid_scores], verdicts, models
    )
    out = tmp_path / "tables"
    write_all_tables(
        statistics={"localization": stats_path},
        scores={"localization": [*score_paths, grid_scores]},
        paper_reference=ROOT / "config" / "paper_reference.yaml",
        dataset_manifest=write_manifest(tmp_path, {"source": "sample", "n_images": 21}),
        out_dir=out,
    )
    metrics = json.loads(grid_scores.read_text())["metrics"]
    # Uncapped, the grid beats every model on Hit@30; capped, it keeps 100 boxes an image.
    assert (
        uncapped["Hit@30"]
        == 100.0
        > max(score_metrics(p)["Hit@30"] for p in score_paths if p.stem in ("model_a", "model-b"))
    )
    assert metrics["n_predicted_boxes"] == 100 * 21 and metrics["n_capped"] == 21
    assert metrics["n_boxes_over_cap"] == (n_grid - 100) * 21
    md = (out / "localization.md").read_text()
    row = md_row(md, "grid")
    assert row["Model"] == "grid †" and "**" not in " ".join(row.values())
    assert row["Boxes/image"] == f"{n_grid:.1f}" and md_row(md, "model_a")["Boxes/image"] != "–"
    table = pd.read_csv(out / "localization.csv").set_index("model")
    assert table.loc["grid", "flag"] == "21 answer(s) over tasks.localization.max_boxes"


def _check_partial_in_latex(tex: str, no_finding: str) -> None:
    row_tex = next(line for line in tex.splitlines() if line.startswith("partial"))
    assert row_tex.startswith("partial$^\\dagger$ & ")
    assert row_tex.endswith(
        # answered, parse errors, refusals, errors, missing, then no finding
        " & 67\\% & 0\\% & 0\\% & 0\\% & 33\\% & " + no_finding.replace("%", "\\%") + " \\\\"
    )
    assert "\\textbf" not in row_tex
    assert "\\par\\smallskip{\\footnotesize $^\\dagger$ fewer than 95\\% of the images" in tex
    strict_parse(tex)


def test_a_model_missing_a_third_of_the_images_is_marked_and_never_bold(tmp_path):
    out, fp30 = _tables_with_a_model_missing_a_third(tmp_path)
    assert fp30["partial"] == 0 < min(fp30["model_a"], fp30["model-b"])

    md = (out / "localization.md").read_text()
    row = md_row(md, "partial")
    assert row["Model"] == "partial †"
    assert (row["Answered"], row["Missing"], row["Errors"], row["Parse errors"]) == (
        "67%",
        "33%",
        "0%",
        "0%",
    )
    assert "**" not in " ".join(row.values())
    best = "model_a" if fp30["model_a"] < fp30["model-b"] else "model-b"
    assert md_row(md, best)["FP30 ↓"].startswith(f"**{fp30[best]}**")
    legend = (
        "† fewer than 95% of the images answered (reporting.min_answered), more than 2% "
        "without an answer (reporting.max_error_rate), or answers over a task's cap (the CSV's "
        "flag column says which): never shown as best."
    )
    assert legend in md.splitlines()

    table = pd.read_csv(out / "localization.csv").set_index("model")
    assert table.loc["partial", "missing_pct"] == pytest.approx(100 / 3)
    assert table.loc["partial", "answered_pct"] == pytest.approx(200 / 3)
    assert table.loc["partial", "n_missing"] == 7
    assert table.loc["partial", "flag"] == "67% answered < 95%"
    assert not table.loc["partial", "FP30_best"] and table.loc[best, "FP30_best"]
    assert pd.isna(table.loc["model_a", "flag"])  # empty: not marked

    _check_partial_in_latex((out / "localization.tex").read_text(), row["No finding"])

    summary = (out / "summary.md").read_text()
    assert md_row(summary, "partial")["Anomaly localization: answered"] == "67% (33% missing) †"
    assert md_row(summary, "model_a")["Anomaly localization: answered"] == "100%"
    assert legend in summary.splitlines()


def captioning_estimates(n_images: int, **counts: int) -> dict[str, float]:
    """A captioning score file's metrics with the given status counts (the rest ok)."""
    metrics = {"Clinical_F1": 50.0, "BLEU-4": 10.0, "n_images": n_images}
    metrics["n_ok"] = n_images - sum(counts.values())
    for status in ("parse_error", "error", "missing", *counts):
        metrics[f"n_{status}"] = counts.get(status, 0)
        metrics[f"{status}_rate"] = 100.0 * counts.get(status, 0) / n_images
    return metrics


def test_failure_columns_follow_the_statuses_the_score_files_count():
    from novabench.report.tables import markdown_table

    # A status added by a scorer later (refusal) shows without a change in the report.
    estimates = {
        "m1": {**captioning_estimates(50, refusal=5, parse_error=1), "n_excluded": 3},
        "m2": captioning_estimates(50),
    }
    empty = pd.DataFrame(columns=["model", "group", "metric", "ci_low", "ci_high", "p_value"])
    limits = Limits(min_answered=0.85, max_error_rate=0.05)
    table = task_table("captioning", empty, estimates, limits)
    md = markdown_table(table, get_task("captioning").table_metrics, "T", "note", "legend")
    m1, m2 = md_row(md, "m1"), md_row(md, "m2")
    headers = ["Answered", "Parse errors", "Refusals", "Errors", "Missing", "Excluded"]
    assert list(m1)[-6:] == headers
    assert [m1[k] for k in headers] == ["88%", "2%", "10%", "0%", "0%", "3"]
    # m2's score file counts neither refusals nor exclusions: unknown, not zero
    assert [m2[k] for k in headers] == ["100%", "0%", "–", "0%", "0%", "–"]
    # 88% answered is within min_answered 0.85: not marked, so the better F1 is bold
    assert m1["Model"] == "m1" and "legend" not in md
    assert set(table["flag"]) == {""}


def test_models_past_the_limits_are_marked_with_the_reason():
    limits = Limits(min_answered=0.9, max_error_rate=0.05)
    reasons = {
        # parse failures are the model's: within min_answered
        "parse": (captioning_estimates(100, parse_error=8), None),
        # errors and missing images are the run's: past max_error_rate
        "errors": (captioning_estimates(100, error=4, missing=4), "8% without an answer > 5%"),
        "few": (captioning_estimates(100, parse_error=11), "89% answered < 90%"),
    }
    for name, (metrics, reason) in reasons.items():
        assert failures.flag_reason(failures.shares(metrics), limits) == reason, name
    # unknown statuses (a scorer given none: null rates) are shown as "–", never marked
    unknown = {**captioning_estimates(10), "error_rate": math.nan}
    assert math.isnan(failures.shares(unknown)["answered"])
    assert failures.flag_reason(failures.shares(unknown), limits) is None


def test_the_default_limits_pass_a_good_model_on_nova_s_906_images():
    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["reporting"]
    limits = Limits.from_config(defaults)
    assert limits == Limits()  # the package's defaults are the config's
    verdicts = {
        # one unreadable answer in 906 is not a mark for good (it was at min_answered 1.0)
        "one parse error": (captioning_estimates(906, parse_error=1), None),
        "a few of each": (captioning_estimates(906, parse_error=20, refusal=10, error=5), None),
        "mostly failures": (captioning_estimates(906, parse_error=50), "94% answered < 95%"),
        "run unfinished": (captioning_estimates(906, error=19), "2% without an answer > 2%"),
    }
    for name, (metrics, reason) in verdicts.items():
        assert failures.flag_reason(failures.shares(metrics), limits) == reason, name


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0%"), (0.5, "<1%"), (1.0, "1%"), (33.33, "33%"), (99.4, ">99%"), (100.0, "100%")],
)
def test_a_share_never_rounds_a_failure_away(value, text):
    from novabench.report.tables import _latex_share

    assert failures.share_text(value) == text
    latex = {"<1%": "$<$1\\%", ">99%": "$>$99\\%"}.get(text, text.replace("%", "\\%"))
    assert _latex_share(text) == latex


def test_reproduced_vs_reported(results):
    compared = pd.read_csv(results["out"] / "reproduced_vs_reported.csv")
    # the unconfigured model and the unscored task are simply absent
    assert list(compared["metric"]) == ["mAP@30", "Hit@30"]
    inside, outside = compared.iloc[0], compared.iloc[1]
    ours = score_metrics(results["scores"][0])
    assert inside["ours"] == ours["mAP@30"]
    assert inside["difference"] == pytest.approx(ours["mAP@30"] - inside["reported"])
    assert bool(inside["reported_in_ci"]) and not bool(outside["reported_in_ci"])
    tex = (results["out"] / "reproduced_vs_reported.tex").read_text()
    assert "Paper Model A & localization & Hit@30 & -5 &" in tex


LABEL = "NOVA c-i-ber/Nova @ main (3f2a1b9)"


def test_captions_and_titles_name_the_dataset(results):
    tex = (results["out"] / "localization.tex").read_text()
    assert f"\\caption{{Anomaly localization on {LABEL}. 22 images from 10 cases." in tex
    md = (results["out"] / "localization.md").read_text()
    assert md.startswith(f"## Anomaly localization on {LABEL}\n")
    summary = (results["out"] / "summary.md").read_text()
    assert summary.startswith(f"# Summary across tasks on {LABEL}\n")
    reproduced = (results["out"] / "reproduced_vs_reported.tex").read_text()
    assert f"\\caption{{Reproduced on {LABEL} vs reported. Ours:" in reproduced


def test_reproduced_vs_reported_markdown(results):
    compared = pd.read_csv(results["out"] / "reproduced_vs_reported.csv")
    hit = compared.set_index("metric").loc["Hit@30"]
    lines = (results["out"] / "reproduced_vs_reported.md").read_text().splitlines()
    assert lines[0] == f"## Reproduced on {LABEL} vs reported"
    expected = (
        f"| Paper Model A | localization | Hit@30 | -5 | {hit.ours:.1f} "
        f"[{hit.ci_low:.1f}, {hit.ci_high:.1f}] | {hit.difference:.1f} | no | paper |"
    )
    assert expected in lines
    assert lines[-1] == "Sources: paper: the paper."


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        ({"source": "sample", "n_images": 30}, "the dataset is the synthetic sample, not NOVA"),
        (
            {**HUB_RELEASE, "subset": {"n_cases": 20, "seed": 1}},
            "the dataset is a subset (n_cases=20, seed=1)",
        ),
        (
            {"source": "local", "local_path": "/data/nova", "n_images": 300},
            "the local copy has 300 images, not the release's 906",
        ),
        (None, "there is no dataset manifest"),
    ],
)
def test_reproduced_vs_reported_only_on_the_full_release(tmp_path, manifest, reason):
    from novabench.report.tables import write_reproduced

    reference = load_paper_reference(ROOT / "config" / "paper_reference.yaml")
    write_reproduced(reference, {}, manifest, tmp_path)
    line = (
        f"Not compared with the published numbers: {reason}; they are for the full NOVA "
        "release (906 images)."
    )
    assert (tmp_path / "reproduced_vs_reported.md").read_text() == line + "\n"
    assert (tmp_path / "reproduced_vs_reported.tex").read_text() == latex_escape(line) + "\n"
    with open(tmp_path / "reproduced_vs_reported.csv", newline="") as handle:
        assert list(csv.reader(handle)) == [[line]]  # one cell, quoted where it has commas


@pytest.mark.parametrize(
    ("manifest", "label", "comparable"),
    [
        ({"source": "sample"}, "synthetic sample (not NOVA)", False),
        (HUB_RELEASE, LABEL, True),
        (
            {**HUB_RELEASE, "revision": "3f2a1b9c" + "0" * 32},  # pinned to the sha
            "NOVA c-i-ber/Nova @ 3f2a1b9",
            True,
        ),
        (
            {"source": "hf-legacy", "repo_id": "Ano-2090/Nova", "revision": "v1"},
            "NOVA Ano-2090/Nova @ v1",
            True,
        ),
        (
            {"source": "local", "local_path": "/data/nova", "n_images": 906},
            "local copy at /data/nova",
            True,
        ),
        (
            {**HUB_RELEASE, "subset": {"description": "first 20 cases"}},
            f"{LABEL} + subset: first 20 cases",
            False,
        ),
        (None, "unknown dataset (no dataset manifest)", False),
    ],
)
def test_dataset_label(manifest, label, comparable):
    from novabench.report.labels import dataset_label, not_comparable

    assert dataset_label(manifest) == label
    assert (not_comparable(manifest) is None) == comparable


def test_the_report_captions_read_the_label_when_shown(tmp_path):
    from novabench.report.labels import DatasetLabel

    label = DatasetLabel(tmp_path / "manifest.json")
    assert str(label) == "unknown dataset (no dataset manifest)"  # not built yet
    write_manifest(tmp_path, HUB_RELEASE)
    # reStructuredText: "@" would make an e-mail link
    assert str(label) == "NOVA c-i-ber\\/Nova \\@ main (3f2a1b9)"
    assert repr(label) == f"DatasetLabel({str(tmp_path / 'manifest.json')!r})"


def test_shipped_paper_reference_is_valid():
    reference = load_paper_reference(ROOT / "config" / "paper_reference.yaml")
    values = {(r["model"], r["metric"]): r["value"] for r in reference["reported"]}
    assert values[("Qwen2.5-VL-72B", "mAP@50")] == 24.5
    assert values[("Gemini 2.0 Flash", "Clinical_F1")] == 19.8
    assert values[("GPT-4o", "Top-1")] == 24.2
    assert values[("Qwen3-VL-235B", "Hit@50")] == 20.1
    # the config names are those of config/paper.yaml where that model is configured
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    assert {"gpt-4o", "gemini-2.0-flash", "qwen2.5-vl-72b"} <= set(paper["models"])
    assert set(reference["models"].values()) - set(paper["models"]) <= {"qwen3-vl-235b"}


# --- LaTeX -----------------------------------------------------------------------------------


def synthetic_task_tables() -> dict[str, str]:
    """A LaTeX table per task from made-up numbers, with awkward names and missing values."""
    from novabench.report.tables import latex_table

    out = {}
    for task, columns in ((t, get_task(t).table_metrics) for t in task_names()):
        rows, estimates = [], {}
        for i, (name, group) in enumerate(
            [
                ("gpt_4o & co", "model"),
                ("50%-model #2", "model"),
                ("gold", "control"),
                ("rater-x~1", "human"),
            ]
        ):
            estimates[name] = {}
            for j, column in enumerate(columns):
                value = math.nan if (i, j) == (1, 0) else 10.0 * (i + 1) + j
                estimates[name][column.key] = value
                rows.append(
                    {
                        "model": name,
                        "group": group,
                        "metric": column.key,
                        "ci_low": value - 1,
                        "ci_high": value + 1,
                        "p_value": 0.5,
                        "reference": "gpt_4o & co",
                    }
                )
        table = task_table(task, pd.DataFrame(rows), estimates)
        out[task] = latex_table(task, table, f"{task} 95\\% CI", f"tab:{task}", columns)
    return out


def strict_parse(tex: str) -> None:
    """Balanced braces and environments; every tabular row has one cell per column."""
    depth = 0
    # drop line breaks first, then escaped characters (backslash-brace is a literal brace)
    for char in re.sub(r"\\[{}%&_#$]", "", tex.replace("\\\\", " ")):
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
    stack = []
    for kind, name in re.findall(r"\\(begin|end)\{(\w+\*?)\}", tex):
        if kind == "begin":
            stack.append(name)
        else:
            assert stack.pop() == name
    assert not stack
    spec = re.search(r"\\begin\{tabular\}\{([lcr]+)\}", tex).group(1)
    body = tex.split("\\toprule", 1)[1].split("\\bottomrule", 1)[0]
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("\\midrule") or line.startswith("\\multicolumn"):
            continue
        assert line.endswith("\\\\"), line
        assert len(re.split(r"(?<!\\)&", line)) == len(spec), line
    for command in ("\\toprule", "\\midrule", "\\bottomrule"):
        assert command in tex


def test_latex_tables_parse_strictly(results):
    tables = synthetic_task_tables()
    tables["written"] = (results["out"] / "localization.tex").read_text()
    tables["reproduced"] = (results["out"] / "reproduced_vs_reported.tex").read_text()
    for tex in tables.values():
        strict_parse(tex)
    assert latex_escape("a_b & 50% #1 {x} ~^\\") == (
        "a\\_b \\& 50\\% \\#1 \\{x\\} \\textasciitilde{}\\textasciicircum{}\\textbackslash{}"
    )


@pytest.mark.parametrize(
    "text",
    ["a_b & 50% #1 {x} ~^", "C:\\models\\x_1", "a backslash before a percent: \\%", "$5 & $6"],
)
def test_latex_text_undoes_latex_escape_exactly(text):
    # The Markdown tables and the leaderboard read notes written for LaTeX.
    assert latex_text(latex_escape(text)) == text


def test_latex_text_reads_the_captions_math():
    assert latex_text("Hit@$\\tau$: share with IoU at least $\\tau$, 50\\%.") == (
        "Hit@τ: share with IoU at least τ, 50%."
    )


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="needs texlive-latex-recommended")
def test_latex_tables_compile(results, tmp_path):
    tables = synthetic_task_tables()
    for name in ("localization.tex", "reproduced_vs_reported.tex"):
        tables[name] = (results["out"] / name).read_text()
    inputs = []
    for index, tex in enumerate(tables.values()):
        (tmp_path / f"t{index}.tex").write_text(tex)
        inputs.append(f"\\input{{t{index}.tex}}\n\\clearpage")
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\n\\usepackage[T1]{fontenc}\n\\usepackage{booktabs,graphicx}\n"
        "\\begin{document}\n" + "\n".join(inputs) + "\n\\end{document}\n"
    )
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 1000
    assert "Undefined control sequence" not in run.stdout


def test_a_caption_warns_when_too_few_cases_make_the_cis_meaningless():
    from novabench.report.tables import FEW_CASES, table_note

    context = {"n_images": 5, "n_cases": 2, "n_resamples": 1000, "confidence": 0.95}
    warning = (
        f"Warning: only 2 cases, too few for the CIs to tell models apart (use at least "
        f"{FEW_CASES})."
    )
    assert warning in table_note("localization", context)
    context["n_cases"] = FEW_CASES
    assert "Warning" not in table_note("localization", context)


def test_a_metric_that_could_not_be_computed_says_why_in_the_caption(tmp_path):
    from novabench.report.tables import unavailable_notes

    reason = (
        "BERT F1 not computed: the encoder roberta-large is not in the Hugging Face cache "
        "and the Hub cannot be reached; fix: download it once (`hf download roberta-large`)"
    )
    paths = []
    for name in ("a", "b"):  # two score files, one reason
        path = tmp_path / f"{name}.json"
        metrics = {"BERT_F1": None, "bertscore": {"status": "unavailable", "reason": reason}}
        path.write_text(json.dumps({"task": "captioning", "model": name, "metrics": metrics}))
        paths.append(path)
    disabled = tmp_path / "c.json"
    disabled.write_text(
        json.dumps({"metrics": {"bertscore": {"status": "disabled", "reason": "off"}}})
    )
    assert unavailable_notes([*paths, disabled]) == [
        "BERT F1 not computed: the encoder roberta-large is not in the Hugging Face cache "
        "and the Hub cannot be reached (the score files say how to fix it)."
    ]


def test_the_paper_reference_refuses_a_nan(tmp_path):
    from novabench.errors import ConfigError
    from novabench.report.tables import load_paper_reference

    path = tmp_path / "paper_reference.yaml"
    path.write_text("sources: {}\nmodels: {}\nreported:\n  - {value: .nan}\n")
    with pytest.raises(ConfigError, match=r"paper_reference.yaml:4: \.nan is not a finite"):
        load_paper_reference(path)
