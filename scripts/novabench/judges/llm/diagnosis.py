"""The diagnosis judge: which ranked candidate first names the reference's disease."""

from __future__ import annotations

from collections.abc import Sequence

from novabench.judges.base import RankedVerdict, Verdict
from novabench.judges.llm.answers import read_first_match
from novabench.judges.llm.base import LLMJudge
from novabench.judges.llm.settings import DIAGNOSIS_PROTOCOL


class LLMDiagnosisJudge(LLMJudge):
    """Diagnosis judge: which ranked candidate first names the reference's disease.

    Implements the scorer's diagnosis-judge interface (``match_ranked``,
    ``match_ranked_many``, ``identity``). An image the judge could not decide (within
    ``max_failure_rate``) counts as not matched.
    """

    task = "diagnosis"
    protocol = DIAGNOSIS_PROTOCOL
    answer_tokens = 12  # one rank in a small JSON object

    def match_ranked(self, ranked: Sequence[str], reference: str) -> tuple[bool, bool]:
        return self.match_ranked_many([(ranked, reference)])[0]

    def judge_ranked(self, ranked: Sequence[str], reference: str) -> RankedVerdict:
        return self.judge_ranked_many([(ranked, reference)])[0]

    def judge_ranked_many(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[RankedVerdict]:
        """Each pair's verdict; a failed request or an unreadable answer is undecided and
        marked ``failed`` (counted, never taken as "no match")."""
        out = []
        for rank in self._ranks(pairs):
            if rank is None:
                out.append(RankedVerdict("undecided", "undecided", self.name, failed=True))
            else:
                top1: Verdict = "match" if rank == 1 else "no_match"
                top5: Verdict = "match" if 1 <= rank <= 5 else "no_match"
                out.append(RankedVerdict(top1, top5, self.name))
        return out

    def match_ranked_many(
        self, pairs: Sequence[tuple[Sequence[str], str]]
    ) -> list[tuple[bool, bool]]:
        """(Top-1, Top-5) correctness of each (ranked candidates, reference) pair."""
        return [verdict.scored for verdict in self.judge_ranked_many(pairs)]

    def _ranks(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[int | None]:
        """Per pair, the rank of the first candidate that names the reference (0: none
        does); None: no verdict (a failed request, an unreadable answer). A pair without a
        candidate is no match (0)."""
        prompts: list[str | None] = []
        counts: list[int] = []
        for ranked, reference in pairs:
            prompt, n = self._prompt(ranked, reference)
            prompts.append(prompt)
            counts.append(n)
        asked = [p for p in prompts if p is not None]
        # The rank must name one of the candidates of *its* prompt.
        listed = {p: n for p, n in zip(prompts, counts, strict=True) if p is not None}
        verdicts = dict(
            zip(
                asked,
                self._ask(asked, lambda prompt, raw: read_first_match(raw, listed[prompt])),
                strict=True,
            )
        )
        return [verdicts.get(prompt) if prompt is not None else 0 for prompt in prompts]

    def _prompt(self, ranked: Sequence[str], reference: str) -> tuple[str | None, int]:
        """The prompt of one ranked list and the candidates it lists (none: no prompt)."""
        # One line per candidate, so that the numbering stays unambiguous.
        top = [" ".join(str(item).split()) for item in list(ranked)[:5]]
        top = [item for item in top if item]
        if not top:
            return None, 0
        candidates = "\n".join(f"{i}. {item}" for i, item in enumerate(top, start=1))
        reference = " ".join(str(reference).split())
        return self.template.format(reference=reference, candidates=candidates), len(top)

    def request_prompts(self, pairs: Sequence[tuple[Sequence[str], str]]) -> list[str]:
        """The distinct prompts that judging ``pairs`` asks (a list without a candidate:
        none)."""
        prompts = (self._prompt(ranked, reference)[0] for ranked, reference in pairs)
        return list(dict.fromkeys(p for p in prompts if p is not None))
