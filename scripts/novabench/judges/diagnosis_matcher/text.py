"""Normalization: a diagnosis text as tokens, and as the normalized text rules compare.

Word tokens are lower-case, accent-free, American, singular, with Roman numerals as digits,
edition words dropped ("CNS WHO grade 3" = "WHO grade III") and types moved after the name
they type (``raw_tokens``). The Normalizer then drops hedges with a report's opening around
them, and filler words, writes out expansions and unifies word variants (the tables' word
lists).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from novabench.judges.diagnosis_matcher.words import RuleWords
from novabench.text import (
    PhraseIndex,
    american_spelling,
    drop_possessives,
    fold_accents,
    ize_spelling,
    roman_numeral,
    singular,
)

TYPE_NUMBER = re.compile(r"\d{1,2}[a-d]?")  # "2", "2b"
CODE_NUMBER = re.compile(r"([a-z]{2,4})(\d{1,2}[a-d]?)")  # "sca1", "pch2"


def _singular(token: str, words: RuleWords) -> str:
    """Singular form of one lower-case token (novabench.text.singular)."""
    return singular(token, words.singular_exceptions)


def raw_tokens(text: str, words: RuleWords) -> list[str]:
    """Lower-case, American, singular word tokens of ``text`` (nothing removed)."""
    text = fold_accents(text, letters=True)
    text = drop_possessives(text)  # "Wilson's disease"
    text = re.sub(r"\b([A-Z]{2,})s\b", r"\1", text)  # abbreviation plurals: "AVMs"
    text = american_spelling(text)
    # "non-aneurysmal" = "nonaneurysmal": one word, so the prefix cannot be read as a
    # negation of the whole diagnosis ("non-Hodgkin lymphoma" is a lymphoma).
    text = re.sub(r"\bnon[\s-]+(?=[a-z])", "non", text)
    text = re.sub(r"\bpost-(?=[a-z])", "post", text)  # "post-infectious": no "post" clause
    for long, short in words.abbreviated:  # "central nervous system" -> "cns"
        text = long.sub(short, text)
    text = ize_spelling(text)  # "necrotising", "generalised"
    text = re.sub(r"(?<=[a-z])-(?=\d)", "", text)  # "NF-1" -> "nf1"
    tokens = re.findall(r"[a-z0-9]+", text)
    out: list[str] = []
    for token in tokens:
        token = _roman(token, out[-1] if out else "", words)
        # "NF 1", "HSV 1" -> "nf1", "hsv1" (short letter prefix + one digit)
        if token.isdigit() and len(token) == 1 and out and is_code(out[-1], words):
            out[-1] += token
            continue
        out.append(_singular(token, words))
    if len(out) > 1 and out[-1] == "i" and out[-2].isalpha() and len(out[-2]) >= 3:
        out[-1] = "1"  # a closing roman one: "neurofibromatosis I", "MPS I"
    return move_types(_drop_edition_words(out, words), words)


def _roman(token: str, previous: str, words: RuleWords) -> str:
    """Roman numerals as digits (novabench.text.roman_numeral): a bare "i" or "ia" only
    after a word that takes a number ("type I") or, lettered, after a code ("FCD Ia")."""
    after_number_word = previous in words.numeral_after
    lettered = not after_number_word and token[:1] == "i" and len(token) == 2
    return roman_numeral(token, after_number_word, lettered and is_code(previous, words))


def _drop_edition_words(tokens: list[str], words: RuleWords) -> list[str]:
    """ "CNS WHO grade 4" and "WHO grade IV" read as "grade 4": the 2021 and 2016
    classifications write the same grade with different words."""
    out: list[str] = []
    for i, token in enumerate(tokens):
        if not any(
            phrase[0] == token and tuple(tokens[i + 1 : i + len(phrase) + 1]) == (*phrase[1:], word)
            for word, before in words.edition_words
            for phrase in before
        ):
            out.append(token)
    return out


def compact_key(tokens: Iterable[str], words: RuleWords) -> tuple[str, ...]:
    return tuple(sorted(t for t in tokens if t not in words.function_words))


def is_code(token: str, words: RuleWords) -> bool:
    """A short letter code a number attaches to ("nf" 1, "hsv" 1, "mps" 2)."""
    return token.isalpha() and len(token) <= 3 and token not in words.not_codes


def move_types(tokens: list[str], words: RuleWords) -> list[str]:
    """Write "type N X" as "X N" and "type C" / "group B" as one token "typec" / "groupb".

    "Type 1 neurofibromatosis" then reads as "neurofibromatosis (type) 1", the order the
    names in the tables use; a letter type keeps its word so that the article filler "a"
    cannot swallow "type A" or "group A".
    """
    out = list(tokens)
    for i in range(len(out) - 1):
        word = out[i]
        if word not in words.type_words or not out[i + 1].isalpha() or len(out[i + 1]) != 1:
            continue
        out[i : i + 2] = ["", f"{word}{out[i + 1]}"]
    out = [t for t in out if t]
    if len(out) > 2 and out[0] == words.leading_type and TYPE_NUMBER.fullmatch(out[1]):
        # The number goes after the name it types, before any trailing clause.
        ends = words.type_name_ends
        end = next((j for j in range(2, len(out)) if out[j] in ends), len(out))
        out = [*out[2:end], out[1], *out[end:]]
    return out


def phrase_tokens(items: Iterable[str], words: RuleWords) -> list[tuple[str, ...]]:
    """Token tuples of multi-word phrases, longest first."""
    found = {tuple(raw_tokens(item, words)) for item in items}
    return sorted((p for p in found if p), key=len, reverse=True)


def remove_phrases(tokens: list[str], index: PhraseIndex) -> list[str]:
    """``tokens`` without the phrases of ``index`` (the longest at each position)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        length, _ = index.longest(tokens, i)
        if not length:
            out.append(tokens[i])
        i += max(length, 1)
    return out


class Normalizer:
    """Clean tokens and the normalized text of a diagnosis, with the tables' word lists:
    hedges and a report's opening around them, filler words, expansions and word variants.
    ``normalize`` is cached: the same strings recur across images and ranks."""

    def __init__(self, tables: dict[str, Any], words: RuleWords):
        def tokens(text: str) -> list[str]:
            return raw_tokens(text, words)

        self.words = words
        self.hedges = PhraseIndex(dict.fromkeys(phrase_tokens(tables["hedges"], words), True))
        self.filler = {t for item in tables["filler"] for t in tokens(item)}
        self.word_variants = {
            " ".join(tokens(k)): " ".join(tokens(v))
            for k, v in (tables.get("word_variants") or {}).items()
        }
        self.expansions = {
            tuple(tokens(short)): tokens(long)
            for short, long in (tables.get("expansions") or {}).items()
        }
        self.expansion_index = PhraseIndex(self.expansions)
        self.normalize = functools.lru_cache(maxsize=65536)(self._normalize_uncached)

    def _normalize_uncached(self, text: str) -> str:
        return " ".join(self.clean_tokens(text))

    def clean_tokens(self, text: str) -> list[str]:
        """The tokens of ``text`` that name the diagnosis and its qualifiers."""
        tokens = self._without_lead_in(raw_tokens(text or "", self.words))
        tokens = remove_phrases(tokens, self.hedges)
        if self.expansions:
            tokens = move_types(self._expand(tokens), self.words)
        out: list[str] = []
        for token in tokens:
            token = self.word_variants.get(token, token)
            if token in self.filler:
                continue
            if token.isdigit() and len(token) == 1 and out and is_code(out[-1], self.words):
                out[-1] += token  # "MPS type II" -> "mps2", as "MPS II" and "MPS-2"
                continue
            out.append(token)
        return out

    def _without_lead_in(self, tokens: list[str]) -> list[str]:
        """A report's opening of hedges and the words around them dropped ("The
        appearance is typical of X", "The most likely diagnosis is X"): those words say
        how sure the reader is, and left in they read as an unknown kind of X."""
        start, hedged = 0, False
        while start < len(tokens):
            length, _ = self.hedges.longest(tokens, start)
            if not length and tokens[start] not in self.words.lead_in:
                break
            start += max(length, 1)
            hedged = hedged or bool(length)
        # Without a hedge the words may be the name itself.
        return tokens[start:] if hedged and start < len(tokens) else tokens

    def _expand(self, tokens: list[str]) -> list[str]:
        """Abbreviations and names that carry a qualifier, written out ("RRMS" ->
        "relapsing remitting multiple sclerosis"), so the qualifier is compared too."""
        out: list[str] = []
        i = 0
        while i < len(tokens):
            length, long = self.expansion_index.longest(tokens, i)
            out.extend(long if length else tokens[i : i + 1])
            i += max(length, 1)
        return out
