"""A persistent, content-addressed cache of model responses that survives ``kill -9``.

Every successful answer of a service-backed model is stored under a key that hashes
everything that determines it (model id, endpoint, generation settings, system prompt,
prompt text, image hash). Re-running a job then sends only the requests that have no entry,
so an interrupted overnight run resumes where it stopped and a finished one is free to
re-run.

Layout: one small JSON file per entry, ``<root>/<key[:2]>/<key>.json``. Each file is
written to a temporary name in the same folder, then renamed over its final name
(``os.replace`` is atomic on POSIX), so a reader sees either no entry or a complete one.
Files rather than SQLite because several jobs (one per task) write one model's cache at once
and a rename needs no locking, and because an entry can be inspected with ``cat``.

What a crash can lose:

- a killed process (``kill -9``, out of memory): nothing that :meth:`ResponseCache.put`
  returned from. The written file is in the kernel's page cache, which outlives the
  process, and the rename has made it visible; a write cut short leaves only a temporary
  file, which readers never see and which is swept once stale;
- a power loss or kernel crash: the entries written since the last :meth:`ResponseCache.sync`
  (which fsyncs the new files and their folders, in one batch rather than once per entry,
  which would cost a disk flush per answer). Such an entry may come back empty or partly
  written; each entry carries the sha256 of its response, so a damaged one is ignored and
  the request sent again, never read as an answer.

Entries that cannot be read (garbage left by a faulty disk or a hand edit), or that read as
JSON of the wrong shape (the owner's ``response_problem`` names what is wrong), are ignored
with one line naming the file, so the request is simply sent again and the entry rewritten.
A cache folder that cannot be written is found before the first request is sent
(:meth:`ResponseCache.check_writable`), not after it is paid for.

Several processes may want one entry at once: two runs sharing the cache (another dataset
tag, another task's job asking the same), or a prediction job left running after its
``snakemake`` was killed and the job a re-run starts in its place. A process sending a
request first *claims* its entry (:meth:`ResponseCache.claim`): a POSIX byte-range lock,
at an offset given by the key, on one file per cache folder (``<root>/.claims``). A
process finding an entry claimed waits and then reads the finished entry instead of
sending the request again. The kernel drops a killed process's locks, so a claim never
outlives its holder; one file and one descriptor per process, whatever the number of
entries, and NFS supports such locks.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.provenance import canonical_json

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_PARTIAL_SUFFIX = ".partial"
# Temporary files older than this were left by a killed writer and are removed.
_STALE_PARTIAL_S = 3600.0


def request_key(request: dict[str, Any]) -> str:
    """The sha256 of a request description (key order and float spelling do not matter)."""
    return hashlib.sha256(canonical_json({"v": FORMAT_VERSION, **request}).encode()).hexdigest()


def response_check(response: dict[str, Any]) -> str:
    """The sha256 of a stored response, which proves an entry whole when it is read."""
    return hashlib.sha256(canonical_json(response).encode()).hexdigest()


class ResponseCache:
    """Entries under one folder (one per model); safe for concurrent processes and threads."""

    def __init__(
        self, root: Path, response_problem: Callable[[dict[str, Any]], str | None] | None = None
    ):
        self.root = Path(root)
        # What is wrong with a stored response's shape (None: nothing); its writer knows.
        self.response_problem = response_problem
        self._named: set[Path] = set()  # entries of the wrong shape already named
        self._unsynced: list[Path] = []  # written since the last sync
        self._lock = threading.Lock()
        self._syncing = threading.Lock()

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
        if problem := self._shape_problem(entry["response"]):
            if path not in self._named:  # once: a request looks its entry up more than once
                self._named.add(path)
                log.warning(
                    "ignoring cache entry %s of the wrong shape (%s); the request is re-sent",
                    path,
                    problem,
                )
            return None
        # Entries written before the check was added have none; they were fsynced one by one.
        if "check" in entry and entry["check"] != response_check(entry["response"]):
            log.warning("ignoring damaged cache entry %s; the request is re-sent", path)
            return None
        return entry

    def _shape_problem(self, response: Any) -> str | None:
        if not isinstance(response, dict):
            return f"the response has type {type(response).__name__}, not an object"
        return None if self.response_problem is None else self.response_problem(response)

    def check_writable(self) -> None:
        """Raise NovaError, in one line, unless entries can be written here: called before
        the first request is sent, so that no answer is paid for and then lost."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(
                prefix=".write-check.", suffix=_PARTIAL_SUFFIX, dir=self.root
            )
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise NovaError(
                f"the response cache {self.root} cannot be written "
                f"({exc.strerror or exc}); nothing was sent",
                "make the folder writable (or free space on its disk), then re-run",
            ) from None

    def put(self, key: str, response: dict[str, Any], request: dict[str, Any]) -> Path:
        """Store one successful response atomically; returns the entry's path.

        Safe from a process kill once this returns; from a power loss after :meth:`sync`.
        """
        path = self.path(key)
        entry = {
            "v": FORMAT_VERSION,
            "key": key,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "request": request,
            "response": response,
            "check": response_check(response),
        }
        data = json.dumps(entry, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8")
        _write_atomically(path, data)
        with self._lock:
            self._unsynced.append(path)
        return path

    def sync(self) -> int:
        """Flush the entries written since the last sync, and their folders, to disk; returns
        how many entries. Call it every second or so, and before a job's outputs are written.
        """
        # One sync at a time: a sync that returns has also waited for one under way in
        # another thread, so every entry put before the call is on disk.
        with self._syncing:
            with self._lock:
                paths, self._unsynced = self._unsynced, []
            if not paths:
                return 0
            # In parallel: the file system commits concurrent fsyncs together, so hundreds
            # of entries take about as long as one (300 in 0.04 s here, 1 s one by one).
            # The folders after their files: their fsync makes the renames durable.
            folders = {path.parent for path in paths}
            with concurrent.futures.ThreadPoolExecutor(min(16, len(paths))) as pool:
                list(pool.map(_fsync, paths))
                list(pool.map(functools.partial(_fsync, directory=True), folders))
            return len(paths)

    def claim(self, key: str) -> bool:
        """Claim ``key``'s entry for this process, to fetch its answer; False while another
        process holds it (never blocks). Release it with :meth:`release` once the entry is
        written or the request has failed; the claims of a process end with it."""
        self.path(key)  # checks the key
        try:
            fcntl.lockf(self._claims_fd(), fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _offset(key))
        except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: held elsewhere
            return False
        except OSError as exc:
            # A file system without POSIX locks (NFS mounted nolock, Lustre without flock):
            # the job runs as before claims existed, so two runs at once may send a request
            # twice; said once per process, never a crash.
            _no_claims_warning(self.root, str(exc.strerror or exc))
        return True

    def release(self, key: str) -> None:
        """End this process's claim on ``key`` (no-op if it holds none)."""
        with contextlib.suppress(OSError):  # no locks on this file system: nothing held
            fcntl.lockf(self._claims_fd(), fcntl.LOCK_UN, 1, _offset(key))

    def _claims_fd(self) -> int:
        # POSIX locks belong to the process and closing *any* descriptor of the file drops
        # them all: so one descriptor per file and process, shared and never closed.
        path = (self.root / ".claims").resolve()
        with _CLAIM_FILES_LOCK:
            fd = _CLAIM_FILES.get(path)
            if fd is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = _CLAIM_FILES[path] = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            return fd

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


class CacheWriter:
    """Writes entries from a background thread, so that an event loop sending requests never
    waits on the disk, and syncs them every ``sync_every_s`` seconds and when closed.

    An entry is safe from a process kill once the thread has written it, normally within a
    millisecond of :meth:`put`; until then its answer is as good as still in flight (a
    re-run sends that request again). An error in the thread (a bug, a full disk) is raised
    by the next :meth:`put` and by :meth:`close`: nothing is dropped quietly.
    """

    def __init__(self, cache: ResponseCache, sync_every_s: float = 1.0):
        self.cache, self.sync_every_s = cache, sync_every_s
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="cache writer", daemon=True)
        self._thread.start()

    def put(
        self,
        key: str,
        response: dict[str, Any],
        request: dict[str, Any],
        then: Callable[[], None] | None = None,
    ) -> None:
        """Queue one entry; ``then`` runs in the thread once it is written (or failed)."""
        if self.error is not None:
            raise self.error
        self._queue.put((key, response, request, then))

    def close(self) -> None:
        """Write what is queued, sync, stop; raise the thread's error if it had one."""
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        next_sync = time.monotonic() + self.sync_every_s
        try:
            while True:
                try:
                    item = self._queue.get(timeout=max(0.0, next_sync - time.monotonic()))
                except queue.Empty:
                    item = ()
                if item is None:
                    self.cache.sync()
                    return
                if item:
                    key, response, request, then = item
                    try:
                        self.cache.put(key, response, request)
                    finally:
                        if then is not None:
                            then()
                if time.monotonic() >= next_sync:
                    self.cache.sync()
                    next_sync = time.monotonic() + self.sync_every_s
        except BaseException as exc:  # raised in the caller's thread by put() and close()
            self.error = exc


# The claims file of each cache folder this process opened: path -> descriptor.
_CLAIM_FILES: dict[Path, int] = {}
_CLAIM_FILES_LOCK = threading.Lock()


def _offset(key: str) -> int:
    """The byte a key's claim locks: 60 bits of the key (distinct keys sharing one would
    only wait for each other, and the waiter reads the cache before sending)."""
    return int(key[:15], 16)


def _write_atomically(path: Path, data: bytes) -> None:
    """``data`` to a fresh temporary file renamed over ``path``: what ``io.atomic_write_bytes``
    does, with one open and no ``mkdir`` per entry (creating files is the cost that matters
    at hundreds of entries per second). The temporary name is unique: jobs of several tasks
    may write the same entry at once."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_PARTIAL_SUFFIX, dir=path.parent)
    except FileNotFoundError:  # the folder's first entry (or the folder was deleted)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_PARTIAL_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync(path: Path, directory: bool = False) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    except FileNotFoundError:
        return  # replaced or deleted since it was written: nothing of ours left to flush
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _no_claims_warning(root: Path, reason: str) -> None:
    """One warning per cache folder and process when its file system cannot lock."""
    log.warning(
        "the cache folder %s cannot take locks (%s): two runs at once may send a request "
        "twice; fix: keep results/ on a local disk or a file system with POSIX locks",
        root,
        reason,
    )
