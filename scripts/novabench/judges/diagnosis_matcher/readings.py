"""Readings: which parts of a prediction and of a reference are compared.

A reference matches when any of its alternatives does: its parentheses, "A/B", "A or B",
"A vs B", an index-style title read in natural order ("Leukodystrophy, metachromatic"), and
for a "lesion in syndrome" title the syndrome. A prediction counts only for what it commits
to: the diagnosis it explicitly favours ("..., but favour B"), else the first one named
("A or B", "A, B", "A/B", "A, B less likely"), with its parentheses as a fallback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from novabench.judges import diagnosis_qualifiers as qualifiers
from novabench.judges.diagnosis_matcher.analysis import Analyser, Analysis
from novabench.judges.diagnosis_matcher.tables import MatcherTables
from novabench.judges.diagnosis_matcher.words import RuleWords


class Reader:
    """The readings of a prediction and of a reference, analysed."""

    def __init__(self, tables: MatcherTables, analyser: Analyser):
        self._words = tables.words
        self._cutoffs = tables.cutoffs
        self._cutoff_pattern = tables.cutoff_pattern
        self._qualifier_table = tables.qualifier_table
        self._groups = tables.concepts.groups
        self._analyse = analyser.analyse
        self._names_disease = analyser.names_disease

    def references(self, reference: str) -> list[Analysis]:
        """The reference's readings: its alternatives, then a "lesion in syndrome"
        title's syndrome."""
        return self._reference_readings(reference) + self._compound_parts(reference)

    def predictions(self, committed: str) -> list[Analysis]:
        """The readings of what a prediction commits to (``commit``): its main text, then
        its parentheses."""
        predictions = [
            self._analyse(self._uninverted(t)) for t in _prediction_alternatives(committed)
        ]
        # What the prediction's brackets state qualifies its main text too ("juvenile
        # NCL (CLN3)" is a type 3).
        predictions[0] = _taking_bracket_qualifiers(
            predictions[0], predictions[1:], self._qualifier_table
        )
        return predictions

    def _reference_readings(self, reference: str) -> list[Analysis]:
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

    def commit(self, predicted: str) -> str:
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

    def _compound_parts(self, reference: str) -> list[Analysis]:
        """For "lesion in syndrome" titles, the syndrome (naming either one matches).

        Only when what follows "in" names a known disease: "infarct in the MCA territory"
        gives nothing.
        """
        # "MPNST arising in a plexiform neurofibroma" names a transformation, not a
        # lesion of a syndrome.
        parts = self._words.lesion_in.split(strip_parentheses(reference), maxsplit=1)
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


_PARENTHESIS = re.compile(r"[(\[]([^()\[\]]*)[)\]]")


def _taking_bracket_qualifiers(
    main: Analysis, inner: Sequence[Analysis], table: qualifiers.QualifierTable
) -> Analysis:
    """``main`` with the qualifiers its bracketed parts state and it does not, or state
    more narrowly ("amoebic encephalitis (Acanthamoeba)" names the organism)."""
    stated = qualifiers.with_inherent(main.qualifiers, [i.qualifiers for i in inner])
    return replace(
        main, qualifiers=qualifiers.with_narrower(stated, [i.qualifiers for i in inner], table)
    )


def strip_parentheses(text: str) -> str:
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


def _reference_alternatives(text: str, words: RuleWords) -> list[str]:
    """The reference and its alternative names: parentheses, "A/B", "A or B", "A vs B".

    A slash may also join the words of one name ("tremor/ataxia syndrome"): each piece is
    also read whole, the slash as a space.
    """
    pieces = [strip_parentheses(text), *_PARENTHESIS.findall(text)]
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
    main = strip_parentheses(text)
    return [t for t in dict.fromkeys([main, *_PARENTHESIS.findall(text)]) if t.strip()] or [text]
