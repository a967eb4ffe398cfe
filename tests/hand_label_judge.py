"""A scripted LLM judge for the test chat server (``openai_server.FakeOpenAI``) that answers
the live check's hand-labelled pairs from their hand labels: right on purpose, or wrong on
purpose, under a served model name and system fingerprint of the test's choosing."""

from __future__ import annotations

import json

from novabench.judges.llm import live_check
from openai_server import Reply
from support import diagnosis_of, pair_of

# The hand labels of every held-out pair the check can draw, as the prompts show the pair.
HAND_MATCH = {
    (" ".join(p["reference"].split()), " ".join(p["prediction"].split())): bool(p["match"])
    for p in live_check.sample_pairs("diagnosis", 10**6, 0)
}
HAND_KEYWORDS = {
    (" ".join(p["reference"].split()), " ".join(p["prediction"].split())): p
    for p in live_check.sample_pairs("captioning", 10**6, 0)
}


def hand_side(labels: dict) -> dict:
    return {"findings": labels["clinical"], "sequence": labels["modality"]}


def judge_from_hand_labels(seen, wrong: bool = False, model: str = "judge-v1", fp: str = "fp_1"):
    """A judge that answers the check's pairs from their hand labels (``wrong``: the
    opposite diagnosis verdict, other keywords of the prediction); any other ranked list is
    matched where a candidate is the reference word for word, any other caption pair gets
    one shared keyword."""
    if "Reference diagnosis:" in seen.prompt:
        reference, candidates = diagnosis_of(seen.prompt)
        if (reference, candidates[0]) in HAND_MATCH:
            rank = int(HAND_MATCH[reference, candidates[0]] != wrong)
        else:
            same = [i for i, c in enumerate(candidates, 1) if c.lower() == reference.lower()]
            rank = same[0] if same else 0
        return Reply(json.dumps({"first_match": rank}), served_model=model, system_fingerprint=fp)
    pair = pair_of(seen.prompt)
    labelled = HAND_KEYWORDS.get(pair)
    if labelled is None:
        sides = {"gt": {"findings": ["mass"]}, "pred": {"findings": ["mass"]}}
        labels = {"gt_label": "abnormal", "pred_label": "abnormal"}
    else:
        ref, pred = labelled["reference_labels"], labelled["prediction_labels"]
        if wrong:
            pred = {"clinical": ["nothing alike"], "modality": []}
        sides = {"gt": hand_side(ref), "pred": hand_side(pred)}
        labels = {"gt_label": "abnormal", "pred_label": "abnormal"}
    answer = {"standardized_keywords": sides, **labels}
    return Reply(json.dumps(answer), served_model=model, system_fingerprint=fp)


class DriftingJudge:
    """A chat-server script: the hand-label judge (served as judge-v1, fp_1) until
    ``drifted`` is set, then wrong on purpose under another served model (judge-v2, fp_2)."""

    def __init__(self):
        self.drifted = False

    def __call__(self, seen) -> Reply:
        if self.drifted:
            return judge_from_hand_labels(seen, wrong=True, model="judge-v2", fp="fp_2")
        return judge_from_hand_labels(seen)
