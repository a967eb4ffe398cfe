"""The judged pairs the cost estimate counts (Task.judged_pairs) are the pairs reading asks
the task's judge, answer for answer, odd answers included."""

from __future__ import annotations

import pandas as pd
import pytest

from novabench.tasks import Answers, get_task
from support import RecordingJudge

FRAME = pd.DataFrame(
    {
        "filename": ["a.png", "b.png", "c.png", "d.png"],
        "case_id": ["c1", "c1", "c2", "c3"],
        "caption": ["Axial T2.", "Sagittal T1.", "Axial FLAIR.", "Coronal T1."],
        "final_diagnosis": ["Glioma", "Glioma", "Meningioma", "Abscess"],
    }
)
READ = {
    # A caption, an ok answer read without one, a failed request, no answer on file.
    "captioning": [
        ("ok", {"caption": "A lesion."}),
        ("ok", None),
        ("error", None),
    ],
    # A list, another harness's " | "-joined string, a failed request.
    "diagnosis": [
        ("ok", {"ranked": ["Glioma", "Metastasis"]}),
        ("ok", {"ranked": "Meningioma | Glioma"}),
        ("error", None),
    ],
}


@pytest.mark.parametrize("task", ["captioning", "diagnosis"])
def test_judged_pairs_are_what_reading_asks_the_judge(task):
    records = [
        {"filename": name, "status": status, "read": read}
        for name, (status, read) in zip(FRAME["filename"], READ[task], strict=False)
    ]
    spec, judge = get_task(task), RecordingJudge()
    spec.judge_answers(FRAME, Answers(records), judge)
    assert judge.asked and judge.asked == spec.judged_pairs(FRAME, Answers(records))
