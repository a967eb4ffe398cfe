"""How the benchmark counts a caption's keywords: the Clinical/Modality split and set F1.

The split is the benchmark's definition, not a judge's: judges only name keywords. It is
shared by the captioning task's metrics and the judge validation report, which scores
judges against hand labels the same way and imports no task.
"""

from __future__ import annotations

from collections.abc import Iterable

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
