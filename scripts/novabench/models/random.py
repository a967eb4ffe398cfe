"""Negative control: seeded random boxes.

Brackets the localization metrics from below. Box sizes follow a log-uniform law between
``min_size`` and ``max_size`` pixels; the number of boxes per image is uniform in
1..``max_boxes``. Each image gets its own stream derived from (seed, filename), so the
answer for one image never depends on which other images are in the run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample


class Adapter(BaseAdapter):
    box_format = "pixel_xyxy"
    control = True  # the negative control
    # Chance: 1 to 3 boxes at random hit a lesion box rarely; a judge or reader that gives
    # random boxes more than this is broken.
    control_bounds: ClassVar[dict[str, float]] = {"at_most": 25.0}
    supported_tasks = ("localization",)
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "seed": {"type": "integer"},
            "max_boxes": {"type": "integer", "minimum": 1},
            "min_size": {"type": "number", "exclusiveMinimum": 0},
            "max_size": {"type": "number", "exclusiveMinimum": 0},
        },
    }

    def _rng(self, filename: str) -> np.random.Generator:
        digest = hashlib.sha256(f"{self.settings.get('seed', 0)}:{filename}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "little"))

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        max_boxes = int(self.settings.get("max_boxes", 3))
        lo, hi = float(self.settings.get("min_size", 16)), float(self.settings.get("max_size", 160))
        for sample in samples:
            rng = self._rng(sample.filename)
            boxes = []
            for _ in range(int(rng.integers(1, max_boxes + 1))):
                w, h = np.exp(rng.uniform(np.log(lo), np.log(hi), size=2))
                w, h = min(w, sample.width), min(h, sample.height)
                x = rng.uniform(0, sample.width - w)
                y = rng.uniform(0, sample.height - h)
                boxes.append(
                    {"bbox_2d": [round(x, 1), round(y, 1), round(x + w, 1), round(y + h, 1)]}
                )
            yield Response(raw=json.dumps(boxes))
