"""The text layer: normalization steps and one phrase index, shared by every reader of
free text (the keyword caption judge, the diagnosis matcher, its vocabulary and the
retrieval baseline).

Each step is a small function a consumer composes in its own order; where consumers
differ, the difference is a named option here, not a second copy:

- :func:`fold_accents` drops diacritics ("Baló" -> "Balo"); ``letters=True`` also spells
  out letters Unicode does not decompose ("ø", "æ", "ß"), as the matcher does.
- :func:`american_spelling` (whole lower-cased text, the ``text`` list of
  ``resources/spelling.yaml``) and :func:`american_word` (one word, the ``words`` list).
- :func:`regular_plurals` (a form's last word made plural) and :func:`singular` (one
  word made singular), :func:`roman_numeral` (a numeral as digits).
- :class:`PhraseIndex`: longest match over a token trie.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import yaml

from novabench import paths
from novabench.errors import ConfigError

# Letters that Unicode does not decompose into a base letter and a diacritic.
_LETTERS = str.maketrans(
    {"ø": "o", "Ø": "O", "æ": "ae", "Æ": "Ae", "œ": "oe", "Œ": "Oe", "ß": "ss", "ł": "l", "đ": "d"}
)
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "vi": "6", "vii": "7", "viii": "8"}
# Numerals that are also letters or words ("i", "v"): digits only where the caller says
# the word before takes a number.
_ROMAN_AFTER_WORD = {"i": "1", "v": "5"}
# A roman numeral with a letter subtype: "IIb", "IIIa".
_ROMAN_LETTERED = re.compile(r"(i|ii|iii|iv)([a-d])")


def fold_accents(text: str, *, letters: bool = False) -> str:
    """Diacritics dropped ("Barré" -> "Barre"); ``letters``: also "ø" -> "o", "æ" -> "ae"."""
    if letters:
        text = text.translate(_LETTERS)
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@functools.cache
def _spelling() -> dict[str, Any]:
    path = paths.RESOURCES / "spelling.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        text = [(re.compile(p), r) for p, r in raw["text"]]
        words = [(re.compile(p), r) for p, r in raw["words"]["rules"]]
        keep = frozenset(raw["words"]["keep"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, re.error) as exc:
        raise ConfigError(
            f"spelling map {path.name}: {type(exc).__name__}: {exc}",
            "give it text: [[pattern, replacement], ...] and words: {rules: [...], keep: [...]}",
        ) from None
    return {"text": text, "words": words, "keep": keep}


_NOT_A_WORD_CHARACTER = re.compile(r"[^a-z0-9]+")
_POSSESSIVE = re.compile(r"['’]s\b")
_POSSESSIVE_ANY_CASE = re.compile(r"['’]s\b", re.IGNORECASE)


def drop_possessives(text: str, *, any_case: bool = False) -> str:
    """ "Wilson's disease" -> "Wilson disease"; ``any_case``: "WILSON'S" too."""
    return (_POSSESSIVE_ANY_CASE if any_case else _POSSESSIVE).sub("", text)


def plain_words(text: str) -> str:
    """American spelling, lower case, letters and digits only, one space between words:
    a light key for looking names up ("Non-Hodgkin's  Lymphoma" -> "non hodgkin s
    lymphoma")."""
    return " ".join(_NOT_A_WORD_CHARACTER.sub(" ", american_spelling(text)).split())


def american_spelling(text: str) -> str:
    """Lower-case ``text`` and rewrite British medical spellings to American (the ``text``
    list: patterns over the whole text, so "haematoma" and "ischaemic" both change)."""
    text = text.lower()
    for pattern, replacement in _spelling()["text"]:
        text = pattern.sub(replacement, text)
    return text


_ISE = re.compile(r"(?<=[a-z]{3})is(ing|ation|ed)\b")


def ize_spelling(text: str) -> str:
    """-ising, -isation, -ised made -iz- in lower-case text ("necrotising" ->
    "necrotizing"), after three letters so "rising" stays; the matcher's step (the word
    list's -isation/-ising rules are the keyword judge's)."""
    return _ISE.sub(r"iz\1", text)


@functools.cache  # words repeat across forms and captions
def american_word(word: str) -> str:
    """One lower-case word in American spelling (the ``words`` list, its kept words
    unchanged: "raising" is no "-ising" verb)."""
    spelling = _spelling()
    if word in spelling["keep"]:
        return word
    for pattern, replacement in spelling["words"]:
        word = pattern.sub(replacement, word)
    return word


def regular_plurals(form: Sequence[str]) -> list[tuple[str, ...]]:
    """Regular plurals of a form's last word (+s; +es after s, x, z, ch, sh; consonant+y
    -> ies); none for a last word that is not all letters."""
    *head, last = form
    if not last.isalpha():
        return []
    variants = [last + "s"]
    if last.endswith(("s", "x", "z", "ch", "sh")):
        variants.append(last + "es")
    if last.endswith("y") and last[-2:-1] not in ("a", "e", "o", "u"):
        variants.append(last[:-1] + "ies")
    return [(*head, variant) for variant in variants]


def singular(word: str, exceptions: Mapping[str, str]) -> str:
    """Singular form of one lower-case word.

    A handful of rules instead of a lemmatizer: WordNet-based lemmatizers need corpus
    data at run time, and the same function is applied to both sides compared, so a rare
    wrong stem ("herpes" -> "herpe") still compares equal.
    """
    if word in exceptions:
        return exceptions[word]
    if len(word) <= 4 or not word.isalpha():
        return word  # abbreviations such as "pres", "mets"
    if word.endswith("omata"):
        return word[:-2]  # Greek plurals: "meningiomata", "hamartomata"
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def roman_numeral(word: str, after_number_word: bool, after_code: bool = False) -> str:
    """A roman numeral as digits, a lettered subtype kept: "iii" -> "3", "iib" -> "2b".

    "i" and "v" are numerals only ``after_number_word`` ("type I"); "ia".."id" also
    ``after_code`` ("FCD Ia"); "iia", "iiib", "ivc" are never English words.
    """
    if word in _ROMAN:
        return _ROMAN[word]
    if word in _ROMAN_AFTER_WORD and after_number_word:
        return _ROMAN_AFTER_WORD[word]
    lettered = _ROMAN_LETTERED.fullmatch(word)
    if lettered is None:
        return word
    numeral, letter = lettered.groups()
    if numeral != "i" or after_number_word or after_code:
        return _ROMAN.get(numeral, "1") + letter
    return word


_END = object()  # the trie key that holds a phrase's value


class PhraseIndex:
    """Phrases (tuples of tokens) -> values, for longest match over a token trie.

    Built once; :meth:`longest` finds, at one position, the longest phrase that starts
    there. Ties cannot arise within one index (a phrase has one value; :meth:`add` keeps
    the first value given unless ``replace``); between indexes, :func:`longest_of` gives
    a tie to the index listed first.
    """

    def __init__(self, phrases: Mapping[tuple[str, ...], Any] | None = None) -> None:
        self._root: dict = {}
        self._size = 0
        for phrase, value in (phrases or {}).items():
            self.add(phrase, value)

    def add(self, phrase: Iterable[str], value: Any, replace: bool = False) -> None:
        node = self._root
        for token in phrase:
            node = node.setdefault(token, {})
        if _END not in node:
            self._size += 1
        elif not replace:
            return
        node[_END] = value

    def __len__(self) -> int:
        return self._size

    def get(self, phrase: Iterable[str], default: Any = None) -> Any:
        node = self._root
        for token in phrase:
            node = node.get(token)
            if node is None:
                return default
        return node.get(_END, default)

    def longest(self, tokens: Sequence[str], start: int = 0) -> tuple[int, Any]:
        """(length, value) of the longest phrase at ``tokens[start:]``; (0, None) if none."""
        node, best = self._root, (0, None)
        for i in range(start, len(tokens)):
            node = node.get(tokens[i])
            if node is None:
                break
            if _END in node:
                best = (i - start + 1, node[_END])
        return best

    def scan(self, tokens: Sequence[str]) -> Iterator[tuple[int, int, Any]]:
        """Greedy left to right: (start, length, value) of each longest match; a token no
        phrase starts at is skipped."""
        i = 0
        while i < len(tokens):
            length, value = self.longest(tokens, i)
            if length:
                yield i, length, value
                i += length
            else:
                i += 1


def longest_of(*candidates: tuple[PhraseIndex, Sequence[str]], start: int) -> tuple[int, Any]:
    """The longest match at ``start`` over several (index, tokens) pairs (the same text
    tokenized per index, e.g. as written and lower-cased); a tie goes to the one first."""
    best = (0, None)
    for index, tokens in candidates:
        found = index.longest(tokens, start)
        if found[0] > best[0]:
            best = found
    return best
