"""Why a value of the report is "–": the reason read from a score file, per case."""

from __future__ import annotations

import pytest

from novabench.report import missing
from novabench.tasks import get_task

BERT_F1 = get_task("captioning").metric("BERT_F1")
METEOR = get_task("captioning").metric("METEOR")
UNREAD = get_task("captioning").metric("Unread_share")


@pytest.mark.parametrize(
    ("metrics", "metric", "reason"),
    [
        # Not computed, the score file says why (its fix left to the score file).
        (
            {"BERT_F1": None, "bertscore": {"status": "unavailable", "reason": "BERT F1 not "
             "computed: encoder x is not cached; fix: download it"}},
            BERT_F1,
            "BERT F1 not computed: encoder x is not cached",
        ),
        (
            {"BERT_F1": None, "bertscore": {"status": "disabled", "reason": "bertscore.enabled "
             "is false"}},
            BERT_F1,
            "not computed: bertscore.enabled is false",
        ),
        # Computed: the record of what computed it is no reason.
        ({"BERT_F1": 81.0, "bertscore": {"model": "roberta-large"}}, BERT_F1, None),
        ({"BERT_F1": None, "bertscore": {"model": "roberta-large"}}, BERT_F1, missing.UNDEFINED),
        ({"METEOR": None}, METEOR, missing.UNDEFINED),
        ({"METEOR": float("nan")}, METEOR, missing.UNDEFINED),
        ({}, METEOR, missing.NOT_IN_SCORE_FILE),
        ({"METEOR": 0.0}, METEOR, None),
        ({"METEOR": True}, METEOR, missing.UNDEFINED),  # not a number
        # A metric that says why it can be null (a judge that gives no unread share).
        ({"Unread_share": None}, UNREAD, UNREAD.when_undefined),
    ],
)  # fmt: skip
def test_metric_reason(metrics, metric, reason):
    assert missing.metric_reason({"metrics": metrics}, metric) == reason


def test_no_score_file_and_no_statuses():
    assert missing.metric_reason(None, METEOR) == missing.NO_SCORE_FILE
    assert missing.share_reason("human") == missing.RATER_STATUSES
    assert missing.share_reason("model") == missing.NO_STATUSES
