"""The retrieval baseline's corpus: conditions with their names and typical text.

``corpus.yaml`` (next to this module) lists conditions with their names, synonyms,
typical MRI findings and typical clinical context. Only the retrieval baseline reads it:
the diagnosis judge has a vocabulary of its own (``novabench.judges.vocabulary``), so what
the corpus lists to help retrieval never makes the judge more lenient.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.text import plain_words
from novabench.yaml_data import check_entries, read_yaml

# Shipped inside the package, so an installed novabench finds it too.
DEFAULT_CORPUS = Path(__file__).resolve().with_name("corpus.yaml")

_NON_EMPTY = {"type": "string", "pattern": r"\S"}
_FIELDS = ("name", "synonyms", "mri_findings", "clinical_context")
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
                "required": list(_FIELDS),
                "additionalProperties": False,
                "properties": {
                    "name": _NON_EMPTY,
                    "synonyms": {"type": "array", "items": _NON_EMPTY},
                    "mri_findings": _NON_EMPTY,
                    "clinical_context": _NON_EMPTY,
                },
            },
        },
    },
}


@dataclass(frozen=True)
class CorpusEntry:
    """One condition of the corpus."""

    name: str
    synonyms: tuple[str, ...]
    mri_findings: str
    clinical_context: str

    @property
    def names(self) -> tuple[str, ...]:
        """The display name followed by every synonym."""
        return (self.name, *self.synonyms)


@dataclass(frozen=True)
class Corpus:
    """The loaded, validated corpus."""

    entries: tuple[CorpusEntry, ...]
    version: int
    sha256: str
    path: Path

    def __len__(self) -> int:
        return len(self.entries)


def _name_key(name: str) -> str:
    return plain_words(name)


def _entries(items: list[dict[str, Any]], path: Path) -> tuple[CorpusEntry, ...]:
    """The entries, text tidied; a name or synonym shared by two entries is refused."""
    entries = []
    owner: dict[str, str] = {}
    for item in items:
        entry = CorpusEntry(
            name=item["name"].strip(),
            synonyms=tuple(s.strip() for s in item["synonyms"]),
            mri_findings=" ".join(item["mri_findings"].split()),
            clinical_context=" ".join(item["clinical_context"].split()),
        )
        for alias in entry.names:
            key = _name_key(alias)
            if owner.get(key, entry.name) != entry.name:
                raise NovaError(
                    f"retrieval corpus {path}: {alias!r} names both {owner[key]!r} and "
                    f"{entry.name!r}",
                    "keep each name or synonym in one entry only",
                )
            owner[key] = entry.name
        entries.append(entry)
    return tuple(entries)


def load_corpus(path: str | Path | None = None) -> Corpus:
    """Load and validate the corpus YAML (default: the shipped one).

    Raises NovaError when the file is missing, is not YAML, breaks the schema (unknown
    or missing fields, empty text) or names one condition twice.
    """
    path = Path(path) if path is not None else DEFAULT_CORPUS
    raw, data = read_yaml(
        path,
        "the retrieval corpus",
        "point the retrieval model's corpus setting at an existing YAML file such as "
        "the shipped one",
    )
    check_entries(
        data,
        _SCHEMA,
        path,
        "retrieval corpus",
        "give every entry name, synonyms (a list), mri_findings and clinical_context "
        "and nothing else",
    )
    return Corpus(
        entries=_entries(data["entries"], path),
        version=data["version"],
        sha256=hashlib.sha256(raw).hexdigest(),
        path=path,
    )
