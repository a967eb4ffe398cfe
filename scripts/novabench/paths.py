"""Where novabench finds its files: the data shipped in the package, and the checkout's.

The folders live here, so that moving one is a one-line change; each file is named in the
module that reads it, which is how a job's code fingerprint finds the data files behind it
(novabench.code_fingerprint): a name here would count for every module importing this one.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# Vocabularies and judge prompts the package reads at run time (package-data in
# pyproject.toml), so an installed novabench has them too.
RESOURCES = PACKAGE / "resources"
# The judges' default prompts; the workflow's configurations name them by path too.
JUDGE_PROMPTS = RESOURCES / "prompts"

# The repository, when the package runs from a checkout (scripts/novabench/); an installed
# package has none.
_CHECKOUT = PACKAGE.parents[1]
REPOSITORY: Path | None = _CHECKOUT if (_CHECKOUT / "Snakefile").is_file() else None
# The hand-labelled sets that measure the judges ship with the repository only; relative to
# the working directory when there is no checkout.
VALIDATION = (REPOSITORY / "validation") if REPOSITORY else Path("validation")
