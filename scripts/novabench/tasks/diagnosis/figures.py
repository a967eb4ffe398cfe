"""Diagnosis' own figure family: the rank-frequency of predicted against reference labels.

Drawn in the report's style with its helpers (:mod:`novabench.report.figures`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from novabench.report.figures import (
    COLUMN_WIDTH_IN,
    FigureContext,
    apply_style,
    by_group,
    entry_styles,
    placeholder,
    plt,
    save,
)
from novabench.tasks.diagnosis import table_labels


def _entropy_bits(counts) -> float:
    values = np.array(list(counts.values()), dtype=float)
    p = values / values.sum() if values.sum() else values
    return float(-(p[p > 0] * np.log2(p[p > 0])).sum())


def _rank_frequency(ax, counts, n_images: int, **style) -> np.ndarray:
    """Share of images per label (%), most frequent first, against the label's rank."""
    shares = 100 * np.sort(np.array(list(counts.values()), dtype=float))[::-1] / n_images
    ax.plot(np.arange(1, len(shares) + 1), shares, markersize=2.2, **style)
    return shares


def one_two_five_limits(values: Sequence[float]) -> tuple[float, float]:
    """The 1-2-5 steps (..., 0.5, 1, 2, 5, 10, ...) just below and above the positive
    values, so that a log axis has a labelled tick at each end whatever the range."""
    positive = np.asarray(values, dtype=float)
    positive = positive[positive > 0]
    steps = [m * 10.0**e for e in range(-4, 4) for m in (1, 2, 5)]
    low = max((v for v in steps if v <= positive.min() * (1 + 1e-9)), default=steps[0])
    high = min((v for v in steps if v >= positive.max() * (1 - 1e-9)), default=steps[-1])
    if low == high:  # every value on one step: one step either side
        index = steps.index(low)
        low, high = steps[max(index - 1, 0)], steps[min(index + 1, len(steps) - 1)]
    return low, high


def _rank_share_axes(ax, shares: np.ndarray, n_ranks: int) -> None:
    """Ranks on a linear axis (integer ticks); shares on a log axis, every 1-2-5 step
    labelled as a plain number."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    ax.set_yscale("log")
    ax.set_ylim(*one_two_five_limits(shares))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=3))
    ax.set_xlim(0.5, n_ranks + 0.5)


def plot_diagnosis_labels(
    entries: Sequence[tuple[str, str, list[str | None]]],
    reference: Sequence[str],
    png: Path,
    pdf: Path,
) -> None:
    """Rank-frequency of the predicted top-1 labels per entry against the reference labels
    (long tail), with each distribution's coverage and entropy in the legend."""
    from collections import Counter

    apply_style()
    groups = {name: group for name, group, _ in entries}
    names = by_group([name for name, _, _ in entries], groups)
    labels = {name: lab for name, _, lab in entries}
    styles = entry_styles(names, groups)
    reference_counts = Counter(reference)
    if not reference_counts:
        placeholder("No diagnosis scores.", png, pdf)
        return

    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.3))
    n_images = len(reference)

    shown: list[np.ndarray] = []

    def draw(counts: Counter, **style) -> None:
        shown.append(_rank_frequency(ax, counts, n_images, **style))

    n_reference, h_reference = len(reference_counts), _entropy_bits(reference_counts)
    draw(
        reference_counts,
        color="#000000",
        marker="o",
        linewidth=1.6,
        label=f"reference ({n_reference} labels, H = {h_reference:.2f} bits)",
    )
    for name in names:
        counts = Counter(label for label in labels[name] if label is not None)
        if not counts:
            continue
        coverage = 100 * min(1.0, len(counts) / len(reference_counts))
        draw(
            counts,
            **styles[name].line(),
            label=f"{name} (coverage {coverage:.0f}%, H = {_entropy_bits(counts):.2f} bits)",
        )
    _rank_share_axes(ax, np.concatenate(shown), max(len(s) for s in shown))
    ax.set_xlabel("label rank (1 = most frequent top-1 label)")
    ax.set_ylabel("images with this top-1 label (%)")
    fig.tight_layout()
    handles, texts = ax.get_legend_handles_labels()
    fig.legend(handles, texts, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=1)
    save(fig, png, pdf)


def _figure_labels(ctx: FigureContext) -> None:
    # The labels the scorer counted, from the per-image score tables: no judge is built.
    labelled = [(e.name, e.group, *table_labels(e)) for e in ctx.entries()]
    reference = labelled[0][3] if labelled else []
    plot_diagnosis_labels([(n, g, p) for n, g, p, _ in labelled], reference, ctx.png, ctx.pdf)


FAMILIES = {"labels": _figure_labels}
