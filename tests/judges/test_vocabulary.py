"""The judges' diagnosis vocabulary: loader, schema and pathology categories."""

from pathlib import Path

import pytest
import yaml

from novabench.errors import NovaError
from novabench.judges.vocabulary import CATEGORIES, Vocabulary, load_vocabulary


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    return load_vocabulary()


def _entry(name: str, **overrides) -> dict:
    return {"name": name, "category": "neoplasm", "synonyms": [], **overrides}


def _write(tmp_path: Path, entries: list) -> Path:
    path = tmp_path / "vocabulary.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "entries": entries}))
    return path


def test_shipped_vocabulary_covers_every_category(vocabulary: Vocabulary) -> None:
    assert len(vocabulary) >= 120 and len(vocabulary.sha256) == 64
    assert {entry.category for entry in vocabulary.entries} == set(CATEGORIES)
    gbm = next(entry for entry in vocabulary.entries if entry.name == "Glioblastoma")
    assert gbm.names[0] == "Glioblastoma" and "GBM" in gbm.synonyms


def test_related_names_have_the_category_but_are_no_synonyms(vocabulary: Vocabulary) -> None:
    meningioma = next(entry for entry in vocabulary.entries if entry.name == "Meningioma")
    assert "atypical meningioma" in meningioma.related
    assert "atypical meningioma" not in meningioma.names
    assert vocabulary.category_of("Prolactinoma") == "neoplasm"  # related to microadenoma
    assert vocabulary.category_of("Central pontine myelinolysis") == "metabolic"


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([_entry("X", category="tumour")], "category"),
        ([{"name": "X", "category": "neoplasm"}], "synonyms"),
        ([_entry("X", related="Y")], "related"),
        ([_entry("X", mri_findings="Some findings.")], "mri_findings"),
        ([_entry("Glioblastoma"), _entry("Meningioma", synonyms=["glioblastoma"])], "both"),
        ([_entry("Meningioma"), _entry("Other", related=["meningioma"])], "both"),
        ([], "entries"),
    ],
)
def test_malformed_entries_raise(tmp_path: Path, entries: list, message: str) -> None:
    with pytest.raises(NovaError, match=message):
        load_vocabulary(_write(tmp_path, entries))


def test_bad_file_raises(tmp_path: Path) -> None:
    with pytest.raises(NovaError, match="cannot read the diagnosis vocabulary"):
        load_vocabulary(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nentries: [\n")
    with pytest.raises(NovaError, match="not valid YAML"):
        load_vocabulary(broken)


def test_error_names_the_bad_entry(tmp_path: Path) -> None:
    path = _write(tmp_path, [_entry("Good"), _entry("Bad one", category="x")])
    with pytest.raises(NovaError, match=r"entries/1/category \('Bad one'\)"):
        load_vocabulary(path)
