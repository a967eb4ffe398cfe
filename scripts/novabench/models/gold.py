"""Positive control: answers every task with the reference.

It brackets the metrics from above (it must score 100 on every AP, hit, F1 and Top-k
metric) and so catches scoring bugs. Each task writes its reference the way a real model
would (``Task.gold_answer``), so the answers go through the same parsers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample
from novabench.tasks import get_task


class Adapter(BaseAdapter):
    # Localization's gold answer is pixel corners (Localization.gold_answer).
    box_format = "pixel_xyxy"
    control = True  # the positive control
    # The reference scores 100 wherever that is defined.
    control_bounds: ClassVar[dict[str, float]] = {"at_least": 100.0}

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        for sample in samples:
            yield Response(raw=get_task(sample.task).gold_answer(sample.reference))
