"""WordNet 3.0 installed offline from the Debian packages, for METEOR."""

import gzip
import hashlib
import shutil
import zipfile
from pathlib import Path

import nltk
import pytest

from novabench.errors import NovaError
from novabench.wordnet import (
    DATABASE_FILES,
    DEBIAN_LEXNAMES_MAN,
    DEBIAN_WORDNET_DIR,
    ensure_wordnet,
    lexnames_from_manpage,
    load_wordnet,
    wordnet_identity,
)

NLTK_PATH_AT_IMPORT = list(nltk.data.path)

needs_debian_wordnet = pytest.mark.skipif(
    not (DEBIAN_WORDNET_DIR / "index.sense").is_file() or not DEBIAN_LEXNAMES_MAN.is_file(),
    reason="needs `apt-get install wordnet-base wordnet-sense-index`",
)


@needs_debian_wordnet
def test_lexnames_rebuilt_from_the_manual_page():
    lines = lexnames_from_manpage().splitlines()
    assert len(lines) == 45
    # Spot checks against WordNet 3.0's lexnames file (number, name, syntactic category:
    # 1 noun, 2 verb, 3 adjective, 4 adverb).
    assert lines[0] == "00\tadj.all\t3"
    assert lines[2] == "02\tadv.all\t4"
    assert lines[3] == "03\tnoun.Tops\t1"
    assert lines[18] == "18\tnoun.person\t1"
    assert lines[29] == "29\tverb.body\t2"
    assert lines[44] == "44\tadj.ppl\t3"


def test_lexnames_refuses_a_manual_page_without_the_table(tmp_path):
    page = tmp_path / "lexnames.5WN.gz"
    page.write_bytes(gzip.compress(b".TH LEXNAMES 5WN\n00\tadj.all\tall adjective clusters\n"))
    with pytest.raises(NovaError, match=r"expected 45|unexpected lexnames"):
        lexnames_from_manpage(page)


def test_installed_wordnet_is_3_0_and_knows_lesion(nltk_data):
    wordnet = load_wordnet(nltk_data)
    assert wordnet.get_version() == "3.0"
    assert "lesion.n.01" in {s.name() for s in wordnet.synsets("lesion")}
    # Synonyms METEOR relies on.
    assert "tumor" in {lemma.name() for s in wordnet.synsets("tumour") for lemma in s.lemmas()}
    folder = nltk_data / "corpora" / "wordnet"
    for name in (*DATABASE_FILES, "lexnames"):
        assert (folder / name).is_file() and not (folder / name).is_symlink()


def test_nltk_data_path_gains_the_directory_once_and_keeps_its_order(nltk_data):
    load_wordnet(nltk_data)
    load_wordnet(nltk_data)
    resolved = [Path(p).resolve() for p in nltk.data.path]
    assert resolved.count(nltk_data.resolve()) == 1
    # Appended, not prepended: other nltk lookups in the process resolve as before.
    assert nltk.data.path[: len(NLTK_PATH_AT_IMPORT)] == NLTK_PATH_AT_IMPORT


def test_ensure_wordnet_is_idempotent(nltk_data):
    data_noun = nltk_data / "corpora" / "wordnet" / "data.noun"
    before = data_noun.stat().st_mtime_ns
    assert ensure_wordnet(nltk_data) == nltk_data
    assert data_noun.stat().st_mtime_ns == before


def test_identity_names_version_source_and_checksums(nltk_data):
    identity = wordnet_identity(nltk_data)
    assert identity["wordnet_version"] == "3.0"
    assert identity["source"] == "debian"
    expected = hashlib.sha256((DEBIAN_WORDNET_DIR / "index.noun").read_bytes()).hexdigest()
    assert identity["files_sha256"]["index.noun"] == expected
    assert len(identity["sha256"]) == 64


def test_missing_debian_files_raise_with_the_fix(tmp_path):
    with pytest.raises(NovaError, match="apt-get install wordnet-base wordnet-sense-index"):
        ensure_wordnet(tmp_path / "nltk_data", debian_dir=tmp_path / "no-wordnet")
    # Nothing half-installed is left behind for a later run to trust.
    assert not (tmp_path / "nltk_data" / "corpora" / "wordnet").exists()


def test_unreadable_existing_folder_is_not_silently_replaced(tmp_path):
    broken = tmp_path / "corpora" / "wordnet"
    broken.mkdir(parents=True)
    (broken / "README").write_text("not wordnet")
    with pytest.raises(NovaError, match=r"cannot be read.*delete"):
        ensure_wordnet(tmp_path)


def test_downloaded_zip_layout_is_used_as_it_is(nltk_data, tmp_path):
    # nltk.download("wordnet") leaves corpora/wordnet.zip holding a wordnet/ folder.
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    source = nltk_data / "corpora" / "wordnet"
    with zipfile.ZipFile(corpora / "wordnet.zip", "w") as archive:
        for name in (*DATABASE_FILES, "lexnames"):
            archive.write(source / name, f"wordnet/{name}")
    ensure_wordnet(tmp_path, debian_dir=tmp_path / "no-wordnet")
    assert not (corpora / "wordnet").exists()
    identity = wordnet_identity(tmp_path)
    assert identity["source"] == "nltk-data-zip"
    assert identity["wordnet_version"] == "3.0"
    assert load_wordnet(tmp_path).synsets("lesion")


def test_a_folder_nltk_refuses_is_reported_with_the_fix(nltk_data, tmp_path):
    shared = tmp_path / "shared"
    (shared / "corpora").mkdir(parents=True)
    # A group-writable copy: nltk's sandbox skips it with only a warning.
    shutil.copytree(nltk_data / "corpora" / "wordnet", shared / "corpora" / "wordnet")
    shared.chmod(0o775)
    with pytest.raises(NovaError, match="chmod -R go-w"):
        ensure_wordnet(shared)
