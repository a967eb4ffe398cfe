"""Where novabench finds its files: the data shipped in the package, and the checkout's.

Every module-level path constant lives here, so that moving a file is a one-line change.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# The repository, when the package runs from a checkout (scripts/novabench/); an installed
# package has none.
_CHECKOUT = PACKAGE.parents[1]
REPOSITORY: Path | None = _CHECKOUT if (_CHECKOUT / "Snakefile").is_file() else None
# The hand-labelled sets that measure the judges ship with the repository only; relative to
# the working directory when there is no checkout.
VALIDATION = (REPOSITORY / "validation") if REPOSITORY else Path("validation")
