"""Progress of long jobs: a bar on the terminal, a few lines in the log file.

Snakemake shows a job's stderr on its terminal (a ``script:`` rule's ``log:`` file does
not capture stderr), so the bar (tqdm: counts, rate, time left) goes to stderr when that is
a terminal. The log file gets one line per tenth of the work, never one per item (none
for a job done within ``QUIET_S`` seconds: only its final count), and the bar appears only
after that time, so quick jobs print nothing but their result. The tenths are
flagged so that the terminal handler of :func:`novabench.rules.run` drops them
while the bar shows the same; without a terminal (a cluster job's stderr file) there is no
bar and they go to stderr too.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("novabench")

#: Attribute of a log record that a visible bar already shows on the terminal.
SHOWN_BY_BAR = "shown_by_bar"
#: Seconds before a bar shows and progress lines are logged.
QUIET_S = 3.0


def not_shown_by_bar(record: logging.LogRecord) -> bool:
    """Filter of the terminal handler: drop progress lines while a bar shows them."""
    return not getattr(record, SHOWN_BY_BAR, False)


class Progress:
    """Counts of ``total`` items, by kind (e.g. status); ``label`` None shows nothing."""

    def __init__(
        self,
        total: int,
        label: str | None,
        *,
        unit: str = "img",
        initial: int = 0,
        counts: Mapping[str, int] | None = None,
    ):
        from tqdm import tqdm

        self.total, self.label, self.done = total, label, initial
        self.counts = dict(counts or {})
        self.next_log = 0.1
        self.started = time.monotonic()
        self.bar = None
        if label is not None and total:
            self.bar = tqdm(
                total=total,
                initial=initial,
                desc=label,
                unit=unit,
                file=sys.stderr,
                disable=not sys.stderr.isatty(),
                dynamic_ncols=True,
                mininterval=0.5,
                delay=QUIET_S,
            )
            self.bar.set_postfix(self.counts, refresh=False)

    @property
    def on_terminal(self) -> bool:
        return self.bar is not None and not self.bar.disable

    def update(self, kind: str | None = None, n: int = 1) -> None:
        """``n`` more items done, counted under ``kind`` if given."""
        if kind is not None:
            self.counts[kind] = self.counts.get(kind, 0) + n
        self.done += n
        if self.bar is None:
            return
        self.bar.set_postfix(self.counts, refresh=False)
        self.bar.update(n)
        if self.done >= self.next_log * self.total:
            if time.monotonic() - self.started >= QUIET_S:
                self._log("%s: %d/%d %s", self.label, self.done, self.total, self.counts)
            self.next_log = (int(10 * self.done / self.total) + 1) / 10

    def close(self) -> None:
        if self.bar is None:
            return
        self.bar.close()
        if self.done >= self.total:
            log.info("%s: done, %s", self.label, self.counts)
        else:  # an exception ended the work; it says why
            log.info("%s: stopped at %d/%d, %s", self.label, self.done, self.total, self.counts)

    def _log(self, message: str, *args: Any) -> None:
        log.info(message, *args, extra={SHOWN_BY_BAR: self.on_terminal})
