"""The matcher's tables loaded: the synonym tables checked and read into what each stage
uses (rule words, normalizer, word sets, qualifier table, concepts)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from novabench.judges import diagnosis_qualifiers as qualifiers
from novabench.judges.diagnosis_matcher.concepts import ConceptTable, load_concepts
from novabench.judges.diagnosis_matcher.schema import check_tables, read_yaml
from novabench.judges.diagnosis_matcher.text import Normalizer, phrase_tokens, raw_tokens
from novabench.judges.diagnosis_matcher.words import RuleWords
from novabench.judges.vocabulary import Vocabulary


@dataclass(frozen=True)
class MatcherTables:
    """Everything the matcher's stages read from its tables."""

    words: RuleWords
    normalizer: Normalizer
    connectors: list[tuple[str, ...]]
    negations: frozenset[str]
    generic_modifiers: frozenset[str]
    generic_heads: frozenset[str]
    # Words after which a prediction names what it does not commit to ("rather than").
    cutoffs: list[str]
    cutoff_pattern: re.Pattern[str]
    qualifier_table: qualifiers.QualifierTable
    concepts: ConceptTable
    synonyms_sha256: str


def load_tables(path: Path, vocabulary: Vocabulary, ontology_path: Path | None) -> MatcherTables:
    """The synonym tables at ``path`` (checked, see ``schema``), with the concepts of
    ``vocabulary`` and of the ontology table at ``ontology_path`` (None: without it)."""
    raw, tables = read_yaml(path, "the diagnosis synonym tables")
    check_tables(tables, path)
    words = RuleWords.from_tables(tables["rule_words"])
    normalizer = Normalizer(tables, words)

    def token_set(key: str) -> frozenset[str]:
        return frozenset(t for item in tables[key] for t in raw_tokens(item, words))

    cutoffs = tables.get("prediction_cutoffs") or []
    qualifier_table = qualifiers.build_table(
        tables.get("qualifiers") or {},
        normalizer.clean_tokens,
        qualifiers.NumberWords.from_words(tables["rule_words"]),
    )
    concepts = load_concepts(
        vocabulary,
        tables,
        path,
        ontology_path,
        normalizer.normalize,
        words,
        qualifier_table.phrases,
    )
    return MatcherTables(
        words=words,
        normalizer=normalizer,
        connectors=phrase_tokens(tables["connectors"], words),
        negations=token_set("negations"),
        generic_modifiers=token_set("generic_modifiers"),
        generic_heads=token_set("generic_heads"),
        cutoffs=cutoffs,
        cutoff_pattern=re.compile(
            r"\b(?:" + "|".join(re.escape(c) for c in cutoffs) + r")\b", re.IGNORECASE
        ),
        qualifier_table=qualifier_table,
        concepts=concepts,
        synonyms_sha256=hashlib.sha256(raw).hexdigest(),
    )
