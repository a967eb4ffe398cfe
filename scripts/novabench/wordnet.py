"""WordNet 3.0 for METEOR, installed offline from the Debian packages.

nltk's METEOR matches synonyms through WordNet. Without WordNet it cannot run, and a METEOR
computed without synonyms would be a different metric, so this module never falls back:
it either provides the real WordNet 3.0 or raises a ``NovaError`` naming the fix.

Debian's ``wordnet-base`` and ``wordnet-sense-index`` ship the WordNet 3.0 database files.
nltk reads them once they are *copied* (its path sandbox refuses symlinks that leave the data
directory) into ``<nltk_data>/corpora/wordnet/`` together with a ``lexnames`` file, which
Debian does not ship; it is rebuilt from the table in Debian's ``lexnames(5WN)`` manual page.

Where apt is not there (macOS, other distributions), :func:`install_from_nltk` fetches the
archive that ``nltk.download("wordnet")`` fetches, Princeton's WordNet 3.0 files in
``corpora/wordnet.zip``, and refuses it unless its size and md5 are the ones nltk_data's index
publishes (pinned here). The two sources are not byte-identical: Debian rebuilds the database
from the lexicographer files with its own patches (changelog 1:3.0-18, README.Debian), so its
data and index files (and synset offsets) differ from Princeton's. Each score file records
which one METEOR used (:func:`wordnet_identity`).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

from novabench.errors import NovaError
from novabench.provenance import sha256_file

WORDNET_VERSION = "3.0"
DEBIAN_WORDNET_DIR = Path("/usr/share/wordnet")
DEBIAN_LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")
DEBIAN_PACKAGES = ("wordnet-base", "wordnet-sense-index")

# The database files nltk's WordNetCorpusReader opens (its ``_FILES`` minus ``lexnames``,
# which is written here).
DATABASE_FILES = (
    "cntlist.rev",
    "index.sense",
    "index.adj",
    "index.adv",
    "index.noun",
    "index.verb",
    "data.adj",
    "data.adv",
    "data.noun",
    "data.verb",
    "adj.exc",
    "adv.exc",
    "noun.exc",
    "verb.exc",
)
# Written next to the copied files so that wordnet_identity can say where they came from.
SOURCE_FILE = "novabench-source.json"

_FIX = (
    "install WordNet 3.0 offline with `apt-get install wordnet-base wordnet-sense-index` "
    "(Debian/Ubuntu), or elsewhere, where the internet is reachable, run "
    "`PYTHONPATH=scripts python -m novabench.wordnet --download NLTK_DATA_DIR` "
    "(`bash scripts/setup.sh` does either)"
)


@dataclass(frozen=True)
class ArchivePin:
    """Size and md5 of a published nltk_data archive (md5: what nltk's index publishes)."""

    md5: str
    size: int


# corpora/wordnet.zip as nltk_data's index.xml publishes it (package "wordnet", version
# 3.0; the archive last changed in 2015). nltk's downloader checks the md5 that the index
# it reads gives; this pin also refuses an archive that changed upstream.
NLTK_WORDNET_ARCHIVE = ArchivePin(md5="b3f38606f626e54c6f060548546f71f0", size=10_775_600)
# Syntactic category names used in the manual page's table, mapped to the prefixes of
# the lexicographer file names (noun.body, adj.all...).
_CATEGORY_PREFIX = {"NOUN": "noun", "VERB": "verb", "ADJECTIVE": "adj", "ADVERB": "adv"}


def lexnames_from_manpage(manpage: Path = DEBIAN_LEXNAMES_MAN) -> str:
    """Rebuild WordNet's ``lexnames`` file from the table in ``lexnames(5WN)``.

    Each line is ``NN<TAB>lexicographer.file<TAB>category``; the category number is read
    from the manual page's own "Syntactic Category" table, not assumed.
    """
    try:
        text = gzip.decompress(manpage.read_bytes()).decode("utf-8", "replace")
    except OSError as exc:
        raise NovaError(f"cannot read the WordNet manual page {manpage} ({exc})", _FIX) from exc

    # Roff bold markup: "\fB1\fP<TAB>NOUN".
    category_numbers = {
        name: int(number)
        for number, name in re.findall(r"^\\fB(\d)\\fP\t([A-Z]+)\s*$", text, flags=re.M)
    }
    number_by_prefix = {
        prefix: category_numbers[name]
        for name, prefix in _CATEGORY_PREFIX.items()
        if name in category_numbers
    }
    rows = re.findall(r"^(\d\d)\t([a-z]+\.[A-Za-z]+)\s*\t", text, flags=re.M)
    lines = []
    for expected, (number, lexname) in enumerate(rows):
        prefix = lexname.split(".", 1)[0]
        if int(number) != expected or prefix not in number_by_prefix:
            raise NovaError(f"unexpected lexnames table in {manpage} at row {number}", _FIX)
        lines.append(f"{number}\t{lexname}\t{number_by_prefix[prefix]}\n")
    if len(lines) != 45:  # WordNet 3.0 has 45 lexicographer files (00-44).
        raise NovaError(f"{manpage} lists {len(lines)} lexicographer files, expected 45", _FIX)
    return "".join(lines)


def _debian_package_versions() -> dict[str, str]:
    """Installed versions of the Debian WordNet packages (empty where dpkg is absent)."""
    versions = {}
    for package in DEBIAN_PACKAGES:
        try:
            result = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Version}", package],
                capture_output=True,
                text=True,
                check=False,
            )
        except OSError:
            return {}
        if result.returncode == 0 and result.stdout:
            versions[package] = result.stdout.strip()
    return versions


def _find_wordnet_root(nltk_data_dir: Path):
    """nltk's pointer to WordNet inside ``nltk_data_dir`` only, or None.

    Looks where ``nltk.corpus.wordnet`` looks (a downloaded ``wordnet.zip`` first, then an
    unpacked folder) but searches no other data directory.
    """
    import nltk.data

    _use_data_dir(nltk_data_dir)  # nltk's sandbox will not even open a zip outside its path
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for resource in ("corpora/wordnet.zip/wordnet/", "corpora/wordnet"):
            try:
                return nltk.data.find(resource, paths=[str(nltk_data_dir)])
            except LookupError:
                continue
    # nltk skips data folders that another account could write to, with only a warning.
    refused = [str(w.message) for w in caught if "will not read data from" in str(w.message)]
    if refused:
        raise NovaError(
            refused[0].split(":")[0] + " (writable by, or owned by, another account)",
            f"make {nltk_data_dir} and the folders in it private to their owner "
            f"(chmod -R go-w {nltk_data_dir})",
        )
    return None


def _use_data_dir(nltk_data_dir: Path) -> None:
    """Add ``nltk_data_dir`` to ``nltk.data.path`` (once, at the end).

    nltk's file sandbox only opens files under ``nltk.data.path`` entries. Appending keeps
    every other lookup in the process resolving exactly as before; the WordNet reader here
    is built on an explicit root, so it does not depend on the order.
    """
    import nltk.data

    target = Path(nltk_data_dir).resolve()
    if not any(_same_path(entry, target) for entry in nltk.data.path):
        nltk.data.path.append(str(target))


def _same_path(entry: object, target: Path) -> bool:
    try:
        return Path(str(entry)).expanduser().resolve() == target
    except (OSError, ValueError):
        return False


@functools.cache
def _reader_class():
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class WordNet30Reader(WordNetCorpusReader):
        """nltk's reader, without the lookup of a second WordNet by name at start-up.

        ``WordNetCorpusReader.__init__`` calls ``map_wn()``, which maps Open Multilingual
        WordNet ids from WordNet 3.0 to the loaded version by loading whatever corpus named
        "wordnet" comes first on ``nltk.data.path`` (possibly another copy). This reader is
        checked to be 3.0 and has no multilingual data, so that mapping is the identity,
        which nltk represents as None.
        """

        def map_wn(self, version="wordnet"):
            return None

    return WordNet30Reader


@functools.cache
def _load_reader(resolved_dir: Path):
    root = _find_wordnet_root(resolved_dir)
    if root is None:
        raise NovaError(f"WordNet is not installed under {resolved_dir}", _FIX)
    with warnings.catch_warnings():
        # Open Multilingual WordNet is not needed for English METEOR.
        warnings.filterwarnings("ignore", message="The multilingual functions are not available")
        try:
            reader = _reader_class()(root, None)
        except (OSError, ValueError, AssertionError, LookupError, PermissionError) as exc:
            raise NovaError(
                f"WordNet under {resolved_dir} cannot be read ({type(exc).__name__}: {exc})",
                f"delete {resolved_dir / 'corpora' / 'wordnet'} and run again, or {_FIX}",
            ) from exc
    return reader


def load_wordnet(nltk_data_dir: Path):
    """The WordNet 3.0 reader for ``nltk_data_dir`` (cached per directory).

    Returns an ``nltk`` ``WordNetCorpusReader`` to pass as METEOR's ``wordnet=`` argument,
    so METEOR uses exactly this copy rather than whatever ``nltk.corpus.wordnet`` finds.
    """
    reader = _load_reader(Path(nltk_data_dir).resolve())
    version = reader.get_version()
    if version != WORDNET_VERSION:
        raise NovaError(
            f"WordNet under {nltk_data_dir} is version {version}, METEOR here needs "
            f"{WORDNET_VERSION}",
            f"remove {Path(nltk_data_dir) / 'corpora'}/wordnet* and {_FIX}",
        )
    if not reader.synsets("lesion"):
        raise NovaError(f"WordNet under {nltk_data_dir} has no entry for 'lesion'", _FIX)
    return reader


def _make_folders(folder: Path) -> None:
    """Create ``folder`` and its parents level by level with an explicit mode: nltk refuses
    group-writable data folders, and mkdir(parents=True) would give the parents the umask's
    mode."""
    for level in reversed([folder, *folder.parents]):
        if not level.exists():
            level.mkdir(mode=0o755)


def _has_debian_files(debian_dir: Path) -> bool:
    return DEBIAN_LEXNAMES_MAN.is_file() and all(
        (debian_dir / name).is_file() for name in DATABASE_FILES
    )


def _install_from_debian(nltk_data_dir: Path, debian_dir: Path) -> None:
    missing = [name for name in DATABASE_FILES if not (debian_dir / name).is_file()]
    if missing:
        raise NovaError(
            f"WordNet 3.0 is not in {nltk_data_dir} and {debian_dir} lacks {', '.join(missing)}",
            _FIX,
        )
    lexnames = lexnames_from_manpage()
    corpora = nltk_data_dir / "corpora"
    _make_folders(corpora)
    # Build in a sibling folder and rename it into place, so an interrupted copy never
    # leaves a half-installed WordNet that a later run would take as usable.
    staging = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=corpora))
    try:
        for name in DATABASE_FILES:
            shutil.copyfile(debian_dir / name, staging / name)
        (staging / "lexnames").write_text(lexnames, encoding="utf-8")
        source = {
            "source": "debian",
            "debian_dir": str(debian_dir),
            "debian_packages": _debian_package_versions(),
        }
        (staging / SOURCE_FILE).write_text(json.dumps(source, indent=2) + "\n")
        staging.chmod(0o755)
        try:
            staging.rename(corpora / "wordnet")
        except OSError:
            # Another job installed it meanwhile (parallel scoring jobs): keep theirs.
            if not (corpora / "wordnet").is_dir():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def ensure_wordnet(
    nltk_data_dir: Path,
    debian_dir: Path = DEBIAN_WORDNET_DIR,
    *,
    download: bool = False,
    index_url: str | None = None,
) -> Path:
    """Make WordNet 3.0 usable from ``nltk_data_dir``; returns ``nltk_data_dir``.

    Idempotent. A WordNet already there (from an earlier call, or from
    ``nltk.download("wordnet")``) is kept as it is; otherwise the Debian files in
    ``debian_dir`` are copied in with a generated ``lexnames``, or, with ``download`` and
    no Debian files, nltk's archive is downloaded (:func:`install_from_nltk`; the pipeline
    never downloads). Checks that the result is WordNet 3.0 and knows "lesion"; raises
    ``NovaError`` with the fix otherwise.
    """
    nltk_data_dir = Path(nltk_data_dir)
    if _find_wordnet_root(nltk_data_dir) is None:
        if download and not _has_debian_files(Path(debian_dir)):
            install_from_nltk(nltk_data_dir, index_url)
        else:
            _install_from_debian(nltk_data_dir, Path(debian_dir))
    load_wordnet(nltk_data_dir)
    return nltk_data_dir


def install_from_nltk(
    nltk_data_dir: Path, index_url: str | None = None, pin: ArchivePin | None = None
) -> Path:
    """Download WordNet 3.0 with nltk's downloader into ``nltk_data_dir``; returns the archive.

    The archive stays zipped (``corpora/wordnet.zip``, where nltk's reader looks first) so
    that its checksum can be recomputed at any time. ``index_url``: an nltk data index to
    read instead of nltk's (a mirror). An archive that fails :func:`check_nltk_archive`
    against ``pin`` (default: nltk_data's published one) is deleted, never left to be used.
    """
    from nltk.downloader import Downloader

    nltk_data_dir = Path(nltk_data_dir)
    _make_folders(nltk_data_dir)
    _use_data_dir(nltk_data_dir)  # the downloader, too, writes only inside nltk's data path
    archive = nltk_data_dir / "corpora" / "wordnet.zip"
    errors = io.StringIO()
    try:
        with warnings.catch_warnings():
            # nltk warns that an index with md5 only is "legacy"; the md5 is checked below.
            warnings.simplefilter("ignore")
            Downloader(server_index_url=index_url).download(
                "wordnet",
                download_dir=str(nltk_data_dir),
                quiet=True,
                raise_on_error=True,
                print_error_to=errors,
                extract=False,
            )
    except (ValueError, OSError) as exc:
        raise NovaError(
            f"nltk could not download WordNet into {nltk_data_dir} ({exc})",
            "check the internet connection (nltk fetches from raw.githubusercontent.com), "
            "or install `wordnet-base wordnet-sense-index` with apt-get",
        ) from exc
    try:
        check_nltk_archive(archive, pin or NLTK_WORDNET_ARCHIVE)
    except NovaError:
        archive.unlink(missing_ok=True)
        raise
    return archive


def check_nltk_archive(archive: Path, pin: ArchivePin = NLTK_WORDNET_ARCHIVE) -> None:
    """Refuse an archive that is not the pinned WordNet 3.0 one: its size and md5, then the
    files nltk's reader opens under ``wordnet/`` (the layout of nltk_data's archive)."""
    archive = Path(archive)
    fix = f"delete {archive} and run `python -m novabench.wordnet --download` again, or {_FIX}"
    if not archive.is_file():
        raise NovaError(f"{archive} was not written by nltk's downloader", fix)
    digest = _md5(archive)
    size = archive.stat().st_size
    if (digest, size) != (pin.md5, pin.size):
        raise NovaError(
            f"{archive} is not nltk_data's WordNet 3.0 archive (md5 {digest}, {size} bytes; "
            f"expected md5 {pin.md5}, {pin.size} bytes)",
            fix,
        )
    try:
        with zipfile.ZipFile(archive) as opened:
            names = set(opened.namelist())
    except zipfile.BadZipFile as exc:
        raise NovaError(f"{archive} is not a zip archive ({exc})", fix) from exc
    missing = [n for n in (*DATABASE_FILES, "lexnames") if f"wordnet/{n}" not in names]
    if missing:
        raise NovaError(f"{archive} lacks wordnet/{', wordnet/'.join(missing)}", fix)


def _md5(path: Path) -> str:
    # md5 because that is the checksum nltk_data publishes, not for security.
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.md5(usedforsecurity=False)).hexdigest()


def wordnet_identity(nltk_data_dir: Path) -> dict:
    """What WordNet METEOR used: version, where it came from, and file checksums."""
    nltk_data_dir = Path(nltk_data_dir)
    reader = load_wordnet(nltk_data_dir)
    root = _find_wordnet_root(nltk_data_dir)
    identity: dict = {"wordnet_version": reader.get_version()}
    folder = nltk_data_dir / "corpora" / "wordnet"
    if hasattr(root, "zipfile"):
        # nltk.download("wordnet") leaves a zip archive: checksum the archive itself.
        archive = Path(root.zipfile.filename)
        identity["source"] = "nltk-data-zip"
        identity["files_sha256"] = {archive.name: sha256_file(archive)}
        identity["nltk_release_md5"] = NLTK_WORDNET_ARCHIVE.md5
        identity["matches_nltk_release"] = _md5(archive) == NLTK_WORDNET_ARCHIVE.md5
    else:
        source_file = folder / SOURCE_FILE
        if source_file.is_file():
            identity.update(json.loads(source_file.read_text()))
        else:
            identity["source"] = "nltk-data"
        identity["files_sha256"] = {
            name: sha256_file(folder / name)
            for name in (*DATABASE_FILES, "lexnames")
            if (folder / name).is_file()
        }
    combined = hashlib.sha256()
    for name, digest in sorted(identity["files_sha256"].items()):
        combined.update(f"{name}\0{digest}\n".encode())
    identity["sha256"] = combined.hexdigest()
    return identity


def main(argv: list[str] | None = None) -> int:
    """``python -m novabench.wordnet [--download] NLTK_DATA_DIR`` (scripts/setup.sh runs it)."""
    parser = argparse.ArgumentParser(
        prog="python -m novabench.wordnet",
        description="Install WordNet 3.0 for METEOR into an nltk data folder: copied from "
        "Debian's packages where they are installed, else (with --download) fetched by nltk's "
        "downloader and checked against the checksum nltk_data publishes.",
    )
    parser.add_argument("nltk_data", type=Path, help="the folder, e.g. results/nltk_data")
    parser.add_argument(
        "--download", action="store_true", help="download with nltk where Debian's files are absent"
    )
    parser.add_argument("--index-url", help="an nltk data index to read instead of nltk's")
    args = parser.parse_args(argv)
    try:
        ensure_wordnet(
            args.nltk_data, DEBIAN_WORDNET_DIR, download=args.download, index_url=args.index_url
        )
        identity = wordnet_identity(args.nltk_data)
    except NovaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"WordNet {identity['wordnet_version']} ({identity['source']}) in {args.nltk_data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
