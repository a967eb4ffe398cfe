"""Qualifiers of a diagnosis that must agree when both texts state them.

A teaching-file diagnosis often carries a qualifier next to the disease name: a location
("temporal lobe"), a side ("left"), a type or subtype ("type 2", "closed-lip"), a grade
("WHO grade 3", "low-grade"), a phase ("chronic"), a cause ("tuberculous"). The same disease
with a different qualifier is a different diagnosis for the judge; a qualifier stated on one
side only is a difference in specificity and does not count against a match.

The groups and their words live in the ``qualifiers`` section of
``diagnosis_synonyms.yaml``. Each group maps values to the phrases that state them, and
``within`` relates values (a hippocampus is within the temporal lobe, a herpes infection is
viral): two values agree when they are equal or one is within the other. Types, grades and
stages written as numbers are read from the tokens here, not from the table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# Numbers after these words are grades or stages; any other standalone number, a letter
# written as "type X" (token "typex") or the digits closing a short code ("nf2",
# "hsv1", "sca3") is a type.
_GRADE_WORDS = {"grade", "who"}
_STAGE_WORDS = {"stage"}
_CODE_WITH_NUMBER = re.compile(r"^[a-z]{2,4}(\d{1,2})$")
_TYPE_LETTER = re.compile(r"^(?:type|group)([a-z])$")
# Spinal segments written as levels ("L4", "T11", "C1"), and the region each lies in.
_SPINAL_LEVEL = re.compile(r"^([ctls])(\d{1,2})$")
_SEGMENTS = {"c": "cervical", "t": "thoracic", "l": "lumbar", "s": "sacral"}
# Gene symbols with a digit ("tp53", "idh1", "h3f3a"); a few without one.
_GENE = re.compile(r"^[a-z]{1,6}\d{1,3}[a-z]?$")
_GENES_WITHOUT_DIGIT = frozenset({"atrx", "braf", "egfr", "pten", "tert", "mgmt", "nf", "myc"})
# A numbered type with a letter subtype ("2b", read from "IIb"): within its number.
_LETTERED_NUMBER = re.compile(r"^(\d{1,2})([a-d])$")
# Groups read from the whole text, not only before its first clause: the primary tumour
# ("metastases from melanoma") and the organism ("meningitis due to Listeria") often
# follow a connector.
WHOLE_TEXT_GROUPS = ("cause", "primary")
# So is a gene's status ("medulloblastoma, SHH-activated and TP53-mutant").
GENE_STATUS_SUFFIX = " status"


def whole_text_group(group: str) -> bool:
    return group in WHOLE_TEXT_GROUPS or group.endswith(GENE_STATUS_SUFFIX)


# Groups that name where a lesion is (or, for a metastasis, where it came from): their
# words say nothing about what the disease is, so the disease words are compared
# without them.
SITE_GROUPS = (
    "location",
    "laterality",
    "territory",
    "sinus",
    "compartment",
    "midline side",
    "nerve",
    "primary",
)

Qualifiers = dict[str, frozenset[str]]


@dataclass(frozen=True)
class QualifierTable:
    """Phrase -> (group, values) lookup and the ``within`` relation of each group."""

    phrases: dict[tuple[str, ...], tuple[tuple[str, frozenset[str]], ...]]
    max_len: int
    ancestors: dict[tuple[str, str], frozenset[str]]
    # (group, value) pairs that another value lies within: classes, not leaves.
    classes: frozenset[tuple[str, str]] = frozenset()

    def is_leaf(self, group: str, value: str) -> bool:
        """No other value of ``group`` lies within ``value`` (an organism, not a class)."""
        return (group, value) not in self.classes

    def related(self, group: str, a: str, b: str) -> bool:
        return (
            a == b
            or a in self.ancestors.get((group, b), ())
            or b in self.ancestors.get((group, a), ())
            or _lettered_within(a, b)
            or _lettered_within(b, a)
        )


def _lettered_within(narrow: str, broad: str) -> bool:
    """ "2b" lies within "2" (focal cortical dysplasia type IIb is a type II)."""
    match = _LETTERED_NUMBER.match(narrow)
    return bool(match) and match.group(1) == broad


def build_table(groups: Mapping[str, Mapping[str, object]], tokenize) -> QualifierTable:
    """The lookup for the ``qualifiers`` section; ``tokenize`` normalizes a phrase."""
    phrases: dict[tuple[str, ...], dict[str, set[str]]] = {}
    ancestors: dict[tuple[str, str], frozenset[str]] = {}
    for group, spec in groups.items():
        for value, words in (spec.get("values") or {}).items():
            # A number names a value but is no phrase: numbers are read by _numbers.
            named = [] if str(value).isdigit() else [value]
            for phrase in [*named, *(words or [])]:
                key = tuple(tokenize(str(phrase)))
                if key:
                    phrases.setdefault(key, {}).setdefault(group, set()).add(str(value))
        # A value may lie within several others (the fourth ventricle is in the posterior
        # fossa and is a ventricle).
        parents = {
            str(k): [str(x) for x in (v if isinstance(v, list) else [v])]
            for k, v in (spec.get("within") or {}).items()
        }
        for value in parents:
            seen: set[str] = set()
            frontier = list(parents[value])
            while frontier:
                current = frontier.pop()
                if current not in seen:
                    seen.add(current)
                    frontier.extend(parents.get(current, []))
            ancestors[(group, value)] = frozenset(seen)
    frozen = {
        key: tuple((g, frozenset(v)) for g, v in sorted(found.items()))
        for key, found in phrases.items()
    }
    classes = frozenset((group, up) for (group, _), ups in ancestors.items() for up in ups)
    return QualifierTable(frozen, max((len(k) for k in frozen), default=1), ancestors, classes)


def _numbers(tokens: Sequence[str]) -> Qualifiers:
    found: dict[str, set[str]] = {}
    for i, token in enumerate(tokens):
        previous = tokens[i - 1] if i else ""
        following = tokens[i + 1 : i + 3]
        if level := _SPINAL_LEVEL.match(token):
            # "L4-L5", "T11", "C1": the spinal segment is a location like "lumbar".
            found.setdefault("location", set()).add(_SEGMENTS[level.group(1)])
        elif gene_status := _gene_status(token, following):
            found.setdefault(token + GENE_STATUS_SUFFIX, set()).add(gene_status)
        elif token.isdigit() or _LETTERED_NUMBER.match(token):
            if previous in _GRADE_WORDS:
                group = "grade"
            elif previous in _STAGE_WORDS:
                group = "stage"
            else:
                group = "type"
            found.setdefault(group, set()).add(token.lstrip("0") or "0")
        elif match := _TYPE_LETTER.match(token):
            found.setdefault("type", set()).add(match.group(1))
        elif match := _CODE_WITH_NUMBER.match(token):
            found.setdefault("type", set()).add(str(int(match.group(1))))
    return {group: frozenset(values) for group, values in found.items()}


def _gene_status(token: str, following: Sequence[str]) -> str | None:
    """ "TP53-mutant" / "TP53-wildtype": the status of a named gene, a molecular type.

    Only for a gene-like symbol (letters and digits, at most 8 characters, with a digit
    or in capitals upstream: the tokens are lower-case here, so a digit is required
    unless the symbol is a known short gene such as "atrx" or "braf")."""
    if not following or not (_GENE.fullmatch(token) or token in _GENES_WITHOUT_DIGIT):
        return None
    if following[0] in ("mutant", "mutated", "mutation"):
        return "mutant"
    if following[0] in ("amplified", "amplification"):
        return "amplified"
    if following[0] == "wildtype" or list(following) == ["wild", "type"]:
        return "wildtype"
    return None


def extract(tokens: Sequence[str], table: QualifierTable) -> Qualifiers:
    """The qualifiers stated in ``tokens`` (normalized words), longest phrases first."""
    return extract_with_words(tokens, table)[0]


def extract_with_words(
    tokens: Sequence[str], table: QualifierTable
) -> tuple[Qualifiers, dict[str, frozenset[str]]]:
    """The qualifiers stated in ``tokens`` and, per group, the words that state them."""
    found: dict[str, set[str]] = {g: set(v) for g, v in _numbers(tokens).items()}
    words: dict[str, set[str]] = {}
    i = 0
    while i < len(tokens):
        for length in range(min(table.max_len, len(tokens) - i), 0, -1):
            hit = table.phrases.get(tuple(tokens[i : i + length]))
            if hit:
                for group, values in hit:
                    found.setdefault(group, set()).update(values)
                    words.setdefault(group, set()).update(tokens[i : i + length])
                i += length
                break
        else:
            i += 1
    return (
        {group: frozenset(values) for group, values in found.items()},
        {group: frozenset(w) for group, w in words.items()},
    )


def with_inherent(stated: Qualifiers, inherent: Iterable[Qualifiers]) -> Qualifiers:
    """Stated qualifiers, plus a named concept's own ones for groups the text leaves open
    ("glioblastoma" is grade 4 unless the text says otherwise)."""
    out = dict(stated)
    for qualifiers in inherent:
        for group, values in qualifiers.items():
            if group not in stated:
                out[group] = out.get(group, frozenset()) | values
    return out


def conflict(
    a: Qualifiers, b: Qualifiers, table: QualifierTable, ignore: Iterable[str] = ()
) -> str | None:
    """The first group that both state with no agreeing pair of values, or None.

    Each side is compared by its most specific values: "spinal epidural abscess at L4-L5"
    states "lumbar", and its "spinal" must not agree with another text's "cervical"."""
    for group in sorted(set(a) & set(b) - set(ignore)):
        narrow_a, narrow_b = (
            _most_specific(group, a[group], table),
            _most_specific(group, b[group], table),
        )
        if not any(table.related(group, x, y) for x in narrow_a for y in narrow_b):
            return group
    return None


def _most_specific(group: str, values: frozenset[str], table: QualifierTable) -> frozenset[str]:
    """The values no other stated value lies within."""
    broader = {
        v for v in values for w in values if w != v and v in table.ancestors.get((group, w), ())
    }
    return values - broader
