"""How models write answers, for the code that writes or sizes them without a task.

Adapters, the token estimate and the CLI need a task's answer conventions but not its
parser or scorer; they read them here, so that they import no task
(:mod:`novabench.tasks` loads tasks by name). The parsers are the tasks' own
(``novabench.tasks.localization.boxes``, ``novabench.tasks.diagnosis.parser``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

# The box conventions a model may declare (``box_format``); see the localization parser.
BOX_FORMATS = (
    "gemini_yxyx_1000",
    "xyxy_1000",
    "qwen25_bbox_2d",
    "pixel_xyxy",
    "xyxy_01",
    "paligemma_loc",
)


def smart_resize(
    height: int,
    width: int,
    factor: int = 28,
    min_pixels: int = 56 * 56,
    max_pixels: int = 28 * 28 * 1280,
) -> tuple[int, int]:
    """Return ``(height, width)`` of the frame Qwen2.5-VL's image processor resizes to.

    This is the processor's resize rule (``smart_resize`` in transformers' Qwen2-VL image
    processing, which Qwen2.5-VL reuses), written out here because importing transformers
    only for it is heavy: both sides are rounded to a multiple of ``factor`` (patch size 14
    x merge size 2), then scaled so the area lies within ``[min_pixels, max_pixels]`` keeping
    the aspect ratio. Python's ``round`` (half to even) is used, as there. A 480x480 NOVA
    image becomes 476x476.
    """
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got height={height}, width={width}")
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio must be at most 200, got {height}x{width}")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def format_diagnosis(ranked: Sequence[str]) -> str:
    """The model-output JSON for a ranked differential (used by non-LLM baselines)."""
    items = list(ranked)
    return json.dumps(
        {"most_likely_diagnosis": items[0] if items else "", "other_possible_diagnoses": items[1:]},
        ensure_ascii=False,
    )
