"""Figures of the report, one function per figure family, PNG and PDF.

One style for all: sized for a paper column (3.5 in) or the full text width (7.2 in),
7-pt text, the Okabe-Ito colour-blind-safe palette for models, greys for controls and
black for human raters, so an entry has the same colour in every figure. Greys alike
are told apart by a hatch pattern (bars) and a marker and dash pattern (lines) per entry
(:func:`entry_styles`). Every axis with a quantity names its unit. Files are written
without timestamps so that re-running a figure does not change its bytes.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never a display

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from novabench.report.inputs import (
    GROUP_CONTROL,
    GROUP_HUMAN,
    GROUP_MODEL,
    GROUP_TITLES,
)

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


def _legend_below(fig: plt.Figure, ax: plt.Axes, n: int) -> None:
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


def entry_styles(names: Sequence[str], groups: Mapping[str, str]) -> dict[str, EntryStyle]:
    """A fixed style per entry: models from the palette in order, controls grey, raters
    black, each with its own marker, dash pattern and hatch within its group."""
    counters = {GROUP_MODEL: 0, GROUP_CONTROL: 0, GROUP_HUMAN: 0}
    palettes = {GROUP_MODEL: OKABE_ITO, GROUP_CONTROL: CONTROL_GREYS, GROUP_HUMAN: HUMAN_COLOURS}
    styles = {}
    for name in names:
        group = groups.get(name, GROUP_MODEL)
        i = counters[group]
        styles[name] = EntryStyle(
            colour=palettes[group][i % len(palettes[group])],
            marker=MARKERS[group][i % len(MARKERS[group])],
            linestyle=DASHES[group][i % len(DASHES[group])],
            hatch=HATCHES[group][i % len(HATCHES[group])],
        )
        counters[group] += 1
    return styles


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


def _placeholder(message: str, png: Path, pdf: Path) -> None:
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
    columns = [m for m in get_task(task).table_metrics if m.decimals != 0]
    names = list(dict.fromkeys(statistics["model"]))
    if not names:
        _placeholder(f"No {task} scores.", png, pdf)
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
    save(fig, png, pdf)


# --- localization --------------------------------------------------------------------------


def plot_iou_distribution(
    entries: Sequence[tuple[str, str, pd.DataFrame]], png: Path, pdf: Path
) -> None:
    """Share of images (with a gold box) whose best IoU is at least tau, per entry."""
    apply_style()
    groups = {name: group for name, group, _ in entries}
    names = by_group([name for name, _, _ in entries], groups)
    styles = entry_styles(names, groups)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.1))
    tau = np.linspace(0, 1, 201)
    frames = {name: per_image for name, _, per_image in entries}
    for i, name in enumerate(names):
        per_image = frames[name]
        best = per_image.loc[per_image["n_gold"] > 0, "best_iou"].to_numpy(dtype=float)
        if not len(best):
            continue
        share = 100 * (best[None, :] >= tau[:, None]).mean(axis=1)
        # markers every 0.1 of tau, staggered so that overlapping curves stay apart
        every = (5 * i % 20, 20)
        ax.plot(tau, share, **styles[name].line(), markevery=every, label=name)
    for threshold in (0.3, 0.5):
        ax.axvline(threshold, color="#999999", linewidth=0.5, zorder=0)
        ax.text(
            threshold,
            101,
            f"Hit@{round(threshold * 100)}",
            ha="center",
            va="bottom",
            fontsize=5.5,
            color="#555555",
        )
    ax.set_xlabel(r"IoU threshold $\tau$ (overlap ratio, 0–1)")
    ax.set_ylabel(r"images with best IoU $\geq \tau$ (%)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 100)
    _legend_below(fig, ax, len(names))
    save(fig, png, pdf)


LESION_SIZE_EDGES = (0, 16, 32, 64, 128, math.inf)  # sqrt(box area) in pixels


def lesion_hits(
    gold: Mapping[str, Sequence[Sequence[float]]],
    predicted: Mapping[str, Sequence[Mapping[str, float]]],
    threshold: float = 0.3,
) -> pd.DataFrame:
    """One row per gold box: its size (sqrt of area, px) and whether some predicted box of
    the image overlaps it with IoU >= ``threshold`` (lesion-level hit)."""
    from novabench.metrics.localization import iou_matrix

    rows = []
    for filename, boxes in gold.items():
        preds = [[p["x"], p["y"], p["width"], p["height"]] for p in predicted.get(filename, [])]
        ious = iou_matrix(preds, boxes) if boxes else np.zeros((0, 0))
        for index, box in enumerate(boxes):
            best = float(ious[:, index].max()) if len(preds) else 0.0
            rows.append(
                {
                    "filename": filename,
                    "size": math.sqrt(box[2] * box[3]),
                    "hit": best >= threshold,
                }
            )
    return pd.DataFrame(rows, columns=["filename", "size", "hit"])


def size_bin_labels() -> list[str]:
    """ "<16", "16–32", ..., "≥128": the lesion size bins (sqrt of the gold box area, px)."""
    edges = LESION_SIZE_EDGES
    return [
        f"<{int(hi)}" if lo == 0 else (f"≥{int(lo)}" if math.isinf(hi) else f"{int(lo)}–{int(hi)}")
        for lo, hi in itertools.pairwise(edges)
    ]


def lesion_hit_rates(
    hits: Mapping[str, pd.DataFrame],
    case_of: Mapping[str, str],
    *,
    n_resamples: int,
    seed: int,
    confidence: float,
) -> pd.DataFrame:
    """Per entry and lesion size bin: lesions, hit rate (%) and its case-bootstrap CI.

    ``hits[name]`` is :func:`lesion_hits` of one entry; ``case_of`` maps every image of the
    dataset to its case. The resamples are the statistics stage's (same cases, seed and
    count), and a resample weighs each lesion by how often its image's case was drawn.
    """
    from novabench.report.bootstrap import draw_cases, percentile_interval, weighted_mean

    resamples = draw_cases(list(case_of.values()), n_resamples, seed)
    labels = size_bin_labels()
    rows = []
    for name, table in hits.items():
        if table.empty:
            continue
        weights = resamples.weights([case_of[f] for f in table["filename"]])
        bins = np.digitize(table["size"], np.array(LESION_SIZE_EDGES)[1:-1])
        hit = table["hit"].to_numpy(dtype=float)
        for b in np.unique(bins):
            values = np.where(bins == b, hit, np.nan)  # NaN: not in this bin
            low, high, _ = percentile_interval(weighted_mean(weights, values, 100), confidence)
            rows.append(
                {
                    "model": name,
                    "bin": int(b),
                    "size": labels[b],
                    "n_lesions": int((bins == b).sum()),
                    "value": 100 * float(np.nanmean(values)),
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    columns = ["model", "bin", "size", "n_lesions", "value", "ci_low", "ci_high"]
    return pd.DataFrame(rows, columns=columns)


def _dodged(ax, table: pd.DataFrame, members: Sequence[str], bins, styles) -> None:
    """One point per size bin and entry with its CI, entries side by side within a bin."""
    step = 0.7 / max(len(members), 1)
    for i, name in enumerate(members):
        rows = table[table["model"] == name].set_index("bin").reindex(bins)
        x = np.arange(len(bins)) + (i - (len(members) - 1) / 2) * step
        values = rows["value"].to_numpy(dtype=float)
        err = np.clip(np.vstack([values - rows["ci_low"], rows["ci_high"] - values]), 0, None)
        ax.errorbar(
            x, values, yerr=err.astype(float), **styles[name].line(), linewidth=0.8,
            elinewidth=0.6, capsize=1.2, label=name,
        )  # fmt: skip


def plot_hit_by_lesion_size(
    table: pd.DataFrame, groups: Mapping[str, str], png: Path, pdf: Path
) -> None:
    """Lesion-level hit rate at IoU 0.3 per size bin with case-bootstrap CIs: one panel per
    group (models, controls, human reference), entries dodged within a bin."""
    apply_style()
    if table.empty:
        _placeholder("No gold boxes: no lesion sizes.", png, pdf)
        return
    names = by_group(list(dict.fromkeys(table["model"])), groups)
    styles = entry_styles(names, groups)
    panels = [g for g in GROUP_ORDER if any(groups.get(n, GROUP_MODEL) == g for n in names)]
    bins = sorted(table["bin"].unique())
    counts = table.groupby("bin")["n_lesions"].max()
    ticks = [f"{size_bin_labels()[b]}\n(n={counts[b]})" for b in bins]
    width = COLUMN_WIDTH_IN if len(panels) == 1 else TEXT_WIDTH_IN
    fig, axes = plt.subplots(1, len(panels), figsize=(width, 2.2), sharey=True, squeeze=False)
    for ax, group in zip(axes[0], panels, strict=True):
        members = [n for n in names if groups.get(n, GROUP_MODEL) == group]
        _dodged(ax, table, members, bins, styles)
        ax.set_title(GROUP_TITLES[group], pad=2)
        ax.set_xticks(np.arange(len(bins)), ticks)
        ax.set_xlim(-0.5, len(bins) - 0.5)
        ax.set_xlabel(r"lesion size: $\sqrt{\mathrm{gold\ box\ area}}$ (pixels)")
        ax.grid(axis="y", linewidth=0.3, color="#DDDDDD")
    axes[0, 0].set_ylabel("lesions hit at IoU ≥ 0.3 (%)")
    axes[0, 0].set_ylim(-2, 102)
    fig.tight_layout()
    handles = [h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]]
    texts = [t for ax in axes[0] for t in ax.get_legend_handles_labels()[1]]
    fig.legend(
        handles, texts, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncols=min(len(names), 4)
    )
    save(fig, png, pdf)


def pick_examples(frame: pd.DataFrame, n: int, seed: int) -> list[str]:
    """``n`` images with a gold box, from ``n`` different cases where possible, seeded."""
    with_gold = frame[frame["gold_boxes"].map(len) > 0]
    if with_gold.empty or n <= 0:
        return []
    rng = np.random.default_rng(seed)
    cases = sorted(with_gold["case_id"].unique())
    chosen = rng.choice(len(cases), size=min(n, len(cases)), replace=False)
    picks = []
    for index in sorted(chosen):
        options = sorted(with_gold.loc[with_gold["case_id"] == cases[index], "filename"])
        picks.append(options[int(rng.integers(len(options)))])
    return sorted(picks)


EXAMPLE_PIXELS = 320  # longest side of a shown image: enough at 1.8 in, keeps the PDF small


def _downsample(image: np.ndarray) -> np.ndarray:
    """Shrink an image (boxes stay in original pixels: the caller sets the extent)."""
    from PIL import Image

    height, width = image.shape[:2]
    scale = EXAMPLE_PIXELS / max(height, width)
    if scale >= 1:
        return image
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return np.asarray(Image.fromarray(image).resize(size, Image.Resampling.LANCZOS))


def _draw_boxes(ax, boxes, colour: str, style: str = "-") -> None:
    from matplotlib.patches import Rectangle

    for box in boxes:
        ax.add_patch(
            Rectangle(
                (box[0], box[1]),
                box[2],
                box[3],
                fill=False,
                edgecolor=colour,
                linewidth=0.9,
                linestyle=style,
            )
        )


def _show_image(ax, image: np.ndarray) -> None:
    """A grey-scale image in pixel coordinates (boxes drawn on it keep theirs), no frame."""
    ax.imshow(
        _downsample(image),
        cmap="gray",
        vmin=0,
        vmax=255,
        interpolation="antialiased",
        extent=(0, image.shape[1], image.shape[0], 0),
    )
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)


def plot_examples(
    images: Mapping[str, np.ndarray],
    gold: Mapping[str, Sequence[Sequence[float]]],
    raters: Mapping[str, Sequence[Sequence[float]]],
    predicted: Mapping[str, Mapping[str, Sequence[Mapping[str, float]]]],
    png: Path,
    pdf: Path,
) -> None:
    """Rows: example images; columns: reference (gold solid, raters dashed), then one
    column per entry with its predicted boxes over the gold boxes."""
    from matplotlib.lines import Line2D

    apply_style()
    filenames = list(images)
    if not filenames:
        _placeholder("No image with a gold box to show.", png, pdf)
        return
    columns = ["reference", *predicted]
    size = TEXT_WIDTH_IN / max(len(columns), 4)
    fig, axes = plt.subplots(
        len(filenames),
        len(columns),
        figsize=(size * len(columns), size * len(filenames) + 0.3),
        squeeze=False,
    )
    for r, filename in enumerate(filenames):
        for c, column in enumerate(columns):
            ax = axes[r, c]
            _show_image(ax, images[filename])
            _draw_boxes(ax, gold.get(filename, []), BOX_COLOURS["gold"])
            if column == "reference":
                _draw_boxes(ax, raters.get(filename, []), BOX_COLOURS["rater"], "--")
            else:
                boxes = [
                    [p["x"], p["y"], p["width"], p["height"]]
                    for p in predicted[column].get(filename, [])
                ]
                _draw_boxes(ax, boxes, BOX_COLOURS["predicted"])
            if r == 0:
                ax.set_title(column, pad=2)
            if c == 0:
                ax.set_ylabel(filename.rsplit(".", 1)[0], fontsize=5.5)
    handles = [
        Line2D([], [], color=BOX_COLOURS["gold"], label="gold"),
        Line2D([], [], color=BOX_COLOURS["rater"], linestyle="--", label="raters"),
        Line2D([], [], color=BOX_COLOURS["predicted"], label="predicted"),
    ]
    fig.legend(handles=handles, loc="lower center", ncols=3, bbox_to_anchor=(0.5, -0.01))
    fig.tight_layout(rect=(0, 0.03, 1, 1), pad=0.2, h_pad=0.2, w_pad=0.2)
    save(fig, png, pdf, dpi=200)


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
        _placeholder(f"No {task} scores to break down.", png, pdf)
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
    _legend_below(fig, axes[-1], len(names))
    save(fig, png, pdf)


# --- diagnosis -----------------------------------------------------------------------------


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
        _placeholder("No diagnosis scores.", png, pdf)
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


# --- judge agreement ---------------------------------------------------------------------


def plot_judge_agreement(table: pd.DataFrame, png: Path, pdf: Path) -> None:
    """Cohen's kappa per model and label, one marker per pair of judges."""
    apply_style()
    if table.empty:
        _placeholder("No second judge: no agreement to show.", png, pdf)
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
    _legend_below(fig, ax, len(pairs))
    save(fig, png, pdf)


# --- rule `figure` ---------------------------------------------------------------------------


def _figure_metrics(ctx: FigureContext) -> None:
    plot_metric_bars(ctx.task, pd.read_csv(ctx.statistics), ctx.png, ctx.pdf)


def _figure_judge_agreement(ctx: FigureContext) -> None:
    plot_judge_agreement(pd.read_csv(ctx.table), ctx.png, ctx.pdf)


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
    table = pd.read_csv(ctx.table, keep_default_na=False, na_values=[""])
    table = table[table["breakdown"] == ctx.axis]
    groups = dict(zip(table["model"], table["group"], strict=True))
    order = breakdown_order(ctx.axis, list(table["category"]))
    panels = [(BREAKDOWN_TITLES[ctx.axis], table, order)]
    label = str(table["label"].iloc[0]) if len(table) else ""
    plot_breakdown(ctx.task, panels, groups, ctx.png, ctx.pdf, label)


def _figure_iou(ctx: FigureContext) -> None:
    entries = ctx.entries()
    plot_iou_distribution([(e.name, e.group, e.per_image) for e in entries], ctx.png, ctx.pdf)


def _figure_lesion_size(ctx: FigureContext) -> None:
    from novabench.tasks.localization import entry_boxes, gold_boxes

    entries, frame = ctx.entries(), ctx.frame()
    gold = gold_boxes(frame)
    hits = {e.name: lesion_hits(gold, entry_boxes(frame, e.name, e.predictions)) for e in entries}
    settings = ctx.reporting["bootstrap"]
    table = lesion_hit_rates(
        hits,
        dict(zip(frame["filename"], frame["case_id"], strict=True)),
        n_resamples=int(settings["resamples"]),
        seed=int(settings["seed"]),
        confidence=float(settings["confidence"]),
    )
    groups = {e.name: e.group for e in entries}
    plot_hit_by_lesion_size(table, groups, ctx.png, ctx.pdf)


def _figure_examples(ctx: FigureContext) -> None:
    from novabench.dataset.read import decode_image
    from novabench.tasks.localization import entry_boxes

    frame = ctx.frame(with_images=True)
    entries = ctx.entries(frame)
    picks = pick_examples(frame, int(ctx.reporting.get("examples", 6)), _seed(ctx.reporting))
    chosen = frame.set_index("filename").loc[picks]
    images = {f: decode_image(row["image"]["bytes"], f) for f, row in chosen.iterrows()}
    gold = {f: _xywh(row["gold_boxes"]) for f, row in chosen.iterrows()}
    raters = {f: _xywh(row["rater_boxes"]) for f, row in chosen.iterrows()}
    shown = [e for e in entries if e.group == GROUP_MODEL]
    shown += [e for e in entries if e.group == GROUP_CONTROL]
    predicted = {
        e.name: entry_boxes(frame, e.name, e.predictions) for e in shown[:MAX_EXAMPLE_COLUMNS]
    }
    plot_examples(images, gold, raters, predicted, ctx.png, ctx.pdf)


def _figure_labels(ctx: FigureContext) -> None:
    from novabench.tasks.diagnosis import diagnosis_labeler, diagnosis_labels

    labeler = diagnosis_labeler(ctx.judge)
    labelled = [(e.name, e.group, *diagnosis_labels(e.per_image, labeler)) for e in ctx.entries()]
    reference = labelled[0][3] if labelled else []
    plot_diagnosis_labels([(n, g, p) for n, g, p, _ in labelled], reference, ctx.png, ctx.pdf)


@dataclass
class FigureContext:
    """What a figure family may read: the report stage's inputs of one job."""

    png: Path
    pdf: Path
    task: str | None = None
    statistics: Path | None = None
    dataset: Path | None = None
    scores: Sequence[Path] = ()
    predictions: Mapping[str, Path] | None = None
    models: Mapping[str, Any] | None = None
    reporting: Mapping[str, Any] = field(default_factory=dict)
    table: Path | None = None
    judge: Mapping[str, Any] | None = None
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
            self.task, self.scores, frame, self.models or {}, controls, self.predictions
        )


# Figure family -> how to draw it. Task-specific families are named by the task
# (``Task.figures``); `metrics` exists for every task, `judge_agreement` once.
FAMILIES = {
    "metrics": _figure_metrics,
    "judge_agreement": _figure_judge_agreement,
    "breakdown": _figure_breakdown,
    "iou": _figure_iou,
    "lesion_size": _figure_lesion_size,
    "examples": _figure_examples,
    "labels": _figure_labels,
}


def make_figure(family: str, **inputs: Any) -> None:
    """Draw one figure family from the files the scoring and statistics stages wrote
    (keyword arguments: the fields of :class:`FigureContext`)."""
    if family not in FAMILIES:
        raise ValueError(f"unknown figure family {family!r}; one of {sorted(FAMILIES)}")
    inputs["reporting"] = inputs.get("reporting") or {}
    token = _NOTE.set(inputs.pop("note", None))
    try:
        FAMILIES[family](FigureContext(**inputs))
    finally:
        _NOTE.reset(token)


MAX_EXAMPLE_COLUMNS = 5  # entries shown beside the reference in the qualitative grid


def _xywh(boxes: Sequence[Mapping[str, float]]) -> list[list[float]]:
    return [[b["x"], b["y"], b["width"], b["height"]] for b in boxes]


def _seed(reporting: Mapping[str, Any]) -> int:
    """The configured bootstrap seed (the schema always sets it) also picks the examples."""
    return int(reporting["bootstrap"]["seed"])
