"""A scripted LLM judge for the test chat server (``openai_server.FakeOpenAI``) that answers
the live check's hand-labelled pairs from their hand labels: right on purpose, or wrong on
purpose, under a served model name and system fingerprint of the test's choosing."""

from __future__ import annotations

import json
import re

from novabench.judges.llm import live_check
from openai_server import Reply


def diagnosis_of(prompt: str) -> tuple[str, list[str]]:
    reference = prompt.split("Reference diagnosis:\n", 1)[1].split("\n\n", 1)[0]
    block = prompt.split("most likely first:\n", 1)[1].split("\n\n", 1)[0]
    return reference, [re.sub(r"^\d+\. ", "", line) for line in block.splitlines()]


def pair_of(prompt: str) -> tuple[str, str]:
    reference = prompt.split("Reference description (GT):\n", 1)[1].split("\n\n", 1)[0]
    prediction = prompt.split("Predicted description (Pred):\n", 1)[1].split("\n\nAnswer", 1)[0]
    return reference, prediction


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
