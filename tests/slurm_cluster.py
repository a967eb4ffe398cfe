"""A throw-away single-node SLURM cluster on localhost, for testing the cluster profile.

Debian's packages (slurm-wlm, munge, slurmdbd, mariadb-server) start nothing when
installed and there is no systemd to start them, so every daemon is started here by hand,
in the foreground, as a child of the test process: stopping the cluster is terminating
the children it started, in reverse order. Keys, sockets, state, logs and the accounting
database live in one temporary folder and on free ports, so a stale or real daemon on this
machine is never touched. Only the two configuration files go to /etc/slurm: the
executor's job step drops SLURM_CONF from the environment of `srun`, so the default path
is the only one every SLURM command is sure to read. They carry a marker line and are
removed at the end; a configuration without the marker is never overwritten, and a lock
keeps a second test cluster on this machine waiting until the first has stopped.

Used as::

    with local_slurm(tmp_dir) as cluster:
        ...  # sbatch/srun/sacct work; cluster.account and cluster.partition exist
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from support import free_port

# Debian 12 packages: the scheduler and its authentication, then accounting.
SLURM_PACKAGES = ("slurm-wlm", "munge", "slurmdbd", "mariadb-server")
DAEMONS = ("munged", "mungekey", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld")
CLIENTS = ("slurmd", "sbatch", "srun", "sacct", "sacctmgr", "scontrol", "sinfo", "squeue")

CONF_DIR = Path("/etc/slurm")
MARKER = "# Written by tests/slurm_cluster.py for a throw-away test cluster; removed at its end."

# Start-up waits: generous for a loaded CI machine, yet bounded so a broken daemon fails
# the test in seconds instead of hanging it.
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
# One test cluster per machine (they share /etc/slurm): a second waits for the first.
LOCK_FILE = Path(tempfile.gettempdir()) / "novabench-slurm-test.lock"
LOCK_TIMEOUT_S = 900.0

# SLURM binaries live in /usr/sbin, which a non-login root shell may not have on PATH.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


def which(command: str) -> str | None:
    return shutil.which(command, path=SEARCH_PATH)


def missing_commands() -> list[str]:
    """The SLURM, munge and MariaDB commands that are not installed."""
    return [c for c in (*DAEMONS, *CLIENTS, "munge", "unmunge", "mariadb") if not which(c)]


def foreign_config() -> Path | None:
    """A SLURM configuration on this machine that this module did not write, if any."""
    for name in ("slurm.conf", "slurmdbd.conf"):
        path = CONF_DIR / name
        if path.exists() and not path.read_text(errors="replace").startswith(MARKER):
            return path
    return None


def skip_reason() -> str | None:
    """Why a local cluster cannot be started here, or None when it can."""
    if os.geteuid() != 0:
        return "starting SLURM daemons needs root"
    if missing_commands() and not shutil.which("apt-get"):
        return f"SLURM is not installed and apt-get is unavailable ({SLURM_PACKAGES})"
    config = foreign_config()
    if config:
        return f"{config} belongs to a real SLURM installation; not overwriting it"
    return None


def install_packages() -> None:
    """Install the SLURM packages with apt-get when any command is missing (root only)."""
    if not missing_commands():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    quiet = {"env": env, "stdin": subprocess.DEVNULL, "capture_output": True, "text": True}
    for args in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *SLURM_PACKAGES],
    ):
        done = subprocess.run(args, timeout=600, **quiet)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")


@dataclass
class LocalSlurm:
    """One node (this machine) in one partition, with slurmdbd accounting on MariaDB."""

    root: Path
    cluster: str = "novatest"
    account: str = "nova"
    partition: str = "nova"
    ports: dict[str, int] = field(default_factory=dict)
    _procs: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    _written: list[Path] = field(default_factory=list)

    # --- public -----------------------------------------------------------------------

    def start(self) -> None:
        """Start munge, MariaDB, slurmdbd, slurmctld and slurmd; return once a job runs.

        On failure the daemons already started keep running: call stop() (local_slurm
        does, in a finally).
        """
        self.root.mkdir(parents=True, exist_ok=True)
        # munged insists on a socket folder everyone may traverse.
        self.root.chmod(0o711)
        for sub in ("munge", "db", "state", "spool", "log"):
            (self.root / sub).mkdir(exist_ok=True)
        (self.root / "munge").chmod(0o711)
        self.ports = {name: free_port() for name in ("slurmctld", "slurmd", "slurmdbd", "db")}

        self._start_munge()
        self._start_mariadb()
        self._write_config()
        self._start("slurmdbd", ["slurmdbd", "-D"])
        # The first connection also creates the tables: retry until slurmdbd answers.
        self._wait("slurmdbd", lambda: self._ok(["sacctmgr", "-i", "add", "cluster", self.cluster]))
        self._run(["sacctmgr", "-i", "add", "account", self.account, f"Cluster={self.cluster}"])
        self._run(["sacctmgr", "-i", "add", "user", "root", f"Account={self.account}"])
        self._start("slurmctld", ["slurmctld", "-D", "-i"])
        self._wait("slurmctld", lambda: "UP" in self._out(["scontrol", "ping"]))
        self._start("slurmd", ["slurmd", "-D"])
        self._wait("slurmd", lambda: self._out(["sinfo", "-h", "-o", "%T"]).strip() == "idle")
        self._run(["srun", "-t", "1", "true"])

    def stop(self) -> None:
        """Cancel every job, stop the daemons newest first, remove the configuration."""
        if any(name == "slurmctld" and p.poll() is None for name, p in self._procs):
            job_ids = self._out(["squeue", "-h", "-o", "%i"]).split()
            if job_ids:
                subprocess.run([self._bin("scancel"), *job_ids], capture_output=True, timeout=30)
                # Let slurmd end the jobs' processes before it goes itself.
                deadline = time.monotonic() + STOP_TIMEOUT_S
                while self._out(["squeue", "-h"]).strip() and time.monotonic() < deadline:
                    time.sleep(0.5)
        for _name, proc in reversed(self._procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(STOP_TIMEOUT_S)
        self._procs.clear()
        for path in self._written:
            path.unlink(missing_ok=True)
        self._written.clear()

    def sacct(self, *args: str) -> list[dict[str, str]]:
        """Job records from SLURM's accounting database (allocations only, no steps)."""
        fields = "JobID,JobName,State,ExitCode,Account,Partition,NodeList,WorkDir,Comment"
        out = self._out(
            ["sacct", "-X", "-n", "-P", "-S", "now-1days", "-o", fields, *args], check=True
        )
        rows = csv.reader(out.splitlines(), delimiter="|")
        return [dict(zip(fields.split(","), row, strict=True)) for row in rows]

    def logs(self, lines: int = 20) -> str:
        """The end of every daemon's log, to explain a failure."""
        parts = []
        for log in sorted((self.root / "log").iterdir()):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    # --- daemons ----------------------------------------------------------------------

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def db_socket(self) -> Path:
        return self.root / "db" / "mysqld.sock"

    def _start_munge(self) -> None:
        key = self.root / "munge" / "munge.key"
        self._run(["mungekey", "--create", f"--keyfile={key}"])
        self._start(
            "munged",
            [
                "munged",
                "--foreground",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                f"--seed-file={self.root / 'munge' / 'munged.seed'}",
            ],
        )
        sock = f"--socket={self.munge_socket}"
        self._wait(
            "munged",
            lambda: self._ok(["sh", "-c", f"munge -n {sock} | unmunge {sock} >/dev/null"]),
        )

    def _start_mariadb(self) -> None:
        data = self.root / "db" / "data"
        self._run(
            [
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={data}",
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ]
        )
        self._start(
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={self.db_socket}",
                f"--port={self.ports['db']}",
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                f"--pid-file={self.root / 'db' / 'mysqld.pid'}",
                "--user=root",
                "--innodb-buffer-pool-size=64M",
            ],
        )
        client = ["mariadb", "--no-defaults", f"--socket={self.db_socket}", "-u", "root"]
        self._wait("mariadbd", lambda: self._ok([*client, "-e", "SELECT 1"]))
        self._run(
            [
                *client,
                "-e",
                "CREATE DATABASE slurm_acct_db;"
                f" CREATE USER 'slurm'@'%' IDENTIFIED BY '{self._db_password}';"
                " GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';",
            ]
        )

    @property
    def _db_password(self) -> str:
        # Reachable only on 127.0.0.1 for the life of the test; not a secret.
        return "nova-test"

    def _slurm_conf(self, node: str) -> str:
        """slurm.conf for one node, ``node`` being its line as `slurmd -C` prints it."""
        root = self.root
        return f"""{MARKER}
ClusterName={self.cluster}
SlurmctldHost=localhost
SlurmctldPort={self.ports["slurmctld"]}
SlurmdPort={self.ports["slurmd"]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
MinJobAge=300
ReturnToService=2
MpiDefault=none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort={self.ports["slurmdbd"]}
AccountingStoragePass={self.munge_socket}
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

    def _slurmdbd_conf(self) -> str:
        root = self.root
        return f"""{MARKER}
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost=localhost
DbdPort={self.ports["slurmdbd"]}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={self.ports["db"]}
StorageUser=slurm
StoragePass={self._db_password}
StorageLoc=slurm_acct_db
PidFile={root / "slurmdbd.pid"}
LogFile={root / "log" / "slurmdbd.log"}
"""

    def _write_config(self) -> None:
        """slurm.conf with this machine's real node line, and slurmdbd.conf."""
        # `slurmd -C` reports what the node has; a RealMemory above it drains the node.
        node = self._out(["slurmd", "-C"], check=True).splitlines()[0]
        slurm_conf = self._slurm_conf(node)
        dbd_conf = self._slurmdbd_conf()
        if foreign_config():
            raise RuntimeError(f"{foreign_config()} is not ours; not overwriting it")
        CONF_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in (("slurm.conf", slurm_conf), ("slurmdbd.conf", dbd_conf)):
            path = CONF_DIR / name
            self._written.append(path)
            # slurmdbd refuses a configuration others can read (it holds the password).
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(text)

    # --- plumbing ---------------------------------------------------------------------

    def _bin(self, command: str) -> str:
        path = which(command)
        if path is None:
            raise RuntimeError(f"{command} is not installed (apt-get install {SLURM_PACKAGES})")
        return path

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return {**env, "PATH": SEARCH_PATH}

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 (lives with proc)
        proc = subprocess.Popen(
            [self._bin(args[0]), *args[1:]],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            # Own session: a Ctrl-C meant for pytest must not kill daemons before the
            # orderly stop has cancelled the jobs.
            start_new_session=True,
        )
        log.close()  # the child holds its own copy
        self._procs.append((name, proc))

    def _wait(self, name: str, ready) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        proc = next((p for n, p in self._procs if n == name), None)
        while not ready():
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self._tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} not ready in {READY_TIMEOUT_S:.0f} s:\n{self.logs()}")
            time.sleep(0.25)

    def _tail(self, name: str) -> str:
        path = self.root / "log" / f"{name}.out"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _call(self, args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self._bin(args[0]), *args[1:]],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=READY_TIMEOUT_S,
        )

    def _run(self, args: list[str]) -> None:
        done = self._call(args)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stdout}{done.stderr}")

    def _out(self, args: list[str], check: bool = False) -> str:
        done = self._call(args)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def _ok(self, args: list[str]) -> bool:
        return (
            subprocess.run(
                [self._bin(args[0]), *args[1:]],
                env=self._env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=READY_TIMEOUT_S,
            ).returncode
            == 0
        )


@contextlib.contextmanager
def machine_lock() -> Iterator[None]:
    """Hold the machine's test-cluster lock; the kernel drops it if this process dies."""
    with open(LOCK_FILE, "w") as handle:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"another test cluster held {LOCK_FILE} for {LOCK_TIMEOUT_S:.0f} s"
                    ) from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def local_slurm(root: Path | None = None) -> Iterator[LocalSlurm]:
    """A started cluster, always stopped afterwards (also when starting it failed)."""
    with machine_lock(), contextlib.ExitStack() as stack:
        if root is None:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="slurm-")))
        cluster = LocalSlurm(root)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
