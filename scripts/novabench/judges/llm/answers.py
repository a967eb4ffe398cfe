"""Reading an LLM judge's answers: a keyword list, a paired answer, a first match.

Read only in the shape the prompt asks for: the whole answer is one JSON object, or one
fenced block holding it. Text around it or a second object makes the answer unreadable, so
that a server echoing the prompt (whose example object comes first) or a model answer
quoting a verdict cannot steer the reading. Inside that object the syntax is read
tolerantly (:mod:`novabench.answer_json`: single quotes, trailing commas) and the values
normalized (:mod:`.normalize`); an answer not in the asked form raises
:class:`UnreadableAnswer`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from novabench.answer_json import json_spans, load_lenient
from novabench.judges.base import NEGATED_PREFIX, KeywordSet
from novabench.judges.llm.normalize import (
    EDGE_PUNCTUATION,
    clean_keyword,
    modality_keywords,
    plane_keywords,
    sequence_keywords,
)


class UnreadableAnswer(ValueError):
    """The judge answered, but not in the form the prompt asks for."""


EMPTY = KeywordSet(frozenset(), False)
# Keywords a judge may list for one caption (all categories together): a radiology caption
# names a few dozen at most, and a judge listing thousands fills verdict files and tables
# with text no caption holds. More makes the answer unreadable, a counted judge failure.
MAX_KEYWORDS = 100


@dataclass(frozen=True)
class PairedVerdict:
    """The paired judge's whole answer on one pair.

    ``reference``/``prediction``: the standardized keywords, normalized, and the labels.
    ``labels_agree``: whether the judge said the labels agree (None: it did not say).
    ``raw``: side ("reference", "prediction") -> category -> raw keywords as written.
    """

    reference: KeywordSet
    prediction: KeywordSet
    labels_agree: bool | None = None
    raw: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)


# The whole answer as one fenced block: ```json ... ``` (greedy, so a second fence stays
# inside the block and makes it unreadable).
_WHOLE_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*)```", re.DOTALL)


def _json_object(raw: str) -> dict[str, Any]:
    """The answer's JSON object: the whole answer, or the whole of its one fenced block
    (single quotes and trailing commas read); anything else is unreadable."""
    text = raw.strip()
    fenced = _WHOLE_FENCE.fullmatch(text)
    if fenced is not None:
        text = fenced.group(1).strip()
    if not text.startswith("{"):
        raise UnreadableAnswer("no JSON object")
    spans = json_spans(text)
    if len(spans) != 1 or spans[0] != text:
        raise UnreadableAnswer("text around the JSON object, or a second one")
    data = load_lenient(text)
    if not isinstance(data, dict):
        raise UnreadableAnswer("no JSON object")
    return data


def _key(name: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


_CATEGORIES = {
    "sequence": "sequence",
    "sequences": "sequence",
    "mri_sequence": "sequence",
    "mri_sequences": "sequence",
    "plane": "plane",
    "planes": "plane",
    "imaging_plane": "plane",
    "anatomy": "anatomy",
    "anatomical_locations": "anatomy",
    "location": "anatomy",
    "locations": "anatomy",
    "characteristics": "characteristics",
    "imaging_characteristics": "characteristics",
    "findings": "findings",
    "finding": "findings",
    "diseases": "findings",
    "findings_diseases": "findings",
    "negated_findings": "negated",
    "negated": "negated",
    "negative_findings": "negated",
    "absent_findings": "negated",
    # The paired prompt's fifth category holds both.
    "sequence_and_plane": "modality",
    "sequences_and_planes": "modality",
    "sequence_plane": "modality",
    "sequence_and_planes": "modality",
    "modality": "modality",
}
_LABEL_KEYS = ("label", "classification", "normal_abnormal", "status")
_ABNORMAL_KEYS = ("abnormal", "is_abnormal")
# Leading negations an LLM may leave on a negated finding ("no hemorrhage"). Not "absent"
# or "absence of": "absent septum pellucidum" is a finding.
_NEGATION = re.compile(r"^(?:no|not|without|negative for|free of)\s+")


def _items(value: Any) -> list[str]:
    """A category's keywords: a list, or one comma/semicolon-separated string, or nothing."""
    if value is None:
        return []
    if isinstance(value, str):
        value = re.split(r"[;,\n]", value)
    if isinstance(value, dict):
        value = list(value)
    if not isinstance(value, list | tuple):
        raise UnreadableAnswer(f"a keyword list is a {type(value).__name__}")
    return [str(v) for v in value if v is not None and not isinstance(v, list | dict)]


def _label_word(value: Any) -> bool:
    """ "abnormal" -> True, "normal" -> False; anything else (a bool too) is unreadable."""
    word = clean_keyword(value)
    if not isinstance(value, bool):
        if word in ("abnormal", "abnormality", "pathological"):
            return True
        if word == "normal":
            return False
    raise UnreadableAnswer(f"label {value!r} is neither normal nor abnormal")


def _label(data: dict[str, Any]) -> bool:
    for key in _LABEL_KEYS:
        if key in data:
            return _label_word(data[key])
    for key in _ABNORMAL_KEYS:
        if isinstance(data.get(key), bool):
            return data[key]
    raise UnreadableAnswer("no normal/abnormal label")


def _category_items(categories: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(category, keywords) of the known categories; UnreadableAnswer over MAX_KEYWORDS."""
    found = [
        (_CATEGORIES[key], _items(value)) for key, value in categories.items() if key in _CATEGORIES
    ]
    count = sum(len(items) for _, items in found)
    if count > MAX_KEYWORDS:
        raise UnreadableAnswer(f"{count} keywords for one caption, more than {MAX_KEYWORDS}")
    return found


def _keyword_set(categories: Mapping[str, Any], abnormal: bool) -> KeywordSet:
    """Keyword lists by category (keys already passed through ``_key``; unknown keys
    ignored) -> normalized KeywordSet."""
    keywords: set[str] = set()
    for category, items in _category_items(categories):
        for item in items:
            if category == "sequence":
                keywords |= sequence_keywords(item)
            elif category == "plane":
                keywords |= plane_keywords(item)
            elif category == "modality":
                keywords |= modality_keywords(item)
            else:
                cleaned = clean_keyword(item)
                stripped = _NEGATION.sub("", cleaned)
                if category == "negated" or stripped != cleaned:
                    # A finding written as "no hemorrhage" is a negated one, whatever list.
                    if stripped:
                        keywords.add(NEGATED_PREFIX + stripped)
                elif cleaned:
                    keywords.add(cleaned)
    return KeywordSet(frozenset(keywords), abnormal)


def read_keywords(raw: str) -> KeywordSet:
    """A keyword judge's answer -> normalized KeywordSet; UnreadableAnswer if not possible."""
    data = {_key(k): v for k, v in _json_object(raw).items()}
    abnormal = _label(data)
    if not any(k in _CATEGORIES for k in data):
        raise UnreadableAnswer("no keyword category")
    return _keyword_set(data, abnormal)


# --- reading a paired answer ------------------------------------------------------------------

# The names an LLM may give the two sides and the sections of a paired answer.
_SIDES = {
    "gt": "reference",
    "ground_truth": "reference",
    "reference": "reference",
    "ref": "reference",
    "pred": "prediction",
    "prediction": "prediction",
    "predicted": "prediction",
}
_STANDARDIZED = (
    "standardized_keywords",
    "standardised_keywords",
    "standardized",
    "standardised",
    "normalized_keywords",
    "normalised_keywords",
)
_RAW = ("raw_keywords", "raw", "extracted_keywords")
_AGREEMENT = ("labels_agree", "label_agreement", "agreement", "labels_match", "agree")
_YES = {"yes", "true", "agree", "agreement", "match", "same"}
_NO = {"no", "false", "disagree", "disagreement", "mismatch", "different"}


def _keyed(value: Any) -> dict[str, Any] | None:
    return {_key(k): v for k, v in value.items()} if isinstance(value, dict) else None


def _side_section(data: dict[str, Any], names: Sequence[str], side: str) -> dict | None:
    """``side``'s block of a section, nested either way or flattened: {section: {gt: ..}},
    {gt: {section: ..}} or {gt_section: ..}; None if absent."""
    aliases = [alias for alias, s in _SIDES.items() if s == side]
    for name in names:
        for alias in aliases:
            for candidate in (
                (_keyed(data.get(name)) or {}).get(alias),
                (_keyed(data.get(alias)) or {}).get(name),
                data.get(f"{alias}_{name}"),
                data.get(f"{name}_{alias}"),
            ):
                if isinstance(candidate, dict):
                    return _keyed(candidate)
    return None


def _side_label(data: dict[str, Any], side: str) -> bool:
    """``side``'s normal/abnormal label: gt_label, labels.gt, or gt.label."""
    aliases = [alias for alias, s in _SIDES.items() if s == side]
    for alias in aliases:
        for candidate in (
            data.get(f"{alias}_label"),
            data.get(f"label_{alias}"),
            (_keyed(data.get("labels")) or {}).get(alias),
            (_keyed(data.get(alias)) or {}).get("label"),
        ):
            if candidate is not None:
                return _label_word(candidate)
    raise UnreadableAnswer(f"no normal/abnormal label of the {side}")


def _agreement(data: dict[str, Any]) -> bool | None:
    for key in _AGREEMENT:
        value = (_keyed(data.get("labels")) or {}).get(key, data.get(key))
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and clean_keyword(value) in _YES | _NO:
            return clean_keyword(value) in _YES
    return None


def _raw_lists(block: dict[str, Any] | None) -> dict[str, tuple[str, ...]]:
    if not block:
        return {}
    _category_items(block)  # the cap
    return {key: tuple(_items(value)) for key, value in block.items() if key in _CATEGORIES}


def read_paired(raw: str) -> PairedVerdict:
    """A paired judge's answer -> both sides' standardized keywords (normalized), their
    labels, the stated agreement and the raw keywords; UnreadableAnswer if not possible.

    The standardized keywords and both labels are required (falling back to the raw
    keywords would score a pair the judge did not standardize); raw keywords and the
    agreement are read where present.
    """
    data = _keyed(_json_object(raw)) or {}
    sides: dict[str, KeywordSet] = {}
    for side in ("reference", "prediction"):
        block = _side_section(data, _STANDARDIZED, side)
        if block is None:
            raise UnreadableAnswer(f"no standardized keywords of the {side}")
        if block and not any(k in _CATEGORIES for k in block):
            raise UnreadableAnswer(f"no keyword category in the {side}'s standardized keywords")
        sides[side] = _keyword_set(block, _side_label(data, side))
    raw_keywords = {side: _raw_lists(_side_section(data, _RAW, side)) for side in sides}
    return PairedVerdict(sides["reference"], sides["prediction"], _agreement(data), raw_keywords)


_NONE_WORDS = {"", "none", "null", "no", "no match", "n a", "na", "0"}


def read_first_match(raw: str, candidates: int) -> int:
    """A diagnosis judge's answer -> the first matching rank (0: none); UnreadableAnswer
    if it is not a rank between 0 and ``candidates``."""
    try:
        data = {_key(k): v for k, v in _json_object(raw).items()}
    except UnreadableAnswer:
        bare = raw.strip().strip(EDGE_PUNCTUATION)
        if not re.fullmatch(r"\d", bare):
            raise
        data = {"first_match": int(bare)}
    for key in ("first_match", "match", "first_matching_rank", "rank", "answer"):
        if key in data:
            value = data[key]
            break
    else:
        raise UnreadableAnswer("no first_match")
    if isinstance(value, bool):
        raise UnreadableAnswer(f"first_match {value!r} is not a rank")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is None or (isinstance(value, str) and clean_keyword(value) in _NONE_WORDS):
        return 0
    try:
        rank = int(str(value).strip())
    except ValueError:
        raise UnreadableAnswer(f"first_match {value!r} is not a rank") from None
    if not 0 <= rank <= candidates:
        raise UnreadableAnswer(f"first_match {rank} is not between 0 and {candidates}")
    return rank
