"""One server per model and run: the service job that starts it and the jobs that use it.

A model whose adapter ``starts_server`` (a managed vLLM server) is loaded once for all its
tasks in a run: rule ``serve_model`` is a Snakemake service job (output ``service(...)``)
that starts the model's server with the adapter's own lifecycle code
(``Adapter.shared_server``: process group, parent-death signal, pid file, reaping), writes
its address into the service file once it is ready, and holds it until Snakemake ends the
job after the model's last prediction job. Snakemake runs a service job and its consumers
together, in one group: on a cluster one allocation with the model's GPUs, asked for once.

The prediction jobs (one per task, as before: their outputs, caching, code-aware re-runs
are unchanged) start at the same time and ask for the server only when they have a request
to send (:func:`service_address`): the first to ask leaves a demand file beside the service
file, and only then does the service job load the model (the service file exists from the
start, without an address: Snakemake checks that its consumers' inputs exist). When every
answer is cached (a re-run after a code edit) nobody asks, and Snakemake ends the service
job before it loaded anything.
A server that fails to start is written into the service file, so that the waiting jobs
stop at once with its one line instead of at the start-up timeout.

The server checks a key every request must carry (``VLLM_API_KEY``). The service job
writes it into a file only its user can read, beside the service file, for the time the
server lives, and removes it when the server stops: no key outlives its server in
``results/``. The service file names the server's process (pid and start time), so a
prediction job checks, before its first request, that every socket listening on the port
belongs to that process or its children, and keeps no answer that arrives once it is gone:
the same checks a job makes of a server it started itself. The service job and its
prediction jobs run on one node (one Snakemake group), where these checks hold.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench import vllm_server
from novabench.errors import NovaError
from novabench.io import atomic_write_text

log = logging.getLogger("novabench.serving")

#: How often a prediction job looks for the address, and the service job for its end.
POLL_S = 0.2
#: Seconds a prediction job waits beyond the server's own start-up timeout.
WAIT_MARGIN_S = 60.0


def serve_model(name: str, adapter: Any, service_file: Path) -> None:
    """Start model ``name``'s server with its ``adapter`` (``shared_server``), publish its
    address, hold it until the job ends. The caller loads the adapter: the adapters
    import this module."""
    parent = os.getppid()
    # The file exists at once: Snakemake checks its consumers' inputs before they start.
    _publish(service_file, {"model": name, "state": "waiting for a task"})
    if not _wait_for_demand(Path(service_file), parent, _termination_flag()):
        log.info("%s: no task asked for the server (answers cached): not started", name)
        return
    try:
        with adapter.shared_server() as server:
            _write_key(Path(service_file), server.api_key)
            pid = server.process.pid
            start_time = vllm_server.process_start_time(pid)
            record = {"model": name, "base_url": server.base_url, "pid": pid}
            _publish(service_file, {**record, "start_time": start_time})
            log.info("%s: serving every task of this run at %s", name, server.base_url)
            _hold(server, parent)
    except NovaError as exc:
        _publish(service_file, {"model": name, "error": str(exc)})
        raise
    finally:
        demand_file(Path(service_file)).unlink(missing_ok=True)
        key_file(Path(service_file)).unlink(missing_ok=True)


def demand_file(service_file: Path) -> Path:
    """Left by the first prediction job that has a request to send."""
    return service_file.with_name(service_file.name + ".wanted")


def key_file(service_file: Path) -> Path:
    """The server's key, readable by its user only, while the server lives."""
    return service_file.with_name(service_file.name + ".key")


def _write_key(service_file: Path, key: str) -> None:
    path = key_file(service_file)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(key)


def _termination_flag() -> threading.Event:
    """Set by SIGTERM or SIGHUP (how Snakemake and SLURM end the job) while the job waits
    for a task: it then ends cleanly and says so. The server's own handlers replace these."""
    ended = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, lambda *_: ended.set())
    return ended


def _wait_for_demand(service_file: Path, parent: int, ended: threading.Event) -> bool:
    """Until a task asks for the server (True) or the job is ended first (False)."""
    while os.getppid() == parent and not ended.is_set():
        if demand_file(service_file).exists():
            return True
        time.sleep(POLL_S)
    return False


def _publish(service_file: Path, record: dict[str, Any]) -> None:
    atomic_write_text(Path(service_file), json.dumps(record, sort_keys=True) + "\n")


def _hold(server: Any, parent: int) -> None:
    """Until Snakemake ends the job (SIGTERM, handled by the server's own context, or
    the end of the shell the job ran in, whose signal Python does not get) or the
    server exits on its own (an error: the tasks still running lose their server)."""
    while os.getppid() == parent:
        problem = server.exit_problem()
        if problem is not None:
            raise problem
        time.sleep(POLL_S)
    log.info("the job was ended: stopping the server")


@dataclass(frozen=True)
class SharedServer:
    """The run's server as a prediction job sees it: where, the key, whose process."""

    base_url: str
    api_key: str
    pid: int
    start_time: str | None

    def running(self) -> bool:
        """Whether the process the service job started still runs (its port is its own)."""
        return vllm_server._alive(self.pid, self.start_time)

    def listener_problem(self, name: str) -> NovaError | None:
        """Why the port is not (only) the shared server's, or None."""
        port = int(self.base_url.rsplit(":", 1)[1].split("/")[0])
        ours = vllm_server.process_tree(self.pid) if self.running() else set()
        found = vllm_server.port_strangers(port, ours)
        if found is None:
            return None
        return NovaError(
            f"models.{name}: port {port} is served by {found}, "
            f"not by the run's shared vLLM server (process {self.pid}); nothing was sent to it",
            "read the log of its serve_model job, stop what listens there and re-run",
        )


def service_address(service_file: Path, timeout_s: float) -> Callable[[], SharedServer]:
    """The shared server as a prediction job asks for it: waits (once) for the service
    job to publish it; a failed start ends the job with the service's line."""
    found: list[SharedServer] = []

    def address() -> SharedServer:
        if not found:
            wanted = demand_file(Path(service_file))
            wanted.parent.mkdir(parents=True, exist_ok=True)
            wanted.touch()
            found.append(_wait_for_address(Path(service_file), timeout_s))
        return found[0]

    return address


def _wait_for_address(service_file: Path, timeout_s: float) -> SharedServer:
    deadline = time.monotonic() + timeout_s
    while True:
        record = _read_record(service_file)
        if record is not None and "error" in record:
            raise NovaError(
                f"the model's shared server did not start: {record['error']}",
                "fix what it names, then re-run: the answers received are not asked again",
            )
        if record is not None and "base_url" in record:
            return _shared_server(service_file, record)
        if time.monotonic() >= deadline:
            raise NovaError(
                f"the model's shared server published no address in {timeout_s:g} s "
                f"({service_file})",
                "read the log of its serve_model job",
            )
        time.sleep(POLL_S)


def _read_record(service_file: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(service_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # not written yet (written whole, by rename)
    return record if isinstance(record, dict) else None


def _shared_server(service_file: Path, record: dict[str, Any]) -> SharedServer:
    try:
        key = key_file(service_file).read_text(encoding="utf-8")
        pid, start_time = int(record["pid"]), record.get("start_time")
        return SharedServer(str(record["base_url"]), key, pid, start_time)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise NovaError(
            f"the model's shared server published an incomplete record ({service_file}: "
            f"{type(exc).__name__})",
            "its serve_model job has ended or was interrupted: re-run",
        ) from None
