"""The paired captioning judge (the paper's): one request per (reference, prediction)
pair."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from novabench.judges.base import PairVerdict
from novabench.judges.llm.answers import EMPTY, PairedVerdict, read_paired
from novabench.judges.llm.base import LLMJudge

# What the paired prompt shows for a side without text (e.g. a failed prediction). That
# side's verdict is then no keywords and normal, whatever the judge wrote for it.
NO_DESCRIPTION = "(no description)"


class LLMPairedCaptionJudge(LLMJudge):
    """Captioning judge, one request per (reference, prediction) pair (``protocol:
    paired``, the paper's): both captions' keywords standardized together, both labels.

    Implements the paired caption-judge interface (``judge_pair``, ``judge_pairs``,
    ``identity``); ``paired_verdicts`` gives the whole answer (raw keywords, agreement).
    A pair the judge could not answer or whose answer could not be read (within
    ``max_failure_rate``) has no verdict: None, counted in ``usage``. It has no
    ``extract``: a caption alone is not what it judges.
    """

    task = "captioning"
    protocol = "paired"
    answer_tokens = 350  # both captions' keywords and both labels

    def judge_pair(self, reference: str, prediction: str) -> PairVerdict:
        """The (reference, prediction) KeywordSets of one pair; None: no verdict."""
        return self.judge_pairs([(reference, prediction)])[0]

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
        """Every pair's KeywordSets, the requests sent concurrently; None: no verdict."""
        return [
            None if verdict is None else (verdict.reference, verdict.prediction)
            for verdict in self.paired_verdicts(pairs)
        ]

    def paired_verdicts(self, pairs: Sequence[tuple[str, str]]) -> list[PairedVerdict | None]:
        """Every pair's whole verdict; a pair of two empty captions needs no request."""
        cleaned = [(_text(reference), _text(prediction)) for reference, prediction in pairs]
        asked = [pair for pair in dict.fromkeys(cleaned) if any(pair)]
        prompts = [self._prompt(*pair) for pair in asked]
        answers = self._ask(prompts, lambda _, raw: read_paired(raw))
        verdicts: dict[tuple[str, str], PairedVerdict | None] = {
            ("", ""): PairedVerdict(EMPTY, EMPTY)
        }
        for (reference, prediction), verdict in zip(asked, answers, strict=True):
            if verdict is not None:
                verdict = _blank_empty_sides(verdict, reference, prediction)
                self.counts["label_conflicts"] += _label_conflict(verdict)
            verdicts[(reference, prediction)] = verdict
        return [verdicts[pair] for pair in cleaned]

    def _prompt(self, reference: str, prediction: str) -> str:
        return self.template.format(
            reference=reference or NO_DESCRIPTION, prediction=prediction or NO_DESCRIPTION
        )

    def request_prompts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The distinct prompts that judging ``pairs`` asks (two empty captions: none)."""
        cleaned = [(_text(reference), _text(prediction)) for reference, prediction in pairs]
        return list(dict.fromkeys(self._prompt(*pair) for pair in cleaned if any(pair)))


def _text(caption: Any) -> str:
    return " ".join(str(caption or "").split())


def _blank_empty_sides(verdict: PairedVerdict, reference: str, prediction: str) -> PairedVerdict:
    """A side without text has no keywords and is normal, whatever the judge wrote."""
    return PairedVerdict(
        verdict.reference if reference else EMPTY,
        verdict.prediction if prediction else EMPTY,
        verdict.labels_agree,
        verdict.raw,
    )


def _label_conflict(verdict: PairedVerdict) -> int:
    """1 when the judge's stated agreement contradicts its two labels (the labels count)."""
    if verdict.labels_agree is None:
        return 0
    same = verdict.reference.abnormal == verdict.prediction.abnormal
    return int(same != verdict.labels_agree)
