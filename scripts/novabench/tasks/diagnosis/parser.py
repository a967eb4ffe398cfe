"""Parsing Task 3 model outputs into a ranked differential diagnosis.

Models are asked for ``{"most_likely_diagnosis": str, "other_possible_diagnoses":
[4 x str]}``. Real outputs wrap that JSON in markdown fences or prose, use single quotes
or trailing commas, rename the keys, give fewer than five items, stop mid-JSON at the
token limit, or answer with a numbered list. ``parse_diagnosis`` accepts all of these,
gives a result for any text, and reports anything it cannot read as
``status="parse_error"`` so that parse failures are counted, not hidden. It catches no
error of its own: a bug here raises rather than becoming a model's parse error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from novabench.answer_json import json_spans, load_lenient

MAX_ITEMS = 5
# Longer outputs are cut before parsing: a differential never needs this much text and
# the bracket scan must stay fast on pathological inputs.
MAX_TEXT_CHARS = 100_000
_MAX_ITEM_CHARS = 300

_TOP_KEYS = {
    "most_likely_diagnosis",
    "most_likely",
    "most_probable_diagnosis",
    "primary_diagnosis",
    "top_diagnosis",
    "top_1",
    "top1",
    "main_diagnosis",
    "leading_diagnosis",
    "likely_diagnosis",
    "final_diagnosis",
    "diagnosis",
}
_OTHER_KEYS = {
    "other_possible_diagnoses",
    "other_possible_diagnosis",
    "other_diagnoses",
    "other_diagnosis",
    "differential_diagnoses",
    "differential_diagnosis",
    "differentials",
    "differential",
    "alternative_diagnoses",
    "alternatives",
    "possible_diagnoses",
    "others",
}
_LIST_KEYS = {"diagnoses", "ranked_diagnoses", "ranking", "top_5", "top5", "top_5_diagnoses"}
_ITEM_KEYS = ("diagnosis", "name", "label", "condition", "disease")
_PLACEHOLDERS = {"", "n/a", "na", "none", "null", "nil", "unknown", "-", "--", "...", "…"}


@dataclass(frozen=True)
class ParsedDiagnosis:
    """A parsed model answer: the ranked differential or why there is none."""

    status: str  # "ok" or "parse_error"
    ranked: tuple[str, ...] = ()  # most likely first, at most MAX_ITEMS, no duplicates
    error: str | None = None


def _clean_item(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    text = " ".join(str(value).split())
    text = re.sub(r"^(?:\d{1,2}\s*[.):]|[-*•·])\s+", "", text)  # list numbering or bullet
    text = text.strip(" \t*_`'\"“”‘’")
    text = text.rstrip(" .,;:")
    if text.casefold() in _PLACEHOLDERS:
        return ""
    return text[:_MAX_ITEM_CHARS]


def _items(value: Any, split_text: bool) -> list[str]:
    """Diagnosis strings inside a JSON value (string, list, dict of ranks, item dicts)."""
    if isinstance(value, str):
        if not split_text:
            return [value]
        parts = [p for p in re.split(r"\s*(?:\n|;|\s\d{1,2}[.)]\s)\s*", value) if p.strip()]
        if len(parts) == 1 and value.count(",") >= 2:
            parts = value.split(",")  # "A, B, C": a list written as one string
        return parts
    if isinstance(value, dict):
        for key in _ITEM_KEYS:
            for actual, inner in value.items():
                if _key(actual) == key and isinstance(inner, str):
                    return [inner]
        return [item for inner in value.values() for item in _items(inner, split_text=False)]
    if isinstance(value, list | tuple):
        return [item for inner in value for item in _items(inner, split_text=False)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [str(value)]
    return []


def _key(name: Any) -> str:
    return re.sub(r"[^a-z0-9]+", "_", str(name).lower()).strip("_")


def _role(key: str) -> str | None:
    """Whether a JSON key holds the top diagnosis, the other diagnoses, or a full list."""
    if key in _TOP_KEYS:
        return "top"
    if key in _OTHER_KEYS:
        return "other"
    if key in _LIST_KEYS:
        return "list"
    if any(word in key for word in ("other", "differential", "alternative")):
        return "other"
    if "diagnos" in key and any(w in key for w in ("most", "primary", "top", "main", "lead")):
        return "top"
    return None


def _from_mapping(data: dict[str, Any]) -> tuple[list[str], list[str]] | None:
    """(top items, other items) from a parsed JSON object, or None if it has neither."""
    top: list[str] = []
    other: list[str] = []
    found = False
    for name, value in data.items():
        role = _role(_key(name))
        if isinstance(value, dict) and (inner := _from_mapping(value)) is not None:
            return inner  # {"diagnosis": {"most_likely_diagnosis": ...}}
        if role == "top":
            top += _items(value, split_text=False)
        elif role == "other":
            other += _items(value, split_text=True)
        elif role == "list":
            items = _items(value, split_text=True)
            top, other = top or items[:1], other + items[1:]
        else:
            continue
        found = True
    # Wrapped answers ({"answer": {...}}) were read in the loop; reading nested objects a
    # second time here made the work grow exponentially with the depth.
    return (top, other) if found else None


_TRUNCATED_TOP = re.compile(
    r"[\"']?most[_ ]likely[_ ]diagnosis[\"']?\s*:\s*[\"']([^\"'\n]+)[\"']", re.IGNORECASE
)
_TRUNCATED_OTHER = re.compile(
    r"[\"']?(?:other[_ ]possible[_ ]diagnoses|differential[_ ]diagnoses)[\"']?\s*:\s*\[(.*)",
    re.IGNORECASE | re.DOTALL,
)
_LABELLED_TOP = re.compile(
    r"^\W*(?:most\s+likely|primary|leading|final)\s+diagnosis[ \t*_]*[:\-–][ \t]*(.+)$",
    re.IGNORECASE | re.MULTILINE,
)
_LABELLED_OTHER = re.compile(
    r"^\W*(?:other\s+possible\s+diagnoses|differential\s+diagnos[ie]s|differentials)[ \t*_]*[:\-–]"
    r"[ \t]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)
_NUMBERED = re.compile(r"^\s*(?:\d{1,2}\s*[.)]|[-*•])\s+(.+?)\s*$", re.MULTILINE)


def _from_truncated_json(text: str) -> tuple[list[str], list[str]] | None:
    top = _TRUNCATED_TOP.search(text)
    if not top:
        return None
    other = _TRUNCATED_OTHER.search(text)
    others = re.findall(r"\"([^\"\n]+)\"", other.group(1)) if other else []
    return [top.group(1)], others


def _from_plain_text(text: str) -> tuple[list[str], list[str]] | None:
    top = _LABELLED_TOP.search(text)
    if top:
        other = _LABELLED_OTHER.search(text)
        others: list[str] = []
        if other:
            inline = other.group(1).strip()
            if inline:
                others = _items(inline, split_text=True)
            else:
                others = _NUMBERED.findall(text[other.end() :])
        return [top.group(1)], others
    numbered = _NUMBERED.findall(text)
    if numbered:
        return numbered[:1], numbered[1:]
    return None


def _ranked(top: list[str], other: list[str]) -> tuple[str, ...]:
    ranked: list[str] = []
    seen: set[str] = set()
    for raw in top[:1] + other:
        item = _clean_item(raw)
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            ranked.append(item)
        if len(ranked) == MAX_ITEMS:
            break
    return tuple(ranked)


def _parse(text: str) -> ParsedDiagnosis:
    text = text[:MAX_TEXT_CHARS]
    fenced = re.findall(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", text, flags=re.DOTALL)
    found_json = False
    for candidate in [*fenced, text]:
        for span in json_spans(candidate):
            data = load_lenient(span)
            if isinstance(data, dict):
                found_json = True
                parts = _from_mapping(data)
            elif isinstance(data, list) and data and all(isinstance(x, str) for x in data):
                found_json = True
                parts = (data[:1], data[1:])
            else:
                continue
            if parts is None:
                continue
            top, other = parts
            if not any(_clean_item(t) for t in top):
                return ParsedDiagnosis("parse_error", (), "the JSON has no most likely diagnosis")
            return ParsedDiagnosis("ok", _ranked(top, other))
    for fallback in (_from_truncated_json, _from_plain_text):
        parts = fallback(text)
        if parts is not None and any(_clean_item(t) for t in parts[0]):
            return ParsedDiagnosis("ok", _ranked(*parts))
    if found_json:
        return ParsedDiagnosis("parse_error", (), "JSON found but no diagnosis keys in it")
    return ParsedDiagnosis("parse_error", (), "no JSON object or numbered list found")


def parse_diagnosis(text: str) -> ParsedDiagnosis:
    """Parse one model answer into a ranked differential; any text gives a result."""
    if not isinstance(text, str):
        return ParsedDiagnosis("parse_error", (), f"expected text, got {type(text).__name__}")
    if not text.strip():
        return ParsedDiagnosis("parse_error", (), "empty output")
    return _parse(text)
