"""The per-caption captioning judge: one request per caption."""

from __future__ import annotations

from collections.abc import Sequence

from novabench.judges.base import KeywordSet, PairVerdict
from novabench.judges.llm.answers import EMPTY, read_keywords
from novabench.judges.llm.base import LLMJudge


class LLMKeywordJudge(LLMJudge):
    """Captioning judge, one request per caption (``protocol: per-caption``): keywords by
    category and a normal/abnormal label from an LLM.

    Implements the caption-judge interface (``extract``, ``extract_many``, ``identity``) and
    ``judge_pairs``, which scores use: a pair whose caption the judge could not read
    (within ``max_failure_rate``) has no verdict (None). ``extract``/``extract_many`` give
    such a caption an empty, normal KeywordSet (counted in ``usage``).
    """

    task = "captioning"
    protocol = "per-caption"
    # Each caption's raw and standardized keywords in five categories and a label.
    answer_tokens = 175
    requests_per_image = 2  # the reference and the prediction

    def extract(self, text: str) -> KeywordSet:
        return self.extract_many([text])[0]

    def extract_many(self, texts: Sequence[str]) -> list[KeywordSet]:
        """Keywords of every text, the requests sent concurrently; empty texts need none."""
        verdicts = self._verdicts(texts)
        return [verdicts[t] or EMPTY for t in texts]

    def judge_pair(self, reference: str, prediction: str) -> PairVerdict:
        return self.judge_pairs([(reference, prediction)])[0]

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
        """Each caption of each pair judged alone; None where either has no verdict."""
        verdicts = self._verdicts([text for pair in pairs for text in pair])
        out: list[PairVerdict] = []
        for reference, prediction in pairs:
            ref, pred = verdicts[reference], verdicts[prediction]
            out.append(None if ref is None or pred is None else (ref, pred))
        return out

    def request_prompts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The distinct prompts that judging ``pairs`` asks (one per non-empty caption)."""
        asked = [t for t in dict.fromkeys(t for pair in pairs for t in pair) if t and t.strip()]
        return list(dict.fromkeys(self.template.format(caption=t.strip()) for t in asked))

    def _verdicts(self, texts: Sequence[str]) -> dict[str, KeywordSet | None]:
        """Text -> its KeywordSet (None: no verdict); an empty text has no keywords."""
        asked = [t for t in dict.fromkeys(texts) if t and t.strip()]
        prompts = [self.template.format(caption=t.strip()) for t in asked]
        answers = self._ask(prompts, lambda _, raw: read_keywords(raw))
        verdicts: dict[str, KeywordSet | None] = dict.fromkeys(texts, EMPTY)
        verdicts.update(zip(asked, answers, strict=True))
        return verdicts
