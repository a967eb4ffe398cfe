"""WordNet 3.0 for METEOR: installed offline from the Debian packages, or elsewhere
downloaded by nltk's downloader (here from a local file:// index in nltk_data's layout) and
checked against the archive checksum nltk_data publishes."""

import gzip
import hashlib
import shutil
import zipfile
from pathlib import Path

import nltk
import pytest

from novabench import wordnet as wordnet_module
from novabench.errors import NovaError
from novabench.wordnet import (
    DATABASE_FILES,
    DEBIAN_LEXNAMES_MAN,
    DEBIAN_WORDNET_DIR,
    ArchivePin,
    check_nltk_archive,
    ensure_wordnet,
    lexnames_from_manpage,
    load_wordnet,
    main,
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
    assert identity["matches_nltk_release"] is False  # built here, not nltk_data's archive
    assert load_wordnet(tmp_path).synsets("lesion")


def test_a_folder_nltk_refuses_is_reported_with_the_fix(nltk_data, tmp_path):
    shared = tmp_path / "shared"
    (shared / "corpora").mkdir(parents=True)
    # A group-writable copy: nltk's sandbox skips it with only a warning.
    shutil.copytree(nltk_data / "corpora" / "wordnet", shared / "corpora" / "wordnet")
    shared.chmod(0o775)
    with pytest.raises(NovaError, match="chmod -R go-w"):
        ensure_wordnet(shared)


# --- without apt: nltk's downloader --------------------------------------------------------


def nltk_archive(source: Path, path: Path) -> ArchivePin:
    """A wordnet.zip in nltk_data's layout (files under wordnet/) from an installed copy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in (*DATABASE_FILES, "lexnames"):
            archive.write(source / name, f"wordnet/{name}")
    return ArchivePin(hashlib.md5(path.read_bytes()).hexdigest(), path.stat().st_size)


@pytest.fixture(scope="module")
def served_archive(nltk_data, tmp_path_factory):
    """A local nltk data server: an index.xml naming a file:// wordnet.zip, as nltk_data's
    index names https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/.../wordnet.zip.
    Returns (server folder, the archive's pin)."""
    server = tmp_path_factory.mktemp("server")
    pin = nltk_archive(nltk_data / "corpora" / "wordnet", server / "wordnet.zip")
    unzipped = sum((nltk_data / "corpora" / "wordnet" / n).stat().st_size for n in DATABASE_FILES)
    (server / "index.xml").write_text(
        '<?xml version="1.0"?>\n<nltk_data><packages>\n'
        f'<package id="wordnet" name="WordNet" version="3.0" unzip="0" subdir="corpora" '
        f'size="{pin.size}" unzipped_size="{unzipped + 1000}" checksum="{pin.md5}" '
        f'url="{(server / "wordnet.zip").as_uri()}" />\n'
        "</packages><collections></collections></nltk_data>\n"
    )
    return server, pin


@pytest.fixture
def nltk_server(served_archive, monkeypatch):
    """(index URL, the archive's pin) of the local server, which nltk may now read."""
    server, pin = served_archive
    # nltk opens file:// URLs only inside its data path (its sandbox).
    monkeypatch.setattr(nltk.data, "path", [*nltk.data.path, str(server)])
    return (server / "index.xml").as_uri(), pin


def test_without_debian_files_nltk_downloads_the_archive(nltk_server, tmp_path, monkeypatch):
    index_url, pin = nltk_server
    monkeypatch.setattr(wordnet_module, "NLTK_WORDNET_ARCHIVE", pin)
    target = tmp_path / "project" / "nltk_data"
    ensure_wordnet(target, debian_dir=tmp_path / "no-debian", download=True, index_url=index_url)
    archive = target / "corpora" / "wordnet.zip"
    # Kept zipped, as published, so that its checksum can be recomputed.
    assert archive.is_file() and not (target / "corpora" / "wordnet").exists()
    identity = wordnet_identity(target)
    assert identity["source"] == "nltk-data-zip"
    served = Path(index_url.removeprefix("file://")).with_name("wordnet.zip")
    expected = hashlib.sha256(served.read_bytes()).hexdigest()
    assert identity["files_sha256"] == {"wordnet.zip": expected}
    assert identity["matches_nltk_release"] is True
    assert "tumor" in {
        lemma.name() for s in load_wordnet(target).synsets("tumour") for lemma in s.lemmas()
    }


def test_an_archive_other_than_nltk_datas_is_refused_and_deleted(nltk_server, tmp_path):
    index_url, _ = nltk_server
    target = tmp_path / "nltk_data"
    with pytest.raises(NovaError) as caught:
        ensure_wordnet(
            target, debian_dir=tmp_path / "no-debian", download=True, index_url=index_url
        )
    message = str(caught.value)
    assert "is not nltk_data's WordNet 3.0 archive" in message
    assert "expected md5 b3f38606f626e54c6f060548546f71f0, 10775600 bytes" in message
    assert "\n" not in message
    # Nothing is left for a later run to take as installed.
    assert not (target / "corpora" / "wordnet.zip").exists()
    assert not (target / "corpora" / "wordnet").exists()


def test_debian_files_are_preferred_to_a_download(nltk_data, tmp_path):
    # An index that cannot be read: a download attempt would fail.
    target = tmp_path / "nltk_data"
    ensure_wordnet(target, download=True, index_url=(tmp_path / "none.xml").as_uri())
    assert wordnet_identity(target)["source"] == "debian"


def test_an_unreachable_index_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(nltk.data, "path", [*nltk.data.path, str(tmp_path)])
    with pytest.raises(NovaError, match=r"^nltk could not download WordNet into .*fix: check"):
        ensure_wordnet(
            tmp_path / "nltk_data",
            debian_dir=tmp_path / "no-debian",
            download=True,
            index_url=(tmp_path / "no-index.xml").as_uri(),
        )


def test_the_command_downloads_and_reports(nltk_server, tmp_path, monkeypatch, capsys):
    index_url, pin = nltk_server
    monkeypatch.setattr(wordnet_module, "NLTK_WORDNET_ARCHIVE", pin)
    monkeypatch.setattr(wordnet_module, "DEBIAN_WORDNET_DIR", tmp_path / "no-debian")
    target = tmp_path / "nltk_data"
    assert main(["--download", "--index-url", index_url, str(target)]) == 0
    assert capsys.readouterr().out == f"WordNet 3.0 (nltk-data-zip) in {target}\n"
    # Without --download it never fetches: the Debian fix is named instead.
    assert main([str(tmp_path / "other")]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: WordNet 3.0 is not in") and error.count("\n") == 1


def fake_archive(path: Path, members: dict[str, bytes]) -> ArchivePin:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return ArchivePin(hashlib.md5(path.read_bytes()).hexdigest(), path.stat().st_size)


def test_archive_check_names_missing_files(tmp_path):
    archive = tmp_path / "wordnet.zip"
    names = [n for n in (*DATABASE_FILES, "lexnames") if n != "index.sense"]
    pin = fake_archive(archive, {f"wordnet/{n}": b"x" for n in names})
    with pytest.raises(NovaError, match=r"wordnet\.zip lacks wordnet/index\.sense; fix: delete"):
        check_nltk_archive(archive, pin)
    # A flat archive (files not under wordnet/) is not nltk_data's layout.
    pin = fake_archive(archive, {n: b"x" for n in (*DATABASE_FILES, "lexnames")})
    with pytest.raises(NovaError, match=r"lacks wordnet/cntlist\.rev, wordnet/index\.sense"):
        check_nltk_archive(archive, pin)


def test_archive_check_compares_size_and_md5(tmp_path):
    archive = tmp_path / "wordnet.zip"
    pin = fake_archive(archive, {f"wordnet/{n}": b"x" for n in (*DATABASE_FILES, "lexnames")})
    check_nltk_archive(archive, pin)  # as pinned: accepted
    with pytest.raises(NovaError, match=rf"\(md5 {pin.md5}, {pin.size} bytes; expected md5 0+,"):
        check_nltk_archive(archive, ArchivePin("0" * 32, pin.size))
    archive.write_bytes(b"not a zip")
    with pytest.raises(NovaError, match="is not a zip archive"):
        check_nltk_archive(archive, ArchivePin(hashlib.md5(b"not a zip").hexdigest(), 9))
    with pytest.raises(NovaError, match="was not written by nltk's downloader"):
        check_nltk_archive(tmp_path / "absent.zip")
