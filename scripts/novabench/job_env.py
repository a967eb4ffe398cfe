"""Where the libraries a job uses keep their own state: under ``results/``, never in the
home folder.

matplotlib writes its font cache (and looks for a ``matplotlibrc``) in ``~/.cache`` and
``~/.config``; ``datasets`` keeps prepared Arrow files and dataset scripts in
``~/.cache/huggingface``. The workflow sets these variables for every job before any job
starts (``workflow/rules/common.smk``), so a run writes nothing outside its working
folder. The Hugging Face Hub cache of model weights (``HF_HUB_CACHE``, by default
``~/.cache/huggingface/hub``) and its login token stay where the user has them: local
models and BERTScore's encoder are read from there, and downloaded there, so they are
shared with every other tool on the machine (docs/outputs.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def job_environment(
    cache_dir: Path | str, environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """The variables to set for the jobs, given the shared cache folder (``results/cache``).

    matplotlib's folder is always the run's: a user's ``matplotlibrc`` must not change the
    figures. The ``datasets`` caches are the run's unless the user named them.
    """
    cache = Path(cache_dir).resolve()
    # huggingface_hub's own default: $HF_HOME, else $XDG_CACHE_HOME/huggingface.
    xdg_cache = environ.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
    hf_home = Path(environ.get("HF_HOME") or Path(xdg_cache) / "huggingface")
    hub = environ.get("HF_HUB_CACHE") or environ.get("HUGGINGFACE_HUB_CACHE")
    return {
        "MPLCONFIGDIR": str(cache / "matplotlib"),
        "HF_DATASETS_CACHE": environ.get("HF_DATASETS_CACHE") or str(cache / "datasets"),
        "HF_MODULES_CACHE": environ.get("HF_MODULES_CACHE") or str(cache / "hf_modules"),
        # Named explicitly, so that the weights are found where they were before.
        "HF_HUB_CACHE": hub or str(hf_home / "hub"),
    }
