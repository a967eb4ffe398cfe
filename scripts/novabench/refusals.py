"""Refusals: answers in which a model declines the task instead of doing it.

A refusal is not an answer. Every task gives it the status ``refusal`` and scores it as it
scores a failed request (status ``error``), and it is counted apart from both errors and
parse failures (``n_refusal``, ``refusal_rate``). A refusal is recognized in two ways:

- the API says so: an OpenAI-compatible server fills ``message.refusal`` (read by the
  ``openai_compatible`` adapter, which marks the response);
- the answer text says so: :func:`refusal_reason`, the one detector every task uses.

How the text is read. The answer is cut into clauses (at sentence ends, line breaks, ``;``,
``:``, commas and "but / however / although"), and each clause is one of

- a *refusal*: the model, in the first person, declines or says it cannot do the work:
  "I can't help with that", "I'm unable to interpret medical images", "I must decline to
  provide a diagnosis", "I won't be able to assist";
- *filler*: an apology ("I'm sorry"), "as an AI (language model)", advice to see a
  professional ("please consult a radiologist", "a medical professional should review it"),
  or a remark about medical images or advice in general;
- *content*: anything else (a finding, a box, a JSON answer, a differential).

The answer is a refusal when it has no content clause and has a refusal clause or advice to
see a professional (the whole answer "Consult a radiologist."). So a caption that says
"malignancy cannot be excluded" (no first person declining), a differential that ends
"a neurosurgical consult is advised", "I can't give a definitive diagnosis, but the
ring-enhancing lesion suggests an abscess" and "I cannot identify any abnormality" (a
"no finding" answer: finding words are not refusal verbs) are not refusals.

Measured on validation/refusals.jsonl (hand-written refusals and non-refusals, kept out of
the tuning of these patterns): see tests/test_refusals.py, which prints precision and
recall and holds them above a floor. The patterns are English only.
"""

from __future__ import annotations

import re

# Where an answer is cut into clauses.
_CLAUSE_BREAK = re.compile(
    r"(?<=[.!?])\s+|\n+|[;:,]|\b(?:but|however|although|though|yet)\b", re.IGNORECASE
)

# The first person declining: "I can't", "I'm unable to", "I won't be able to", "I must
# decline to", "I am not allowed to" (the adverbs models put between: really, simply...).
_DECLINE = (
    r"(?-i:\bI\b)(?:'m|\s+am)?(?:\s+(?:really|truly|simply|just|currently|afraid|still))?\s+"
    r"(?:can(?:no|')?t|can\s+not|could(?:n't|\s+not)|(?:am\s+|'m\s+)?(?:unable|not\s+able)"
    r"|won't|will\s+not|must\s+decline|have\s+to\s+decline|need\s+to\s+decline|decline"
    r"|(?:am\s+|'m\s+)?not\s+(?:allowed|permitted|in\s+a\s+position)"
    r"|do(?:n't|\s+not)\s+(?:have\s+the\s+ability|feel\s+comfortable))"
)
# What a model declines to do. Finding verbs (see, identify, detect, find, locate) are not
# here: "I cannot identify any abnormality" is a "no finding" answer, not a refusal.
_VERB = (
    r"(?:help|assist|provide|offer|give|interpret|analy[sz]e|diagnose|make|read|review"
    r"|evaluate|assess|comply|fulfil+|do\s+(?:that|this|so)|process|describe|view|examine"
    r"|answer|respond|determine|perform|share|support|proceed)"
)
_REFUSAL = re.compile(
    rf"{_DECLINE}(?:\s+(?:be\s+able\s+to|to))?(?:\s+\w+){{0,2}}?\s+{_VERB}\b"
    r"|(?-i:\bI\b)\s+(?:must|have\s+to)\s+decline\b"
    r"|\bnot\s+something\s+I\s+can\s+(?:help|assist|do)\b"
    rf"|^{_DECLINE}$",  # "I can't." as the whole clause
    re.IGNORECASE,
)
# Filler: apologies, "as an AI", advice to see a professional, remarks about medical
# images or advice in general.
_APOLOGY = re.compile(
    r"^(?:(?:I'm|I\s+am|I)\s+)?(?:really\s+|very\s+|so\s+|truly\s+)?"
    r"(?:sorry|afraid|apologi[sz]e|unfortunately|regrettably)\b(?:\W+\w+){0,4}\W*$",
    re.IGNORECASE,
)
_AI = re.compile(
    r"\b(?:as\s+an?|I'm\s+an?|I\s+am\s+an?|being\s+an?)\s+(?:AI|artificial\s+intelligence"
    r"|language\s+model|assistant|chatbot)\b",
    re.IGNORECASE,
)
_PROFESSIONAL = re.compile(
    r"\b(?:radiologists?|neuroradiologists?|physicians?|doctors?|clinicians?|specialists?"
    r"|neurologists?|neurosurgeons?|medical\s+(?:professionals?|experts?|specialists?|team)"
    r"|health\s*care\s+(?:providers?|professionals?|team)|licensed|qualified\s+\w+)\b",
    re.IGNORECASE,
)
_GENERAL = re.compile(
    r"\b(?:medical|radiolog\w*|clinical)\s+(?:images?|imaging|scans?|advice|opinions?"
    r"|diagnos\w*|interpretations?|expertise|training)\b"
    r"|\bfor\s+an?\s+(?:accurate|proper|professional|definitive)\s+\w+"
    r"|\bif\s+you\s+have\s+(?:any\s+)?(?:concerns|questions)\b"
    # "This image appears to be a brain MRI": says nothing about the image's content.
    r"|^(?:this|the)\s+(?:image|picture|scan)\s+(?:appears\s+to\s+be|seems\s+to\s+be|looks"
    r"\s+like|is)\s+an?\s+(?:brain\s+|head\s+|medical\s+)?(?:MRI|scan|image)(?:\s+of\s+the\s+"
    r"(?:brain|head))?$",
    re.IGNORECASE,
)


def clauses(text: str) -> list[str]:
    """The non-empty clauses of ``text``, as the detector reads them."""
    parts = (part.strip(" \t\"'()[]{}-*.!?") for part in _CLAUSE_BREAK.split(text) if part)
    return [part for part in parts if part]


def _kind(clause: str) -> str:
    if _REFUSAL.search(clause):
        return "refusal"
    if _PROFESSIONAL.search(clause):
        return "professional"
    if _APOLOGY.match(clause) or _AI.search(clause) or _GENERAL.search(clause):
        return "filler"
    return "content"


def refusal_reason(text: str | None) -> str | None:
    """Why ``text`` is a refusal (the clause that declines, quoted), or None.

    None for any answer with content, for an empty answer (a parse failure, not a
    refusal) and for an answer of fillers alone without advice to see a professional.
    """
    if not text or not text.strip():
        return None
    kinds = [(_kind(clause), clause) for clause in clauses(text)]
    if not kinds or any(kind == "content" for kind, _ in kinds):
        return None
    declining = [clause for kind, clause in kinds if kind == "refusal"]
    if declining:
        return f"the model declined: {declining[0][:80]!r}"
    referring = [clause for kind, clause in kinds if kind == "professional"]
    if referring:
        return f"the model only referred to a professional: {referring[0][:80]!r}"
    return None
