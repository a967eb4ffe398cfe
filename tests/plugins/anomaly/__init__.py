"""A toy task from outside the package, as a plug-in (the config's ``plugins:``): "is there
an anomaly in this image?", scored by accuracy against "the image has a gold box".

All it takes is this folder: the task, its prompt (anomaly-v1.txt beside this file) and its
block of the configuration (``tasks.anomaly``, declared by ``settings_schema``). Importing
it registers the task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from novabench.report.bootstrap import weighted_mean
from novabench.tasks import Metric, Parsed, Task, register_task

YES, NO = {"yes", "y", "true", "abnormal"}, {"no", "n", "false", "normal"}


class AnomalyPresence(Task):
    name = "anomaly"
    title = "Anomaly presence"
    caption = "Accuracy: the yes/no answer equals whether the image has a gold box."
    metrics = (Metric("Accuracy", "Accuracy", headline=True),)
    reference_columns = ("gold_boxes",)
    default_prompt = str(Path(__file__).with_name("anomaly-v1.txt"))
    # Its own key of tasks.anomaly: the gold boxes that make an image abnormal.
    settings_schema: ClassVar[dict[str, Any]] = {
        "min_boxes": {"type": "integer", "minimum": 1, "default": 1}
    }
    figure_captions: ClassVar[dict[str, str]] = {
        "metrics": "Accuracy of the yes/no answer on {dataset}."
    }

    def options(self, task_config):
        return {"min_boxes": int(task_config.get("min_boxes", 1))}

    def gold_answer(self, reference):
        return "yes" if len(reference["gold_boxes"]) else "no"  # the default min_boxes

    def parse(self, raw, context):
        word = raw.strip().strip(".!").lower()
        if word in YES | NO:
            return Parsed("ok", {"abnormal": word in YES})
        return Parsed("parse_error", None, f"not yes or no: {raw[:40]!r}")

    def score(self, frame, answers, context):
        rows, least = [], context.options.get("min_boxes", 1)
        for row in frame.itertuples(index=False):
            abnormal, status = answers.get(row.filename, "abnormal")
            truth = len(row.gold_boxes) >= least
            correct = status == "ok" and abnormal == truth
            rows.append({"filename": row.filename, "status": status, "correct": correct})
        per_image = pd.DataFrame(rows)
        return {"Accuracy": 100.0 * per_image["correct"].mean()}, per_image

    def replicates(self, entry, dataset, weights):
        correct = entry.per_image["correct"].to_numpy(dtype=float)
        return {"Accuracy": weighted_mean(weights, correct, 100.0)}


TASK = register_task(AnomalyPresence())
