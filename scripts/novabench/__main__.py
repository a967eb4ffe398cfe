"""``python -m novabench``: the ``novabench`` command (novabench.cli)."""

import sys

from novabench.cli import main

sys.exit(main())
