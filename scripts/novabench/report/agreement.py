"""Judge agreement: the same predictions judged by several judges, Cohen's kappa per label.

A task is scored by one judge (``tasks.<task>.judge``). Judges listed under
``reporting.agreement_judges.<task>`` judge the same predictions in the reading stage too,
each writing its verdict file ``verdicts/{task}/{judge}/{model}.jsonl``; every pair of
judges is compared here on the per-image ``labels`` of those files, the labels the metrics
are built from:

- captioning: the abnormal/normal label of the predicted caption (Binary F1's input);
- diagnosis: Top-1 and Top-5 correctness of the ranked answer.

No judge is built or run here, and nothing is re-scored: the metrics remain the configured
judge's. An image a judge left unlabelled (a null label: it gave no verdict) is left out
of the comparisons of that judge on that label.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from novabench.errors import NovaError
from novabench.records import read_verdicts
from novabench.report.markdown import md_row, md_text
from novabench.spreadsheet import write_csv

AGREEMENT_COLUMNS = [
    "task", "model", "label", "judge_a", "judge_b", "kappa", "agreement",
    "n_images", "positive_a", "positive_b",
]  # fmt: skip


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels of the same items.

    Written out (a few lines) rather than taken from scikit-learn, which the pipeline does
    not otherwise need. NaN without items; 1.0 when both raters give every item the same
    single label (perfect agreement, no chance term to correct).
    """
    a, b = np.asarray(a), np.asarray(b)
    if len(a) != len(b):
        raise ValueError(f"{len(a)} labels against {len(b)}")
    if not len(a):
        return math.nan
    categories = np.union1d(a, b)
    observed = float(np.mean(a == b))
    expected = float(sum(np.mean(a == c) * np.mean(b == c) for c in categories))
    if expected == 1.0:
        return 1.0
    return (observed - expected) / (1.0 - expected)


def verdict_labels(path: Path, labels: Sequence[str]) -> pd.DataFrame:
    """The per-image ``labels`` of one verdict file: one row per image (index: filename),
    one nullable boolean column per label (NA: the judge gave that image no label)."""
    fix = f"delete {path} and re-run the `read` rule for it"
    rows = {}
    for record in read_verdicts(Path(path)):
        values = record.get("labels") or {}
        if any(label not in values for label in labels):
            raise NovaError(f"{path}: {record.get('filename')} lacks labels {list(labels)}", fix)
        rows[record["filename"]] = [values[label] for label in labels]
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(labels))
    return frame.astype("boolean")


def compare_labels(a: pd.Series, b: pd.Series) -> dict[str, Any]:
    """Kappa, raw agreement, images and positives of two judges' labels of the same
    images (indexed by filename), on the images both labelled."""
    b = b.reindex(a.index)
    both = (a.notna() & b.notna()).to_numpy(dtype=bool)
    x = a.to_numpy(dtype=bool, na_value=False)[both]
    y = b.to_numpy(dtype=bool, na_value=False)[both]
    return {
        "kappa": cohen_kappa(x, y),
        "agreement": float(np.mean(x == y)) if len(x) else math.nan,
        "n_images": len(x),
        "positive_a": int(x.sum()),
        "positive_b": int(y.sum()),
    }


def agreement_table(
    task: str,
    labels: Mapping[str, Mapping[str, pd.DataFrame]],
) -> pd.DataFrame:
    """Kappa and raw agreement for every model, label and pair of judges.

    ``labels[model][judge]`` is :func:`verdict_labels` of that judge's verdicts on that
    model's predictions.
    """
    from novabench.tasks import get_task

    rows = []
    for model, by_judge in labels.items():
        for first, second in itertools.combinations(by_judge, 2):
            for label in get_task(task).agreement_labels:
                pair = {"task": task, "model": model, "label": label}
                pair.update(judge_a=first, judge_b=second)
                compared = compare_labels(by_judge[first][label], by_judge[second][label])
                rows.append({**pair, **compared})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def group_verdict_files(
    paths: Sequence[Path], judges: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, dict[str, Path]]]:
    """``verdicts/{task}/{judge}/{model}.jsonl`` files as ``{task: {model: {judge: path}}}``,
    models in the order given, judges in the order of ``judges[task]`` (the task's own
    judge first); every listed judge must have a file for every model."""
    found: dict[str, dict[str, dict[str, Path]]] = {}
    for path in map(Path, paths):
        task, judge, model = path.parent.parent.name, path.parent.name, path.name
        found.setdefault(task, {}).setdefault(model.removesuffix(".jsonl"), {})[judge] = path
    grouped: dict[str, dict[str, dict[str, Path]]] = {}
    for task, names in judges.items():
        for model, by_judge in found.get(task, {}).items():
            absent = [name for name in names if name not in by_judge]
            if absent:
                raise NovaError(
                    f"no verdicts of judge {', '.join(absent)} on {task}/{model}",
                    "list the judge's verdict files among the agreement job's inputs",
                )
            grouped.setdefault(task, {})[model] = {name: by_judge[name] for name in names}
    return grouped


def task_agreement(task: str, files: Mapping[str, Mapping[str, Path]]) -> pd.DataFrame:
    """:func:`agreement_table` of one task's verdict files (``files[model][judge]``);
    the judges of a model must have judged the same images."""
    from novabench.tasks import get_task

    names = get_task(task).agreement_labels
    labels: dict[str, dict[str, pd.DataFrame]] = {}
    for model, by_judge in files.items():
        labels[model] = {judge: verdict_labels(path, names) for judge, path in by_judge.items()}
        images = [set(frame.index) for frame in labels[model].values()]
        if any(other != images[0] for other in images[1:]):
            raise NovaError(
                f"the judges' verdict files of {task}/{model} hold different images",
                "re-run the `read` rule for them against the same predictions and dataset",
            )
    return agreement_table(task, labels)


def agreement_markdown(table: pd.DataFrame, dataset_label: str | None) -> str:
    lines = [
        "## Judge agreement" + (f" on {md_text(dataset_label)}" if dataset_label else ""),
        "",
        "Cohen's kappa between judges on the same predictions (per-image labels).",
        "",
        md_row(["Task", "Model", "Label", "Judges", "Kappa", "Agreement", "Images"]),
        md_row(["---", "---", "---", "---", "---:", "---:", "---:"]),
    ]
    for row in table.itertuples(index=False):
        judges = f"{row.judge_a} vs {row.judge_b}"
        agreement = f"{100 * row.agreement:.1f}%"
        cells = [row.task, row.model, row.label, judges, f"{row.kappa:.2f}", agreement]
        lines.append(md_row([*cells, row.n_images]))
    return "\n".join([*lines, ""])


def write_agreement(
    *,
    verdicts: Mapping[str, Mapping[str, Mapping[str, Path]]],
    out_csv: Path,
    out_md: Path,
    dataset_label: str | None = None,
) -> pd.DataFrame:
    """Rule `judge_agreement`: compare the verdict files ``verdicts[task][model][judge]``
    of every task; ``dataset_label`` (``report.labels.dataset_label``) names the data in
    the title."""
    tables = [task_agreement(task, files) for task, files in verdicts.items()]
    table = (
        pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=AGREEMENT_COLUMNS)
    )
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    write_csv(table, out_csv, index=False)
    Path(out_md).write_text(agreement_markdown(table, dataset_label))
    return table
