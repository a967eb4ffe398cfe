"""What a judge gives, and the protocols judges answer to: a caption judge's keyword sets,
a diagnosis judge's ranked verdicts, and the two calls that get them from any judge.

Plain data that the reading stage writes and the tasks' scorers read back, kept outside
the judges package (whose registry and factory :mod:`novabench.judges.base` re-exports
these names with), so that a score job, which counts verdicts, has no judge in its code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class KeywordSet:
    """A caption judge's verdict on one caption: normalized keywords and its label.

    Negated findings carry the prefix ``neg:`` ("neg:hemorrhage").
    """

    keywords: frozenset[str]
    abnormal: bool
    #: Share of the caption's content words (outside stop words) the judge could not
    #: read; None: the judge does not say (an LLM judge reads every word).
    unread_share: float | None = field(default=None, compare=False)
    #: How many of those content words it could not read (what the pair's keyword doubt,
    #: :func:`novabench.caption_keywords.keyword_doubt`, counts); None: it does not say.
    unread_words: int | None = field(default=None, compare=False)


NEGATED_PREFIX = "neg:"


class CaptionJudge(Protocol):
    """What captioning scores need: a verdict on each caption. A judge may also have
    ``extract_many(texts)``; it is then given every caption at once (an LLM judge sends its
    requests concurrently). A judge that reads a caption only against its reference has
    :class:`PairedCaptionJudge`'s methods instead; scores prefer those where present
    (:func:`judge_caption_pairs`)."""

    def extract(self, text: str) -> KeywordSet: ...

    def identity(self) -> dict[str, Any]: ...


#: A caption judge's verdict on one (reference, prediction) pair; None: the judge gave
#: none (a failed request or an unreadable answer, counted by the judge).
PairVerdict = tuple[KeywordSet, KeywordSet] | None


class PairedCaptionJudge(Protocol):
    """A caption judge that sees the reference and the prediction together, so that it
    can write the same concept as the same string on both sides (the paper's protocol)."""

    def judge_pair(self, reference: str, prediction: str) -> PairVerdict: ...

    def judge_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]: ...

    def identity(self) -> dict[str, Any]: ...


def judge_caption_pairs(judge: Any, pairs: Sequence[tuple[str, str]]) -> list[PairVerdict]:
    """Every (reference, prediction) pair's keywords, from any caption judge: in one call
    to ``judge_pairs`` where the judge has it, else pair by pair with ``judge_pair``, else
    per caption (all captions at once where it has ``extract_many``: references first,
    then predictions)."""
    pairs = list(pairs)
    if hasattr(judge, "judge_pairs"):
        return list(judge.judge_pairs(pairs))
    if hasattr(judge, "judge_pair"):
        return [judge.judge_pair(reference, prediction) for reference, prediction in pairs]
    references = [reference for reference, _ in pairs]
    predictions = [prediction for _, prediction in pairs]
    if hasattr(judge, "extract_many"):
        verdicts = list(judge.extract_many([*references, *predictions]))
    else:
        verdicts = [judge.extract(text) for text in [*references, *predictions]]
    return list(zip(verdicts[: len(pairs)], verdicts[len(pairs) :], strict=True))


#: A diagnosis judge's answer on one question: a judge that cannot decide says so, and
#: "undecided" is never scored as a certainty (scores show it beside the numbers).
Verdict = Literal["match", "no_match", "undecided"]
VERDICTS: tuple[Verdict, ...] = ("match", "no_match", "undecided")


@dataclass(frozen=True)
class RankedVerdict:
    """A diagnosis judge's verdict on one image's ranked list, best first: does the top
    candidate (``top1``) and does any of the top five (``top5``) name the reference.

    ``judge`` names the judge that decided (a cascade's stage); ``failed`` marks a judge
    request that failed or gave an unreadable answer: both verdicts are then undecided and
    the failure is counted, never taken as a verdict.
    """

    top1: Verdict
    top5: Verdict
    judge: str = ""
    failed: bool = False

    @property
    def decided(self) -> bool:
        return "undecided" not in (self.top1, self.top5)

    @property
    def scored(self) -> tuple[bool, bool]:
        """(Top-1 correct, Top-5 correct) as the scores count them: only a match is
        correct, undecided counts as no match (its share is reported beside)."""
        return self.top1 == "match", self.top5 == "match"


def ranked_verdict(candidates: Sequence[Verdict], judge: str = "") -> RankedVerdict:
    """The ranked list's verdict from each candidate's (top five, best first): Top-5 is a
    match when one candidate matches, no match when every one does not, else undecided."""
    top = list(candidates)[:5]
    if not top:
        return RankedVerdict("no_match", "no_match", judge)
    if "match" in top:
        top5: Verdict = "match"
    elif all(v == "no_match" for v in top):
        top5 = "no_match"
    else:
        top5 = "undecided"
    return RankedVerdict(top[0], top5, judge)


class DiagnosisJudge(Protocol):
    """What diagnosis scores need: a :class:`RankedVerdict` per (ranked list, reference).
    A judge may also have ``judge_ranked_many(pairs)`` for every image at once, and
    ``canonical_label(text)`` to count distinct labels (Coverage, Entropy). A judge
    written before verdicts had three values (``match_ranked`` giving two booleans) is
    still read, every verdict of it decided (:func:`judge_ranked`)."""

    def judge_ranked(self, ranked: Sequence[str], reference: str) -> RankedVerdict: ...

    def identity(self) -> dict[str, Any]: ...


def judge_ranked(
    judge: Any, pairs: Sequence[tuple[Sequence[str], str]], name: str = ""
) -> list[RankedVerdict]:
    """Every (ranked list, reference) pair's verdict from any diagnosis judge: in one call
    to ``judge_ranked_many`` where it has it, else pair by pair; a two-valued judge's
    booleans become decided verdicts."""
    pairs = list(pairs)
    if hasattr(judge, "judge_ranked_many"):
        return list(judge.judge_ranked_many(pairs))
    if hasattr(judge, "judge_ranked"):
        return [judge.judge_ranked(ranked, reference) for ranked, reference in pairs]
    if hasattr(judge, "match_ranked_many"):
        booleans = list(judge.match_ranked_many(pairs))
    else:
        booleans = [judge.match_ranked(ranked, reference) for ranked, reference in pairs]

    def verdict(value: Any) -> Verdict:
        return "match" if value else "no_match"

    return [RankedVerdict(verdict(t1), verdict(t5), name) for t1, t5 in booleans]
