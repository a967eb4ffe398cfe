"""Qualifiers of a diagnosis that must agree when both texts state them.

A teaching-file diagnosis often carries a qualifier next to the disease name: a location
("temporal lobe"), a side ("left"), a type or subtype ("type 2", "closed-lip"), a grade
("WHO grade 3", "low-grade"), a phase ("chronic"), a cause ("tuberculous"). The same disease
with a different qualifier is a different diagnosis for the judge; a qualifier stated on one
side only is a difference in specificity and does not count against a match.

The groups and their words live in the ``qualifiers`` section of
``diagnosis_synonyms.yaml``. Each group maps values to the phrases that state them, and
``within`` relates values (a hippocampus is within the temporal lobe, a herpes infection is
viral): two values agree when they are equal or one is within the other; ``roles`` says
which groups name a site, are read from the whole text, or describe the whole diagnosis
from a clause. Types, grades and stages written as numbers are read from the tokens here,
with the words of the tables' ``rule_words`` (the number groups, spinal segments, gene
status words).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from novabench.text import PhraseIndex

_CODE_WITH_NUMBER = re.compile(r"^[a-z]{2,4}(\d{1,2})$")
# Gene symbols with a digit ("tp53", "idh1", "h3f3a"); the tables list a few without one.
_GENE = re.compile(r"^[a-z]{1,6}\d{1,3}[a-z]?$")
# A numbered type with a letter subtype ("2b", read from "IIb"): within its number.
_LETTERED_NUMBER = re.compile(r"^(\d{1,2})([a-d])$")
# A gene's status is a group of its own, read from the whole text ("medulloblastoma,
# SHH-activated and TP53-mutant").
GENE_STATUS_SUFFIX = " status"
# What a group's ``roles`` may say: it names where a lesion is (its words say nothing about
# what the disease is), it is read from the whole text and not only before the first clause
# ("metastases from melanoma", "meningitis due to Listeria"), or its value in a clause
# describes the whole diagnosis.
ROLES = ("site", "whole-text", "clause-wide")

Qualifiers = dict[str, frozenset[str]]


@dataclass(frozen=True)
class NumberWords:
    """How numbers, levels and gene symbols in the tokens are read (``rule_words``).

    A number after a word of ``after`` goes to that word's group; any other standalone
    number, a letter written as "type X" (token "typex") or the digits closing a short code
    ("nf2", "hsv1", "sca3") to ``other``; a spinal level ("L4", "T11") is the segment's
    value of ``level_group``."""

    after: Mapping[str, str]
    other: str
    type_letter: re.Pattern[str]
    level_group: str
    segments: Mapping[str, str]
    spinal_level: re.Pattern[str]
    genes_without_digit: frozenset[str]
    # status -> the token sequences that state it, in the order they are tried
    gene_status: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]

    @classmethod
    def from_words(cls, words: Mapping[str, Any]) -> NumberWords:
        levels = words["spinal_levels"]
        segments = {str(k): str(v) for k, v in levels["segments"].items()}
        type_words = "|".join(re.escape(w) for w in words["type_words"])
        return cls(
            after={str(k): str(v) for k, v in words["number_groups"].items()},
            other=str(words["other_numbers"]),
            type_letter=re.compile(rf"^(?:{type_words})([a-z])$"),
            level_group=str(levels["group"]),
            segments=segments,
            spinal_level=re.compile(
                "^(" + "|".join(re.escape(k) for k in segments) + r")(\d{1,2})$"
            ),
            genes_without_digit=frozenset(words["genes_without_digit"]),
            gene_status=tuple(
                (str(status), tuple(tuple(p.split()) for p in phrases))
                for status, phrases in words["gene_status"].items()
            ),
        )


@dataclass(frozen=True)
class QualifierTable:
    """Phrase -> (group, values) lookup and the ``within`` relation of each group."""

    phrases: dict[tuple[str, ...], tuple[tuple[str, frozenset[str]], ...]]
    index: PhraseIndex  # the phrases that state a qualifier, for longest match
    ancestors: dict[tuple[str, str], frozenset[str]]
    # (group, value) pairs that another value lies within: classes, not leaves.
    classes: frozenset[tuple[str, str]]
    roles: Mapping[str, frozenset[str]]
    numbers: NumberWords

    def has_role(self, group: str, role: str) -> bool:
        return role in self.roles.get(group, ())

    def whole_text(self, group: str) -> bool:
        return self.has_role(group, "whole-text") or group.endswith(GENE_STATUS_SUFFIX)

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


def build_table(
    groups: Mapping[str, Mapping[str, object]],
    tokenize,
    numbers: NumberWords,
) -> QualifierTable:
    """The lookup for the ``qualifiers`` section; ``tokenize`` normalizes a phrase and
    ``numbers`` says how numbers are read."""
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
    roles = {str(g): frozenset(spec.get("roles") or ()) for g, spec in groups.items()}
    return QualifierTable(
        frozen,
        PhraseIndex({key: hit for key, hit in frozen.items() if hit}),
        ancestors,
        classes,
        roles,
        numbers,
    )


def _numbers(tokens: Sequence[str], words: NumberWords) -> Qualifiers:
    found: dict[str, set[str]] = {}
    for i, token in enumerate(tokens):
        previous = tokens[i - 1] if i else ""
        following = tokens[i + 1 : i + 3]
        if level := words.spinal_level.match(token):
            # "L4-L5", "T11", "C1": the spinal segment is a location like "lumbar".
            found.setdefault(words.level_group, set()).add(words.segments[level.group(1)])
        elif gene_status := _gene_status(token, following, words):
            found.setdefault(token + GENE_STATUS_SUFFIX, set()).add(gene_status)
        elif token.isdigit() or _LETTERED_NUMBER.match(token):
            group = words.after.get(previous, words.other)
            found.setdefault(group, set()).add(token.lstrip("0") or "0")
        elif match := words.type_letter.match(token):
            found.setdefault(words.other, set()).add(match.group(1))
        elif match := _CODE_WITH_NUMBER.match(token):
            found.setdefault(words.other, set()).add(str(int(match.group(1))))
    return {group: frozenset(values) for group, values in found.items()}


def _gene_status(token: str, following: Sequence[str], words: NumberWords) -> str | None:
    """ "TP53-mutant" / "TP53-wildtype": the status of a named gene, a molecular type.

    Only for a gene-like symbol (letters and digits, at most 8 characters, with a digit
    or in capitals upstream: the tokens are lower-case here, so a digit is required
    unless the symbol is a known short gene such as "atrx" or "braf")."""
    if not following or not (_GENE.fullmatch(token) or token in words.genes_without_digit):
        return None
    for status, phrases in words.gene_status:
        for phrase in phrases:
            # One word is the next token; two words are the next two and nothing after.
            if (len(phrase) == 1 and following[0] == phrase[0]) or tuple(following) == phrase:
                return status
    return None


def extract(tokens: Sequence[str], table: QualifierTable) -> Qualifiers:
    """The qualifiers stated in ``tokens`` (normalized words), longest phrases first."""
    return extract_with_words(tokens, table)[0]


def extract_with_words(
    tokens: Sequence[str], table: QualifierTable
) -> tuple[Qualifiers, dict[str, frozenset[str]]]:
    """The qualifiers stated in ``tokens`` and, per group, the words that state them."""
    found: dict[str, set[str]] = {g: set(v) for g, v in _numbers(tokens, table.numbers).items()}
    words: dict[str, set[str]] = {}
    for start, length, hit in table.index.scan(tokens):
        for group, values in hit:
            found.setdefault(group, set()).update(values)
            words.setdefault(group, set()).update(tokens[start : start + length])
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


def with_narrower(
    stated: Qualifiers, others: Iterable[Qualifiers], table: QualifierTable
) -> Qualifiers:
    """``stated`` with the values of ``others`` that lie within every value it states of
    their group: a bracket's organism narrows the main text's class ("amoebic
    encephalitis (Balamuthia)" is a Balamuthia infection)."""
    out = dict(stated)
    for other in others:
        for group, values in other.items():
            narrower = {
                v
                for v in values
                if group in out
                and all(u in table.ancestors.get((group, v), ()) for u in out[group])
            }
            if narrower:
                out[group] = out[group] | narrower
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
