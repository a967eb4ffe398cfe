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
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from novabench.errors import NovaError

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
    except BaseException as exc:
        written = _size(tmp)
        with contextlib.suppress(OSError):
            tmp.unlink()
        if is_disk_full(exc):
            raise disk_full_error(path.parent, written, path.name) from exc
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


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full (pyarrow's OSError carries errno 28 too)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full_error(folder: Path | str, written: int | None = None, name: str = "") -> NovaError:
    """One line for a full disk: the folder, what is free there and, when known, how much
    the output had written when the disk filled (the space it needs is more than that)."""
    folder = Path(folder)
    try:
        free = _mib(shutil.disk_usage(folder).free)
    except OSError:
        free = "unknown"
    needed = f"; {name} needs more than {_mib(written)}" if written else ""
    return NovaError(
        f"no space left on the device of {folder} ({free} free){needed}",
        "free space there or move results/ to a larger disk, then run the same command "
        "again (finished outputs are kept; only the failed jobs re-run)",
    )


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _mib(n: int | None) -> str:
    return f"{(n or 0) / 2**20:.1f} MiB"
