"""The known diagnoses: concepts, their names and is-a relations, and the indexes of names.

Names and synonyms come from the diagnosis vocabulary, then the ``concepts`` table of the
synonym tables, then (lowest priority) the generated ontology table; ``broader`` gives the
is-a relations, ``groups`` the class names that commit to no member, ``inherent`` the
qualifiers a concept states by its name. A name claimed by two concepts, a name no concept
has, or a cycle of is-a relations is refused with a one-line NovaError.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.judges.diagnosis_matcher.schema import read_yaml
from novabench.judges.diagnosis_matcher.text import compact_key
from novabench.judges.diagnosis_matcher.words import RuleWords
from novabench.judges.vocabulary import Vocabulary
from novabench.text import PhraseIndex


@dataclass
class Concept:
    """One known diagnosis: its display name, normalized names, broader concepts (is-a)
    and the qualifiers its name states (``inherent``)."""

    name: str
    aliases: set[str] = field(default_factory=set)
    broader: set[str] = field(default_factory=set)
    qualifiers: dict[str, frozenset[str]] = field(default_factory=dict)


def load_concepts(
    vocabulary: Vocabulary,
    tables: dict[str, Any],
    path: Path,
    ontology_path: Path | None,
    normalize: Callable[[str], str],
    words: RuleWords,
    qualifier_phrases: Iterable[tuple[str, ...]],
) -> ConceptTable:
    """The concepts of the vocabulary, the synonym tables at ``path`` and the ontology
    table (None: without it), indexed. ``normalize`` gives a name's key; the qualifier
    phrases' words count as known words when split words are joined."""
    table = ConceptTable(normalize, words, path)
    table.add_vocabulary(vocabulary)
    table.add_tables(tables)
    if ontology_path is not None:
        table.ontology_sha256 = table.add_ontology(ontology_path)
    table.build_indexes(qualifier_phrases)
    table.regraded = {table.lookup(n, "regraded") for n in tables.get("regraded") or []}
    return table


class ConceptTable:
    """Concepts by id (a normalized name), every normalized name's concept, the is-a
    closure (``ancestors``), and the indexes the analysis reads names with."""

    def __init__(self, normalize: Callable[[str], str], words: RuleWords, path: Path):
        self._normalize = normalize
        self._words = words
        self.path = path
        self.concepts: dict[str, Concept] = {}
        self.alias_to_concept: dict[str, str] = {}
        self.groups: set[str] = set()
        self.regraded: set[str] = set()
        self.ontology_sha256: str | None = None
        self.ancestors: dict[str, frozenset[str]] = {}
        self.alias_index = PhraseIndex()
        self.compact_aliases: dict[tuple[str, ...], str] = {}
        # Every word of a known name or qualifier phrase, and each pair of neighbours in
        # a name (split words are joined only into a known word no name writes apart).
        self.vocabulary: frozenset[str] = frozenset()
        self.name_bigrams: frozenset[tuple[str, str]] = frozenset()

    # ------------------------------------------------------------------ loading
    def add_vocabulary(self, vocabulary: Vocabulary) -> None:
        for entry in vocabulary.entries:
            cid = self._normalize(entry.name)
            self.concepts[cid] = Concept(name=entry.name)
            for alias in entry.names:
                self._add_alias(cid, alias)

    def add_tables(self, tables: dict[str, Any]) -> None:
        """Names of the synonym tables, their is-a relations and own qualifiers."""
        for name, aliases in (tables.get("concepts") or {}).items():
            key = self._normalize(name)
            cid = self.alias_to_concept.get(key, key)
            self.concepts.setdefault(cid, Concept(name=name))
            for alias in [name, *(aliases or [])]:
                self._add_alias(cid, str(alias))
        for narrow, broad_list in (tables.get("broader") or {}).items():
            cid = self.lookup(narrow, "broader")
            for broad in broad_list or []:
                self.concepts[cid].broader.add(self.lookup(broad, "broader"))
        self.groups = {self.lookup(name, "groups") for name in tables.get("groups") or []}
        for name, stated in (tables.get("inherent") or {}).items():
            cid = self.lookup(name, "inherent")
            self.concepts[cid].qualifiers = {
                group: frozenset(str(v) for v in values) for group, values in stated.items()
            }

    def add_ontology(self, path: Path) -> str:
        """Names from the generated ontology table: the lowest-priority synonyms.

        A group whose names are all unknown becomes a concept; a group with names of one
        known concept adds its other names to it; a group touching two known concepts is
        skipped (the hand-written tables decide, the ontology never merges two entities).
        Returns the table's sha256.
        """
        raw, table = read_yaml(path, "the ontology synonym table")
        groups = table.get("groups") if isinstance(table, dict) else None
        if not isinstance(groups, list) or not all(
            isinstance(g, list) and all(isinstance(n, str) for n in g) for g in groups
        ):
            raise NovaError(
                f"the ontology synonym table {path} has no list 'groups'",
                "regenerate it with scripts/tools/make_ontology_synonyms.py",
            )
        for names in groups:
            keys = {self._normalize(n) for n in names} - {""}
            owners = {self.alias_to_concept[k] for k in keys if k in self.alias_to_concept}
            if len(owners) > 1 or not keys:
                continue
            cid = owners.pop() if owners else min(keys)
            self.concepts.setdefault(cid, Concept(name=names[0]))
            for key in keys:
                self.alias_to_concept.setdefault(key, cid)
                self.concepts[cid].aliases.add(key)
        return hashlib.sha256(raw).hexdigest()

    def build_indexes(self, qualifier_phrases: Iterable[tuple[str, ...]]) -> None:
        """The is-a closure and the name indexes, once every name is known."""
        self.ancestors = {cid: self._closure(cid) for cid in self.concepts}
        self.alias_index = PhraseIndex(
            {tuple(alias.split()): cid for alias, cid in self.alias_to_concept.items()}
        )
        self.compact_aliases = self._compact_index()
        self.vocabulary = frozenset(
            {t for alias in self.alias_to_concept for t in alias.split()}
            | {t for phrase in qualifier_phrases for t in phrase}
        )
        self.name_bigrams = frozenset(
            pair for alias in self.alias_to_concept for pair in itertools.pairwise(alias.split())
        )

    def _compact_index(self) -> dict[tuple[str, ...], str]:
        """The words of a name in any order and without function words -> the name,
        where that is unambiguous ("astrocytoma, IDH-mutant, grade 4" = "IDH-mutant
        astrocytoma, grade 4"; "leukodystrophy, metachromatic")."""
        owners: dict[tuple[str, ...], set[str]] = {}
        for alias in self.alias_to_concept:
            key = compact_key(alias.split(), self._words)
            if len(key) >= 2:
                owners.setdefault(key, set()).add(alias)
        return {
            key: next(iter(aliases))
            for key, aliases in owners.items()
            if len({self.alias_to_concept[a] for a in aliases}) == 1
        }

    def _add_alias(self, cid: str, alias: str) -> None:
        key = self._normalize(alias)
        if not key:
            raise NovaError(f"{alias!r} normalizes to nothing in {self.path}", "remove it")
        owner = self.alias_to_concept.setdefault(key, cid)
        if owner != cid:
            raise NovaError(
                f"diagnosis name {alias!r} is claimed by both {self.concepts[owner].name!r} "
                f"and {self.concepts[cid].name!r}",
                "keep each name or synonym in one entry of the diagnosis vocabulary and "
                "the synonym tables",
            )
        self.concepts[cid].aliases.add(key)
        # "Chiari 1 malformation" is also written "Chiari malformation (type) 1".
        tokens = key.split()
        for i, token in enumerate(tokens[:-1]):
            if token.isdigit() and i and tokens[i - 1] not in self._words.number_words:
                variant = " ".join([*tokens[:i], *tokens[i + 1 :], token])
                if self.alias_to_concept.setdefault(variant, cid) == cid:
                    self.concepts[cid].aliases.add(variant)

    def lookup(self, name: str, section: str) -> str:
        """The concept of a name a section of the tables gives; NovaError when none."""
        cid = self.alias_to_concept.get(self._normalize(name))
        if cid is None:
            raise NovaError(
                f"the {section!r} table of {self.path} names {name!r}, which is no known diagnosis",
                "add it to the diagnosis vocabulary or the concepts table, or fix its spelling",
            )
        return cid

    def _closure(self, cid: str) -> frozenset[str]:
        seen: set[str] = set()
        stack = list(self.concepts[cid].broader)
        while stack:
            current = stack.pop()
            if current == cid:
                raise NovaError(
                    f"the 'broader' table of {self.path} has a cycle through "
                    f"{self.concepts[cid].name!r}",
                    "make broader relations point from narrow to broad only",
                )
            if current not in seen:
                seen.add(current)
                stack.extend(self.concepts[current].broader)
        return frozenset(seen)
