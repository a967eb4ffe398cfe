"""Judge agreement: the same predictions judged by several judges, Cohen's kappa per label.

A task is scored by one judge (``tasks.<task>.judge``). Judges listed under
``reporting.agreement_judges.<task>`` re-judge the same prediction files here, and every
pair of judges is compared on the per-image labels the metrics are built from:

- captioning: the abnormal/normal label of the predicted caption (Binary F1's input);
- diagnosis: Top-1 and Top-5 correctness of the ranked answer.

Nothing is re-scored: the metrics remain the configured judge's.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

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


def judge_labels(task: str, judge: Any, dataset: pd.DataFrame, predictions: Path) -> pd.DataFrame:
    """One judge's per-image labels of one prediction file, as the scorer would give them."""
    from novabench.answers import read_file
    from novabench.tasks import Answers, get_task

    spec = get_task(task)
    dataset = spec.scored_rows(dataset)[0]  # the images the scorer scored
    records = read_file(task, predictions, dataset).by_filename
    rows = [
        spec.judge_labels(judge, row, records.get(row.filename, Answers.MISSING))
        for row in dataset.itertuples(index=False)
    ]
    return pd.DataFrame(rows, index=list(dataset["filename"]), columns=list(spec.agreement_labels))


def agreement_table(
    task: str,
    labels: Mapping[str, Mapping[str, pd.DataFrame]],
) -> pd.DataFrame:
    """Kappa and raw agreement for every model, label and pair of judges.

    ``labels[model][judge]`` is :func:`judge_labels` of that model's predictions.
    """
    from novabench.tasks import get_task

    rows = []
    for model, by_judge in labels.items():
        for first, second in itertools.combinations(by_judge, 2):
            for label in get_task(task).agreement_labels:
                a, b = by_judge[first][label], by_judge[second][label]
                rows.append(
                    {
                        "task": task,
                        "model": model,
                        "label": label,
                        "judge_a": first,
                        "judge_b": second,
                        "kappa": cohen_kappa(a, b),
                        "agreement": float(np.mean(a.to_numpy() == b.to_numpy())),
                        "n_images": len(a),
                        "positive_a": int(a.sum()),
                        "positive_b": int(b.sum()),
                    }
                )
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def write_agreement(
    *,
    dataset_path: Path,
    predictions: Mapping[str, Sequence[Path]],
    judges: Mapping[str, Sequence[Mapping[str, Any]]],
    out_csv: Path,
    out_md: Path,
    cache_dir: Path | None = Path("results/cache"),
    dataset_label: str | None = None,
) -> pd.DataFrame:
    """Rule `judge_agreement`: re-judge every prediction file of each task with each judge;
    ``dataset_label`` (``report.labels.dataset_label``) names the data in the title.

    LLM judges answer from the same response cache as scoring, so re-judging predictions
    that were already scored sends no request.
    """
    from novabench.judges import make_judge
    from novabench.report.inputs import load_dataset

    dataset = load_dataset(Path(dataset_path))
    tables = []
    for task, paths in predictions.items():
        built = {
            cfg["name"]: make_judge(dict(cfg), task, cache_dir=cache_dir) for cfg in judges[task]
        }
        labels = {
            Path(path).stem: {
                name: judge_labels(task, judge, dataset, Path(path))
                for name, judge in built.items()
            }
            for path in paths
        }
        tables.append(agreement_table(task, labels))
    table = (
        pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=AGREEMENT_COLUMNS)
    )
    Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
    write_csv(table, out_csv, index=False)
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
    Path(out_md).write_text("\n".join([*lines, ""]))
    return table
