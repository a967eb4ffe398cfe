"""A persistent, content-addressed cache of model responses that survives ``kill -9``.

Every successful answer of a service-backed model is stored under a key that hashes
everything that determines it (model id, endpoint, generation settings, system prompt,
prompt text, image hash). Re-running a job then sends only the requests that have no entry,
so an interrupted overnight run resumes where it stopped and a finished one is free to
re-run.

Layout: one small JSON file per entry, ``<root>/<key[:2]>/<key>.json``. Each file is
written to a temporary name in the same folder, flushed and fsynced, then renamed over its
final name (``os.replace`` is atomic on POSIX), so a reader sees either no entry or a
complete one, and a crash at any moment loses at most the entries being written. Files
rather than SQLite because several jobs (one per task) write one model's cache at once and
a rename needs no locking, and because an entry can be inspected with ``cat``. Entries that
cannot be read (garbage left by a faulty disk or a hand edit) are ignored, so the request is
simply sent again and the entry rewritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from novabench.io import atomic_write_bytes
from novabench.provenance import canonical_json

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_PARTIAL_SUFFIX = ".partial"
# Temporary files older than this were left by a killed writer and are removed.
_STALE_PARTIAL_S = 3600.0


def request_key(request: dict[str, Any]) -> str:
    """The sha256 of a request description (key order and float spelling do not matter)."""
    return hashlib.sha256(canonical_json({"v": FORMAT_VERSION, **request}).encode()).hexdigest()


class ResponseCache:
    """Entries under one folder (one per model); safe for concurrent processes."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(f"not a sha256 hex key: {key!r}")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry, or None when absent or unreadable."""
        path = self.path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            log.warning(
                "ignoring unreadable cache entry %s (%s); the request is re-sent", path, exc
            )
            return None
        if not isinstance(entry, dict) or entry.get("key") != key or "response" not in entry:
            log.warning("ignoring malformed cache entry %s; the request is re-sent", path)
            return None
        return entry

    def put(self, key: str, response: dict[str, Any], request: dict[str, Any]) -> Path:
        """Store one successful response atomically; returns the entry's path."""
        path = self.path(key)
        entry = {
            "v": FORMAT_VERSION,
            "key": key,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "request": request,
            "response": response,
        }
        data = json.dumps(entry, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8")
        # A unique temporary name: jobs of several tasks may write the same entry at once.
        atomic_write_bytes(path, data, fsync=True, unique=True, suffix=_PARTIAL_SUFFIX)
        # The folder is not fsynced after the rename: that only matters on a power loss,
        # where it could lose the newest entries (re-sent next time) but never corrupt one,
        # and it would double the cost of every write.
        return path

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("??/*.json")) if self.root.is_dir() else 0

    def remove_stale_partials(self, older_than_s: float = _STALE_PARTIAL_S) -> int:
        """Delete temporary files a killed writer left behind; returns how many."""
        if not self.root.is_dir():
            return 0
        removed, now = 0, time.time()
        for tmp in self.root.glob(f"??/.*{_PARTIAL_SUFFIX}"):
            with contextlib.suppress(OSError):
                if now - tmp.stat().st_mtime > older_than_s:
                    tmp.unlink()
                    removed += 1
        return removed
