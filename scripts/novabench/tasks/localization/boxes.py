"""Parse a model's localization answer into pixel boxes of the original image.

Each model declares one box convention in the config (``BOX_FORMATS`` in
:mod:`novabench.answer_formats`, which adapters read too); the parser reads
every answer of that model with that convention only. It never guesses per answer and
never tries several readings to keep the best one, because that would inflate scores.

Conventions (the four numbers of a box, in the order the model writes them):

- ``gemini_yxyx_1000``: ``[ymin, xmin, ymax, xmax]`` normalized to 0-1000 (Gemini), as lines
  ``label: [ymin, xmin, ymax, xmax]`` or Gemini's JSON mode ``[{"box_2d": [...], "label": ...}]``.
- ``xyxy_1000``: ``[x1, y1, x2, y2]`` normalized to 0-1000 (Qwen2-VL, Qwen3-VL); Qwen2-VL's
  ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>`` form is read too.
- ``qwen25_bbox_2d``: ``[{"bbox_2d": [x1, y1, x2, y2], "label": ...}]`` in absolute pixels of
  the image as Qwen2.5-VL's processor resized it (see ``smart_resize``).
- ``pixel_xyxy``: ``[x1, y1, x2, y2]`` in absolute pixels of the original image, as objects
  with a ``bbox_2d``/``bbox``/``box`` key (always read as corners, never as COCO's xywh) and an
  optional ``score``/``confidence``, or as bare lists. The project's offline baselines emit
  ``[{"bbox_2d": [x1, y1, x2, y2], "score": 0.83}]``.
- ``xyxy_01``: ``[x1, y1, x2, y2]`` normalized to 0-1.
- ``paligemma_loc``: PaliGemma's location tokens, four per box in the order ymin, xmin,
  ymax, xmax, each ``<locNNNN>`` with NNNN a bin 0000-1023 of 1024 across the image, then
  the label; boxes separated by `` ; ``: ``<loc0128><loc0256><loc0384><loc0512> lesion``.
  A bin maps to ``NNNN / 1024 * size`` pixels (as big_vision's and the PaliGemma demo's
  decoding do), so bin 256 of a 480-pixel side is pixel 120.

Each family's native convention, the default of ``hf_local`` models that declare none
(novabench.vlm_families; ``model_type`` in brackets):

- Qwen2-VL [qwen2_vl], Qwen3-VL [qwen3_vl, qwen3_vl_moe], Qwen3.5 [qwen3_5,
  qwen3_5_moe; Qwen3-VL's vision stack], InternVL [internvl] (its
  ``<ref>label</ref><box>[[x1, y1, x2, y2]]</box>``), GLM-4.1V/4.5V [glm4v, glm4v_moe]
  (``<|begin_of_box|>[x1, y1, x2, y2]<|end_of_box|>``): ``xyxy_1000``;
- Qwen2.5-VL [qwen2_5_vl]: ``qwen25_bbox_2d``;
- LLaVA-1.5 [llava], LLaVA-NeXT [llava_next], LLaVA-OneVision [llava_onevision]:
  ``xyxy_01`` (their grounding data writes 0-1 corners);
- PaliGemma [paligemma]: ``paligemma_loc``;
- Gemini (an API model, no hf_local family): ``gemini_yxyx_1000``;
- families trained without a box convention answer as the prompt asks; their default is
  ``pixel_xyxy``, what the default localization prompt asks for: Gemma 3 / MedGemma
  [gemma3], Gemma 4 [gemma4], Idefics3 [idefics3], SmolVLM [smolvlm], Llama 3.2 Vision
  [mllama], Aya Vision [aya_vision], Mistral 3 / Pixtral [mistral3, llava with a Pixtral
  tower].

A box is any group of four numbers written ``[a, b, c, d]``, ``(a, b, c, d)`` or as two
points ``(a, b), (c, d)`` / ``[[a, b], [c, d]]``, read in the convention's order
(``paligemma_loc``: four location tokens in a row). Finding these
groups with a regular expression, rather than decoding JSON, makes one rule cover code
fences, prose around the answer, trailing commas, single quotes, truncated output and the
non-JSON line formats alike; a score and a label are taken from the flat ``{...}`` object
that holds the box, when there is one.

Answers without any box are ``no_finding`` when they say so ("no target", "no abnormality",
"no finding", "none", an empty list ``[]``), else ``parse_error``. Boxes win over a "no
finding" phrase in the same answer. Swapped corners are reordered, boxes are clipped to the
image, and boxes left without area (or with non-finite numbers) are dropped and counted;
an answer whose boxes were all dropped keeps status ``ok`` with no boxes. Boxes beyond the
cap (``tasks.localization.max_boxes``) are dropped and counted apart (``over_cap``).
Output order is the model's order, which the scorer relies on to break score ties.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from novabench.answer_formats import BOX_FORMATS, smart_resize
from novabench.errors import ConfigError, NovaError

# Conventions that write y before x.
_YXYX = ("gemini_yxyx_1000", "paligemma_loc")
STATUSES = ("ok", "no_finding", "parse_error")

# Keys that name a box, not a finding (a Gemini line "lesion: [..]" names the finding).
_BOX_KEYS = frozenset({"bbox_2d", "box_2d", "bbox", "box", "bounding_box", "boxes", "bboxes"})

_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_SEP = r"\s*,\s*"
_BOX_PATTERN = re.compile(
    # [a, b, c, d] and (a, b, c, d), a trailing comma allowed
    rf"\[\s*{_NUM}{_SEP}{_NUM}{_SEP}{_NUM}{_SEP}{_NUM}\s*,?\s*\]"
    rf"|\(\s*{_NUM}{_SEP}{_NUM}{_SEP}{_NUM}{_SEP}{_NUM}\s*,?\s*\)"
    # two points: (a, b), (c, d) as Qwen2-VL writes them, or [[a, b], [c, d]]
    rf"|[\[(]\s*{_NUM}{_SEP}{_NUM}\s*[\])]\s*,?\s*[\[(]\s*{_NUM}{_SEP}{_NUM}\s*[\])]"
)
# PaliGemma: four location tokens (ymin, xmin, ymax, xmax), then its label up to " ; ".
_LOC_PATTERN = re.compile(r"<loc(\d{4})>" * 4)
_LOC_BINS = 1024
_LOC_LABEL = re.compile(r"[ \t]*([^;<\n]*[^;<\s])")
_FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
_SCORE = re.compile(
    rf"""["']?\b(?:score|confidence|conf|probability)["']?\s*:\s*{_NUM}""", re.IGNORECASE
)
_LABEL = re.compile(r"""["']?\blabel["']?\s*:\s*(?:"([^"\n]*)"|'([^'\n]*)')""", re.IGNORECASE)
# What stands just before a box on its line: a Gemini label ("lesion: "), a JSON key,
# Qwen2-VL's object reference tokens, or InternVL's <ref>label</ref><box>[.
_PREFIX_LABEL = re.compile(
    r"<\|object_ref_start\|>([^<\n]{1,80})<\|object_ref_end\|>\s*(?:<\|box_start\|>)?\s*$"
    r"""|["']?([A-Za-z][\w ./-]{0,60}?)["']?\s*[:=]\s*$"""
    r"|<ref>([^<\n]{1,80})</ref>\s*(?:<box>)?\s*\[?\s*$"
)
_NO_FINDING = re.compile(
    r"\bno\s+(?:[a-z-]+\s+){0,2}?"
    r"(?:targets?|findings?|abnormalit(?:y|ies)|lesions?|anomal(?:y|ies)|boxes)\b"
    r"|\bnone\b|\bnothing\s+(?:abnormal|found|detected)\b|\[\s*\]",
    re.IGNORECASE,
)
_CODE_FENCE = re.compile(r"```[A-Za-z]*")
_PREFIX_WINDOW = 120  # characters looked at for a label; bounds the work on huge answers


@dataclass(frozen=True)
class Box:
    """A box in pixels of the original image; ``x, y`` is the top-left corner."""

    x: float
    y: float
    width: float
    height: float
    score: float | None = None
    label: str | None = None


@dataclass(frozen=True)
class ParsedBoxes:
    """One parsed answer: status, boxes in the model's order, and what was dropped."""

    status: str  # "ok" | "no_finding" | "parse_error"
    boxes: tuple[Box, ...]
    dropped: int  # boxes dropped as degenerate (no area after clipping, non-finite)
    error: str | None  # why parsing failed (parse_error only)
    over_cap: int = 0  # boxes beyond ``max_boxes`` in the model's order, dropped


def _check_size(name: str, size: Any) -> tuple[int, int]:
    ok = (
        isinstance(size, tuple | list)
        and len(size) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)
    )
    if not ok:
        raise ConfigError(
            f"{name} must be (width, height) in pixels, got {size!r}",
            fix="give two positive integers, e.g. (480, 480)",
        )
    return int(size[0]), int(size[1])


def _scales(
    box_format: str, image_size: tuple[int, int], resized_size: tuple[int, int] | None
) -> tuple[float, float]:
    """Factors that map the convention's x and y units to original-image pixels."""
    width, height = image_size
    if box_format in ("gemini_yxyx_1000", "xyxy_1000"):
        return width / 1000.0, height / 1000.0
    if box_format == "xyxy_01":
        return float(width), float(height)
    if box_format == "paligemma_loc":
        return width / _LOC_BINS, height / _LOC_BINS
    if box_format == "qwen25_bbox_2d":
        if resized_size is None:
            resized_h, resized_w = smart_resize(height, width)
        else:
            resized_w, resized_h = resized_size
        return width / resized_w, height / resized_h
    return 1.0, 1.0  # pixel_xyxy


def _find_label(text: str, start: int) -> str | None:
    # Only the window is searched for the line's start: a search back to the text's start
    # for every box made a one-line answer of many boxes quadratic.
    window_start = max(0, start - _PREFIX_WINDOW)
    prefix = text[text.rfind("\n", window_start, start) + 1 or window_start : start]
    match = _PREFIX_LABEL.search(prefix)
    if match is None:
        return None
    label = (match.group(1) or match.group(2) or match.group(3) or "").strip()
    if not label or label.lower() in _BOX_KEYS:
        return None
    return label


def _object_fields(obj: str) -> tuple[float | None, str | None]:
    """Score and label written in the flat JSON-like object that holds a box."""
    score = None
    score_match = _SCORE.search(obj)
    if score_match is not None:
        value = float(score_match.group(1))
        score = value if math.isfinite(value) else None
    label_match = _LABEL.search(obj)
    label = None
    if label_match is not None:
        label = label_match.group(1) if label_match.group(1) is not None else label_match.group(2)
    return score, label


def _check_arguments(
    box_format: str, image_size: tuple[int, int], resized_size: tuple[int, int] | None
) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """The checked ``image_size`` and ``resized_size``; bad arguments raise ``ConfigError``."""
    if box_format not in BOX_FORMATS:
        raise ConfigError(
            f"unknown box format {box_format!r}",
            fix=f"set the model's box_format to one of {', '.join(BOX_FORMATS)}",
        )
    size = _check_size("image_size", image_size)
    if resized_size is not None:
        if box_format != "qwen25_bbox_2d":
            raise ConfigError(
                f"resized_size is only used by qwen25_bbox_2d, not {box_format}",
                fix="remove resized_size for this model",
            )
        resized_size = _check_size("resized_size", resized_size)
    return size, resized_size


def _pixel_corners(
    match: re.Match, box_format: str, scales: tuple[float, float], size: tuple[int, int]
) -> tuple[float, float, float, float] | None:
    """``x1, y1, x2, y2`` in image pixels, clipped to the image; None for a box to drop."""
    (scale_x, scale_y), (width, height) = scales, size
    a, b, c, d = (float(v) for v in match.groups() if v is not None)
    if box_format in _YXYX:
        a, b, c, d = b, a, d, c  # yxyx -> xyxy
    x1, x2 = sorted((a * scale_x, c * scale_x))
    y1, y2 = sorted((b * scale_y, d * scale_y))
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return None
    x1, x2 = min(max(x1, 0.0), width), min(max(x2, 0.0), width)
    y1, y2 = min(max(y1, 0.0), height), min(max(y2, 0.0), height)
    if x2 - x1 <= 0 or y2 - y1 <= 0:
        return None
    return x1, y1, x2, y2


def _box_annotations(
    text: str, match: re.Match, objects: list[tuple[int, int]], object_starts: list[int]
) -> tuple[float | None, str | None]:
    """Score and label of a box: from the flat object around it, else a label before it;
    PaliGemma's label follows its location tokens."""
    if match.re is _LOC_PATTERN:
        after = _LOC_LABEL.match(text, match.end())
        return None, after.group(1) if after else None
    score, label = None, None
    i = bisect.bisect_right(object_starts, match.start()) - 1
    if i >= 0 and objects[i][1] >= match.end():
        score, label = _object_fields(text[objects[i][0] : objects[i][1]])
    if label is None:
        label = _find_label(text, match.start())
    return score, label


def _boxless_answer(text: str) -> ParsedBoxes:
    """An answer without any box: a 'no finding' answer, or unreadable."""
    unfenced = _CODE_FENCE.sub("", text).strip()
    if _NO_FINDING.search(unfenced) or unfenced.lower() == "null":
        return ParsedBoxes("no_finding", (), 0, None)
    return ParsedBoxes(
        "parse_error", (), 0, "no box of four numbers and no 'no finding' answer found"
    )


def parse_boxes(
    text: str | None,
    box_format: str,
    *,
    image_size: tuple[int, int] = (480, 480),
    resized_size: tuple[int, int] | None = None,
    max_boxes: int | None = None,
) -> ParsedBoxes:
    """Read one model answer in the declared convention; never raises on the answer text.

    ``image_size`` and ``resized_size`` are ``(width, height)``. ``resized_size`` is the
    frame Qwen2.5-VL saw (``qwen25_bbox_2d`` only); when None it is computed with
    ``smart_resize`` from ``image_size``. ``max_boxes``: the first that many boxes kept,
    in the model's order; the rest are counted (``over_cap``) and dropped, so that volume
    cannot buy hits. Bad arguments (not the text) raise ``ConfigError``.
    """
    size, resized_size = _check_arguments(box_format, image_size, resized_size)
    if not isinstance(text, str) or not text.strip():
        return ParsedBoxes("parse_error", (), 0, "empty answer")

    scales = _scales(box_format, size, resized_size)
    objects = [(m.start(), m.end()) for m in _FLAT_OBJECT.finditer(text)]
    object_starts = [start for start, _ in objects]

    boxes: list[Box] = []
    dropped = 0
    n_found = 0
    pattern = _LOC_PATTERN if box_format == "paligemma_loc" else _BOX_PATTERN
    over_cap = 0
    for match in pattern.finditer(text):
        n_found += 1
        corners = _pixel_corners(match, box_format, scales, size)
        if corners is None:
            dropped += 1
        elif max_boxes is not None and len(boxes) >= max_boxes:
            over_cap += 1  # counted only: no label or score is looked for
        else:
            x1, y1, x2, y2 = corners
            score, label = _box_annotations(text, match, objects, object_starts)
            boxes.append(Box(x1, y1, x2 - x1, y2 - y1, score=score, label=label))

    if n_found:
        return ParsedBoxes("ok", tuple(boxes), dropped, None, over_cap)
    return _boxless_answer(text)


def to_dict(parsed: ParsedBoxes) -> dict[str, Any]:
    """JSON-friendly form of a parsed answer, for prediction records.

    Box dicts carry ``x, y, width, height, score, label``, the shape the localization scorer
    takes as predictions.
    """
    return {
        "status": parsed.status,
        "boxes": [
            {
                "x": box.x,
                "y": box.y,
                "width": box.width,
                "height": box.height,
                "score": box.score,
                "label": box.label,
            }
            for box in parsed.boxes
        ],
        "dropped": parsed.dropped,
        "error": parsed.error,
        # Only where the cap cut: records of answers within it stay as they were.
        **({"over_cap": parsed.over_cap} if parsed.over_cap else {}),
    }


def from_dict(data: Mapping[str, Any]) -> ParsedBoxes:
    """Inverse of ``to_dict``; raises ``NovaError`` on a malformed record."""
    fix = "re-create the prediction record with novabench.tasks.localization.boxes.to_dict"
    try:
        status = data["status"]
        boxes = tuple(
            Box(
                float(b["x"]),
                float(b["y"]),
                float(b["width"]),
                float(b["height"]),
                score=None if b.get("score") is None else float(b["score"]),
                label=b.get("label"),
            )
            for b in data["boxes"]
        )
        dropped = int(data.get("dropped", 0))
        over_cap = int(data.get("over_cap", 0))
        error = data.get("error")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NovaError(f"malformed box record ({exc!r})", fix=fix) from exc
    if status not in STATUSES:
        raise NovaError(f"box record has unknown status {status!r}", fix=fix)
    return ParsedBoxes(status, boxes, dropped, error, over_cap)
