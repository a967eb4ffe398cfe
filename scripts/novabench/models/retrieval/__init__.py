"""Corpus retrieval baseline for diagnosis, no training and no weights.

Ranks the conditions of its own corpus (``corpus.yaml`` in this package) against the
clinical history and findings with BM25 and answers with their names; see
:class:`novabench.models.retrieval.bm25.RetrievalDiagnoser` for the method. Settings:
``k1``, ``b``, ``name_weight``, ``top_k`` (BM25 parameters) and ``corpus`` (another corpus
file). The diagnosis judge never reads the corpus.
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
            "corpus": {"type": "string", "minLength": 1},
        },
    }

    @cached_property
    def _diagnoser(self):
        from novabench.models.retrieval.bm25 import RetrievalDiagnoser
        from novabench.models.retrieval.corpus import load_corpus

        params = {
            k: self.settings[k] for k in ("k1", "b", "name_weight", "top_k") if k in self.settings
        }
        return RetrievalDiagnoser(load_corpus(self.settings.get("corpus")), **params)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "method": self._diagnoser.identity()}

    def predict(self, samples: Sequence[Sample]) -> Iterator[Response]:
        from novabench.answer_formats import format_diagnosis

        for sample in samples:
            ranked = self._diagnoser.predict(
                sample.inputs["clinical_history"], sample.inputs["findings"]
            )
            yield Response(raw=format_diagnosis(ranked))
