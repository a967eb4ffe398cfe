"""How the benchmark counts a caption's keywords: the Clinical/Modality split and set F1.

The split is the benchmark's definition, not a judge's: judges only name keywords. It is
shared by the captioning task's metrics and the judge validation report, which scores
judges against hand labels the same way and imports no task.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Keywords that make up Modality F1 (sequence and plane words); every other keyword is
# clinical.
MODALITY_KEYWORDS = frozenset(
    {"flair", "axial", "sagittal", "t1", "t2", "coronal", "dwi", "t1w", "t2w", "weighted"}
)


def split_keywords(keywords: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
    """(clinical, modality) keywords of one caption, as the benchmark splits them."""
    keywords = frozenset(keywords)
    return keywords - MODALITY_KEYWORDS, keywords & MODALITY_KEYWORDS


def set_f1(reference: frozenset[str] | set[str], predicted: frozenset[str] | set[str]):
    """Set F1 x100 of one image; None when both sets are empty (undefined)."""
    if not reference and not predicted:
        return None
    true_positives = len(set(reference) & set(predicted))
    return 100.0 * 2 * true_positives / (len(reference) + len(predicted))


#: A pair is *confident* when its keyword doubt is at most this many Clinical F1 points.
#: Chosen on the caption set's tuning half read with lexicons thinned at random (as hard
#: as fresh sets: 8.6-8.9 points off overall): about 40% of pairs confident, 3.0-3.2 points
#: off on them (scripts/tools/caption_doubt_report.py --thinned-lexicon).
CONFIDENT_DOUBT = 25.0


def _f1_of_counts(matched: int, n_reference: int, n_prediction: int) -> float | None:
    total = n_reference + n_prediction
    return None if total == 0 else 200.0 * matched / total


def keyword_doubt(
    reference: frozenset[str] | set[str],
    prediction: frozenset[str] | set[str],
    unread: tuple[int, int],
) -> float:
    """How far, in points, the pair's Clinical F1 could move if each unread content word
    (``unread``: reference's, prediction's) named one clinical keyword of its own: down,
    when none of them matches; up, when each matches an unmatched keyword of the other
    caption or another unread word there. 0.0 when both captions were read fully; 100.0
    when neither caption has a keyword but one has unread words (the F1 is anybody's).

    ``reference``, ``prediction``: the clinical keywords of each caption as judged."""
    n_ref, n_pred = len(reference), len(prediction)
    matched = len(set(reference) & set(prediction))
    unread_ref, unread_pred = unread
    if not unread_ref and not unread_pred:
        return 0.0
    now = _f1_of_counts(matched, n_ref, n_pred)
    if now is None:
        return 100.0
    lowest = _f1_of_counts(matched, n_ref + unread_ref, n_pred + unread_pred) or 0.0
    # The most matches the unread words could add: against the other side's unmatched
    # keywords first, then with each other; adding only those maximizes F1.
    ref_to_pred = min(unread_ref, n_pred - matched)
    pred_to_ref = min(unread_pred, n_ref - matched)
    with_each_other = min(unread_ref - ref_to_pred, unread_pred - pred_to_ref)
    gained = ref_to_pred + pred_to_ref + with_each_other
    n_ref_then = n_ref + ref_to_pred + with_each_other
    highest = _f1_of_counts(matched + gained, n_ref_then, n_pred + pred_to_ref + with_each_other)
    return max(now - lowest, (highest or 0.0) - now)


def is_confident(doubt: float | None) -> bool | None:
    """Whether a pair's keyword doubt is small enough to trust its keyword F1; None where
    the judge gives no doubt (one that reads every word: an LLM)."""
    return None if doubt is None else doubt <= CONFIDENT_DOUBT


def pair_doubt(reference: Any, prediction: Any) -> float | None:
    """:func:`keyword_doubt` of a judged pair (two ``KeywordSet``: ``keywords`` and
    ``unread_words``); None where a side does not count its unread words."""
    if reference.unread_words is None or prediction.unread_words is None:
        return None
    return keyword_doubt(
        split_keywords(reference.keywords)[0],
        split_keywords(prediction.keywords)[0],
        (reference.unread_words, prediction.unread_words),
    )
