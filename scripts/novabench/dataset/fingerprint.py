"""A cheap fingerprint of a dataset source, so that a changed source re-runs the build.

Snakemake cannot see inside a folder that is not a declared input. The dataset rule
carries this fingerprint as a parameter (Snakemake re-runs a job whose parameters
changed): every file's path, size and modification time, plus the checksum of the
metadata files (small; an edit that keeps size and time is still seen there). Image
content hashes would mean reading every image on every plan, so they are recorded in the
dataset manifest by the build instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from novabench.dataset.layouts import CURRENT_METADATA, LEGACY_FILES
from novabench.provenance import canonical_json, sha256_file, sha256_text

METADATA_FILES = (str(CURRENT_METADATA), *LEGACY_FILES)


def source_fingerprint(dataset_cfg: Mapping[str, Any]) -> str:
    """What the dataset job reads, as one short string: ``local:<sha256>`` for a local
    folder; empty for the sample (a declared input) and the Hub (its revision is in the
    config, and the manifest records the commit it resolved to)."""
    if dataset_cfg.get("source") != "local" or not dataset_cfg.get("local_path"):
        return ""
    root = Path(str(dataset_cfg["local_path"])).expanduser()
    if not root.is_dir():
        # The build names the problem; any later change of the path re-runs it. A hash, not
        # the path: a job parameter never carries a config string raw (job_params).
        return f"local:absent:{sha256_text(str(root))}"
    return "local:" + sha256_text(canonical_json(folder_listing(root)))


def folder_listing(root: Path) -> list[list[Any]]:
    """``[relative path, size, mtime_ns, sha256 or None]`` per file, sorted; the sha256
    only for the metadata files. Hidden files and folders (``.cache``, ``.git``) are
    skipped: downloaders keep their own bookkeeping there. A link to a folder (or a
    dangling or looping link) is listed with its target (``[path, "link", target, None]``),
    never followed: a loop (``loop -> ..``) or a link to ``/`` would walk forever or the
    whole disk, and images must lie inside the folder anyway
    (:func:`novabench.dataset.images.image_file`)."""
    rows = []
    for path, stat in _files(Path(root)):
        relative = path.relative_to(root).as_posix()
        if stat is None:
            rows.append([relative, "link", os.readlink(path), None])
            continue
        checksum = sha256_file(path) if relative in METADATA_FILES else None
        rows.append([relative, stat.st_size, stat.st_mtime_ns, checksum])
    return sorted(rows, key=lambda row: row[0])


def _files(folder: Path) -> Iterator[tuple[Path, os.stat_result | None]]:
    """Files under ``folder`` with their stat (a linked file: its target's); other links
    (to a folder, dangling, looping) with None."""
    # os.scandir reuses the directory listing's stat data: one pass, no extra syscalls.
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                try:
                    linked_file = entry.is_file()
                except OSError:  # a loop
                    linked_file = False
                yield Path(entry.path), entry.stat() if linked_file else None
            elif entry.is_dir():
                yield from _files(Path(entry.path))
            elif entry.is_file():
                yield Path(entry.path), entry.stat()
