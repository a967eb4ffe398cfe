"""Figures of the report, one function per figure family, PNG and PDF; a task's own
families live in its folder (``novabench.tasks.<name>.figures``) and use these helpers.

One style for all: sized for a paper column (3.5 in) or the full text width (7.2 in),
7-pt text, the Okabe-Ito colour-blind-safe palette for models, greys for controls and
black for human raters, so an entry has the same colour in every figure. Greys alike
are told apart by a hatch pattern (bars) and a marker and dash pattern (lines) per entry
(:func:`entry_styles`). Every axis with a quantity names its unit. Files are written
without timestamps so that re-running a figure does not change its bytes.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a display


import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from novabench.report.inputs import (
    GROUP_CONTROL,
    GROUP_HUMAN,
    GROUP_MODEL,
)
from novabench.spreadsheet import read_csv

COLUMN_WIDTH_IN = 3.5
TEXT_WIDTH_IN = 7.2
# Okabe & Ito (2008), in an order that keeps neighbours distinguishable; yellow last
# (weak on white).
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#F0E442")
CONTROL_GREYS = ("#7F7F7F", "#B3B3B3", "#595959", "#CCCCCC")
HUMAN_COLOURS = ("#000000", "#3B3B3B", "#1F1F1F", "#4D4D4D")
BOX_COLOURS = {"gold": "#009E73", "rater": "#56B4E9", "predicted": "#E69F00"}
STYLE = {
    "font.size": 7,
    "axes.titlesize": 7,
    "axes.labelsize": 7,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "legend.fontsize": 6,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "errorbar.capsize": 1.5,
    "savefig.dpi": 300,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "pdf.fonttype": 42,  # embedded TrueType: editable text in the PDF
    "svg.hashsalt": "novabench",
    # Text on figures comes from outside (dataset paths, diagnoses, answers): a "$" must
    # not start TeX math, which fails on e.g. "$\\input{x}$". Axis labels that mean math
    # ask for it with parse_math=True.
    "text.usetex": False,
    "text.parse_math": False,
}


def apply_style() -> None:
    plt.rcParams.update(STYLE)
    # fontTools reports every PDF font subset at INFO; the rule logs are for our messages.
    logging.getLogger("fontTools").setLevel(logging.WARNING)


GROUP_ORDER = (GROUP_MODEL, GROUP_CONTROL, GROUP_HUMAN)


def by_group(names: Sequence[str], groups: Mapping[str, str]) -> list[str]:
    """Models first, then controls, then raters; config order within a group."""
    return sorted(names, key=lambda n: GROUP_ORDER.index(groups.get(n, GROUP_MODEL)))


def _errorbar(ax, x, y, xerr=None, yerr=None) -> None:
    """Black error bars with a white halo: visible on black, grey and coloured bars."""
    import matplotlib.patheffects as path_effects

    container = ax.errorbar(
        x,
        y,
        xerr=xerr,
        yerr=yerr,
        fmt="none",
        ecolor="black",
        elinewidth=0.6,
        capsize=1.2,
        capthick=0.6,
    )
    halo = [path_effects.withStroke(linewidth=1.4, foreground="white")]
    for artist in (*container.lines[1], *container.lines[2]):
        artist.set_path_effects(halo)


def legend_below(fig: plt.Figure, ax: plt.Axes, n: int) -> None:
    """One legend under the plot (below the x label), out of the data's way."""
    fig.tight_layout()
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncols=min(n, 3),
        handlelength=2.2,
    )


# Per group, cycled within the group: what tells entries of one colour family apart.
MARKERS = {
    GROUP_MODEL: ("o", "s", "^", "D", "v", "P", "X"),
    GROUP_CONTROL: ("s", "^", "D", "v"),
    GROUP_HUMAN: ("X", "P", "*", "h"),
}
DASHES = {
    GROUP_MODEL: ("-",),
    GROUP_CONTROL: ((0, (5, 2)), (0, (5, 1.5, 1, 1.5)), (0, (1.5, 1.5)), (0, (8, 2, 1, 2, 1, 2))),
    GROUP_HUMAN: ((0, (1, 1.2)), (0, (3, 1, 1, 1)), (0, (1, 2.5)), (0, (4, 1.5))),
}
# Models are told apart by colour; the greys of controls and the blacks of raters by hatch.
HATCHES = {
    GROUP_MODEL: (None,),
    GROUP_CONTROL: ("////", "....", "xxxx", "\\\\\\\\"),
    GROUP_HUMAN: (None, "////", "....", "xxxx"),
}


@dataclass(frozen=True)
class EntryStyle:
    """How one entry is drawn in every figure."""

    colour: str
    marker: str
    linestyle: Any
    hatch: str | None

    @property
    def hatch_colour(self) -> str:
        """Hatch lines that show on the fill: white on the darkest fills, else black."""
        return "#FFFFFF" if self.colour in HUMAN_COLOURS or self.colour == "#595959" else "#000000"

    def line(self) -> dict[str, Any]:
        """Keyword arguments of ``plot`` / ``errorbar`` for this entry."""
        return {"color": self.colour, "marker": self.marker, "linestyle": self.linestyle}


def _preferred_slot(name: str, n: int) -> int:
    """A slot of ``n`` that follows from the name alone (not Python's salted hash)."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:4], "big") % n


def style_slots(names: Sequence[str], n: int) -> dict[str, int]:
    """Each name's slot of ``n`` styles: derived from the name, so that an entry keeps
    its colour from run to run whatever else is configured; a name whose slot another
    (alphabetically earlier) name of the same figure holds takes the next free one."""
    slots: dict[str, int] = {}
    for name in sorted(set(names)):
        slot = _preferred_slot(name, n)
        taken = set(slots.values())
        if len(taken) < n:
            while slot in taken:
                slot = (slot + 1) % n
        slots[name] = slot
    return slots


def entry_styles(names: Sequence[str], groups: Mapping[str, str]) -> dict[str, EntryStyle]:
    """A fixed style per entry, from its name (:func:`style_slots`): models from the
    palette, controls grey, raters black, each with its own marker, dash pattern and hatch
    within its group."""
    palettes = {GROUP_MODEL: OKABE_ITO, GROUP_CONTROL: CONTROL_GREYS, GROUP_HUMAN: HUMAN_COLOURS}
    styles = {}
    for group, palette in palettes.items():
        members = [name for name in names if groups.get(name, GROUP_MODEL) == group]
        for name, i in style_slots(members, len(palette)).items():
            styles[name] = EntryStyle(
                colour=palette[i],
                marker=MARKERS[group][i % len(MARKERS[group])],
                linestyle=DASHES[group][i % len(DASHES[group])],
                hatch=HATCHES[group][i % len(HATCHES[group])],
            )
    return {name: styles[name] for name in names}


def entry_colours(names: Sequence[str], groups: Mapping[str, str]) -> dict[str, str]:
    """The colour of each entry's style."""
    return {name: style.colour for name, style in entry_styles(names, groups).items()}


def hatch_bars(bars: Any, styles: Sequence[EntryStyle]) -> None:
    """Give each bar its entry's hatch (none for models: their colours differ)."""
    for patch, style in zip(bars.patches, styles, strict=True):
        if style.hatch:
            patch.set_hatch(style.hatch)
            patch.set_hatchcolor(style.hatch_colour)
            patch.set_hatch_linewidth(0.5)


def unit_label(metric: Any) -> str:
    """The x-axis label of a metric panel: its unit."""
    if metric.percent:
        return "%"
    return "bits" if metric.key.startswith("Entropy") else "count"


# The dataset line of the figure being drawn (labels.figure_note), set by make_figure:
# every figure family saves through save(), which writes it under the figure.
_NOTE: contextvars.ContextVar[str | None] = contextvars.ContextVar("note", default=None)


def save(fig: plt.Figure, png: Path, pdf: Path, dpi: int | None = None) -> None:
    note = _NOTE.get()
    if note:
        # Above the figure: legends sit below the axes.
        fig.text(0.0, 1.0, note, fontsize=6, color="0.35", ha="left", va="bottom")
    for path in (png, pdf):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    options = {"dpi": dpi} if dpi else {}
    fig.savefig(png, metadata={"Software": None}, **options)
    fig.savefig(pdf, metadata={"Creator": None, "Producer": None, "CreationDate": None}, **options)
    plt.close(fig)


def placeholder(message: str, png: Path, pdf: Path) -> None:
    """A figure that says why there is nothing to plot (the rule's outputs must exist)."""
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 0.8))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    save(fig, png, pdf)


# --- per task: metrics with CIs ----------------------------------------------------------------


def plot_metric_bars(task: str, statistics: pd.DataFrame, png: Path, pdf: Path) -> None:
    """One panel per table metric (counts left out: other scale): a bar per entry, 95% CI."""
    from novabench.tasks import get_task

    apply_style()
    # Counts are left out: another scale.
    wanted = [m for m in get_task(task).table_metrics if m.decimals != 0 and m.figure]
    columns, not_computed = computed_metrics(wanted, statistics)
    names = list(dict.fromkeys(statistics["model"]))
    if not names or not columns:
        placeholder(f"No {task} scores.", png, pdf)
        return
    groups = statistics.drop_duplicates("model").set_index("model")["group"].to_dict()
    order = by_group(names, groups)
    styles = entry_styles(order, groups)
    n_cols = 2
    n_rows = math.ceil(len(columns) / n_cols)
    height = n_rows * (0.45 + 0.12 * len(order)) + 0.1
    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(COLUMN_WIDTH_IN, height), sharey=True, squeeze=False
    )
    y = np.arange(len(order))
    for ax, column in zip(axes.ravel(), columns, strict=False):
        rows = statistics[statistics["metric"] == column.key].set_index("model").reindex(order)
        values = rows["estimate"].to_numpy(dtype=float)
        low = rows["ci_low"].to_numpy(dtype=float)
        high = rows["ci_high"].to_numpy(dtype=float)
        bars = ax.barh(
            y, np.nan_to_num(values), color=[styles[n].colour for n in order], height=0.7
        )
        hatch_bars(bars, [styles[n] for n in order])
        err = np.clip(np.vstack([values - low, high - values]), 0, None)
        ok = ~np.isnan(err).any(axis=0)
        if ok.any():
            _errorbar(ax, values[ok], y[ok], xerr=err[:, ok])
        for yi, value in zip(y, values, strict=True):
            if np.isnan(value):
                ax.text(0, yi, " n/a", va="center", fontsize=5.5, color="#555555")
            elif value == 0:  # a bar of zero width: say the value instead
                ax.text(0, yi, " 0", va="center", fontsize=5.5, color="#555555")
        ax.set_title(f"{column.label} {column.arrow}".strip(), pad=2)
        top = np.nanmax(np.r_[high, values, 1e-9])
        if column.key == "Entropy":  # read against the reference labels' entropy
            reference = statistics.loc[statistics["metric"] == "Entropy_reference", "estimate"]
            if len(reference):
                ax.axvline(reference.iloc[0], color="#000000", linestyle="--", linewidth=0.8)
                ax.text(reference.iloc[0], -0.6, " reference", fontsize=5.5, va="bottom")
                top = max(top, float(reference.iloc[0]))
        ax.set_xlim(0, top * 1.08 if np.isfinite(top) else 1)
        ax.set_xlabel(unit_label(column), labelpad=1)
        ax.grid(axis="x", linewidth=0.3, color="#DDDDDD")
        ax.set_axisbelow(True)
    for ax in axes.ravel()[len(columns) :]:
        ax.axis("off")
    axes[0, 0].set_yticks(y, order)
    axes[0, 0].invert_yaxis()
    fig.tight_layout(h_pad=0.6, w_pad=0.8)
    _name_not_computed(fig, not_computed)
    save(fig, png, pdf)


def _name_not_computed(fig: plt.Figure, metrics: Sequence[Any]) -> None:
    """A line under the figure naming the metrics left without a panel."""
    if metrics:
        labels = ", ".join(m.label for m in metrics)
        note = f"Not computed for any entry (no panel): {labels}."
        fig.text(0.0, 0.0, note, fontsize=6, color="0.35", ha="left", va="top")


def computed_metrics(metrics: Sequence[Any], statistics: pd.DataFrame) -> tuple[list, list]:
    """(metrics with a value for at least one entry, those with none): a metric no entry
    has (BERT F1 without its encoder) gets no empty panel, only a line under the figure."""
    values = pd.to_numeric(statistics.get("estimate", pd.Series(dtype=float)), errors="coerce")
    present = set(statistics.loc[values.notna(), "metric"]) if len(statistics) else set()
    return [m for m in metrics if m.key in present], [m for m in metrics if m.key not in present]


# --- breakdowns by sequence and plane ------------------------------------------------------


def plot_breakdown(
    task: str,
    panels: Sequence[tuple[str, pd.DataFrame, Sequence[str]]],
    groups: Mapping[str, str],
    png: Path,
    pdf: Path,
    label: str = "",
) -> None:
    """Grouped bars: the task's per-image metric per category (sequence, plane), per entry."""
    apply_style()
    names = by_group(list(dict.fromkeys(n for _, t, _ in panels for n in t["model"])), groups)
    if not names:
        placeholder(f"No {task} scores to break down.", png, pdf)
        return
    styles = entry_styles(names, groups)
    # Past five entries (or categories) the bars get too thin for a column: use the full
    # text width, and slant the category names so that long ones do not collide.
    most = max(len(set(t["category"])) for _, t, _ in panels)
    width_in = COLUMN_WIDTH_IN if len(names) <= 5 and most <= 5 else TEXT_WIDTH_IN
    fig, axes = plt.subplots(len(panels), 1, figsize=(width_in, 1.8 * len(panels)))
    axes = np.atleast_1d(axes)
    width = 0.8 / len(names)
    for ax, (title, table, order) in zip(axes, panels, strict=True):
        present = [c for c in order if c in set(table["category"])]
        x = np.arange(len(present))
        for i, name in enumerate(names):
            rows = table[table["model"] == name].set_index("category").reindex(present)
            values = rows["value"].to_numpy(dtype=float)
            err = np.vstack([values - rows["ci_low"], rows["ci_high"] - values]).astype(float)
            err = np.clip(err, 0, None)
            centres = x - 0.4 + width * (i + 0.5)
            bars = ax.bar(
                centres, np.nan_to_num(values), width, color=styles[name].colour, label=name
            )
            hatch_bars(bars, [styles[name]] * len(centres))
            ok = ~np.isnan(err).any(axis=0) & ~np.isnan(values)
            if ok.any():
                _errorbar(ax, centres[ok], values[ok], yerr=err[:, ok])
        counts = table.groupby("category")["n_images"].max()
        ticks = [f"{_tick(c)}\n(n={int(counts.get(c, 0))})" for c in present]
        slanted = {"rotation": 30, "ha": "right"} if len(present) > 5 else {}
        ax.set_xticks(x, ticks, **slanted)
        ax.set_ylabel(label)
        ax.set_title(title, pad=2)
        ax.set_ylim(0, 105)
        ax.grid(axis="y", linewidth=0.3, color="#DDDDDD")
        ax.set_axisbelow(True)
    legend_below(fig, axes[-1], len(names))
    save(fig, png, pdf)


# --- judge agreement ---------------------------------------------------------------------


def plot_judge_agreement(table: pd.DataFrame, png: Path, pdf: Path) -> None:
    """Cohen's kappa per model and label, one marker per pair of judges."""
    apply_style()
    if table.empty:
        placeholder("No second judge: no agreement to show.", png, pdf)
        return
    table = table.assign(
        row=table["task"] + ": " + table["model"] + " · " + table["label"].str.replace("_", " "),
        pair=table["judge_a"] + " vs " + table["judge_b"],
    )
    rows = list(dict.fromkeys(table["row"]))
    pairs = list(dict.fromkeys(table["pair"]))
    markers = "osD^v<>"
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 0.5 + 0.18 * len(rows)))
    for i, pair in enumerate(pairs):
        part = table[table["pair"] == pair]
        ax.scatter(
            part["kappa"], [rows.index(r) for r in part["row"]],
            color=OKABE_ITO[i % len(OKABE_ITO)], marker=markers[i % len(markers)], s=14,
            label=pair, zorder=3,
        )  # fmt: skip
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.axvline(0, color="#999999", linewidth=0.5)
    ax.set_xlim(min(-0.1, float(table["kappa"].min()) - 0.05), 1.02)
    ax.set_xlabel("Cohen's kappa")
    ax.grid(axis="x", linewidth=0.3, color="#DDDDDD")
    legend_below(fig, ax, len(pairs))
    save(fig, png, pdf)


# --- rule `figure` ---------------------------------------------------------------------------


def _figure_metrics(ctx: FigureContext) -> None:
    plot_metric_bars(ctx.task, read_csv(ctx.statistics), ctx.png, ctx.pdf)


def _figure_judge_agreement(ctx: FigureContext) -> None:
    plot_judge_agreement(read_csv(ctx.table), ctx.png, ctx.pdf)


def _tick(category: str) -> str:
    """A category as a tick label: a long one breaks at its first space."""
    return category.replace(" ", "\n", 1) if len(category) > 10 else category


def breakdown_order(axis: str, present: Sequence[str]) -> list[str]:
    """The categories of one breakdown axis in reading order (sizes small to large)."""
    from novabench.judges.vocabulary import CATEGORIES, UNKNOWN_CATEGORY
    from novabench.report.breakdowns import NO_GOLD_BOX
    from novabench.report.imaging import MULTIPLE, PLANES, SEQUENCES, UNSPECIFIED

    fixed = {
        "sequence": [*SEQUENCES, MULTIPLE, UNSPECIFIED],
        "plane": [*PLANES, MULTIPLE, UNSPECIFIED],
        "category": [*CATEGORIES, UNKNOWN_CATEGORY],
    }
    if axis in fixed:
        return fixed[axis]
    sizes = ("small", "medium", "large")
    ranked = sorted(
        set(present),
        key=lambda c: (
            c == NO_GOLD_BOX,
            next((i for i, s in enumerate(sizes) if c.startswith(s)), 3),
            c,
        ),
    )
    return ranked


BREAKDOWN_TITLES = {
    "category": "By pathology category (diagnosis vocabulary)",
    "sequence": "By sequence (from the reference caption)",
    "plane": "By plane (from the reference caption)",
    "lesion_size": "By lesion size (tertiles of sqrt of the largest gold box area)",
}


def _figure_breakdown(ctx: FigureContext) -> None:
    """Grouped bars of one breakdown axis from the statistics stage's breakdown table
    (CIs computed there, on the case resamples of the task's statistics)."""
    table = read_csv(ctx.table, keep_default_na=False, na_values=[""])
    table = table[table["breakdown"] == ctx.axis]
    groups = dict(zip(table["model"], table["group"], strict=True))
    order = breakdown_order(ctx.axis, list(table["category"]))
    panels = [(BREAKDOWN_TITLES[ctx.axis], table, order)]
    label = str(table["label"].iloc[0]) if len(table) else ""
    plot_breakdown(ctx.task, panels, groups, ctx.png, ctx.pdf, label)


@dataclass
class FigureContext:
    """What a figure family may read: the report stage's inputs of one job."""

    png: Path
    pdf: Path
    task: str | None = None
    statistics: Path | None = None
    dataset: Path | None = None
    scores: Sequence[Path] = ()
    verdicts: Mapping[str, Path] | None = None  # per model, the verdicts it was scored on
    models: Mapping[str, Any] | None = None
    reporting: Mapping[str, Any] = field(default_factory=dict)
    table: Path | None = None
    axis: str | None = None  # the breakdown figure's axis (report.breakdowns.AXES)

    def frame(self, with_images: bool = False) -> pd.DataFrame:
        from novabench.report import inputs

        columns = [*inputs.DATASET_COLUMNS, "image"] if with_images else None
        return inputs.load_dataset(self.dataset, columns, task=self.task)

    def entries(self, frame: pd.DataFrame | None = None) -> list:
        from novabench.report import inputs

        frame = self.frame() if frame is None else frame
        controls = self.reporting.get("controls")
        return inputs.load_entries(
            self.task, self.scores, frame, self.models or {}, controls, self.verdicts
        )


# Figure family -> how to draw it: `metrics` and `breakdown` exist for every task,
# `judge_agreement` once. A task draws its own families (``Task.figures``, in its folder's
# figures module) through ``Task.draw_figure``.
FAMILIES = {
    "metrics": _figure_metrics,
    "judge_agreement": _figure_judge_agreement,
    "breakdown": _figure_breakdown,
}


def make_figure(family: str, **inputs: Any) -> None:
    """Draw one figure family from the files the scoring and statistics stages wrote
    (keyword arguments: the fields of :class:`FigureContext`)."""
    from novabench.tasks import get_task

    task = get_task(inputs["task"]) if inputs.get("task") else None
    own = () if task is None else tuple(f for f in task.figures if f not in FAMILIES)
    if family not in FAMILIES and family not in own:
        raise ValueError(f"unknown figure family {family!r}; one of {sorted([*FAMILIES, *own])}")
    inputs["reporting"] = inputs.get("reporting") or {}
    token = _NOTE.set(inputs.pop("note", None))
    try:
        context = FigureContext(**inputs)
        if family in FAMILIES:
            FAMILIES[family](context)
        else:
            task.draw_figure(family, context)
    finally:
        _NOTE.reset(token)
