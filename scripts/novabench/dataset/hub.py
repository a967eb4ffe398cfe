"""Fetching a NOVA dataset repository from the Hugging Face Hub.

Both Hub sources download a snapshot of the dataset repository at a pinned revision
and then read it with exactly the code used for a ``local`` directory, so the Hub and
an offline copy can never disagree.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from novabench.errors import HubUnreachableError

DEFAULT_ENDPOINT = "https://huggingface.co"

LOCAL_FIX = (
    "download the dataset repository by hand (e.g. `hf download {repo_id} --repo-type dataset "
    "--local-dir DIR` on a machine with internet) and set dataset.source: local and "
    "dataset.local_path: DIR in the config"
)


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def check_hub_reachable(repo_id: str, timeout_s: float = 10.0) -> None:
    """Fail within ``timeout_s`` seconds when the Hub cannot be reached.

    A plain TCP connect is enough to tell "offline" from "online" and, unlike the Hub
    client's own retries, it never hangs for minutes.
    """
    fix = LOCAL_FIX.format(repo_id=repo_id)
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        raise HubUnreachableError(
            "Hugging Face Hub access is disabled (HF_HUB_OFFLINE is set)", fix
        )
    url = urlparse(hub_endpoint())
    host = url.hostname or "huggingface.co"
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise HubUnreachableError(
            f"Hugging Face Hub unreachable at {hub_endpoint()} ({exc.__class__.__name__}: {exc})",
            fix,
        ) from exc


def download_snapshot(
    repo_id: str, revision: str, cache_dir: Path, timeout_s: float
) -> tuple[Path, str]:
    """Download the dataset repository at ``revision``; returns (directory, commit sha)."""
    check_hub_reachable(repo_id, timeout_s)
    from huggingface_hub import HfApi, snapshot_download

    fix = LOCAL_FIX.format(repo_id=repo_id)
    try:
        sha = HfApi().dataset_info(repo_id, revision=revision, timeout=timeout_s).sha
    except Exception as exc:  # the Hub client raises many unrelated types
        raise HubUnreachableError(
            f"cannot resolve {repo_id}@{revision} on the Hub ({exc.__class__.__name__}: {exc})", fix
        ) from exc
    target = Path(cache_dir) / f"{repo_id.replace('/', '__')}@{sha}"
    try:
        path = snapshot_download(repo_id, repo_type="dataset", revision=sha, local_dir=str(target))
    except Exception as exc:
        raise HubUnreachableError(
            f"downloading {repo_id}@{sha} failed ({exc.__class__.__name__}: {exc})", fix
        ) from exc
    return Path(path), sha
