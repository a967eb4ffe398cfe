"""Task 2's reading stage: the judge's keywords and labels of each (reference, caption) pair.

Per scored image (``judge_captions``): ``judged`` (False where the judge gave no verdict:
a failed request or an unreadable answer, counted by the judge) and, when judged,
``reference`` and ``prediction``, each ``{keywords, abnormal, unread_share, unread_words}``
(:class:`novabench.judges.base.KeywordSet` as plain data; keywords sorted), and the pair's
``keyword_doubt`` (Clinical F1 points its unread words could move; None where the judge
does not count them) and ``confident`` (doubt at most ``CONFIDENT_DOUBT``; None likewise):
:mod:`novabench.caption_keywords`. An image
without a caption is judged as an empty caption, as scoring counts it. Scoring
(:mod:`.metrics`) turns these into keyword and binary F1 and runs no judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from novabench.caption_keywords import is_confident, pair_doubt
from novabench.judge_verdicts import KeywordSet, PairVerdict, judge_caption_pairs


def hypotheses(scored: Sequence[Mapping[str, Any]]) -> list[str]:
    """The caption each scored record is read as: its text if ``ok``, else ""."""
    # parse_error (and error or refusal, unless excluded): scored as an empty caption.
    return [r["prediction"] if r["status"] == "ok" else "" for r in scored]


def _plain(keywords: KeywordSet) -> dict[str, Any]:
    return {
        "keywords": sorted(keywords.keywords),
        "abnormal": bool(keywords.abnormal),
        "unread_share": keywords.unread_share,
        "unread_words": keywords.unread_words,
    }


def keyword_set(stored: Mapping[str, Any]) -> KeywordSet:
    """A stored side of a verdict back as the judge gave it."""
    return KeywordSet(
        frozenset(stored["keywords"]),
        stored["abnormal"],
        stored["unread_share"],
        stored.get("unread_words"),  # absent from verdicts read before it was counted
    )


def caption_verdict(verdict: PairVerdict) -> dict[str, Any]:
    if verdict is None:
        return {"judged": False, "reference": None, "prediction": None}
    reference, prediction = verdict
    doubt = pair_doubt(reference, prediction)
    return {
        "judged": True,
        "reference": _plain(reference),
        "prediction": _plain(prediction),
        "keyword_doubt": doubt,
        "confident": is_confident(doubt),
    }


def caption_pairs(scored: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    """(reference, caption as read) of every scored record: what the judge is asked."""
    return list(zip((r["reference"] for r in scored), hypotheses(scored), strict=True))


def judge_captions(scored: Sequence[Mapping[str, Any]], judge: Any) -> list[dict[str, Any]]:
    """Every scored record's verdict (the module docstring's fields), in order."""
    return [caption_verdict(v) for v in judge_caption_pairs(judge, caption_pairs(scored))]


def pair_verdicts(verdicts: Sequence[Mapping[str, Any] | None]) -> dict[int, tuple]:
    """Image index -> the (reference, prediction) keyword sets, for every judged image."""
    return {
        i: (keyword_set(v["reference"]), keyword_set(v["prediction"]))
        for i, v in enumerate(verdicts)
        if v and v.get("judged")
    }


def agreement_labels(verdict: Mapping[str, Any] | None) -> dict[str, bool | None]:
    """``abnormal``: the judge's label of the model's caption; None where it gave none."""
    if not verdict or not verdict.get("judged"):
        return {"abnormal": None}
    return {"abnormal": bool(verdict["prediction"]["abnormal"])}
