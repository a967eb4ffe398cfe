"""Text analysis: a diagnosis text read into its tokens, names, core part and qualifiers.

A cause written first becomes a clause, split words that are one known word are joined,
codes with a type number are split, and a whole text that is a known name in another word
order is that name. The longest known names are found; the core part ends at the first
connector outside a name ("glioblastoma with hemorrhage" is a glioblastoma); the
qualifiers stated before a clause (and, for some groups, in the whole text) are read; a
known name preceded by words the tables do not know is a *partial* concept, an unknown
kind of it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from novabench.judges import diagnosis_qualifiers as qualifiers
from novabench.judges.diagnosis_matcher.tables import MatcherTables
from novabench.judges.diagnosis_matcher.text import CODE_NUMBER, TYPE_NUMBER, compact_key


@dataclass(frozen=True)
class Analysis:
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


class Analyser:
    """Reads texts into Analysis records with the matcher's tables; ``analyse`` is cached
    (the same strings recur across images and ranks)."""

    def __init__(self, tables: MatcherTables):
        self._words = tables.words
        self._clean_tokens = tables.normalizer.clean_tokens
        self._connectors = tables.connectors
        self._negations = tables.negations
        self._generic_modifiers = tables.generic_modifiers
        self._generic_heads = tables.generic_heads
        self._qualifier_table = tables.qualifier_table
        self._concepts = tables.concepts.concepts
        self._alias_to_concept = tables.concepts.alias_to_concept
        self._alias_index = tables.concepts.alias_index
        self._compact_aliases = tables.concepts.compact_aliases
        self._vocabulary = tables.concepts.vocabulary
        self._name_bigrams = tables.concepts.name_bigrams
        self.analyse = functools.lru_cache(maxsize=65536)(self._analyse_uncached)

    def _analyse_uncached(self, text: str) -> Analysis:
        tokens = self._tokens(text)
        matches, covered = self._known_names(tokens)
        core_end = self._clause_end(tokens, covered)
        qualifier_end = self._qualifier_end(tokens, covered)
        negated, core = self._core_names(tokens, covered, matches, core_end)
        qualifier_tokens = tokens[:qualifier_end] if core_end > 0 else tokens
        stated, words_of = self._stated_qualifiers(tokens, qualifier_tokens)
        stating = frozenset().union(*words_of.values())
        core_tokens = tokens[:core_end] if core_end > 0 else tokens
        concepts, written = self._core_concepts(tokens, covered, core, core_tokens, stating)
        loose = frozenset(t for t, known in zip(tokens, covered, strict=True) if not known)
        inherent = [self._concepts[cid].qualifiers for cid, partial in concepts if not partial]
        table = self._qualifier_table
        return Analysis(
            text=" ".join(tokens),
            tokens=tuple(tokens),
            core_concepts=concepts,
            core_words=frozenset(t for t in core_tokens if t not in self._generic_modifiers),
            negated=negated,
            qualifiers=qualifiers.with_inherent(stated, inherent),
            site_words=frozenset().union(
                *(w for g, w in words_of.items() if table.has_role(g, "site"))
            ),
            qualifier_words=stating,
            negation_words=loose & self._negations,
            like_name=self._words.like in loose,
            clause_qualifiers=qualifiers.extract(tokens[qualifier_end:], table)
            if core_end > 0
            else {},
            concept_words=written,
        )

    def _tokens(self, text: str) -> list[str]:
        """The clean tokens, a cause written first moved last, split words joined, codes
        split and a known name in another word order written as that name."""
        tokens = self._clean_tokens(self._cause_last(text))
        return self._written_out(self._split_codes(self._joined(tokens)))

    def _qualifier_end(self, tokens: list[str], covered: list[bool]) -> int:
        """Where the qualifiers of the main part end: qualifiers also come from an "in"
        clause ("epilepsy in the left frontal lobe")."""
        vocabulary = self._words
        qualifier_end = self._clause_end(tokens, covered, skip=vocabulary.qualifier_clause)
        if vocabulary.between in tokens[:qualifier_end]:
            # "infarct between the ACA and MCA territories" lies in neither territory.
            qualifier_end = tokens.index(vocabulary.between)
        return qualifier_end

    def _core_names(
        self,
        tokens: list[str],
        covered: list[bool],
        matches: list[tuple[int, int, str]],
        core_end: int,
    ) -> tuple[bool, list[tuple[int, int, str]]]:
        """Whether the core part is negated, and the known names no negation precedes
        in the core part (in the whole text when the core part has none)."""

        def negated_at(start: int) -> bool:
            return start > 0 and not covered[start - 1] and tokens[start - 1] in self._negations

        negated = any(not covered[i] and tokens[i] in self._negations for i in range(core_end))
        usable = [m for m in matches if not negated_at(m[0])]
        return negated, [m for m in usable if m[0] < core_end] or usable

    def _core_concepts(
        self,
        tokens: list[str],
        covered: list[bool],
        core: list[tuple[int, int, str]],
        core_tokens: list[str],
        stating: frozenset[str],
    ) -> tuple[tuple[tuple[str, bool], ...], dict[str, frozenset[str]]]:
        """The core concepts as (concept id, partial: words the tables do not know come
        before the name), and the words that name each as written."""
        # A word that states a qualifier ("hypothalamic pilocytic astrocytoma", the "5" of
        # "grade 5 AVM") is compared as that qualifier, not read as an unknown kind of the
        # disease.
        numbers = {t for t in tokens if TYPE_NUMBER.fullmatch(t)}
        ignorable = self._generic_modifiers | self._generic_heads | self._negations | stating
        ignorable |= numbers
        concepts = tuple(
            (
                cid,
                any(not covered[j] and tokens[j] not in ignorable for j in range(start)),
            )
            for start, _, cid in core
        )
        written: dict[str, frozenset[str]] = {}
        for start, end, cid in core:
            written[cid] = written.get(cid, frozenset()) | frozenset(tokens[start:end])
        unnamed = not concepts or any(partial for _, partial in concepts)
        if unnamed and (bare := self._name_without_qualifiers(core_tokens, stating)):
            concepts = bare
            written[bare[0][0]] = frozenset(t for t in core_tokens if t not in stating)
        return concepts, written

    def _name_without_qualifiers(
        self, core: list[str], stating: frozenset[str]
    ) -> tuple[tuple[str, bool], ...]:
        """A known name split by qualifier words ("saccular MCA bifurcation aneurysm" is a
        saccular aneurysm at the MCA bifurcation); empty when there is none."""
        bare = [t for t in core if t not in stating]
        if not bare or len(bare) == len(core):
            return ()
        cid = self._alias_to_concept.get(" ".join(bare))
        if cid is None and (alias := self._compact_aliases.get(compact_key(bare, self._words))):
            cid = self._alias_to_concept[alias]
        return ((cid, False),) if cid else ()

    def _cause_last(self, text: str) -> str:
        """ "Chemotherapy-induced PRES" read as "PRES due to chemotherapy": the cause
        becomes a clause, so that two causes of one disease name one disease."""
        found = self._words.cause_first.match(text)
        if found is None or " ".join(self._clean_tokens(text)) in self._alias_to_concept:
            return text
        disease = found["disease"]
        if not self.names_disease(disease):
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
            code = CODE_NUMBER.fullmatch(token)
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
        alias = self._compact_aliases.get(compact_key(tokens, self._words))
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

    def names_disease(self, text: str) -> bool:
        """The text names a known disease by a whole name (no unknown kind of one)."""
        return any(not partial for _, partial in self.analyse(text).core_concepts)
