"""Task 3, diagnostic reasoning: clinical history and MRI findings in, a ranked top-5 out."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from novabench.errors import NovaError
from novabench.tasks.base import AnswerContext, Answers, Metric, Parsed, ScoringContext, Task

# The two verdicts of a judged ranking: its first diagnosis, and its first five.
TOPS = ("top1", "top5")

UNITS = ("image", "case")
# The per-image score table's canonical labels (written by the reading stage, .verdicts).
LABEL_COLUMNS = ("top1_label", "reference_label")


class Diagnosis(Task):
    name = "diagnosis"
    title = "Diagnostic reasoning"
    position = 3
    default_prompt = "config/prompts/diagnosis-v1.txt"
    audited = True  # novabench.audit: a hand-labelled sample of the judge's verdicts
    settings_schema: ClassVar[Mapping[str, Any]] = {
        "findings": {
            "description": "`reference` (the reference caption) or the name of a captioning model",
            "$ref": "#/$defs/name",
            "default": "reference",
        },
        "unit": {"type": "string", "enum": list(UNITS), "default": "image"},
    }
    figure_captions: ClassVar[Mapping[str, str]] = {
        "metrics": "Entropy is in bits, without a CI; the dashed line is the reference "
        "labels' entropy.",
        "breakdown": "Top-1 accuracy (%)",
        "labels": (
            "Distribution of the top-1 predicted diagnoses against the reference diagnoses on "
            "{dataset}, by rank (long tail): the share of images (%) each label covers. The "
            "legend gives each model's coverage (distinct predicted over distinct reference "
            "labels) and entropy (bits)."
        ),
    }
    caption = (
        "Top-1/Top-5: the reference diagnosis is the first / among the five ranked answers, "
        "as decided by the judge, an undecided verdict counted as no match. Undecided: share "
        "of images whose verdict the judge left undecided (it says so rather than guess); "
        "Top-1/Top-5 upper: the same scores with undecided verdicts counted as matches, so "
        "the true value lies between the score and its upper bound when the judge's decided "
        "verdicts are right. Coverage: distinct predicted top-1 labels over distinct "
        "reference labels, at most 100 (the paper's definition; wrong labels count too). "
        "Label recall: share of distinct reference labels predicted correctly (top-1) at "
        "least once. Entropy: Shannon entropy (bits) of the predicted top-1 labels; no CI, "
        "as the entropy of a case resample is biased low. Right, by the paper's judge rule: "
        "the same disease at another specificity (e.g. Meningioma for a transitional "
        "meningioma, Infarct for a cerebral infarction in sickle cell disease); a "
        "fundamentally different disease is wrong."
    )
    metrics = (
        Metric("Top-1", "Top-1", headline=True, ceiling=True),
        Metric("Top-5", "Top-5", headline=True, ceiling=True),
        # The judge's uncertainty beside the scores: no best, no CI, no figure panel.
        Metric("Top-1_upper", "Top-1 upper", None, interval=False, figure=False),
        Metric("Top-5_upper", "Top-5 upper", None, interval=False, figure=False),
        Metric("Undecided_top1", "Undecided top-1", None, headline=True, interval=False,
               figure=False),
        Metric("Undecided_top5", "Undecided top-5", None, headline=True, interval=False,
               figure=False),
        Metric("Coverage", "Coverage"),
        Metric("Label_recall", "Label recall"),
        # No "better": Entropy is read against the reference labels' entropy. No CI: the
        # plug-in entropy of a case resample is biased low by more than its spread.
        Metric("Entropy", "Entropy", None, decimals=2, percent=False, interval=False),
        Metric("Entropy_reference", "Entropy (reference)", None, 2, False, table=False,
               interval=False),
        Metric("Top-1_image", "Top-1 (image)", table=False),
        Metric("Top-5_image", "Top-5 (image)", table=False),
        Metric("Top-1_case", "Top-1 (case)", table=False),
        Metric("Top-5_case", "Top-5 (case)", table=False),
    )  # fmt: skip
    reference_columns = ("caption", "clinical_history", "final_diagnosis")
    # An empty caption or history leaves the prompt short but the answer scorable.
    required_references = ("final_diagnosis",)
    # Diagnosis is text-only in NOVA: history and findings, no image.
    uses_image = False
    needs_judge = True
    default_judge: ClassVar[Mapping[str, Any]] = {
        "name": "matcher",
        "kind": "diagnosis-matcher",
        "settings": {"embedding_fallback": False},
    }
    agreement_labels = ("top1_correct", "top5_correct")
    figures = ("breakdown", "labels")
    upstream_task = "captioning"
    reserved_model_names: ClassVar[Mapping[str, str]] = {
        "reference": "tasks.diagnosis.findings: reference means the reference caption"
    }
    answer_tokens = 60  # a JSON object with five diagnoses
    stage_modules: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "parse": ("parser",),
        "read": ("verdicts",),
        "score": ("metrics",),
        "statistics": ("bootstrap",),
        "figures": ("figures",),
    }

    def options(self, task_config: Mapping[str, Any]) -> dict[str, Any]:
        return {"unit": task_config.get("unit", "image")}

    def upstream_model(self, task_config: Mapping[str, Any]) -> str | None:
        findings = task_config.get("findings", "reference")
        return None if findings == "reference" else findings

    def prompt_inputs(self, row: Any, upstream: Mapping[str, Any] | None) -> dict[str, Any]:
        """Findings are the reference caption (the paper's setting) or a model's caption."""
        if upstream is None:
            findings = row.caption
        else:
            findings = (upstream.get(row.filename) or {}).get("caption") or ""
        return {"clinical_history": row.clinical_history, "findings": findings}

    def gold_answer(self, reference: Mapping[str, Any]) -> str:
        answer = {
            "most_likely_diagnosis": reference["final_diagnosis"],
            "other_possible_diagnoses": [],
        }
        return json.dumps(answer)

    def parse(self, raw: str, context: AnswerContext) -> Parsed:
        parsed = self.stage("parser").parse_diagnosis(raw)
        if parsed.status != "ok":
            return Parsed(parsed.status, None, parsed.error)
        read: dict[str, Any] = {"ranked": list(parsed.ranked)}
        if parsed.n_alternatives:  # slots naming alternatives ("A vs B"), counted apart
            read["n_alternatives"] = parsed.n_alternatives
        return Parsed("ok", read)

    def parsed_problem(self, parsed: dict[str, Any]) -> str | None:
        ranked = parsed.get("ranked")
        if not isinstance(ranked, list) or not all(isinstance(d, str) for d in ranked):
            return "parsed.ranked must be a list of diagnosis strings"
        return None

    def verdict_counts(self, verdicts: Sequence[Any]) -> dict[str, int]:
        """``top1:<verdict>`` and ``top5:<verdict>`` counts of the judged rankings."""
        counts = Counter(
            f"{k}:{v[k]}" for v in verdicts if isinstance(v, Mapping) for k in TOPS if v.get(k)
        )
        return dict(sorted(counts.items()))

    def _records(self, frame: pd.DataFrame, answers: Answers) -> list[dict[str, Any]]:
        """Each row's reference and ranking, as the verdict and metric code read them."""
        rows = []
        for row in frame.itertuples(index=False):
            ranked, status = answers.get(row.filename, "ranked", [])
            rows.append(
                {
                    "filename": row.filename,
                    "case_id": row.case_id,
                    "reference": row.final_diagnosis,
                    "predictions": ranked,
                    "status": status,
                }
            )
        return rows

    def judge_answers(self, frame: pd.DataFrame, answers: Answers, judge: Any) -> list[dict]:
        verdicts = self.stage("verdicts")
        judged = verdicts.judge_diagnoses(self._records(frame, answers), judge)
        return [{"verdict": v, "labels": verdicts.scored_labels(v)} for v in judged]

    def reading_notes(self, judge: Any) -> dict[str, Any]:
        return {"label_normalization": self.stage("verdicts").label_normalization(judge)}

    def score(
        self, frame: pd.DataFrame, answers: Answers, context: ScoringContext
    ) -> tuple[dict[str, Any], pd.DataFrame]:
        unit = context.options.get("unit", "image")
        verdicts = [context.verdicts.get(filename) for filename in frame["filename"]]
        normalization = context.notes.get("label_normalization", "casefold")
        return self.stage("metrics").aggregate_diagnosis(
            self._records(frame, answers), verdicts, unit, context.judge, normalization
        )

    def replicates(self, entry, dataset, weights) -> dict[str, np.ndarray]:
        labels = entry.extra.get("labels")
        if labels is None:
            labels = entry.extra["labels"] = table_labels(entry)
        unit = entry.scores["metrics"].get("unit", "image")
        return self.stage("bootstrap").diagnosis_replicates(
            entry.per_image, weights, *labels, unit=unit
        )

    def draw_figure(self, family: str, context: Any) -> None:
        self.stage("figures").FAMILIES[family](context)

    def breakdown_values(self, per_image: pd.DataFrame) -> tuple[str, np.ndarray]:
        values = per_image["top1_correct"].astype("boolean").astype("Float64")
        return "Top-1 (%)", 100 * values.to_numpy(dtype=float, na_value=np.nan)

    def table_note(self, estimates: Mapping[str, Mapping[str, float]]) -> str | None:
        values = [m["Entropy_reference"] for m in estimates.values() if "Entropy_reference" in m]
        if not values:
            return None
        return f"Entropy of the reference labels: {values[-1]:.2f} bits."

    def judged_pairs(self, frame: pd.DataFrame, answers: Answers) -> list[tuple[Any, Any]]:
        """(top five, reference) of every image with a ranking, as reading asks the judge."""
        if frame.empty:
            return []
        verdicts = self.stage("verdicts")
        entries = verdicts.records_frame(self._records(frame, answers)).to_dict("records")
        return verdicts.ranked_pairs(entries, verdicts.ranked_lists(entries))


def table_labels(entry: Any) -> tuple[list[str | None], list[str]]:
    """Canonical top-1 labels (None without a prediction) and reference labels of a scored
    entry, as the scorer counted them: the per-image table's ``top1_label`` and
    ``reference_label`` columns, labelled by the reading stage with the judge's
    ``canonical_label`` (or folded text); statistics and figures build no judge."""
    per_image = entry.per_image
    missing = [c for c in LABEL_COLUMNS if c not in per_image]
    if missing or per_image["reference_label"].isna().any():
        raise NovaError(
            f"the per-image scores of diagnosis/{entry.name} have no "
            f"{' and '.join(missing) or 'reference_label on every image'}",
            "re-run `read` and `score` for this model (older score files lack the labels)",
        )
    predicted = [
        label if isinstance(label, str) and label else None for label in per_image["top1_label"]
    ]
    return predicted, [str(label) for label in per_image["reference_label"]]


TASK = Diagnosis()
