"""Task 2, image captioning: image in, a radiology-style description out."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from novabench.tasks.base import AnswerContext, Answers, Metric, Parsed, ScoringContext, Task

# BERT F1's encoder and settings (tasks.captioning.bertscore; see .bertscore):
# bert-score's English default, raw (not rescaled) F1.
BERTSCORE_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "model": "roberta-large",
    "revision": None,
    "num_layers": None,  # bert-score's tuned layer: 17 for roberta-large
    "rescale_with_baseline": False,
    "baseline": None,
}


def bertscore_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """``tasks.captioning.bertscore`` with the defaults filled in."""
    return {**BERTSCORE_DEFAULTS, **(settings or {})}


class Captioning(Task):
    name = "captioning"
    title = "Image captioning"
    position = 2
    default_prompt = "config/prompts/captioning-v1.txt"
    settings_schema: ClassVar[Mapping[str, Any]] = {
        "bertscore": {
            "description": "the encoder of BERT F1 (config/README.md)",
            "type": "object",
            "additionalProperties": False,
            "default": {},
            "properties": {
                "enabled": {"type": "boolean", "default": True},
                "model": {"type": "string", "minLength": 1, "default": "roberta-large"},
                "revision": {"type": ["string", "null"], "minLength": 1, "default": None},
                "num_layers": {"type": ["integer", "null"], "minimum": 0, "default": None},
                "rescale_with_baseline": {"type": "boolean", "default": False},
                "baseline": {"type": ["string", "null"], "minLength": 1, "default": None},
            },
        }
    }
    figure_captions: ClassVar[Mapping[str, str]] = {"breakdown": "Clinical F1 (%)"}
    caption = (
        "Clinical and Modality F1: per-image F1 of judge keywords (Modality: sequence and "
        "plane words), averaged over images. BLEU-4: corpus level; METEOR: mean over images; "
        "BERT F1: BERTScore F1 per image, mean over images (encoder in the score files); "
        "Binary F1: normal vs abnormal, positive = abnormal. Unread: share of the content "
        "words of both captions the judge could not read (mean over images; none for a "
        "judge that reads every word)."
    )
    metrics = (
        Metric("Clinical_F1", "Clinical F1", headline=True, ceiling=True),
        Metric("Modality_F1", "Modality F1", ceiling=True),
        Metric("BLEU-4", "BLEU-4", decimals=2, headline=True),
        # Per-image METEOR is read back from a CSV written with 6 significant digits.
        Metric("METEOR", "METEOR", tolerance=1e-3),
        # Per-image BERT F1 is read back from the same CSV.
        Metric("BERT_F1", "BERT F1", tolerance=1e-3, computed_by="bertscore"),
        Metric("Binary_F1", "Binary F1", ceiling=True),
        # How much of the compared text the judge read: no model is better for it.
        Metric(
            "Unread_share",
            "Unread",
            better=None,
            headline=True,
            interval=False,
            figure=False,
            when_undefined="the judge does not say which words it could not read",
        ),
    )
    reference_columns = ("caption",)
    required_references = ("caption",)
    needs_judge = True
    default_judge: ClassVar[Mapping[str, Any]] = {"name": "keywords", "kind": "keyword-lexicon"}
    agreement_labels = ("abnormal",)
    figures = ("breakdown",)
    answer_tokens = 70  # one to three sentences
    stage_modules: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "parse": ("parser",),
        "read": ("verdicts",),
        "score": ("metrics", "bertscore"),
        "statistics": ("bootstrap",),
    }

    def options(self, task_config: Mapping[str, Any]) -> dict[str, Any]:
        return {"bertscore": bertscore_settings(task_config.get("bertscore"))}

    def gold_answer(self, reference: Mapping[str, Any]) -> str:
        return reference["caption"]

    def parse(self, raw: str, context: AnswerContext) -> Parsed:
        return self.stage("parser").parse_caption(raw)

    def parsed_problem(self, parsed: dict[str, Any]) -> str | None:
        if not isinstance(parsed.get("caption"), str):
            return "parsed.caption must be a string"
        return None

    def _records(self, frame: pd.DataFrame, answers: Answers) -> list[dict[str, Any]]:
        rows = []
        for row in frame.itertuples(index=False):
            caption, status = answers.get(row.filename, "caption")
            rows.append(
                {
                    "filename": row.filename,
                    "reference": row.caption,
                    "prediction": caption,
                    "status": status,
                }
            )
        return rows

    def verdict_counts(self, verdicts: Sequence[Any]) -> dict[str, int]:
        """How many images the judge read (``judged``) and not (``not_judged``)."""
        counts = Counter(
            "judged" if v.get("judged") else "not_judged"
            for v in verdicts
            if isinstance(v, Mapping)
        )
        return dict(sorted(counts.items()))

    def judge_answers(self, frame: pd.DataFrame, answers: Answers, judge: Any) -> list[dict]:
        verdicts = self.stage("verdicts")
        # Every image is scored (on_error "empty"), so every image is judged.
        judged = verdicts.judge_captions(self._records(frame, answers), judge)
        return [{"verdict": v, "labels": verdicts.agreement_labels(v)} for v in judged]

    def score(
        self, frame: pd.DataFrame, answers: Answers, context: ScoringContext
    ) -> tuple[dict[str, Any], pd.DataFrame]:
        bert = functools.partial(
            self.stage("bertscore").bert_f1, settings=context.options.get("bertscore")
        )
        verdicts = [context.verdicts.get(filename) for filename in frame["filename"]]
        return self.stage("metrics").aggregate_captioning(
            self._records(frame, answers), verdicts, context.judge, context.nltk_data, bert_f1=bert
        )

    def replicates(self, entry, dataset, weights) -> dict[str, np.ndarray]:
        bootstrap = self.stage("bootstrap")
        stats = entry.extra.get("bleu")
        if stats is None and entry.verdicts is not None:
            hypotheses = bootstrap.captions(dataset, entry.verdicts)
            stats = entry.extra["bleu"] = bootstrap.bleu_statistics(
                list(dataset["caption"]), hypotheses
            )
        return bootstrap.captioning_replicates(entry.per_image, stats, weights)

    def breakdown_values(self, per_image: pd.DataFrame) -> tuple[str, np.ndarray]:
        return "Clinical F1 (%)", per_image["clinical_f1"].to_numpy(dtype=float)

    def judged_pairs(self, frame: pd.DataFrame, answers: Answers) -> list[tuple[Any, Any]]:
        """(reference, caption) of every scored image, as reading asks the judge (every
        image is judged: on_error empty)."""
        return self.stage("verdicts").caption_pairs(self._records(frame, answers))


TASK = Captioning()
