"""Knowledge-base retrieval baseline for diagnosis, no training and no weights.

Ranks the conditions of the shipped knowledge base (``novabench/data/knowledge_base.yaml``)
against the clinical history and findings with BM25; see
:class:`novabench.knowledge_base.RetrievalDiagnoser` for the method. Settings: ``k1``,
``b``, ``name_weight``, ``top_k`` (BM25 parameters) and ``knowledge_base`` (another
knowledge base file).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any, ClassVar

from novabench.models.base import Adapter as BaseAdapter
from novabench.models.base import Response, Sample


class Adapter(BaseAdapter):
    supported_tasks = ("diagnosis",)
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "k1": {"type": "number", "minimum": 0},
            "b": {"type": "number", "minimum": 0, "maximum": 1},
            "name_weight": {"type": "integer", "minimum": 0},
            "top_k": {"type": "integer", "minimum": 1, "maximum": 5},
            "knowledge_base": {"type": "string", "minLength": 1},
        },
    }

    @cached_property
    def _diagnoser(self):
        from novabench.knowledge_base import RetrievalDiagnoser, load_knowledge_base

        params = {
            k: self.settings[k] for k in ("k1", "b", "name_weight", "top_k") if k in self.settings
        }
        kb = load_knowledge_base(self.settings.get("knowledge_base"))
        return RetrievalDiagnoser(kb, **params)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "method": self._diagnoser.identity()}

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        from novabench.answer_formats import format_diagnosis

        for sample in samples:
            ranked = self._diagnoser.predict(
                sample.inputs["clinical_history"], sample.inputs["findings"]
            )
            yield Response(raw=format_diagnosis(ranked))
