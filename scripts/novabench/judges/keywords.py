"""Offline caption judge: keywords and a normal/abnormal label from a curated lexicon.

The paper's judge is an LLM; this one is a transparent, deterministic stand-in that needs
no network and no model. It reads a reviewed lexicon (``lexicon.yaml`` next to this file;
its header explains the rules: synonyms, longest match, laterality, negation scope).
Matching is hand-written rather than done with a clinical NLP library (scispaCy, medspaCy)
because those need model or vocabulary downloads, and a small phrase matcher over a data
file is easy to review.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from novabench.errors import ConfigError
from novabench.judges.base import NEGATED_PREFIX, JudgeKind, KeywordSet, register_judge_kind

DEFAULT_LEXICON = Path(__file__).with_name("lexicon.yaml")

# Words: letters/digits, keeping "t2*", "t1+c" and a leading "+" ("+C") together; decimals
# stay one token so their dot does not end a negation scope. Sentence punctuation is kept
# as a boundary token; everything else (hyphens, slashes, brackets, quotes) separates words.
_TOKEN = re.compile(r"\d+(?:\.\d+)+|\+?[a-z0-9]+(?:[*+][a-z0-9]*)*|[.;:!?,]", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s\b", re.IGNORECASE)
_BOUNDARIES = frozenset(".;:!?,")
# Bumped whenever the extraction rules in this module change (the lexicon has its own).
MATCHER_VERSION = "2"
_SENTENCE_ENDS = frozenset(".;:!?")
_LIST_CLOSERS = frozenset({"or", "nor"})


def _list_goes_on(lowered: list[str], comma: int) -> bool:
    """Whether the rest of the sentence after a comma closes a list with "or"/"nor"."""
    for token in lowered[comma + 1 :]:
        if token in _SENTENCE_ENDS:
            return False
        if token in _LIST_CLOSERS:
            return True
    return False


@dataclass(frozen=True)
class _Entry:
    """What a matched phrase means."""

    keys: tuple[str, ...] = ()  # concepts named by the phrase
    negated: bool = False  # the phrase itself is a negated concept ("non-enhancing")
    negates_after: bool = False  # opens a negation scope over what follows
    negates_before: bool = False  # negates what came since the last boundary
    ends_scope: bool = False
    location: bool = False  # ends the scope once a negated concept has been seen


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(_POSSESSIVE.sub("", text))


def _plurals(form: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Regular plurals of a form's last word (irregular ones are listed in the lexicon)."""
    *head, last = form
    if not last.isalpha():
        return []
    variants = [last + "s"]
    if last.endswith(("s", "x", "z", "ch", "sh")):
        variants.append(last + "es")
    if last.endswith("y") and last[-2:-1] not in ("a", "e", "o", "u"):
        variants.append(last[:-1] + "ies")
    return [(*head, variant) for variant in variants]


class KeywordJudge:
    """Extracts normalized keywords and a normal/abnormal label with a lexicon."""

    name = "keyword-lexicon"

    def __init__(self, lexicon_path: Path | None = None):
        self.lexicon_path = Path(lexicon_path) if lexicon_path else DEFAULT_LEXICON
        try:
            raw = self.lexicon_path.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the judge lexicon {self.lexicon_path} ({exc})",
                "point lexicon_path at a lexicon YAML file",
            ) from exc
        self._sha256 = hashlib.sha256(raw).hexdigest()
        lexicon = yaml.safe_load(raw)
        self.version = str(lexicon["version"])
        self._groups: dict[str, dict] = {}
        self._phrases: dict[tuple[str, ...], _Entry] = {}
        self._exact: dict[tuple[str, ...], _Entry] = {}
        self._load(lexicon)
        self._longest = max(len(p) for p in (*self._phrases, *self._exact))

    # -- lexicon loading -------------------------------------------------------------
    def _fail(self, problem: str) -> ConfigError:
        return ConfigError(f"judge lexicon {self.lexicon_path.name}: {problem}", "fix the lexicon")

    def _form(self, form: object) -> tuple[str, ...]:
        # YAML 1.1 reads bare no/yes/on/off as booleans: insist on strings.
        if not isinstance(form, str) or not _tokens(form):
            raise self._fail(f"form {form!r} is not a non-empty string (quote it)")
        return tuple(_tokens(form))

    def _add(self, table: dict, tokens: tuple[str, ...], entry: _Entry, explicit: bool = True):
        known = table.get(tokens)
        if known is None:
            table[tokens] = entry
        elif known != entry and explicit:
            raise self._fail(f"form {' '.join(tokens)!r} has two meanings")

    def _load(self, lexicon: dict) -> None:
        concept_group: dict[str, str] = {}
        for group_name, group in lexicon["groups"].items():
            self._groups[group_name] = {
                "abnormal": bool(group["abnormal"]),
                "negatable": bool(group["negatable"]),
            }
            for key, forms in group["concepts"].items():
                if key in concept_group:
                    raise self._fail(f"concept {key!r} is defined twice")
                concept_group[key] = group_name
                for form in forms:
                    self._add(self._phrases, self._lower(form), _Entry((key,)))
        self._concept_group = concept_group

        def known(keys: list[str]) -> tuple[str, ...]:
            for key in keys:
                if key not in concept_group:
                    raise self._fail(f"unknown concept {key!r}")
            return tuple(keys)

        for form, keys in (lexicon.get("compounds") or {}).items():
            self._add(self._phrases, self._lower(form), _Entry(known(list(keys))))
        for form, key in (lexicon.get("negated_forms") or {}).items():
            self._add(self._phrases, self._lower(form), _Entry(known([key]), negated=True))
        for form, key in (lexicon.get("exact_forms") or {}).items():
            self._add(self._exact, self._form(form), _Entry(known([key])))

        negation = lexicon["negation"]
        before, after = set(), set()
        for form in negation["before"]:
            before.add(self._lower(form))
        for form in negation["after"]:
            after.add(self._lower(form))
        for tokens in before | after:
            entry = _Entry(negates_after=tokens in before, negates_before=tokens in after)
            self._add(self._phrases, tokens, entry)
        for form in negation["scope_enders"]:
            self._add(self._phrases, self._lower(form), _Entry(ends_scope=True))
        for form in negation.get("location_words") or []:
            self._add(self._phrases, self._lower(form), _Entry(location=True))

        # Plurals last, so that an explicit form always wins over a generated one.
        for tokens, entry in list(self._phrases.items()):
            if entry.keys and not entry.negated:
                for plural in _plurals(tokens):
                    self._add(self._phrases, plural, entry, explicit=False)

    def _lower(self, form: object) -> tuple[str, ...]:
        return tuple(t.lower() for t in self._form(form))

    # -- judging -----------------------------------------------------------------------
    def identity(self) -> dict:
        """Name, matcher and lexicon versions, the lexicon's SHA-256 (recorded with scores)."""
        return {
            "name": self.name,
            "matcher_version": MATCHER_VERSION,
            "version": self.version,
            "lexicon": self.lexicon_path.name,
            "lexicon_sha256": self._sha256,
        }

    def _match(self, original: list[str], lowered: list[str], i: int) -> tuple[int, _Entry]:
        """Longest phrase at position ``i`` (case-sensitive forms first); (0, None) if none."""
        for length in range(min(self._longest, len(lowered) - i), 0, -1):
            entry = self._exact.get(tuple(original[i : i + length]))
            if entry is None:
                entry = self._phrases.get(tuple(lowered[i : i + length]))
            if entry is not None:
                return length, entry
        return 0, None

    def extract(self, text: str) -> KeywordSet:
        """Keywords and the normal/abnormal label of one caption."""
        original = _tokens(text or "")
        lowered = [t.lower() for t in original]
        # Each mention: [key, negated]; the clause list lets a later "not seen" negate it.
        mentions: list[list] = []
        clause: list[list] = []
        in_scope = negated_in_scope = False
        i = 0
        while i < len(lowered):
            if lowered[i] in _BOUNDARIES:
                # "No hemorrhage, edema or mass effect": a comma inside a negated list
                # (one closed by "or"/"nor" in the same sentence) keeps the negation open.
                if not (lowered[i] == "," and negated_in_scope and _list_goes_on(lowered, i)):
                    in_scope = negated_in_scope = False
                    clause = []
                i += 1
                continue
            length, entry = self._match(original, lowered, i)
            if entry is None:
                i += 1
                continue
            i += length
            if entry.ends_scope or (entry.location and negated_in_scope):
                in_scope = negated_in_scope = False
                if entry.ends_scope:
                    clause = []
                continue
            if entry.negates_before:
                for mention in clause:
                    mention[1] = True
            if entry.negates_after:
                in_scope, negated_in_scope = True, False
            for key in entry.keys:
                negatable = self._groups[self._concept_group[key]]["negatable"]
                mention = [key, entry.negated or (in_scope and negatable)]
                mentions.append(mention)
                negated_in_scope = negated_in_scope or (in_scope and negatable)
                if negatable:
                    clause.append(mention)
        keywords = {NEGATED_PREFIX + key if negated else key for key, negated in mentions}
        abnormal = any(
            not negated and self._groups[self._concept_group[key]]["abnormal"]
            for key, negated in mentions
        )
        return KeywordSet(frozenset(keywords), abnormal)


@register_judge_kind
class KeywordLexiconKind(JudgeKind):
    """``kind: keyword-lexicon``: this module's offline caption judge."""

    name = "keyword-lexicon"
    tasks = ("captioning",)
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"lexicon_path": {"type": "string", "minLength": 1}},
    }

    def build(self, name, settings, task, cache_dir=None) -> KeywordJudge:
        return KeywordJudge(**settings)
