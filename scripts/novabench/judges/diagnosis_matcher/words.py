"""The words the matcher's rules are written with: the tables' ``rule_words``, compiled."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def _alternation(phrases: Iterable[str]) -> str:
    """A regex group matching any of ``phrases`` literally, longest first."""
    return "(?:" + "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True)) + ")"


@dataclass(frozen=True)
class RuleWords:
    """The words the rules are written with: the ``rule_words`` section of the tables
    (its comments say what each is for), ready to use."""

    singular_exceptions: dict[str, str]
    numeral_after: frozenset[str]
    not_codes: frozenset[str]
    abbreviated: tuple[tuple[re.Pattern[str], str], ...]
    # word -> the phrases before it that are dropped ("grade" <- "who", "cns who")
    edition_words: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]
    type_words: frozenset[str]
    leading_type: str
    type_name_ends: frozenset[str]
    function_words: frozenset[str]
    number_words: frozenset[str]
    cause_first: re.Pattern[str]
    cause_connector: str
    cause_clause: re.Pattern[str]
    listed: re.Pattern[str]
    alternatives: re.Pattern[str]
    favour: re.Pattern[str]
    over_start: re.Pattern[str]
    over_split: re.Pattern[str]
    latter_former: re.Pattern[str]
    latter: str
    qualifier_clause: tuple[tuple[str, ...], ...]
    between: str
    like: str
    closing: re.Pattern[str]
    lesion_in: re.Pattern[str]
    syndrome_head: re.Pattern[str]
    regraded_group: str
    organism_group: str
    lead_in: frozenset[str]
    reference_cause: re.Pattern[str]

    @classmethod
    def from_tables(cls, w: dict[str, Any]) -> RuleWords:
        return cls(
            singular_exceptions={str(k): str(v) for k, v in w["singular_exceptions"].items()},
            numeral_after=frozenset(w["numeral_after"]),
            not_codes=frozenset(w["not_codes"]),
            abbreviated=tuple(
                (re.compile(rf"\b{re.escape(long)}\b"), short)
                for long, short in w["abbreviated"].items()
            ),
            edition_words=tuple(
                (word, tuple(tuple(p.split()) for p in before))
                for word, before in w["edition_words"].items()
            ),
            type_words=frozenset(w["type_words"]),
            leading_type=w["leading_type"],
            type_name_ends=frozenset(w["type_name_ends"]),
            function_words=frozenset(w["function_words"]),
            number_words=frozenset(w["number_groups"]),
            latter=w["latter"],
            qualifier_clause=tuple(tuple(x.split()) for x in w["qualifier_clause"]),
            between=w["between"],
            like=w["like"],
            regraded_group=w["regraded_group"],
            organism_group=w["organism_group"],
            lead_in=frozenset(w["lead_in_words"]),
            **_clause_patterns(w),
            **_preference_patterns(w),
        )


def _clause_patterns(w: dict[str, Any]) -> dict[str, Any]:
    """The patterns that find causes, alternatives and clauses in a text."""
    alternatives = _alternation(w["alternative_words"])
    not_before = "".join(rf"(?!{re.escape(x)}\b)" for x in w["cause_first_not_before"])
    return {
        "cause_first": re.compile(
            r"^(?P<cause>[^,;()]+?)[- ]"
            + _alternation(w["cause_first"])
            + rf"\s+{not_before}(?P<disease>.+)$",
            re.IGNORECASE,
        ),
        "cause_connector": w["cause_connectors"][0],
        "cause_clause": re.compile(rf"\s+{_alternation(w['cause_connectors'])}\s+", re.IGNORECASE),
        "listed": re.compile(rf"\s+{alternatives}\s+|,|;|/", re.IGNORECASE),
        "alternatives": re.compile(rf"\s+{alternatives}\s+|;", re.IGNORECASE),
        "closing": re.compile(rf"\s*{_alternation(w['closing_words'])}\s+\w+\s*", re.IGNORECASE),
        "lesion_in": re.compile(
            "".join(rf"(?<!{re.escape(x)})" for x in w["transformation_words"])
            + rf"\s+{re.escape(w['lesion_in'])}\s+(?:{_alternation(w['articles'])}\s+)?",
        ),
        "syndrome_head": re.compile(rf"\b{_alternation(w['syndrome_heads'])}\s*$", re.IGNORECASE),
        "reference_cause": re.compile(
            rf"\s+{_alternation(w['reference_cause_connectors'])}\s+", re.IGNORECASE
        ),
    }


def _preference_patterns(w: dict[str, Any]) -> dict[str, re.Pattern[str]]:
    """The patterns that find the diagnosis a prediction favours."""
    favour_not_before = re.escape(w["favour_not_before"])
    intensified = _alternation(w["favour_intensified"])
    return {
        "favour": re.compile(
            rf"\b{_alternation(w['favour_words'])}\b(?!\s+{favour_not_before})"
            rf"|,\s*(?:{re.escape(w['favour_intensifier'])}\s+)?{intensified}\b"
            rf"|,\s*{_alternation(w['favour_after_comma'])}\b",
            re.IGNORECASE,
        ),
        "over_start": re.compile(rf"{re.escape(w['favoured_over'])}\b", re.IGNORECASE),
        "over_split": re.compile(rf"\s+{re.escape(w['favoured_over'])}\s+", re.IGNORECASE),
        "latter_former": re.compile(
            rf"(?:{re.escape(w['definite_article'])} )?" + _alternation([w["latter"], w["former"]]),
            re.IGNORECASE,
        ),
    }
