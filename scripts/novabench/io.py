"""Atomic file writes: a reader sees the old file or the complete new one, never a part.

Every output is written under a temporary name in the same folder and renamed over its
final name (``os.replace`` is atomic on POSIX when both names are on one file system, as
they are in one folder). A writer killed mid-write leaves at most the temporary file;
the final name keeps its previous content or stays absent, so Snakemake never mistakes a
truncated file for a finished one.

    with atomic_path(out) as tmp:        # for writers that want a path (Parquet, CSV)
        table.write(tmp)
    atomic_write_text(out, text)         # for content already in memory
    atomic_write_bytes(out, data, fsync=True)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

TMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_path(
    path: Path | str, *, fsync: bool = False, unique: bool = False, suffix: str = TMP_SUFFIX
) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it over ``path`` when the block ends.

    Parent folders are created. If the block raises (or is interrupted), the temporary file
    is removed and ``path`` is left untouched. ``fsync=True`` flushes the data to disk
    before the rename, so a power loss cannot leave a renamed but empty file. The
    temporary name is ``<name><suffix>``; with ``unique=True`` it is a fresh hidden name
    ``.<name>.<random><suffix>`` instead, for files that several processes may write at
    once (the file is created empty, readable by its owner only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if unique:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    else:
        tmp = path.with_name(path.name + suffix)
    try:
        yield tmp
        if fsync:
            _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_bytes(
    path: Path | str,
    data: bytes,
    *,
    fsync: bool = False,
    unique: bool = False,
    suffix: str = TMP_SUFFIX,
) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`); returns ``path``."""
    path = Path(path)
    with atomic_path(path, fsync=fsync, unique=unique, suffix=suffix) as tmp:
        tmp.write_bytes(data)
    return path


def atomic_write_text(
    path: Path | str,
    text: str,
    *,
    encoding: str = "utf-8",
    fsync: bool = False,
    unique: bool = False,
    suffix: str = TMP_SUFFIX,
) -> Path:
    """Write ``text`` to ``path`` atomically, encoded as given and with newlines as given
    (no platform translation); returns ``path``."""
    return atomic_write_bytes(
        path, text.encode(encoding), fsync=fsync, unique=unique, suffix=suffix
    )


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def resolve_path(path: str | Path, base: Path | None) -> str:
    """A path from the config: as given when it is absolute or exists (relative to the
    working directory), else under ``base`` (the workflow) when it exists there."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists() or base is None:
        return str(candidate)
    in_base = Path(base) / candidate
    return str(in_base) if in_base.exists() else str(candidate)
