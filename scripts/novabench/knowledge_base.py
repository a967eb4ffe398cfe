"""The neuroradiology knowledge base and the BM25 retrieval baseline for Task 3.

The knowledge base (``novabench/resources/knowledge_base.yaml``) lists conditions with their names,
synonyms, typical MRI findings and typical clinical context. It serves two purposes:
the retrieval baseline ranks its entries against a case's clinical history and findings,
and the offline diagnosis matcher takes its synonyms as naming variants of one entity.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from rank_bm25 import BM25Okapi

from novabench import paths
from novabench.errors import NovaError

DEFAULT_KNOWLEDGE_BASE = paths.RESOURCES / "knowledge_base.yaml"

CATEGORIES = (
    "neoplasm",
    "infection",
    "vascular",
    "demyelinating",
    "inflammatory",
    "metabolic",
    "degenerative",
    "congenital",
    "cyst",
    "csf",
    "trauma",
    "other",
)
# The category of a diagnosis that no entry of the knowledge base holds.
UNKNOWN_CATEGORY = "unknown"

_NON_EMPTY = {"type": "string", "pattern": r"\S"}
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["version", "entries"],
    "additionalProperties": False,
    "properties": {
        "version": {"type": "integer", "minimum": 1},
        "entries": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["name", "category", "synonyms", "mri_findings", "clinical_context"],
                "additionalProperties": False,
                "properties": {
                    "name": _NON_EMPTY,
                    "category": {"enum": list(CATEGORIES)},
                    "synonyms": {"type": "array", "items": _NON_EMPTY},
                    "mri_findings": _NON_EMPTY,
                    "clinical_context": _NON_EMPTY,
                },
            },
        },
    },
}

# British spellings rewritten to American ones, applied to lower-cased text. A short
# explicit list: a general spelling library would be a large dependency for a dozen
# medical word roots, and these rules are shared by retrieval and the matcher.
_BRITISH_TO_AMERICAN = (
    (re.compile(r"tumour"), "tumor"),
    (re.compile(r"haem"), "hem"),  # haemorrhage, haematoma, ischaemic
    (re.compile(r"aemi"), "emi"),  # leukaemia, anaemia, hypoglycaemic
    (re.compile(r"aema\b"), "ema"),  # empyaema
    (re.compile(r"oedem"), "edem"),
    (re.compile(r"oesophag"), "esophag"),
    (re.compile(r"paed"), "ped"),
    (re.compile(r"\bfoet"), "fet"),
    (re.compile(r"leuco"), "leuko"),
    (re.compile(r"anaesth"), "anesth"),
    (re.compile(r"coeli"), "celi"),
    (re.compile(r"aetiolog"), "etiolog"),
    (re.compile(r"behaviour"), "behavior"),
    (re.compile(r"\bcolour"), "color"),
    (re.compile(r"sulph"), "sulf"),
    (re.compile(r"\bgrey\b"), "gray"),
    (re.compile(r"\bcentre"), "center"),
    (re.compile(r"\bfibre"), "fiber"),
    (re.compile(r"\bageing\b"), "aging"),
    (re.compile(r"\bneurone"), "neuron"),
    (re.compile(r"coele\b"), "cele"),  # encephalocoele, myelomeningocoele
    (re.compile(r"naev"), "nev"),  # naevus, naevoid
    (re.compile(r"amoeb"), "ameb"),  # amoebic
    (re.compile(r"\boestr"), "estr"),
    (re.compile(r"(?<=[pn])oea\b"), "ea"),  # apnoea, dyspnoea
    (re.compile(r"rrhoea"), "rrhea"),  # rhinorrhoea, otorrhoea
    (re.compile(r"aesth"), "esth"),  # paraesthesia
    (re.compile(r"gynaec"), "gynec"),
)


def american_spelling(text: str) -> str:
    """Lower-case ``text`` and rewrite common British medical spellings to American."""
    text = text.lower()
    for pattern, replacement in _BRITISH_TO_AMERICAN:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True)
class KnowledgeBaseEntry:
    """One condition of the knowledge base."""

    name: str
    category: str
    synonyms: tuple[str, ...]
    mri_findings: str
    clinical_context: str

    @property
    def names(self) -> tuple[str, ...]:
        """The display name followed by every synonym."""
        return (self.name, *self.synonyms)


@dataclass(frozen=True)
class KnowledgeBase:
    """The loaded, validated knowledge base."""

    entries: tuple[KnowledgeBaseEntry, ...]
    version: int
    sha256: str
    path: Path

    def __len__(self) -> int:
        return len(self.entries)

    def category_of(self, diagnosis: str | None) -> str:
        """The pathology category of a diagnosis, or ``"unknown"`` when no entry holds it.

        The entry whose name or synonym is the longest whole-word phrase of ``diagnosis``
        wins, so "Glioblastoma, IDH-wildtype" is a neoplasm and "Atypical meningioma"
        one too; categories are coarse, so a more specific name never changes them. Text
        in parentheses is looked at only when the rest names no entry: it explains, so
        "MELAS (... with stroke-like episodes)" is metabolic, not a stroke.
        """
        text = diagnosis or ""
        for candidate in (re.sub(r"\([^)]*\)", " ", text), text):
            key = f" {_name_key(candidate)} "
            best = max(
                ((len(name), category) for name, category in self._category_names if name in key),
                default=None,
            )
            if best is not None:
                return best[1]
        return UNKNOWN_CATEGORY

    @functools.cached_property
    def _category_names(self) -> tuple[tuple[str, str], ...]:
        """(`` name ``, category) of every name and synonym, normalized once: a dataset's
        categories are looked up once per image."""
        return tuple(
            (f" {name} ", entry.category)
            for entry in self.entries
            for name in map(_name_key, entry.names)
            if name
        )


def _name_key(name: str) -> str:
    # Duplicate check only: the matcher applies its stronger normalization on top.
    return " ".join(re.sub(r"[^a-z0-9]+", " ", american_spelling(name)).split())


def _read_yaml(path: Path) -> tuple[bytes, Any]:
    """The file's bytes (for its hash) and its parsed YAML."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise NovaError(
            f"cannot read the knowledge base {path} ({exc.strerror})",
            "point knowledge_base_path at an existing YAML file such as the shipped one",
        ) from exc
    try:
        # The C loader when libyaml is present: 10x faster than the pure-Python one.
        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise NovaError(
            f"the knowledge base {path} is not valid YAML ({exc})", "fix the YAML syntax"
        ) from exc
    return raw, data


def _check_schema(data: Any, path: Path) -> None:
    try:
        jsonschema.validate(data, _SCHEMA)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "top level"
        if len(exc.absolute_path) >= 2 and exc.absolute_path[0] == "entries":
            item = data["entries"][exc.absolute_path[1]]
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                where += f" ({item['name']!r})"
        raise NovaError(
            f"malformed knowledge base entry in {path} at {where}: {exc.message}",
            "give every entry name, category, synonyms (a list), mri_findings and "
            f"clinical_context, with category one of {', '.join(CATEGORIES)}",
        ) from exc


def _entries(items: list[dict[str, Any]], path: Path) -> tuple[KnowledgeBaseEntry, ...]:
    """The entries, text tidied; a name or synonym shared by two entries is refused."""
    entries = []
    owner: dict[str, str] = {}
    for item in items:
        entry = KnowledgeBaseEntry(
            name=item["name"].strip(),
            category=item["category"],
            synonyms=tuple(s.strip() for s in item["synonyms"]),
            mri_findings=" ".join(item["mri_findings"].split()),
            clinical_context=" ".join(item["clinical_context"].split()),
        )
        for alias in entry.names:
            key = _name_key(alias)
            if owner.get(key, entry.name) != entry.name:
                raise NovaError(
                    f"knowledge base {path}: {alias!r} names both {owner[key]!r} and "
                    f"{entry.name!r}",
                    "keep each name or synonym in one entry only",
                )
            owner[key] = entry.name
        entries.append(entry)
    return tuple(entries)


def load_knowledge_base(path: str | Path | None = None) -> KnowledgeBase:
    """Load and validate the knowledge base YAML (default: the shipped one).

    Raises NovaError when the file is missing, is not YAML, breaks the schema (unknown
    or missing fields, empty text, unknown category) or names one condition twice.
    """
    path = Path(path) if path is not None else DEFAULT_KNOWLEDGE_BASE
    raw, data = _read_yaml(path)
    _check_schema(data, path)
    return KnowledgeBase(
        entries=_entries(data["entries"], path),
        version=data["version"],
        sha256=hashlib.sha256(raw).hexdigest(),
        path=path,
    )


# Words that say nothing about which condition it is: function words, and the boilerplate
# of clinical histories and figure legends (sex, course, sequence, plane, laterality),
# which appears whatever the diagnosis. Kept here rather than taken from nltk's stopwords
# corpus, which would need a data download at install time.
_STOP_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "being",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
        "which",
        "with",
        "within",
        "who",
        "whom",
        "patient",
        "patients",
        "year",
        "years",
        "old",
        "yo",
        "man",
        "woman",
        "male",
        "female",
        "boy",
        "girl",
        "history",
        "presents",
        "presented",
        "presenting",
        "referred",
        "because",
        "relevant",
        "past",
        "complaint",
        "complaints",
        "symptom",
        "symptoms",
        "illness",
        "developed",
        "evolved",
        "worsened",
        "progressed",
        "along",
        "about",
        "over",
        "several",
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "earlier",
        "new",
        "image",
        "images",
        "scan",
        "mr",
        "mri",
        "axial",
        "sagittal",
        "coronal",
        "weighted",
        "t1",
        "t2",
        "flair",
        "dwi",
        "adc",
        "swi",
        "contrast",
        "enhanced",
        "post",
        "shows",
        "show",
        "showing",
        "seen",
        "demonstrates",
        "depicts",
        "reveals",
        "noted",
        "left",
        "right",
        "sided",
        "side",
    }
)
_TOKEN = re.compile(r"[a-z0-9]+")


@functools.cache
def _stem_function():
    # Imported on first use: importing nltk takes seconds, and the diagnosis matcher,
    # which imports this module, never stems.
    from nltk.stem import PorterStemmer

    return functools.lru_cache(maxsize=None)(PorterStemmer().stem)


def retrieval_tokens(text: str) -> list[str]:
    """Tokens for BM25: lower case, American spelling, no stop words, Porter stems."""
    stem = _stem_function()
    return [
        stem(token) for token in _TOKEN.findall(american_spelling(text)) if token not in _STOP_WORDS
    ]


class RetrievalDiagnoser:
    """Rank knowledge base conditions against a case's clinical history and findings.

    Method (Okapi BM25, via ``rank_bm25``): every knowledge base entry becomes one
    document made of its name and synonyms (repeated ``name_weight`` times, so that a
    condition named in the findings weighs more than one shared finding), its typical MRI
    findings and its typical clinical context. The query is the clinical history
    followed by the findings. Both are tokenized the same way (lower case, British
    spellings made American, stop words removed, Porter stems). BM25 scores each document
    by the query terms it contains, weighting rare terms (inverse document frequency) and
    saturating repeated terms (``k1``) with length normalization (``b``). ``b`` is 0.3
    rather than the usual 0.75: the entries are short and of similar length, and strong
    length normalization let the shortest entries win on generic words (on the project's
    synthetic sample Top-1 rose from 23 to 30 with the same stop words). The five
    highest-scoring entries are the ranked differential; equal scores are ordered by
    name so the output never depends on file order. Nothing is learned from NOVA: the
    knowledge base is the only knowledge, so the baseline shows what plain text matching
    achieves.
    """

    name = "retrieval-bm25"
    version = "1"

    def __init__(
        self,
        knowledge_base: KnowledgeBase | None = None,
        *,
        k1: float = 1.5,
        b: float = 0.3,
        name_weight: int = 2,
        top_k: int = 5,
    ):
        self.knowledge_base = (
            knowledge_base if knowledge_base is not None else load_knowledge_base()
        )
        self.k1, self.b, self.name_weight, self.top_k = k1, b, name_weight, top_k
        corpus = [
            retrieval_tokens(
                " ".join(
                    [" ".join(entry.names)] * name_weight
                    + [entry.mri_findings, entry.clinical_context]
                )
            )
            for entry in self.knowledge_base.entries
        ]
        self._bm25 = BM25Okapi(corpus, k1=k1, b=b)
        self._names = [entry.name for entry in self.knowledge_base.entries]

    def identity(self) -> dict[str, Any]:
        """What produced the predictions: method, parameters and knowledge base hash."""
        return {
            "name": self.name,
            "version": self.version,
            "k1": self.k1,
            "b": self.b,
            "name_weight": self.name_weight,
            "top_k": self.top_k,
            "knowledge_base_sha256": self.knowledge_base.sha256,
            "knowledge_base_entries": len(self.knowledge_base),
        }

    def rank(self, history: str, findings: str) -> list[tuple[str, float]]:
        """Top-k ``(name, BM25 score)`` pairs, best first, ties ordered by name.

        With no query term in the knowledge base every score is 0 and the first names
        in alphabetical order are returned, so the output always has ``top_k`` items.
        """
        scores = self._bm25.get_scores(retrieval_tokens(f"{history or ''} {findings or ''}"))
        order = sorted(
            range(len(self._names)), key=lambda i: (-scores[i], self._names[i].casefold())
        )
        return [(self._names[i], float(scores[i])) for i in order[: self.top_k]]

    def predict(self, history: str, findings: str) -> list[str]:
        """The ranked differential: top-k condition names, most likely first."""
        return [name for name, _ in self.rank(history, findings)]

    def predict_many(self, cases: Sequence[tuple[str, str]]) -> list[list[str]]:
        """``predict`` for each ``(history, findings)`` pair."""
        return [self.predict(history, findings) for history, findings in cases]
