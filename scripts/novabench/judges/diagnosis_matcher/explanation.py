"""Explanation: the verdict on one pair, the rule that decided it and every rule that fired.

Each reading of the reference is compared with the prediction's readings in turn, until
one decides. Any reading that matches decides a match; then a prediction that names the
reference as its cause matches. A no match decides unless another name of the reference
stays open (``undecided.alternative``) or the prediction names only what the reference
gives as its cause (``undecided.reference-cause``). What stays undecided goes to the
embedding fallback when it is on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

from novabench.judges.diagnosis_matcher.analysis import Analyser, Analysis
from novabench.judges.diagnosis_matcher.decision import Decider
from novabench.judges.diagnosis_matcher.readings import Reader, strip_parentheses
from novabench.judges.diagnosis_matcher.tables import MatcherTables
from novabench.judges.diagnosis_matcher.verdicts import MatchDecision, RuleFiring


class _Trail:
    """The rules fired on one pair so far, in order, and per reading of the reference the
    index in ``fired`` of the verdict it got."""

    def __init__(self) -> None:
        self.fired: list[RuleFiring] = []
        self.verdicts: list[int] = []

    def add(self, rule: str, matched: bool | None, prediction: str, reference: str) -> int:
        self.fired.append(RuleFiring(rule, matched, prediction, reference))
        return len(self.fired) - 1

    def matched(self, at: int) -> bool | None:
        return self.fired[at].matched

    def decided(self, at: int, matched: bool, similarity: float | None = None) -> MatchDecision:
        self.fired[at] = replace(self.fired[at], decided=True)
        return MatchDecision(matched, self.fired[at].rule, similarity, tuple(self.fired))


class Explainer:
    """Decides whole pairs with the readings and the decision rules; ``similarity`` (None:
    no embedding fallback) scores what stays undecided against ``threshold``.
    ``explain`` is cached: the same pairs recur across images and ranks."""

    def __init__(
        self,
        tables: MatcherTables,
        analyser: Analyser,
        reader: Reader,
        decider: Decider,
        similarity: Callable[[str, str], float] | None,
        threshold: float,
    ):
        self._words = tables.words
        self._normalize = tables.normalizer.normalize
        self._analyse = analyser.analyse
        self._names_disease = analyser.names_disease
        self._reader = reader
        self._decide = decider.decide
        self._is_a_name = decider.is_a_name
        self._similarity = similarity
        self._threshold = threshold
        self.explain = functools.lru_cache(maxsize=65536)(self._explain_uncached)

    def _explain_uncached(self, predicted: str, reference: str) -> MatchDecision:
        # Equal whole texts match before they are split into alternatives, which can leave
        # nothing of a text such as "A;0" or "[0]:" on one side.
        whole = self._normalize(reference)
        if whole and self._normalize(predicted) == whole:
            rule = "text.normalized-equal"
            return MatchDecision(True, rule, fired=(RuleFiring(rule, True, whole, whole, True),))
        references = self._reader.references(reference)
        committed = self._reader.commit(predicted)
        predictions = self._reader.predictions(committed)
        trail = self._compare(predictions, references)
        for at in trail.verdicts:
            if trail.matched(at):
                return trail.decided(at, True)
        if cause := self._names_the_cause(committed, references):
            return trail.decided(trail.add("cause.named", True, *cause), True)
        return self._without_a_match(trail, predictions, references, reference)

    def _compare(self, predictions: list[Analysis], references: list[Analysis]) -> _Trail:
        """Each reading of the reference against the prediction's readings in turn, until
        one decides."""
        trail = _Trail()
        for r in references:
            for p in predictions:
                notes: list[str] = []
                matched, rule = self._decide(p, r, notes)
                for note in notes:
                    trail.add(note, None, p.text, r.text)
                trail.add(rule, matched, p.text, r.text)
                if matched is not None:
                    break
            trail.verdicts.append(len(trail.fired) - 1)
        return trail

    def _without_a_match(
        self,
        trail: _Trail,
        predictions: list[Analysis],
        references: list[Analysis],
        reference: str,
    ) -> MatchDecision:
        """No reading matched: a no match, or undecided (then the embedding fallback)."""
        # Alternatives with no disease word ("WHO grade IV") say nothing about the disease.
        naming = [self._is_a_name(r) for r in references]
        open_alternative = _open_alternative(trail, references, naming)
        sequel = self._names_reference_cause(predictions[0], reference)
        for at in trail.verdicts:
            if trail.matched(at) is False and not open_alternative and not sequel:
                return trail.decided(at, False)
        # Any name of the reference matches: one no match while another name of it is
        # undecided leaves the pair undecided.
        if open_alternative and any(trail.matched(at) is False for at in trail.verdicts):
            undecided = "undecided.alternative"
            trail.add(undecided, None, predictions[0].text, references[0].text)
        elif sequel:
            undecided = "undecided.reference-cause"
            trail.add(undecided, None, predictions[0].text, sequel)
        else:
            open_rules = (
                trail.fired[at].rule for at in trail.verdicts if trail.matched(at) is None
            )
            undecided = next(open_rules, "undecided")
        if self._similarity is None or not predictions or not references:
            return MatchDecision(False, undecided, fired=tuple(trail.fired))
        candidates = [r for r, names in zip(references, naming, strict=True) if names] or references
        return self._by_embedding(trail, predictions[0], candidates, self._similarity)

    def _by_embedding(
        self,
        trail: _Trail,
        prediction: Analysis,
        candidates: list[Analysis],
        similarity: Callable[[str, str], float],
    ) -> MatchDecision:
        """The embedding fallback: the closest candidate's similarity against the threshold."""
        scored = [(similarity(prediction.text, r.text), r.text) for r in candidates]
        best, closest = max(scored, key=lambda s: s[0])
        at = trail.add("embedding", best >= self._threshold, prediction.text, closest)
        return trail.decided(at, best >= self._threshold, round(best, 4))

    def _names_the_cause(
        self, committed: str, references: list[Analysis]
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

    def _names_reference_cause(self, p: Analysis, reference: str) -> str | None:
        """ "Carbon monoxide poisoning" for "delayed leukoencephalopathy after carbon
        monoxide poisoning" names what the reference gives as the cause of its disease:
        whether the model saw the disease or only its cause cannot be told. The cause's
        normalized text, or None."""
        parts = self._words.reference_cause.split(strip_parentheses(reference), maxsplit=1)
        if len(parts) < 2 or not self._names_disease(parts[1]):
            return None
        cause = self._analyse(parts[1])
        return cause.text if self._decide(p, cause)[0] else None


def _open_alternative(trail: _Trail, references: list[Analysis], naming: list[bool]) -> bool:
    """An undecided name of the reference leaves the pair open, unless it is a piece of
    one that was decided ("atypical teratoid" of "atypical teratoid/rhabdoid tumor")."""
    decided_words = [
        set(r.tokens)
        for r, at in zip(references, trail.verdicts, strict=True)
        if trail.matched(at) is not None
    ]
    return any(
        trail.matched(at) is None
        and names
        and not any(set(r.tokens) <= words for words in decided_words)
        for r, at, names in zip(references, trail.verdicts, naming, strict=True)
    )
