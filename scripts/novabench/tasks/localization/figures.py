"""Localization's own figure families: best-IoU curves, hits by lesion size, examples.

Drawn in the report's style with its helpers (:mod:`novabench.report.figures`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from novabench.report.bootstrap import draw_cases, percentile_interval, weighted_mean
from novabench.report.figures import (
    BOX_COLOURS,
    COLUMN_WIDTH_IN,
    GROUP_ORDER,
    TEXT_WIDTH_IN,
    FigureContext,
    apply_style,
    by_group,
    entry_styles,
    legend_below,
    placeholder,
    plt,
    save,
)
from novabench.report.inputs import GROUP_CONTROL, GROUP_MODEL, GROUP_TITLES
from novabench.tasks.localization import entry_boxes, gold_boxes
from novabench.tasks.localization.metrics import iou_matrix


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
    ax.set_xlabel(r"IoU threshold $\tau$ (overlap ratio, 0–1)", parse_math=True)
    ax.set_ylabel(r"images with best IoU $\geq \tau$ (%)", parse_math=True)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 100)
    legend_below(fig, ax, len(names))
    save(fig, png, pdf)


LESION_SIZE_EDGES = (0, 16, 32, 64, 128, math.inf)  # sqrt(box area) in pixels


def lesion_hits(
    gold: Mapping[str, Sequence[Sequence[float]]],
    predicted: Mapping[str, Sequence[Mapping[str, float]]],
    threshold: float = 0.3,
) -> pd.DataFrame:
    """One row per gold box: its size (sqrt of area, px) and whether some predicted box of
    the image overlaps it with IoU >= ``threshold`` (lesion-level hit)."""
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
        placeholder("No gold boxes: no lesion sizes.", png, pdf)
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
        ax.set_xlabel(r"lesion size: $\sqrt{\mathrm{gold\ box\ area}}$ (pixels)", parse_math=True)
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
        placeholder("No image with a gold box to show.", png, pdf)
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


# --- families ---------------------------------------------------------------------------


def _figure_iou(ctx: FigureContext) -> None:
    entries = ctx.entries()
    plot_iou_distribution([(e.name, e.group, e.per_image) for e in entries], ctx.png, ctx.pdf)


def _figure_lesion_size(ctx: FigureContext) -> None:
    entries, frame = ctx.entries(), ctx.frame()
    gold = gold_boxes(frame)
    hits = {e.name: lesion_hits(gold, entry_boxes(frame, e.name, e.verdicts)) for e in entries}
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
        e.name: entry_boxes(frame, e.name, e.verdicts) for e in shown[:MAX_EXAMPLE_COLUMNS]
    }
    plot_examples(images, gold, raters, predicted, ctx.png, ctx.pdf)


MAX_EXAMPLE_COLUMNS = 5  # entries shown beside the reference in the qualitative grid


def _xywh(boxes: Sequence[Mapping[str, float]]) -> list[list[float]]:
    return [[b["x"], b["y"], b["width"], b["height"]] for b in boxes]


def _seed(reporting: Mapping[str, Any]) -> int:
    """The configured bootstrap seed (the schema always sets it) also picks the examples."""
    return int(reporting["bootstrap"]["seed"])


FAMILIES = {"iou": _figure_iou, "lesion_size": _figure_lesion_size, "examples": _figure_examples}
