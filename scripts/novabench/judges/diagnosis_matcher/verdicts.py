"""What the diagnosis matcher says: its rules by id, one rule firing, one decision."""

from __future__ import annotations

from dataclasses import dataclass, field

from novabench.judges.base import Verdict

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


def group_rule(rule: str, group: str) -> str:
    """A per-group rule's id with the qualifier group that disagreed:
    ("qualifier.conflict", "molecular group") -> "qualifier.conflict.molecular-group"."""
    return f"{rule}.{group.replace(' ', '-')}"


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
