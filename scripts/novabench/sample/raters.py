"""Boxes of the two simulated raters: plausible, imperfect copies of the gold boxes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Box = tuple[float, float, float, float]  # x, y, width, height in pixels (top-left corner)


@dataclass(frozen=True)
class RaterStyle:
    """How one rater deviates from the gold boxes."""

    name: str
    scale: float  # mean growth of the box (raters draw loose boxes)
    jitter: float  # sd of edge shifts, as a fraction of the box size
    miss: float  # probability to skip a lesion (higher for small ones)
    extra: float  # probability to add a false-positive box on an abnormal image
    merge: float  # probability to draw one box around the two closest lesions


RATERS = (
    RaterStyle("rater1", scale=1.06, jitter=0.05, miss=0.05, extra=0.05, merge=0.1),
    RaterStyle("rater2", scale=1.15, jitter=0.08, miss=0.08, extra=0.08, merge=0.2),
)


def _clip(x0: float, y0: float, x1: float, y1: float, size: int) -> Box | None:
    x0, y0 = max(0.0, x0), max(0.0, y0)
    x1, y1 = min(float(size), x1), min(float(size), y1)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None
    x0, y0, x1, y1 = (float(round(v)) for v in (x0, y0, x1, y1))
    return (x0, y0, x1 - x0, y1 - y0)


def _merge_closest(boxes: list[Box]) -> list[Box]:
    centres = np.array([(x + w / 2, y + h / 2) for x, y, w, h in boxes])
    dist = np.linalg.norm(centres[:, None] - centres[None], axis=-1) + np.eye(len(boxes)) * 1e9
    i, j = np.unravel_index(int(np.argmin(dist)), dist.shape)
    a, b = boxes[i], boxes[j]
    x0, y0 = min(a[0], b[0]), min(a[1], b[1])
    x1, y1 = max(a[0] + a[2], b[0] + b[2]), max(a[1] + a[3], b[1] + b[3])
    rest = [box for k, box in enumerate(boxes) if k not in (i, j)]
    return [*rest, (x0, y0, x1 - x0, y1 - y0)]


def rater_boxes(
    gold: list[Box],
    style: RaterStyle,
    brain: np.ndarray,
    rng: np.random.Generator,
) -> list[Box]:
    """One rater's boxes for an image with the given gold boxes (none for normal images)."""
    if not gold:
        return []
    size = brain.shape[0]
    boxes = list(gold)
    if len(boxes) >= 2 and rng.random() < style.merge:
        boxes = _merge_closest(boxes)
    drawn: list[Box] = []
    for x, y, w, h in boxes:
        small = w * h < 300
        if rng.random() < (style.miss * 3 if small else style.miss):
            continue
        grow = style.scale * float(np.exp(rng.normal(0.0, 0.06)))
        cx = x + w / 2 + rng.normal(0.0, style.jitter * w + 0.8)
        cy = y + h / 2 + rng.normal(0.0, style.jitter * h + 0.8)
        half_w = w * grow / 2 + rng.normal(0.0, style.jitter * w / 2)
        half_h = h * grow / 2 + rng.normal(0.0, style.jitter * h / 2)
        box = _clip(cx - half_w, cy - half_h, cx + half_w, cy + half_h, size)
        if box is not None:
            drawn.append(box)
    if rng.random() < style.extra:
        # A false positive somewhere in the brain.
        inside = np.flatnonzero(brain > 0.5)
        centre = inside[int(rng.integers(inside.size))]
        cy, cx = divmod(int(centre), size)
        half = rng.uniform(8, 30)
        box = _clip(cx - half, cy - half * rng.uniform(0.7, 1.3), cx + half, cy + half, size)
        if box is not None:
            drawn.append(box)
    return drawn
