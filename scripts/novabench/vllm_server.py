"""A vLLM server that one prediction job starts, uses and stops (adapter ``vllm``).

The job picks a free port on its node, starts ``vllm serve <model>`` with the model's
``serve`` settings, waits for ``GET /health`` and then ``GET /v1/models`` to list the
model, and hands the address to the chat-completions client. Whatever ends the job (its
work done, an error, Ctrl-C, SIGTERM from Snakemake or ``scancel``), the server goes with
it:

- it runs in a process group of its own, so that stopping it (SIGTERM to the group, then
  SIGKILL after ``stop_grace_s``) also stops its engine workers;
- on Linux it gets SIGTERM when the job process dies, even by ``kill -9``
  (``prctl(PR_SET_PDEATHSIG)``, set between fork and exec);
- a pid file under ``results/servers/`` names the group, its leader's start time and
  command line, the node and the job that owns it; the next managed job on that node stops
  every group whose owner is gone (a node without the parent-death signal), but only while
  the group's leader is that very server (start time and command line as recorded): a file
  without them, or naming another process, is ignored with one line.

Before the first request the job makes sure the server is the process it started: every
request carries a per-job key the server was started with (``VLLM_API_KEY``, passed in its
environment, never on its command line), and every socket listening on the port must
belong to the started process or its descendants; another process there (one that bound
the port first) ends the job with one line before anything is sent or cached.

The server's output goes into the job's log line by line (logger ``novabench.vllm``), keys
and secrets redacted (:mod:`novabench.redaction`: the configured keys, the job's key, the
values of the secret-named variables it inherits such as ``HF_TOKEN``), and its last lines
travel with every error about it: a server that exits or never becomes
healthy ends the job with one line naming the cause and those lines.

vLLM is optional (it needs CUDA): it is not in requirements.txt; ``envs/vllm.yaml`` pins it
for ``--sdm conda`` runs, and a job that cannot find the executable says how to install it.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novabench.errors import ConfigError, NovaError
from novabench.io import atomic_write_text
from novabench.redaction import Redactor, configured_keys, environment_secrets

log = logging.getLogger("novabench.vllm")

#: The release envs/vllm.yaml pins (tests/workflow/test_envs.py checks they agree); the
#: ``--limit-mm-per-prompt`` syntax below is this release's (JSON).
VLLM_VERSION = "0.33.0"
INSTALL_HINT = (
    f"install vLLM where the prediction jobs run (it needs CUDA): pip install "
    f"vllm=={VLLM_VERSION}, or run with --sdm conda (envs/vllm.yaml)"
)
LOOPBACK = "127.0.0.1"
#: Lines of the server's output kept for error messages.
TAIL_LINES = 20
#: The variable through which vLLM takes the key every request must carry.
API_KEY_ENV = "VLLM_API_KEY"
#: How often the health endpoint is asked while the server starts: soon, then less often.
POLL_S = (0.1, 2.0)
#: Default host memory per GPU (MB) a managed job asks for: vLLM workers stage weights
#: through host memory while loading, one worker per GPU.
MEM_MB_PER_GPU = 32000
EXIT_FIX = (
    "read the job's log for the server's whole output (out of GPU memory: more serve.gpus "
    "or a smaller serve.max_model_len; an unknown flag: fix serve.extra_args)"
)

SERVE_DEFAULTS: dict[str, Any] = {
    "weights": None,  # what `vllm serve` loads (a hub id or folder); default settings.model
    "revision": None,
    "gpus": 1,
    "tensor_parallel_size": None,  # default: the GPUs of one replica (at least 1)
    "replicas": 1,  # vLLM data parallel: copies of the model behind one endpoint
    "max_model_len": None,
    "dtype": "auto",
    "images_per_prompt": 1,
    "trust_remote_code": False,
    "extra_args": [],
    "startup_timeout_s": 1800.0,  # a 72B model takes minutes to load
    "stop_grace_s": 30.0,
    "cpus": None,  # default: 4 per GPU (at least 1)
    "mem_mb": None,  # default: MEM_MB_PER_GPU per GPU (at least one GPU's worth)
    "executable": "vllm",
}
# What changes the answers the server gives (the rest only decides where and how it runs).
SERVE_ANSWER_KEYS = (
    "weights",
    "revision",
    "max_model_len",
    "dtype",
    "images_per_prompt",
    "trust_remote_code",
    "extra_args",
)
SERVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "weights": {"type": ["string", "null"], "minLength": 1},
        "revision": {"type": ["string", "null"], "minLength": 1},
        "gpus": {"type": "integer", "minimum": 0},
        "tensor_parallel_size": {"type": ["integer", "null"], "minimum": 1},
        "replicas": {"type": "integer", "minimum": 1},
        "max_model_len": {"type": ["integer", "null"], "minimum": 1},
        "dtype": {"enum": ["auto", "bfloat16", "float16", "float32", "half", "float"]},
        "images_per_prompt": {"type": "integer", "minimum": 0},
        "trust_remote_code": {"type": "boolean"},
        "extra_args": {"type": "array", "items": {"type": "string"}},
        "startup_timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "stop_grace_s": {"type": "number", "minimum": 0},
        "cpus": {"type": ["integer", "null"], "minimum": 1},
        "mem_mb": {"type": ["integer", "null"], "minimum": 1},
        "executable": {"type": "string", "minLength": 1},
    },
}
# Flags the job sets itself: given again in extra_args they would contradict it.
OWN_FLAGS = (
    "--api-key",  # the job's own key, passed by environment: never on a command line
    "--host",
    "--port",
    "--served-model-name",
    "--revision",
    "--tensor-parallel-size",
    "-tp",
    "--data-parallel-size",
    "-dp",
    "--max-model-len",
    "--dtype",
    "--limit-mm-per-prompt",
    "--trust-remote-code",
)


def resolve_serve(name: str, serve: dict[str, Any] | None) -> dict[str, Any]:
    """The ``serve`` settings with defaults filled in (the schema has checked them)."""
    resolved = {**SERVE_DEFAULTS, **(serve or {})}
    for arg in resolved["extra_args"]:
        flag = arg.split("=", 1)[0]
        if flag in OWN_FLAGS:
            key = {"-tp": "--tensor-parallel-size", "-dp": "--data-parallel-size"}.get(flag, flag)
            setting = {"--data-parallel-size": "replicas"}.get(key) or key.removeprefix(
                "--"
            ).replace("-", "_")
            raise ConfigError(
                f"models.{name}.settings.serve.extra_args sets {flag}, which the job sets itself",
                f"remove it (set serve.{setting} instead, where it is a setting)"
                if setting in SERVE_DEFAULTS
                else "remove it",
            )
    return resolved


def job_gpus(serve: dict[str, Any]) -> int:
    return int(serve["gpus"])


def tensor_parallel_size(serve: dict[str, Any]) -> int:
    return int(serve["tensor_parallel_size"] or max(1, serve["gpus"] // serve["replicas"]))


def replicas_problem(name: str, serve: dict[str, Any]) -> ConfigError | None:
    """Plan time: the replicas, each on ``tensor_parallel_size`` GPUs, must fit the GPUs the
    job asks for (``serve.gpus`` 0 runs on no GPU: a CPU build or a test stand-in)."""
    replicas, per_replica, gpus = serve["replicas"], tensor_parallel_size(serve), serve["gpus"]
    if gpus == 0 or replicas * per_replica <= gpus:
        return None
    return ConfigError(
        f"models.{name}.settings.serve: {replicas} replicas x tensor_parallel_size "
        f"{per_replica} need {replicas * per_replica} GPUs, but serve.gpus asks for {gpus}",
        f"set serve.gpus to {replicas * per_replica}, or fewer replicas",
    )


def replica_args(serve: dict[str, Any]) -> list[str]:
    """vLLM's data parallelism: ``replicas`` engines behind the one endpoint."""
    replicas = int(serve["replicas"])
    return [] if replicas == 1 else ["--data-parallel-size", str(replicas)]


def job_cpus(serve: dict[str, Any]) -> int:
    return int(serve["cpus"] or max(1, 4 * serve["gpus"]))


def job_mem_mb(serve: dict[str, Any]) -> int:
    return int(serve["mem_mb"] or MEM_MB_PER_GPU * max(1, serve["gpus"]))


def serve_command(model: str, serve: dict[str, Any], port: int) -> list[str]:
    """``vllm serve ...`` for one model on loopback ``port`` (the client is in the job)."""
    command = [
        serve["executable"],
        "serve",
        serve["weights"] or model,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        # The client asks for settings.model, whatever folder the weights come from.
        "--served-model-name",
        model,
        "--tensor-parallel-size",
        str(tensor_parallel_size(serve)),
        "--dtype",
        serve["dtype"],
        "--limit-mm-per-prompt",
        json.dumps({"image": serve["images_per_prompt"]}),
    ]
    if serve["revision"]:
        command += ["--revision", serve["revision"]]
    if serve["max_model_len"]:
        command += ["--max-model-len", str(serve["max_model_len"])]
    if serve["trust_remote_code"]:
        command.append("--trust-remote-code")
    return command + replica_args(serve) + list(serve["extra_args"])


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's pick); vLLM binds it soon after."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def find_executable(name: str, executable: str) -> str:
    found = shutil.which(executable)
    if found is None:
        raise NovaError(
            f"models.{name}: the job starts its own vLLM server, but {executable!r} is not on "
            "its PATH",
            INSTALL_HINT,
        )
    return found


# -- process groups that die with the job ---------------------------------------------------


def _parent_death_signal() -> Any:
    """A preexec function that asks Linux for SIGTERM when the job process dies; None where
    the call is not available (then the pid file is the fallback). Linux sends it when the
    *thread* that started the server ends: prediction jobs start it from their main thread."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    parent = os.getpid()

    def preexec() -> None:  # runs in the child between fork and exec: no logging here
        prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the job died before the call took effect
            os._exit(1)

    return preexec


def process_start_time(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot, Linux), to tell a pid that was
    reused from the process recorded; None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its end.
    return stat.rsplit(")", 1)[-1].split()[19]


def _alive(pid: int, start_time: str | None) -> bool:
    """Whether ``pid`` is still the process that started at ``start_time``."""
    if not _pid_taken(pid):
        return False
    return start_time is None or process_start_time(pid) in (start_time, None)


def _pid_taken(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: they have exited,
    and the one that is not our child waits for whoever adopted it (which may never
    collect it, in a container whose first process is not an init)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(pgid: int, grace_s: float, process: subprocess.Popen | None = None) -> None:
    """SIGTERM to the group, SIGKILL to what is left after ``grace_s``; returns once the
    group is gone (or after a further few seconds, say, for a process stuck in the kernel)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    if not _wait_group(pgid, grace_s, process):
        log.warning(
            "vLLM server (process group %d) still running after %g s: SIGKILL", pgid, grace_s
        )
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        _wait_group(pgid, 10.0, process)


def _wait_group(pgid: int, seconds: float, process: subprocess.Popen | None) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        if process is not None:
            process.poll()  # reap our child, or the group never empties
        if not _group_alive(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@dataclass
class PidFile:
    """What the next run on the node needs to stop a server whose job died, and to tell
    that server from any other process group (a planted file names someone else's)."""

    path: Path

    def write(self, pgid: int, owner: int, command: list[str]) -> None:
        """``command``: the server's command line as started (its arguments after the
        executable, which the interpreter running ``vllm`` may precede)."""
        atomic_write_text(
            self.path,
            json.dumps(
                {
                    "host": socket.gethostname(),
                    "pgid": pgid,
                    "start_time": process_start_time(pgid),
                    "command": command[1:],
                    "owner": owner,
                    "owner_start_time": process_start_time(owner),
                }
            )
            + "\n",
        )

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def process_arguments(pid: int) -> list[str] | None:
    """The command line of a process (Linux), or None where it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")[:-1]]


def _started_by_us(pgid: int, record: dict[str, Any]) -> bool:
    """Whether the group's leader is the server the record names: the same start time and
    a command line that ends with the recorded arguments, which are those of a server as
    this module starts them (any other process's could be copied into a file)."""
    arguments = process_arguments(pgid)
    command = record["command"]
    ours = command[0] == "serve" and {"--host", LOOPBACK, "--port", "--served-model-name"} <= set(
        command
    )
    return (
        ours
        and process_start_time(pgid) == record["start_time"]
        and arguments is not None
        and len(arguments) > len(command)
        and arguments[-len(command) :] == command
    )


def _read_record(path: Path) -> dict[str, Any] | None:
    """A pid file's record, or None (said in one line) where it cannot be trusted."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        pgid, owner, host = int(record["pgid"]), int(record["owner"]), str(record["host"])
        record.update(pgid=pgid, owner=owner, host=host)
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("ignoring an unreadable server pid file %s", path)
        return None
    command = record.get("command")
    valid_command = (
        isinstance(command, list) and command and all(isinstance(a, str) for a in command)
    )
    if not isinstance(record.get("start_time"), str) or not valid_command:
        log.warning(
            "ignoring server pid file %s: it names no start time and command line of a server "
            "this project started (remove it if no such server runs)",
            path,
        )
        return None
    return record


def reap_orphans(folder: Path, grace_s: float = 10.0) -> list[int]:
    """Stop every server recorded in ``folder`` that runs on this node and whose job is
    gone; return their process groups. Records of other nodes are left alone, and so is
    every group whose leader is not the recorded server."""
    stopped = []
    for path in sorted(Path(folder).glob("*.json")):
        record = _read_record(path)
        if record is None or record["host"] != socket.gethostname():
            continue
        if _alive(record["owner"], record.get("owner_start_time")):
            continue  # a job still running (another task of the model, say)
        pgid = record["pgid"]
        if _started_by_us(pgid, record):
            log.warning(
                "stopping a vLLM server left by a job that is gone (process group %d, %s)",
                pgid,
                path.name,
            )
            stop_group(pgid, grace_s)
            stopped.append(pgid)
        elif _group_alive(pgid):
            # Never another group that got the same number later, nor one whose leader has
            # exited: nothing shows its members are the server's.
            log.warning(
                "leaving process group %d alone: its leader is not the vLLM server %s "
                "records (gone, or its start time or command line differ)",
                pgid,
                path.name,
            )
        for leftover in (path, path.with_suffix(".log")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return stopped


# -- the server -----------------------------------------------------------------------------


class ServerLog:
    """The server's output: a file (a pipe would break when the job dies, and a server
    writing to it with it), followed into the job's log line by line as it grows; the
    last lines kept for error messages."""

    def __init__(self, path: Path, redactor: Redactor | None = None):
        self.path = Path(path)
        self.redactor = redactor or Redactor()
        self.lines: collections.deque = collections.deque(maxlen=TAIL_LINES)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> Any:
        """The file the server writes to (the caller closes its copy after the start);
        readable by its owner only, as it holds what the server prints unredacted until the
        job removes it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)  # a file left by another user keeps its mode
        return os.fdopen(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")

    def follow(self) -> None:
        def pump() -> None:
            with open(self.path, "rb") as stream:
                pending = b""
                while True:
                    chunk = stream.read(65536)
                    if chunk:
                        pending += chunk
                        *lines, pending = pending.split(b"\n")
                        for raw in lines:
                            self._add(raw)
                    elif self._done.is_set():
                        break
                    else:
                        time.sleep(0.05)
                if pending:
                    self._add(pending)

        self._thread = threading.Thread(target=pump, name="vllm-log", daemon=True)
        self._thread.start()

    def _add(self, raw: bytes) -> None:
        # Redacted before it is kept or logged: a server may print the tokens it was given.
        line = self.redactor(raw.decode("utf-8", "replace").rstrip())
        self.lines.append(line)
        log.info("vllm: %s", line)

    def drain(self) -> None:
        """Read what the server wrote up to now, and stop following."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def close(self) -> None:
        self.drain()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def tail(self) -> str:
        lines = [line for line in self.lines if line.strip()]
        return " | ".join(lines[-8:]) if lines else "(the server wrote nothing)"


class ManagedServer:
    """One ``vllm serve`` process group, from start to stop; use it as a context manager."""

    def __init__(
        self,
        name: str,
        model: str,
        serve: dict[str, Any],
        *,
        pid_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.name, self.model, self.serve = name, model, serve
        folder = Path(pid_dir) if pid_dir is not None else Path(tempfile.mkdtemp())
        self.pid_file = None if pid_dir is None else PidFile(folder / f"{os.getpid()}.json")
        # The key every request carries, which the server checks: a process that is not
        # the server the job started cannot serve the job's requests with its answers.
        self.api_key = secrets.token_urlsafe(32)
        self.env = {**(os.environ if env is None else env), API_KEY_ENV: self.api_key}
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        redactor = configured_keys(self.api_key, *environment_secrets(self.env))
        self.output = ServerLog(folder / f"{os.getpid()}.log", redactor)
        self._previous_handlers: dict[int, Any] = {}

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/v1"

    def __enter__(self) -> ManagedServer:
        self._catch_termination()
        try:
            self.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        executable = find_executable(self.name, self.serve["executable"])
        self.port = free_port()
        command = [executable, *serve_command(self.model, self.serve, self.port)[1:]]
        log.info("%s: starting %s", self.name, " ".join(command))
        with self.output.open() as output:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as one
                preexec_fn=_parent_death_signal(),
                env=self.env,
            )
        self.output.follow()
        if self.pid_file is not None:
            self.pid_file.write(self.process.pid, os.getpid(), command)

    def exit_reason(self) -> str | None:
        """How the server ended, with its last lines; None while it runs."""
        code = None if self.process is None else self.process.poll()
        if code is None:
            return None
        self.output.drain()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"models.{self.name}: the vLLM server {how}; its last lines: {self.output.tail()}"

    def running(self) -> bool:
        """Whether the server the job started still runs (it alone holds its port)."""
        return self.process is not None and self.process.poll() is None

    def exit_problem(self) -> NovaError | None:
        """Why the server is not running any more, or None while it runs."""
        reason = self.exit_reason()
        return None if reason is None else NovaError(reason, EXIT_FIX)

    def wait_ready(self) -> None:
        """Until ``/health`` answers 200 and ``/v1/models`` lists the model."""
        timeout = float(self.serve["startup_timeout_s"])
        started = time.monotonic()
        root = self.base_url.removesuffix("/v1")
        tries = 0
        while True:
            problem = self.exit_problem()
            if problem is not None:
                raise problem
            if _get(f"{root}/health") is not None:
                break
            if time.monotonic() - started > timeout:
                raise NovaError(
                    f"models.{self.name}: the vLLM server did not become healthy within "
                    f"{timeout:g} s (serve.startup_timeout_s); its last lines: "
                    f"{self.output.tail()}",
                    "raise serve.startup_timeout_s if it was still loading, else read the "
                    "job's log",
                )
            time.sleep(min(POLL_S[1], POLL_S[0] * 2 ** min(tries, 10)))
            tries += 1
        # Healthy, but whose health? Before the key or a request goes there: the server's.
        problem = self.listener_problem()
        if problem is not None:
            raise problem
        listed = _served_models(_get(f"{self.base_url}/models", api_key=self.api_key))
        if self.model not in listed:
            raise NovaError(
                f"models.{self.name}: the vLLM server serves {listed or 'no model'}, not "
                f"{self.model!r}",
                "report it: the job starts it with --served-model-name settings.model",
            )
        log.info(
            "%s: vLLM server ready on port %d after %.1f s",
            self.name,
            self.port,
            time.monotonic() - started,
        )

    def listener_problem(self) -> NovaError | None:
        """Why the port is not (only) the started server's, or None: every socket listening
        on it must belong to the server's process or one of its descendants."""
        assert self.process is not None and self.port is not None
        found = port_strangers(self.port, process_tree(self.process.pid))
        if found is None:
            return None
        return NovaError(
            f"models.{self.name}: port {self.port} is served by {found}, not by the vLLM "
            f"server the job started (process {self.process.pid}); nothing was sent to it",
            f"stop what listens there (ss -ltnp 'sport = :{self.port}' names it) and re-run "
            "the job",
        )

    def stop(self) -> None:
        """Stop the whole process group; safe to call twice."""
        process, self.process = self.process, None
        try:
            if process is not None:
                stop_group(process.pid, float(self.serve["stop_grace_s"]), process)
                process.wait()
                self.process = process  # keeps the exit code for exit_reason()
                log.info("%s: vLLM server stopped (exit code %s)", self.name, process.returncode)
            self.output.close()
            if self.pid_file is not None:
                self.pid_file.remove()
        finally:
            self._restore_handlers()

    def _catch_termination(self) -> None:
        """SIGTERM (Snakemake, scancel) and SIGHUP end the job through its ``finally``
        blocks, which stop the server; by default they end Python without them."""
        if threading.current_thread() is not threading.main_thread():
            return

        def terminate(signum: int, frame: Any) -> None:
            raise SystemExit(128 + signum)

        for signum in (signal.SIGTERM, signal.SIGHUP):
            self._previous_handlers[signum] = signal.signal(signum, terminate)

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        self._previous_handlers = {}


def listening_pids(port: int) -> set[int | None]:
    """The processes with a TCP socket listening on ``port`` (any address); None stands for
    one whose owner cannot be read (another user's)."""
    import psutil

    return {
        connection.pid
        for connection in psutil.net_connections(kind="tcp")
        if connection.status == psutil.CONN_LISTEN
        and connection.laddr
        and connection.laddr.port == port
    }


def port_strangers(port: int, ours: set[int]) -> str | None:
    """Who else listens on ``port`` than the processes ``ours`` ("nobody" if no one
    does), or None when every listening socket is theirs."""
    owners = listening_pids(port)
    strangers = sorted(str(pid) for pid in owners - ours if pid is not None)
    if None in owners:
        strangers.append("a process of another user")
    if owners and not strangers:
        return None
    return ", ".join(strangers) if strangers else "nobody"


def process_tree(pid: int) -> set[int]:
    """``pid`` and its descendants (empty once it has exited)."""
    import psutil

    try:
        root = psutil.Process(pid)
        return {pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


def _get(url: str, timeout_s: float = 5.0, api_key: str | None = None) -> bytes | None:
    """The body of a 200 answer, or None (not up yet, an error status, no connection)."""
    headers = {} if api_key is None else {"Authorization": f"Bearer {api_key}"}
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return answer.read() if answer.status == 200 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _served_models(body: bytes | None) -> list[str]:
    """Model ids of a ``/v1/models`` answer (the server's text stays data: ids only)."""
    try:
        data = json.loads(body or b"")["data"]
        return [str(item["id"]) for item in data if isinstance(item, dict) and "id" in item]
    except (ValueError, KeyError, TypeError):
        return []


@contextlib.contextmanager
def managed_server(
    name: str, model: str, serve: dict[str, Any], pid_dir: Path | None = None
) -> Iterator[ManagedServer]:
    """Reap what dead jobs left on this node, start the server, yield it, stop it."""
    if pid_dir is not None:
        reap_orphans(pid_dir)
    with ManagedServer(name, model, serve, pid_dir=pid_dir) as server:
        yield server
