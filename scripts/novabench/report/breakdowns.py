"""The axes a task's headline per-image metric is broken down by, and the per-case table.

Each axis maps the dataset to one category per image:

- ``category``: the pathology category of the final diagnosis in the diagnosis
  vocabulary (``unknown`` for a diagnosis it does not hold);
- ``sequence`` and ``plane``: read from the reference caption (``report.imaging``);
- ``lesion_size``: tertile of the image's largest gold box, by the square root of its area
  in pixels (cut points over the images that have a box; ``no gold box`` otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

NO_GOLD_BOX = "no gold box"


def pathology_category(dataset: pd.DataFrame) -> pd.Series:
    from novabench.judges.vocabulary import load_vocabulary

    category_of = load_vocabulary().category_of
    return dataset["final_diagnosis"].map(category_of)


def sequence(dataset: pd.DataFrame) -> pd.Series:
    from novabench.report.imaging import parse_sequence

    return dataset["caption"].map(parse_sequence)


def plane(dataset: pd.DataFrame) -> pd.Series:
    from novabench.report.imaging import parse_plane

    return dataset["caption"].map(parse_plane)


def largest_box_size(boxes: Sequence) -> float:
    """sqrt(area) in pixels of the largest box, NaN without a box."""
    areas = [float(b["width"]) * float(b["height"]) for b in boxes]
    return float(np.sqrt(max(areas))) if areas else float("nan")


def lesion_size(dataset: pd.DataFrame) -> pd.Series:
    sizes = dataset["gold_boxes"].map(largest_box_size).to_numpy(dtype=float)
    known = sizes[~np.isnan(sizes)]
    if not len(known):
        return pd.Series(NO_GOLD_BOX, index=dataset.index)
    low, high = np.quantile(known, [1 / 3, 2 / 3])
    names = (f"small ≤{low:.0f} px", f"medium {low:.0f}–{high:.0f} px", f"large >{high:.0f} px")
    tertile = np.where(sizes <= low, 0, np.where(sizes <= high, 1, 2))
    labels = [NO_GOLD_BOX if np.isnan(s) else names[t] for s, t in zip(sizes, tertile, strict=True)]
    return pd.Series(labels, index=dataset.index)


AXES: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "category": pathology_category,
    "sequence": sequence,
    "plane": plane,
    "lesion_size": lesion_size,
}


def case_table(task, entries, dataset: pd.DataFrame) -> pd.DataFrame:
    """Per entry and case: the mean per-image breakdown metric, the case's diagnosis and
    category, and the images it is defined on (``statistics/{task}_cases.csv``); no rows
    for a task without a breakdown metric."""
    categories = pathology_category(dataset)
    parts = []
    for entry in entries:
        broken_down = task.breakdown_values(entry.per_image)
        if broken_down is None:
            continue
        label, values = broken_down
        frame = pd.DataFrame(
            {
                "case_id": dataset["case_id"].to_numpy(),
                "final_diagnosis": dataset["final_diagnosis"].to_numpy(),
                "category": categories.to_numpy(),
                "value": values,
            }
        )
        per_case = frame.groupby("case_id", sort=True).agg(
            final_diagnosis=("final_diagnosis", "first"),
            category=("category", "first"),
            n_images=("value", "size"),
            n_defined=("value", "count"),
            value=("value", "mean"),
        )
        parts.append(
            per_case.reset_index().assign(model=entry.name, group=entry.group, label=label)
        )
    columns = ["model", "group", "case_id", "final_diagnosis", "category"]
    columns += ["n_images", "n_defined", "value", "label"]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]
