"""Low-level analysis of one brain MRI slice: brain mask, midline, tissue statistics.

Shared by the classical lesion detector and the image-analysis captioner. Everything here is
numpy/scipy only, deterministic, and works on any 2D grayscale slice (any size, any sequence).

Coordinates are (row, column) = (y, x) with the origin at the top-left pixel, as in the
benchmark's boxes. Large images are analysed on a block-averaged *working* grid
(``downsample``) so that one slice takes a few milliseconds; ``Midline.scaled`` and the
detector map results back to full resolution.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from novabench.errors import DatasetError

__all__ = [
    "Midline",
    "TissueStatistics",
    "as_float_image",
    "brain_mask",
    "dilate",
    "downsample",
    "erode",
    "estimate_midline",
    "intensity_classes",
    "otsu_threshold",
    "reflect",
    "robust_location_scale",
    "tissue_statistics",
]

# A brain must cover at least this fraction of the slice to be analysed at all.
MIN_BRAIN_FRACTION = 0.01
# Cortical ribbon and deep core, as fractions of the brain's largest depth.
RIBBON_DEPTH = 0.1
CORE_DEPTH = 0.4
# Erosion radius (image side / this) that cuts bridges between brain and scalp.
SEPARATION_DIVISOR = 60


def as_float_image(image: np.ndarray) -> np.ndarray:
    """Return the slice as float32 in [0, 1]; accept (H, W) or (H, W, 1|3|4) arrays.

    Integer images are divided by their type's maximum (255 for 8-bit PNGs); float images
    by their maximum when it exceeds 1. Colour channels are averaged (alpha ignored).
    """
    source = np.asarray(image)
    if source.ndim == 3 and source.shape[2] in (1, 3, 4):
        gray = source[..., : min(3, source.shape[2])].astype(np.float32).mean(axis=2)
    elif source.ndim == 2:
        gray = source.astype(np.float32)
    else:
        raise DatasetError(
            f"expected a 2D grayscale slice, got an array of shape {source.shape}",
            "pass one slice as an (H, W) array, e.g. numpy.asarray(PIL.Image.open(p).convert('L'))",
        )
    if gray.shape[0] < 8 or gray.shape[1] < 8:
        raise DatasetError(
            f"slice of shape {gray.shape} is too small to analyse", "pass the full image"
        )
    if np.issubdtype(source.dtype, np.integer):
        scale = float(np.iinfo(source.dtype).max)
    else:
        gray = np.nan_to_num(gray, nan=0.0, posinf=0.0, neginf=0.0)
        scale = max(1.0, float(gray.max()))
    return np.clip(gray / np.float32(scale), 0.0, 1.0)


def downsample(image: np.ndarray, max_side: int) -> tuple[np.ndarray, int]:
    """Block-average ``image`` by the smallest integer factor that fits ``max_side``.

    Returns the working image and the factor; working pixel (i, j) covers full-resolution
    rows ``[f*i, f*i + f)`` and columns ``[f*j, f*j + f)`` (trailing rows/columns that do not
    fill a block are dropped).
    """
    factor = max(1, math.ceil(max(image.shape) / max_side))
    if factor == 1:
        return image.astype(np.float32, copy=False), 1
    rows, cols = image.shape[0] // factor, image.shape[1] // factor
    blocks = image[: rows * factor, : cols * factor].reshape(rows, factor, cols, factor)
    return blocks.mean(axis=(1, 3), dtype=np.float32), factor


def erode(mask: np.ndarray, radius: int) -> np.ndarray:
    """Binary erosion by a (2r+1)-pixel square; outside the image counts as background.

    Squares, not disks: scipy's min/max filters are separable for them and several times
    faster than ``binary_erosion`` with a disk, and the shape hardly matters here.
    """
    if radius <= 0:
        return mask.copy()
    size = 2 * int(radius) + 1
    return ndimage.minimum_filter(mask.view(np.uint8), size=size, mode="constant").view(bool)


def dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """Binary dilation by a (2r+1)-pixel square (see ``erode``)."""
    if radius <= 0:
        return mask.copy()
    size = 2 * int(radius) + 1
    return ndimage.maximum_filter(mask.view(np.uint8), size=size, mode="constant").view(bool)


def otsu_threshold(values: np.ndarray, bins: int = 256) -> float:
    """Otsu's threshold of ``values`` (maximal between-class variance).

    Hand-written because scikit-image, which has it, is not a dependency; it is ten lines.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    low, high = float(values.min()), float(values.max())
    if high <= low:
        return low
    counts, edges = np.histogram(values, bins=bins, range=(low, high))
    centres = (edges[:-1] + edges[1:]) / 2
    weight_low = np.cumsum(counts)
    weight_high = weight_low[-1] - weight_low
    mass_low = np.cumsum(counts * centres)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_low = mass_low / weight_low
        mean_high = (mass_low[-1] - mass_low) / weight_high
        between = weight_low * weight_high * (mean_low - mean_high) ** 2
    between = np.nan_to_num(between[:-1], nan=-1.0)
    return float(edges[int(np.argmax(between)) + 1])


def _main_components(mask: np.ndarray, keep_fraction: float = 0.15) -> np.ndarray:
    """Brain components of a thresholded slice: drop enclosing rings, keep the big ones.

    A component whose hole-filled area is more than twice its own area is a ring around
    something else (the scalp around the skull's dark band, a coil or a head holder), not
    brain. Of the rest, the largest is kept with any other at least ``keep_fraction`` of
    its size: near the vertex the two hemispheres, and low down cerebrum and cerebellum, can
    be disconnected in one slice, while specks (noise, eyes, scalp fragments) are dropped.
    """
    labels, count = ndimage.label(mask)
    if count == 0:
        return mask
    sizes = np.bincount(labels.ravel(), minlength=count + 1).astype(float)
    sizes[0] = 0.0
    for index, region in enumerate(ndimage.find_objects(labels), start=1):
        if region is None or sizes[index] < keep_fraction * sizes.max():
            continue
        own = labels[region] == index
        if ndimage.binary_fill_holes(own).sum() > 2.0 * own.sum():
            sizes[index] = 0.0
    if sizes.max() <= 0:
        return np.zeros_like(mask)
    keep = sizes >= keep_fraction * sizes.max()
    keep[0] = False
    return keep[labels]


def brain_mask(image: np.ndarray) -> np.ndarray:
    """Boolean mask of the brain in ``image``.

    Threshold the lightly smoothed slice at half of Otsu's level (half, so that dark CSF and
    low-signal sequences such as DWI stay inside); erode by about 1/60 of the image side so
    that bridges across the skull's dark band break; keep the main components, dropping rings
    that enclose the rest (the scalp); grow back inside the threshold mask; open and close
    with a small square; fill holes (ventricles, dark lesions). Returns an all-False mask
    when no plausible brain is present (blank or constant image).
    """
    if image.size == 0 or float(image.max()) - float(image.min()) < 1e-3:
        return np.zeros(image.shape, dtype=bool)
    smooth = ndimage.gaussian_filter(image, 1.0)
    level = 0.5 * otsu_threshold(smooth)
    background = float(np.percentile(smooth, 5))
    foreground = smooth > max(level, background + 0.02)
    radius = max(1, round(min(image.shape) / 100))
    # Erode by a few pixels before choosing components, so that bridges across the skull's
    # dark band (partial volume, thin bone) break; then grow back inside the foreground.
    separation = max(radius, round(min(image.shape) / SEPARATION_DIVISOR))
    core = erode(foreground, separation)
    if not core.any():
        return np.zeros(image.shape, dtype=bool)
    core = _main_components(core)
    brain = dilate(core, separation + 1) & foreground
    brain = dilate(erode(brain, radius), radius)  # opening: drop specks and thin spurs
    brain = erode(dilate(brain, radius), radius)  # closing: bridge small gaps
    brain = ndimage.binary_fill_holes(brain)
    if brain.mean() < MIN_BRAIN_FRACTION:
        return np.zeros(image.shape, dtype=bool)
    return brain


@dataclass(frozen=True)
class Midline:
    """The left-right symmetry axis of a slice: a line through (``y``, ``x``).

    ``angle_deg`` is the tilt from vertical; the line's direction is
    (cos a, sin a) in (row, column). ``symmetry`` is the cosine similarity in [-1, 1] between
    the brain (as clipped robust z-scores) and its mirror image about the line: close to 1
    for axial and coronal slices, much lower for sagittal ones. ``shape_symmetry`` is the
    intersection over union of the brain mask and its mirror image: above about 0.9 for
    axial and coronal slices, below for sagittal ones.
    """

    y: float
    x: float
    angle_deg: float
    symmetry: float
    shape_symmetry: float = 0.0

    def scaled(self, factor: int) -> Midline:
        """The same line on a grid ``factor`` times finer (see ``downsample``)."""
        shift = (factor - 1) / 2
        return dataclasses.replace(self, y=self.y * factor + shift, x=self.x * factor + shift)

    def column_at(self, row: float) -> float:
        """Column where the line crosses ``row``."""
        a = math.radians(self.angle_deg)
        return self.x + (row - self.y) * math.tan(a)

    def side(self, row: float, col: float) -> float:
        """Signed distance of a point from the line; positive on the image's right side."""
        a = math.radians(self.angle_deg)
        return (col - self.x) * math.cos(a) - (row - self.y) * math.sin(a)


def _rotation(angle_deg: float) -> np.ndarray:
    """Matrix taking the vertical unit vector (1, 0) to (cos a, sin a) in (row, col)."""
    a = math.radians(angle_deg)
    return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def _symmetry_signal(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The masked slice as robust z-scores clipped to +-3, zero outside the brain."""
    # Clipped: a high-contrast lesion or bright CSF would otherwise dominate the energy and
    # hide the symmetry of the rest. Light smoothing first, as pixel noise (DWI) is
    # uncorrelated across the midline.
    smooth = ndimage.gaussian_filter(image.astype(np.float32), 1.0)
    median, scale = robust_location_scale(smooth[mask], min_scale=1e-3)
    signal = np.where(mask, np.clip((smooth - median) / scale, -3.0, 3.0), 0.0)
    return signal.astype(np.float64)


def _score_tilt(
    signal: np.ndarray, centre: np.ndarray, half_range: float, energy_total: float, angle: float
) -> tuple[float, float, float]:
    """(correlation with the mirror image, tilt, mirror column) of the best offset at a tilt."""
    size = 2 * signal.shape[1]
    rot = _rotation(angle)
    rotated = ndimage.affine_transform(
        signal, rot, offset=centre - rot @ centre, order=1, mode="constant", cval=0.0
    )
    energy = float((rotated**2).sum())
    low = max(0, math.ceil(2 * (centre[1] - half_range)))
    high = min(size - 1, math.floor(2 * (centre[1] + half_range)))
    if energy <= 0.0 or energy < 0.5 * energy_total or high < low:
        return (-np.inf, angle, centre[1])
    spectrum = np.fft.rfft(rotated, n=size, axis=1)
    autoconv = np.fft.irfft(spectrum * spectrum, n=size, axis=1).sum(axis=0) / energy
    k = low + int(np.argmax(autoconv[low : high + 1]))
    return (float(autoconv[k]), angle, k / 2.0)


def _best_tilt(
    score_tilt: Callable[[float], tuple[float, float, float]],
    max_angle: float,
    angle_step: float,
    min_angle_step: float,
) -> tuple[float, float, float]:
    """Coarse-to-fine over tilts: a coarse sweep, then halving steps around the best tilt."""
    # Ties keep the first (smallest) tilt, so the search is deterministic.
    best = max(
        (score_tilt(float(a)) for a in np.arange(-max_angle, max_angle + 1e-9, angle_step)),
        key=lambda result: result[0],
    )
    step = angle_step / 2
    while step >= min_angle_step:
        around = [best, score_tilt(best[1] - step), score_tilt(best[1] + step)]
        best = max(around, key=lambda result: result[0])
        step /= 2
    return best


def estimate_midline(
    image: np.ndarray,
    mask: np.ndarray,
    *,
    max_angle: float = 12.0,
    angle_step: float = 4.0,
    min_angle_step: float = 1.0,
    max_offset_fraction: float = 0.15,
) -> Midline:
    """Symmetry axis maximising the correlation of the brain with its mirror image.

    For each candidate tilt the masked slice, as clipped robust z-scores, is rotated about
    the brain's centroid so that the tilt becomes vertical; mirroring every row about column m then
    correlates row values at x and 2m - x, i.e. the row's autoconvolution at 2m, which one
    FFT per tilt gives for all offsets at once. Tilts are searched from a coarse sweep
    (``angle_step``) down to ``min_angle_step`` around the best. Offsets are limited to
    ``max_offset_fraction`` of the brain width on either side of the centroid.
    """
    if not mask.any():
        return Midline(image.shape[0] / 2, image.shape[1] / 2, 0.0, 0.0)
    signal = _symmetry_signal(image, mask)
    energy_total = float((signal**2).sum())
    centre = np.array(ndimage.center_of_mass(mask))
    cols = np.nonzero(mask.any(axis=0))[0]
    half_range = max(1.0, max_offset_fraction * (cols[-1] - cols[0] + 1))
    score_tilt = functools.partial(_score_tilt, signal, centre, half_range, energy_total)
    score, angle, column = _best_tilt(score_tilt, max_angle, angle_step, min_angle_step)
    if not np.isfinite(score):
        return Midline(float(centre[0]), float(centre[1]), 0.0, 0.0)
    # The mirror column lives in the rotated frame; move it back to the original frame.
    normal = _rotation(angle) @ np.array([0.0, 1.0])
    point = centre + (column - centre[1]) * normal
    line = Midline(float(point[0]), float(point[1]), angle, float(np.clip(score, -1.0, 1.0)))
    mirrored = reflect(mask.astype(np.float32), line) > 0.5
    shape = float((mask & mirrored).sum() / max((mask | mirrored).sum(), 1))
    return dataclasses.replace(line, shape_symmetry=shape)


def reflect(image: np.ndarray, midline: Midline, *, order: int = 1) -> np.ndarray:
    """Mirror image of ``image`` about ``midline`` (pixels reflected outside read 0)."""
    a = math.radians(midline.angle_deg)
    direction = np.array([math.cos(a), math.sin(a)])
    householder = 2.0 * np.outer(direction, direction) - np.eye(2)
    point = np.array([midline.y, midline.x])
    return ndimage.affine_transform(
        image.astype(np.float32, copy=False),
        householder,
        offset=point - householder @ point,
        order=order,
        mode="constant",
        cval=0.0,
    )


def robust_location_scale(values: np.ndarray, min_scale: float = 1e-3) -> tuple[float, float]:
    """Median and MAD-based standard deviation (1.4826 * MAD), the latter floored."""
    if values.size == 0:
        return 0.0, min_scale
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median)))
    return median, max(1.4826 * mad, min_scale)


def intensity_classes(
    values: np.ndarray, n_classes: int = 3, bins: int = 256, max_iter: int = 50
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1-D k-means of ``values`` into ``n_classes`` intensity classes, darkest first.

    Returns the class means, the share of values in each class, and the upper bounds
    between classes (``n_classes - 1`` thresholds). Runs Lloyd's algorithm on a histogram,
    started from evenly spaced percentiles, so it is deterministic and takes microseconds;
    hand-written because scipy's ``kmeans2`` works on every value and warns on empty classes.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    counts, edges = np.histogram(values, bins=bins)
    centres = (edges[:-1] + edges[1:]) / 2
    means = np.percentile(values, np.linspace(10, 90, n_classes))
    for _ in range(max_iter):
        bounds = (means[1:] + means[:-1]) / 2
        assign = np.searchsorted(bounds, centres)
        weights = np.bincount(assign, weights=counts, minlength=n_classes)
        sums = np.bincount(assign, weights=counts * centres, minlength=n_classes)
        updated = np.where(weights > 0, sums / np.maximum(weights, 1e-12), means)
        updated = np.sort(updated)
        if np.allclose(updated, means, atol=1e-7):
            break
        means = updated
    bounds = (means[1:] + means[:-1]) / 2
    shares = np.bincount(np.searchsorted(bounds, values), minlength=n_classes) / values.size
    return means, shares, bounds


@dataclass(frozen=True)
class TissueStatistics:
    """Contrast summary of the brain in one slice (intensities on a 0-1 scale).

    The brain's intensities fall in three classes (``intensity_classes``). The CSF class is
    the extreme (darkest or brightest) class with the smaller share, because CSF is a minority
    of a brain slice on every sequence. Of the two other classes, white matter is the brighter
    one if the brain's deep core is brighter than its cortical ribbon (CSF-class pixels left
    out of both), the darker one otherwise. ``bright_tail`` is the 98th percentile over the
    median (high where CSF is bright, as on T2); ``noise`` the pixel-scale noise over the
    median,
    estimated from the residual of a 3x3 median filter and scaled back to the full-resolution
    pixel (``factor``) assuming white noise.
    """

    median: float
    spread: float
    csf: float
    grey: float
    white: float
    csf_share: float
    csf_is_bright: bool
    bright_tail: float
    noise: float

    @property
    def white_brighter_than_grey(self) -> bool:
        return self.white > self.grey


def tissue_statistics(
    image: np.ndarray, mask: np.ndarray, factor: int = 1, exclude: np.ndarray | None = None
) -> TissueStatistics:
    """Summarise tissue contrast inside ``mask`` (see ``TissueStatistics``).

    ``factor`` is the block size ``image`` was averaged with (see ``downsample``);
    ``exclude`` marks pixels to leave out of the tissue classes (suspected lesions, whose
    signal and oedema would otherwise pass for a tissue class).
    """
    if exclude is not None and (mask & ~exclude).sum() >= 0.5 * mask.sum():
        tissue_mask = mask & ~exclude
    else:
        tissue_mask = mask
    if tissue_mask.sum() < 16:
        return TissueStatistics(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False, 0.0, 0.0)
    values = image[tissue_mask]
    median, spread = robust_location_scale(values)
    means, shares, bounds = intensity_classes(values)
    classes = np.searchsorted(bounds, image)
    csf_class = 2 if shares[2] < shares[0] else 0
    others = [c for c in range(3) if c != csf_class]
    depth = ndimage.distance_transform_cdt(mask, metric="taxicab")

    def median_depth(c: int) -> float:
        inside = tissue_mask & (classes == c)
        return float(np.median(depth[inside])) if inside.any() else 0.0

    # Grey vs white: compare the non-CSF tissue of the cortical ribbon (outer band) with that
    # of the deep core; the brighter of the two classes is white matter where the core is
    # brighter (T1), grey matter where the ribbon is (T2, FLAIR, DWI).
    tissue = tissue_mask & (classes != csf_class)
    max_depth = float(depth.max())
    ribbon = tissue & (depth <= max(2.0, RIBBON_DEPTH * max_depth))
    core = tissue & (depth >= CORE_DEPTH * max_depth)
    if ribbon.sum() >= 8 and core.sum() >= 8:
        core_brighter = float(np.median(image[core])) > float(np.median(image[ribbon]))
    else:
        core_brighter = median_depth(others[1]) > median_depth(others[0])
    white_class, grey_class = (others[1], others[0]) if core_brighter else (others[0], others[1])

    inner = erode(mask, 2)
    if inner.sum() > 16:
        residual = image - ndimage.median_filter(image, size=3)
        noise = 1.4826 * float(np.median(np.abs(residual[inner]))) * factor
    else:
        noise = 0.0
    level = max(median, 1e-6)
    return TissueStatistics(
        median=median,
        spread=spread,
        csf=float(means[csf_class]),
        grey=float(means[grey_class]),
        white=float(means[white_class]),
        csf_share=float(shares[csf_class]),
        csf_is_bright=csf_class == 2,
        bright_tail=float(np.percentile(values, 98)) / level,
        noise=noise / level,
    )
