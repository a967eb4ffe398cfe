"""A toy backend kind from outside the package, as a plug-in (the config's ``plugins:``):
it answers every task with the reference, as the gold control does, but declares itself a
model under test, so the report shows it among the models.

Everything the workflow needs to know about it, it declares on its class; importing this
module registers it as the kind ``toy``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

from novabench.models.base import COST_NONE, Adapter, Response, Sample, register_adapter
from novabench.tasks import get_task


class ToyAdapter(Adapter):
    environment: ClassVar[str] = "envs/inference.yaml"
    cost_model: ClassVar[str] = COST_NONE
    control: ClassVar[bool] = False
    box_format: ClassVar[str | None] = "pixel_xyxy"  # what the gold answers are written in

    @classmethod
    def job_resources(cls, settings):
        return {"gpu": 0, "cpus": 1, "mem_mb": 500}

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        for sample in samples:
            yield Response(raw=get_task(sample.task).gold_answer(sample.reference))


register_adapter("toy", ToyAdapter)
