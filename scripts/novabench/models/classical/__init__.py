"""Classical zero-shot image analysis, no training and no weights.

Localization: the lesion detector of :mod:`.detector` (midline asymmetry and robust
intensity outliers inside a brain mask, see its docstring). Captioning: the sequence, plane
and finding estimates of :mod:`.captioner` written as a radiology-style sentence. Both
build on :mod:`.image_analysis` (brain mask, midline, tissue statistics); the three modules
are this baseline's internals, not shared infrastructure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from novabench.dataset.read import decode_image
from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample


class Adapter(BaseAdapter):
    box_format = "pixel_xyxy"
    supported_tasks = ("localization", "captioning")
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"max_boxes": {"type": "integer", "minimum": 1}},
    }

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        from novabench.models.classical import captioner, detector

        max_boxes = int(self.settings.get("max_boxes", 3))
        for sample in samples:
            image = decode_image(sample.image_png, sample.filename)
            if sample.task == "localization":
                found = detector.detect_lesions(image, max_boxes=max_boxes)
                boxes = [
                    {
                        "bbox_2d": [d.x, d.y, d.x + d.width, d.y + d.height],
                        "score": round(float(d.score), 6),
                    }
                    for d in found
                ]
                yield Response(raw=json.dumps(boxes) if boxes else "no finding")
            else:
                yield Response(raw=captioner.caption_image(image))
