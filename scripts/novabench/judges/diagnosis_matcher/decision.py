"""Decision: the rules that decide whether one reading of a prediction names the disease
of one reading of the reference (match / no match / undecided, with the rule's id).

In order: empty or equal normalized texts, negation and "X-like" names, qualifier
conflicts (main parts, then clauses), concepts (same, narrower, broader by dropped words,
a class heading or an unknown kind undecided, different), word containment, a prediction
that names no disease, negation outside the names; else undecided.
"""

from __future__ import annotations

from collections.abc import Sequence

from novabench.judges import diagnosis_qualifiers as qualifiers
from novabench.judges.diagnosis_matcher.analysis import Analysis
from novabench.judges.diagnosis_matcher.tables import MatcherTables
from novabench.judges.diagnosis_matcher.text import TYPE_NUMBER
from novabench.judges.diagnosis_matcher.verdicts import group_rule


class Decider:
    """The decision rules over two analysed readings, with the matcher's tables."""

    def __init__(self, tables: MatcherTables):
        self._words = tables.words
        self._negations = tables.negations
        self._generic_modifiers = tables.generic_modifiers
        self._generic_heads = tables.generic_heads
        self._qualifier_table = tables.qualifier_table
        self._concepts = tables.concepts.concepts
        self._ancestors = tables.concepts.ancestors
        self._groups = tables.concepts.groups
        self._regraded = tables.concepts.regraded

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

    def _names_organism(self, a: Analysis) -> bool:
        """The text names an organism (a cause no other cause lies within)."""
        group = self._words.organism_group
        return any(self._qualifier_table.is_leaf(group, v) for v in a.qualifiers.get(group, ()))

    def _decide_concepts(self, p: Analysis, r: Analysis) -> tuple[bool | None, str] | None:
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

    def _drops_words(self, p: Analysis, r: Analysis, pc: str) -> bool:
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

    def _regraded_pair(self, p: Analysis, r: Analysis) -> bool:
        """Both name a tumour whose grade changed between WHO editions: grades may differ."""
        named = [{c for c, partial in a.core_concepts if not partial} for a in (p, r)]
        return bool(named[0] & named[1] & self._regraded)

    def _decide_words(self, p: Analysis, r: Analysis) -> str | None:
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

    def _clause_conflict(self, p: Analysis, r: Analysis, ignore: Sequence[str]) -> str | None:
        """Qualifiers stated in a clause must agree too: with the other text's clauses
        ("MOGAD with conus myelitis" / "with cervical myelitis"), and, for a side, an
        arterial territory, a grade or a type, with the other text's main part ("CBD with
        left-predominant atrophy" / "CBD, right-predominant"). A clause's site is not
        compared with the main part's: "medulloblastoma with spinal drop metastases" is a
        cerebellar medulloblastoma."""
        table = self._qualifier_table
        if group := qualifiers.conflict(p.clause_qualifiers, r.clause_qualifiers, table, ignore):
            return group

        def widened(a: Analysis) -> qualifiers.Qualifiers:
            extra = {
                g: v for g, v in a.clause_qualifiers.items() if table.has_role(g, "clause-wide")
            }
            return {**extra, **a.qualifiers}

        return qualifiers.conflict(widened(p), widened(r), table, ignore)

    def decide(
        self, p: Analysis, r: Analysis, notes: list[str] | None = None
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
            return False, group_rule("qualifier.conflict", group)
        if group := self._clause_conflict(p, r, ignore):
            return False, group_rule("qualifier.clause-conflict", group)
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

    def _names_a_disease(self, a: Analysis) -> bool:
        """A known name, or a word that is no generic head ("cyst", "lesion")."""
        return bool(a.core_concepts or a.core_words - self._generic_heads)

    def is_a_name(self, a: Analysis) -> bool:
        """A reading of the reference that may name a disease: not only qualifiers ("left
        frontal") or a number (a panel label "2a")."""
        words = a.core_words - self._generic_heads - a.qualifier_words
        return bool(a.core_concepts or {w for w in words if not TYPE_NUMBER.fullmatch(w)})
