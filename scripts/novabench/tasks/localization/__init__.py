"""Task 1, anomaly localization: image in, bounding boxes out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from novabench.tasks.base import AnswerContext, Answers, Metric, Parsed, ScoringContext, Task


def xywh(boxes: Any) -> list[list[float]]:
    """Dataset box records as ``[x, y, width, height]`` lists."""
    return [[b["x"], b["y"], b["width"], b["height"]] for b in boxes]


def gold_boxes(frame: pd.DataFrame) -> dict[str, list[list[float]]]:
    """Gold boxes per image of the dataset, as ``[x, y, width, height]`` lists."""
    return {r.filename: xywh(r.gold_boxes) for r in frame.itertuples(index=False)}


def entry_boxes(
    frame: pd.DataFrame, name: str, verdicts: Path | None
) -> dict[str, list[dict[str, Any]]]:
    """Boxes per image of a model (as the reading stage read them: its verdict file) or a
    rater (``rater-<slug>``, from the dataset), exactly as the scorer counts them."""
    from novabench.dataset.schema import RATER_PREFIX, rater_slug
    from novabench.records import read_verdicts

    if name.startswith(RATER_PREFIX):
        slug = name.removeprefix(RATER_PREFIX)
        return {
            r.filename: [
                {k: b[k] for k in ("x", "y", "width", "height")}
                for b in r.rater_boxes
                if rater_slug(b["rater"]) == slug
            ]
            for r in frame.itertuples(index=False)
        }
    if verdicts is None:
        raise NovaError(f"no verdict file for {name}", "run `read` for this model")
    answers = Answers(read_verdicts(verdicts))
    return {filename: list(answers.get(filename, "boxes", [])[0]) for filename in frame["filename"]}


# Boxes kept per answer (tasks.localization.max_boxes): COCO's maxDets, the detections per
# image its evaluation counts. A blind grid of thousands of boxes then cannot buy hits, and
# its answers are marked in every table.
MAX_BOXES = 100


class Localization(Task):
    name = "localization"
    title = "Anomaly localization"
    position = 1
    default_prompt = "config/prompts/localization-v1.txt"
    scores_raters = True  # the dataset's raters drew boxes too
    figure_captions: ClassVar[Mapping[str, str]] = {
        "metrics": "Counts (TP30, FP30) are in the table only.",
        "breakdown": "Hit\\@30 (%, images with a gold box only)",
        "iou": (
            "Distribution of the best IoU per image (images with a gold box) on {dataset}: the "
            "share of images (%) whose best IoU reaches each threshold. The curves pass through "
            "Hit\\@30 and Hit\\@50."
        ),
        "lesion_size": (
            "Lesion-level hit rate on {dataset}: the share of gold boxes (%) that some "
            "predicted box overlaps with IoU of at least 0.3, by lesion size (square root of "
            "the gold box area, pixels), one panel per group. Error bars: 95% case-bootstrap "
            "CIs; n = gold boxes per size bin."
        ),
        "examples": (
            "Example images of {dataset} (chosen with the bootstrap seed from different "
            "cases): the reference column shows the gold boxes (green) and the human raters' "
            "boxes (blue, dashed); each further column one model's boxes (orange) over the "
            "gold boxes."
        ),
    }
    caption = (
        "mAP: COCO average precision (101-point interpolation, one class, score 1 for boxes "
        "without a confidence) at IoU 0.3, 0.5 and 0.50:0.05:0.95. ACC50 = TP/(TP+FP+FN) of a "
        "greedy one-to-one matching at IoU 0.5; TP30, FP30 (counts) and FNR = FN/(TP+FN) at "
        "IoU 0.3. Hit@$\\tau$: share of images with a gold box where the best IoU is at least "
        "$\\tau$. Boxes/image: boxes answered per image, mean (those beyond the cap on boxes "
        "per answer included; only the boxes within it are scored)."
    )
    metrics = (
        Metric("mAP@30", "mAP@30", ceiling=True),
        Metric("mAP@50", "mAP@50", headline=True, ceiling=True),
        Metric("mAP@[50:95]", "mAP@[50:95]", ceiling=True),
        Metric("ACC50", "ACC50", ceiling=True),
        Metric("TP30", "TP30", decimals=0, percent=False),
        Metric("FP30", "FP30", "lower", decimals=0, percent=False),
        Metric("FNR", "FNR", "lower"),
        Metric("Hit@30", "Hit@30", headline=True, ceiling=True),
        Metric("Hit@50", "Hit@50", ceiling=True),
        Metric("mean_best_IoU", "mean best IoU", decimals=3, percent=False, table=False),
        Metric("FN30", "FN30", "lower", decimals=0, percent=False, table=False),
        Metric("mean_boxes", "Boxes/image", None, percent=False, interval=False, figure=False),
    )
    reference_columns = ("gold_boxes",)
    settings_schema: ClassVar[Mapping[str, Any]] = {
        "max_boxes": {
            "description": "boxes kept per answer, in the model's order (config/README.md)",
            "type": "integer",
            "minimum": 1,
            "default": MAX_BOXES,
        }
    }
    needs_box_format = True
    capped_by = "tasks.localization.max_boxes"
    figures = ("breakdown", "iou", "lesion_size", "examples")
    answer_tokens = 50  # a JSON list of one to three boxes
    reader = "boxes"
    # Statistics and figures read the boxes the reading stage wrote: no parser.
    stage_modules: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "parse": ("boxes",),
        "score": ("metrics",),
        "statistics": ("bootstrap", "metrics"),
        "figures": ("figures",),
    }

    def gold_answer(self, reference: Mapping[str, Any]) -> str:
        boxes = [
            {"bbox_2d": [x, y, x + w, y + h], "score": 1.0}
            for x, y, w, h in xywh(reference["gold_boxes"])
        ]
        return json.dumps(boxes) if boxes else "no finding"

    def reading_options(self, task_config: Mapping[str, Any]) -> dict[str, Any]:
        return {"max_boxes": int(task_config.get("max_boxes", MAX_BOXES))}

    def capped(self, read: Any, options: Mapping[str, Any]) -> Any:
        boxes = read.get("boxes") if isinstance(read, dict) else None
        cap = options.get("max_boxes")
        if not isinstance(boxes, list) or cap is None or len(boxes) <= cap:
            return read
        # over_cap from the other harness, if it wrote one, is not ours to trust or add.
        over = len(boxes) - cap
        return {**read, "boxes": boxes[:cap], "over_cap": over}

    def parse(self, raw: str, context: AnswerContext) -> Parsed:
        boxes = self.stage("boxes")
        # Only this convention is in pixels of the frame the model saw.
        resized = context.frame_size if context.box_format == "qwen25_bbox_2d" else None
        parsed = boxes.parse_boxes(
            raw,
            context.box_format,
            image_size=(context.width, context.height),
            resized_size=resized,
            max_boxes=context.options.get("max_boxes"),
        )
        return Parsed(parsed.status, boxes.to_dict(parsed), parsed.error)

    def parsed_problem(self, parsed: dict[str, Any]) -> str | None:
        boxes = parsed.get("boxes")
        keys = ("x", "y", "width", "height")
        if not isinstance(boxes, list) or not all(
            isinstance(b, dict) and all(isinstance(b.get(k), int | float) for k in keys)
            for b in boxes
        ):
            return "parsed.boxes must be a list of {x, y, width, height} numbers"
        return None

    def score(
        self, frame: pd.DataFrame, answers: Answers, context: ScoringContext
    ) -> tuple[dict[str, Any], pd.DataFrame]:
        gold, predicted, statuses, over_cap = {}, {}, {}, {}
        for row in frame.itertuples(index=False):
            gold[row.filename] = xywh(row.gold_boxes)
            predicted[row.filename], statuses[row.filename] = answers.get(row.filename, "boxes", [])
            over_cap[row.filename] = answers.get(row.filename, "over_cap", 0)[0]
        return self.stage("metrics").score_localization(gold, predicted, statuses, over_cap)

    def score_rater(
        self, frame: pd.DataFrame, rater: str
    ) -> tuple[dict[str, Any], pd.DataFrame] | None:
        """(summary, per-image table) of one human rater's boxes (``rater`` a rater slug)
        against gold, with the models' code; None if the rater drew no box in ``frame``."""
        from novabench.dataset.schema import rater_slug

        gold, boxes = {}, {}
        for r in frame.itertuples(index=False):
            gold[r.filename] = xywh(r.gold_boxes)
            boxes[r.filename] = xywh(b for b in r.rater_boxes if rater_slug(b["rater"]) == rater)
        if not any(boxes.values()):
            return None
        return self.stage("metrics").score_rater(gold, boxes)

    def replicates(self, entry, dataset, weights) -> dict[str, np.ndarray]:
        matches = entry.extra.get("matches")
        if matches is None:
            matches = entry.extra["matches"] = self.stage("metrics").coco_detection_matches(
                gold_boxes(dataset), entry_boxes(dataset, entry.name, entry.verdicts)
            )
        return self.stage("bootstrap").localization_replicates(entry.per_image, matches, weights)

    def draw_figure(self, family: str, context: Any) -> None:
        self.stage("figures").FAMILIES[family](context)

    def breakdown_values(self, per_image: pd.DataFrame) -> tuple[str, np.ndarray]:
        hit = per_image["hit30"].astype("boolean").astype("Float64")
        hit = hit.to_numpy(dtype=float, na_value=np.nan)
        # Hit is defined on images with a gold box only.
        return "Hit@30 (%)", np.where(per_image["n_gold"].to_numpy() > 0, 100 * hit, np.nan)


TASK = Localization()
