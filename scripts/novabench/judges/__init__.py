"""Judges that turn free text into comparable labels for the text metrics.

See :mod:`novabench.judges.base`: judge kinds register themselves by module, and
:func:`make_judge` builds the configured one.
"""

from novabench.judges.base import (
    CaptionJudge,
    DiagnosisJudge,
    JudgeKind,
    KeywordSet,
    PairedCaptionJudge,
    PairVerdict,
    judge_caption_pairs,
    judge_kind,
    judge_kinds,
    make_judge,
    register_judge_kind,
)

__all__ = [
    "CaptionJudge",
    "DiagnosisJudge",
    "JudgeKind",
    "KeywordSet",
    "PairVerdict",
    "PairedCaptionJudge",
    "judge_caption_pairs",
    "judge_kind",
    "judge_kinds",
    "make_judge",
    "register_judge_kind",
]
