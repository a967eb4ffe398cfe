"""Parsing Task 3 model outputs into a ranked differential diagnosis.

Models are asked for ``{"most_likely_diagnosis": str, "other_possible_diagnoses":
[4 x str]}``. Real outputs wrap that JSON in markdown fences or prose, use single quotes
or trailing commas, rename the keys, give fewer than five items, stop mid-JSON at the
token limit, or answer without JSON: Markdown with a bold or heading label and a bulleted
or numbered differential, a bare numbered list, or prose ("The most likely diagnosis is
X. Differential includes A and B."). ``parse_diagnosis`` accepts all of these, gives a
result for any text, and reports anything it cannot read as ``status="parse_error"`` so
that parse failures are counted, not hidden. It catches no error of its own: a bug here
raises rather than becoming a model's parse error.

Rules that decide what counts:

- The top-1 is only ever the model's own most likely diagnosis: a differential is never
  promoted. An answer cut off at the token limit keeps its top-1 if that string is
  complete, and the complete items of its list before the cut; a cut top-1 is a parse
  error.
- Items read from free text lose their reasons and hedges: text after a spaced dash
  (" - ", " – ", " — "), a colon, "because", "given", "due to"; a trailing parenthetical;
  a leading "likely", "most likely", "consistent with", "suggestive of" or article.
  Hyphens inside names ("Rosai-Dorfman disease") stay. JSON values are kept as written.
- A slot naming alternatives ("A vs B", "A or B") stays one item, so the judge decides
  it; ``n_alternatives`` counts such items. In a prose series, "A, B, or C" is three.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from novabench.answer_json import closes, json_spans, load_lenient, structural_brackets

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
    # Ranked items that name alternatives in one slot ("A vs B", "A or B"): kept whole.
    n_alternatives: int = 0


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


# --- A JSON object cut off at the token limit -------------------------------------------

_TOP_KEY = re.compile(r"[\"']most[_ ]likely[_ ]diagnosis[\"']\s*:\s*", re.IGNORECASE)
_OTHER_KEY = re.compile(
    r"[\"'](?:other[_ ]possible[_ ]diagnos[ie]s|differential[_ ]diagnos[ie]s|differentials)"
    r"[\"']\s*:\s*\[",
    re.IGNORECASE,
)
# A complete string: "..." or '...' (an apostrophe inside a word, "Wilson's", stays in it).
_QUOTED = re.compile(r"\"([^\"\n]*)\"|'((?:[^'\n]|'(?=\w))*)'")
# Strings in order, each with the colon that makes it a key, if any.
_QUOTED_OR_KEY = re.compile(rf"(?:{_QUOTED.pattern})(\s*:)?")


def _unclosed_object_start(text: str, at: int) -> int | None:
    """Where the innermost object open at position ``at`` starts, if it is never closed
    (one linear pass over the brackets outside quotes, as ``json_spans`` reads them)."""
    stack: list[tuple[str, int]] = []
    holder: tuple[str, int] | None = None
    seen_at = False
    for j, ch in structural_brackets(text):
        if not seen_at and j >= at:
            holder, seen_at = _innermost_object(stack), True
        if ch in "{[":
            stack.append((ch, j))
        elif closes(stack, ch):
            stack.pop()
    if not seen_at and at < len(text):  # ``at`` past the last bracket, inside the text
        holder = _innermost_object(stack)
    return holder[1] if holder is not None and holder in stack else None


def _innermost_object(stack: list[tuple[str, int]]) -> tuple[str, int] | None:
    return next((entry for entry in reversed(stack) if entry[0] == "{"), None)


def _quoted_strings(text: str) -> list[str]:
    """The complete strings in a cut-off list, skipping keys of item objects."""
    strings = _QUOTED_OR_KEY.findall(text)
    return [double or single for double, single, colon in strings if not colon]


def _from_truncated_object(text: str) -> tuple[list[str], list[str]] | None:
    """The answer object if it is cut off: (complete top-1 or nothing, complete items).

    None when the object holding the most likely (else the other) diagnoses is closed, or
    there is none: the JSON reading then handles it. A complete inner list or item object
    of a cut-off answer is never read as the answer on its own, so a differential is never
    promoted.
    """
    top_key = _TOP_KEY.search(text)
    key = top_key or _OTHER_KEY.search(text)
    if key is None:
        return None
    start = _unclosed_object_start(text, key.start())
    if start is None:
        return None
    value = _QUOTED.match(text, key.end()) if top_key else None
    top = [value.group(1) or value.group(2) or ""] if value else []
    others: list[str] = []
    if (other := _OTHER_KEY.search(text, start)) is not None:
        end = text.find("]", other.end())
        others = _quoted_strings(text[other.end() : end if end >= 0 else len(text)])
    return top, others


# --- Free text: labelled lines, Markdown headings and lists, prose sentences -----------

_MARKER = re.compile(r"(?:\d{1,2}\s*[.):]|[-*•+·])\s+")
_TOP_LABEL = re.compile(
    r"(?:the )?(?:(?:most likely|most probable|primary|leading|final|top|main|working|"
    r"favou?red|suspected) (?:diagnosis|impression)|most likely|diagnosis|impression|"
    r"(?:final )?answer)\b",
    re.IGNORECASE,
)
_OTHER_LABEL = re.compile(
    r"(?:(?:other|alternative|additional|less likely)(?: possible| likely| potential)? "
    r"(?:diagnos[ie]s|considerations|possibilities|differentials?)|differentials?"
    r"(?: diagnos[ie]s| considerations)?|alternatives|others to consider)\b",
    re.IGNORECASE,
)
_PARENTHETICAL = re.compile(r"\([^()]*\)")


def _line_parts(line: str) -> tuple[str, bool, int]:
    """(text without Markdown marks, whether it is a list item, its indentation)."""
    indent = len(line) - len(line.lstrip())
    core = line.strip().lstrip("#> \t")
    marker = _MARKER.match(core)
    if marker:
        core = core[marker.end() :]
    return " ".join(core.split()).strip("*_` "), marker is not None, indent


def _label(core: str) -> tuple[str, str] | None:
    """("top" | "other", inline value, "" for a heading) if the line is a label."""
    for kind, pattern in (("other", _OTHER_LABEL), ("top", _TOP_LABEL)):
        found = pattern.match(core)
        if found is None:
            continue
        rest = core[found.end() :].lstrip("*_ ")
        if rest.startswith("("):  # "Differential diagnosis (most to least likely):"
            rest = _PARENTHETICAL.sub("", rest, count=1).lstrip("*_ ")
        if not rest:
            return kind, ""
        if rest[0] in ":-–—":
            return kind, rest[1:].strip("*_ ")
        return None
    return None


def _from_labelled_lines(text: str) -> tuple[list[str], list[str]]:
    """Top-1 and differential from label lines: "**Most likely diagnosis:** X",
    "## Differential" followed by a bulleted or numbered list, "Differential: A, B"."""
    top: list[str] = []
    others: list[str] = []
    section, item_indent = "", -1
    for line in text.splitlines():
        core, is_item, indent = _line_parts(line)
        if not core:
            continue  # a blank line does not end a section
        label = _label(core)
        if label is not None and not (section == "other" and is_item and indent > item_indent):
            kind, value = label
            if kind == "top" and not top and value:
                top = [value]
            elif kind == "other" and value:
                others += _series(value)
            section, item_indent = (kind if not value else ""), -1
        elif section == "top" and is_item:  # "Answer:" over a ranked list
            top, section, item_indent = (top or [core]), "other", indent
        elif section == "top":
            top, section = (top or [core]), ""
        elif section == "other" and is_item and (item_indent < 0 or indent <= item_indent):
            others.append(core)
            item_indent = indent if item_indent < 0 else item_indent
        elif section == "other" and item_indent < 0 and not is_item and not core.endswith(":"):
            others += _series(core)  # "## Differential\nA, B and C."
            section = ""
        elif section == "other" and not (is_item or indent > max(item_indent, 0)):
            section = ""  # the list ended; an indented line continues its item
    return top, others


_PROSE_TOP = re.compile(
    r"\b(?:most\s+likely|most\s+probable|leading|primary|favou?red|working)\s+"
    r"(?:diagnosis|impression)\s+(?:is|would\s+be|remains)\s*:?\s*([^.\n;]+)"
    r"|\b(?:findings|features|appearances?|imaging|picture|presentation)\s+"
    r"(?:are\s+|is\s+)?(?:most\s+)?(?:suggest(?:s|ive\s+of)?|consistent\s+with|"
    r"compatible\s+with|indicative\s+of|concerning\s+for|characteristic\s+of|typical\s+of|"
    r"in\s+keeping\s+with|favou?r)\s+([^.\n;]+)"
    r"|\b(?:this|it)\s+is\s+most\s+(?:likely|probably)\s+([^.\n;]+)",
    re.IGNORECASE,
)
_PROSE_OTHER = re.compile(
    r"\b(?:differentials?(?:\s+diagnos[ie]s)?|other\s+(?:possible\s+|potential\s+)?"
    r"(?:diagnoses|considerations|possibilities)|alternatives?(?:\s+diagnoses)?|"
    r"less\s+likely\s+(?:diagnoses|considerations|possibilities))"
    r"(?:\s+[a-z]+){0,3}?\s+(?:includes?|are|would\s+include|could\s+include)\s*:?\s*([^.\n]+)",
    re.IGNORECASE,
)


def _from_prose(text: str) -> tuple[list[str], list[str]]:
    """ "The most likely diagnosis is X. Differential includes A and B." and the like."""
    top = _prose_top(text)
    others = [item for found in _PROSE_OTHER.finditer(text) for item in _series(found.group(1))]
    return ([top] if top else []), others


def _prose_top(text: str) -> str | None:
    found = _PROSE_TOP.search(text)
    return next(group for group in found.groups() if group) if found else None


def _series(text: str) -> list[str]:
    """ "A, B and C" / "A; B, or C" / "A and B" as items; "A or B" alone stays one item."""
    text = _PARENTHETICAL.sub("", text)
    parts = re.split(r"\s*[;,]\s*(?:and\s+|or\s+)?", text)
    if len(parts) > 1:
        parts[-1:] = re.split(r"\s+(?:and|or)\s+", parts[-1])
    else:
        parts = re.split(r"\s+and\s+", text)
    return [part for part in parts if part.strip()]


_REASON = re.compile(
    r"\s[-–—]+\s|:\s|,\s*(?:given|which|because|as|although|though|but|likely|with|based|"
    r"due|since|suggest\w*)\b|\s(?:because|given|due\s+to|since)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"(?:(?:most\s+)?(?:likely|probably|probable|possibly|possible)|consistent\s+with|"
    r"suggestive\s+of|compatible\s+with|suspicious\s+for|concerning\s+for|"
    r"in\s+keeping\s+with|favou?ring|favou?r|a|an|the)\s+",
    re.IGNORECASE,
)


def _name(text: str) -> str:
    """A diagnosis named in free text, without its reason or hedge: "1. **X** - given Y"
    and "likely X (given Y)" give X; hyphens inside names ("Rosai-Dorfman") stay."""
    text = _clean_item(text)
    reason = _REASON.search(text)
    if reason is not None:
        text = text[: reason.start()]
    text = text.rstrip(" .,;*_")
    while text.endswith(")") and (opening := text.rfind("(")) > 0:
        text = text[:opening].rstrip()
    for _ in range(3):
        hedge = _HEDGE.match(text)
        if hedge is None or hedge.end() == len(text):
            break
        text = text[hedge.end() :]
    return _clean_item(text)


# Words that say a list holds the diagnoses after the most likely one, never the top-1.
_OTHERS_ONLY = re.compile(
    r"\b(?:other|alternative|additional|less\s+likely)(?:\s+(?:possible|likely|potential))?"
    r"\s+(?:diagnos[ie]s|considerations|possibilities|differentials?)\b|\balternatives\b",
    re.IGNORECASE,
)


def _from_free_text(text: str) -> tuple[list[str], list[str]] | None:
    """Labels and prose first; else a bare or "Differential" list, its first item top-1.

    A list named as the other diagnoses never gives the top-1: without one, ``([], ...)``.
    """
    top, others = _from_labelled_lines(text)
    prose_top, prose_others = _from_prose(text)
    # "Impression: the findings are consistent with X" names X
    top = [_prose_top(value) or value for value in top] or prose_top
    top = [name for name in map(_name, top) if name]
    if top or _OTHERS_ONLY.search(text):
        return top, _first_names(others or prose_others)
    lines = (core for core, is_item, _ in map(_line_parts, text.splitlines()) if is_item)
    items = _first_names(lines)
    return (items[:1], items[1:]) if items else None


def _first_names(texts: Iterable[str]) -> list[str]:
    """The names in the first texts: enough for a ranking, read without a long list's cost."""
    return list(islice(filter(None, map(_name, texts)), 4 * MAX_ITEMS))


# --- The answer ------------------------------------------------------------------------

_ALTERNATIVE = re.compile(r"\s(?:vs\.?|versus|or)\s", re.IGNORECASE)


def _result(top: list[str], other: list[str]) -> ParsedDiagnosis:
    """The ranking, counting the slots that name alternatives ("A vs B", "A or B").

    Policy: such a slot is kept whole as one item (the judge decides whether it matches);
    ``n_alternatives`` says how many of the ranked items are such slots.
    """
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
    n_alternatives = sum(1 for item in ranked if _ALTERNATIVE.search(item))
    return ParsedDiagnosis("ok", tuple(ranked), None, n_alternatives)


def _from_json(text: str) -> tuple[list[str], list[str]] | ParsedDiagnosis | None:
    """The first answer object (else the first list of strings) in the text or its fences."""
    fenced = re.findall(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", text, flags=re.DOTALL)
    values = [load_lenient(span) for candidate in [*fenced, text] for span in json_spans(candidate)]
    found_json = False
    for data in values:
        if isinstance(data, dict):
            found_json = True
            if (parts := _from_mapping(data)) is not None:
                return parts
    for data in values:
        if isinstance(data, list) and data and all(isinstance(x, str) for x in data):
            return data[:1], data[1:]
    if found_json:
        return ParsedDiagnosis("parse_error", (), "JSON found but no diagnosis keys in it")
    return None


def _parse(text: str) -> ParsedDiagnosis:
    text = text[:MAX_TEXT_CHARS]
    parts = _from_truncated_object(text)
    if parts is not None and not any(_clean_item(t) for t in parts[0]):
        return ParsedDiagnosis("parse_error", (), "a cut-off answer without a complete top-1")
    json_error = None
    if parts is None:
        parts = _from_json(text)
        if isinstance(parts, ParsedDiagnosis):
            json_error, parts = parts, None
        elif parts is not None and not any(_clean_item(t) for t in parts[0]):
            return ParsedDiagnosis("parse_error", (), "the JSON has no most likely diagnosis")
    if parts is None:
        parts = _from_free_text(text)
    if parts is not None and parts[0]:
        return _result(*parts)
    if parts is not None and parts[1]:
        return ParsedDiagnosis("parse_error", (), "other diagnoses but no most likely one")
    return json_error or ParsedDiagnosis("parse_error", (), "no JSON object or numbered list found")


def parse_diagnosis(text: str) -> ParsedDiagnosis:
    """Parse one model answer into a ranked differential; any text gives a result."""
    if not isinstance(text, str):
        return ParsedDiagnosis("parse_error", (), f"expected text, got {type(text).__name__}")
    if not text.strip():
        return ParsedDiagnosis("parse_error", (), "empty output")
    return _parse(text)
