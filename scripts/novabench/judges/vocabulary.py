"""The diagnosis vocabulary: named entities, their synonyms and pathology categories.

``diagnosis_vocabulary.yaml`` (in the package's resources) lists entities with a name, a
pathology category, synonyms and optionally related names. The offline diagnosis matcher
takes each entity's name and synonyms as naming variants of one concept; the report's
breakdown by pathology category and dataset subsets by category look diagnoses up here.
The retrieval baseline has a corpus of its own (``novabench/models/retrieval/``), which
neither reads.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench import paths
from novabench.errors import NovaError
from novabench.text import plain_words
from novabench.yaml_data import check_entries, read_yaml

# Shipped inside the package, so an installed novabench finds it too.
DEFAULT_VOCABULARY = paths.RESOURCES / "diagnosis_vocabulary.yaml"

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
# The category of a diagnosis that no entry of the vocabulary holds.
UNKNOWN_CATEGORY = "unknown"

_NON_EMPTY = {"type": "string", "pattern": r"\S"}
_NAMES = {"type": "array", "items": _NON_EMPTY}
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
                "required": ["name", "category", "synonyms"],
                "additionalProperties": False,
                "properties": {
                    "name": _NON_EMPTY,
                    "category": {"enum": list(CATEGORIES)},
                    "synonyms": _NAMES,
                    "related": _NAMES,
                },
            },
        },
    },
}


@dataclass(frozen=True)
class VocabularyEntry:
    """One entity of the vocabulary."""

    name: str
    category: str
    synonyms: tuple[str, ...]
    # Conditions of the same category that the matcher counts as entities of their own.
    related: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The name followed by every synonym: what the matcher counts as this entity."""
        return (self.name, *self.synonyms)


@dataclass(frozen=True)
class Vocabulary:
    """The loaded, validated vocabulary."""

    entries: tuple[VocabularyEntry, ...]
    version: int
    sha256: str
    path: Path

    def __len__(self) -> int:
        return len(self.entries)

    def category_of(self, diagnosis: str | None) -> str:
        """The pathology category of a diagnosis, or ``"unknown"`` when no entry holds it.

        The entry whose name, synonym or related name is the longest whole-word phrase of
        ``diagnosis`` wins, so "Glioblastoma, IDH-wildtype" is a neoplasm and "Atypical
        meningioma" one too; categories are coarse, so a more specific name never changes
        them. Text in parentheses is looked at only when the rest names no entry: it
        explains, so "MELAS (... with stroke-like episodes)" is metabolic, not a stroke.
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
        """(`` name ``, category) of every name, synonym and related name, normalized
        once: a dataset's categories are looked up once per image."""
        return tuple(
            (f" {name} ", entry.category)
            for entry in self.entries
            for name in map(_name_key, (*entry.names, *entry.related))
            if name
        )


def _name_key(name: str) -> str:
    # Duplicate check and category lookup only: the matcher normalizes more strongly.
    return plain_words(name)


def _entries(items: list[dict[str, Any]], path: Path) -> tuple[VocabularyEntry, ...]:
    """The entries, names stripped; a name that two entries hold is refused."""
    entries = []
    owner: dict[str, str] = {}
    for item in items:
        entry = VocabularyEntry(
            name=item["name"].strip(),
            category=item["category"],
            synonyms=tuple(s.strip() for s in item["synonyms"]),
            related=tuple(s.strip() for s in item.get("related", ())),
        )
        for alias in (*entry.names, *entry.related):
            key = _name_key(alias)
            if owner.get(key, entry.name) != entry.name:
                raise NovaError(
                    f"diagnosis vocabulary {path}: {alias!r} names both {owner[key]!r} and "
                    f"{entry.name!r}",
                    "keep each name, synonym or related name in one entry only",
                )
            owner[key] = entry.name
        entries.append(entry)
    return tuple(entries)


def load_vocabulary(path: str | Path | None = None) -> Vocabulary:
    """Load and validate the vocabulary YAML (default: the shipped one).

    Raises NovaError when the file is missing, is not YAML, breaks the schema (unknown
    or missing fields, empty names, unknown category) or gives one name to two entries.
    """
    path = Path(path) if path is not None else DEFAULT_VOCABULARY
    raw, data = read_yaml(
        path,
        "the diagnosis vocabulary",
        "point vocabulary_path at an existing YAML file such as the shipped one",
    )
    check_entries(
        data,
        _SCHEMA,
        path,
        "diagnosis vocabulary",
        "give every entry name, category and synonyms (a list), optionally related "
        f"(a list), with category one of {', '.join(CATEGORIES)}",
    )
    return Vocabulary(
        entries=_entries(data["entries"], path),
        version=data["version"],
        sha256=hashlib.sha256(raw).hexdigest(),
        path=path,
    )
