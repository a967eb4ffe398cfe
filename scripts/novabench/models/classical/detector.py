"""Classical zero-shot lesion detector for one brain MRI slice (no training, no weights).

Method, on a block-averaged working grid of at most ``working_size`` pixels a side
(480x480 slices are analysed at 240x240):

1. **Brain mask** (``image_analysis.brain_mask``): threshold at half of Otsu's level, erode
   to cut bridges across the skull's dark band, drop rings that enclose the rest (the
   scalp), keep the largest components, grow back, open, close, fill holes.
2. **Midline** (``image_analysis.estimate_midline``): the left-right symmetry axis that
   maximises the correlation of the brain with its mirror image over tilts of +-12 degrees
   and offsets of +-15% of the brain's width. How well the brain's intensities and its
   outline match their mirror images (``symmetry``, ``shape_symmetry``) sets how far the
   asymmetry cue is trusted: fully on axial and coronal slices, not at all on sagittal ones.
3. **Intensity outliers**: the slice, smoothed inside the brain only, in robust z-scores
   (median and MAD) against the upper half of the brain's intensities for the bright tail
   and the lower half for the dark tail. Per-half statistics keep a lesion only a little
   brighter than white matter visible on a bimodal grey/white histogram.
4. **Hemispheric asymmetry**: the smoothed slice minus its mirror image about the midline, in
   robust z units. A differing pixel pair is attributed to the side farther from the brain's
   median intensity, so a bright lesion does not also mark a dark ghost on the healthy side.
5. **Score maps**, one per polarity: outlier and asymmetry evidence above their normal range
   (``intensity_floor``, ``asymmetry_floor``), the asymmetry term weighted by the slice's
   symmetry. The dark (hypointense) map is down-weighted (``dark_weight``), its outlier term
   capped (``dark_cap``) and, on symmetric slices, counted only where the pair is asymmetric:
   CSF, the falx and vessels are dark on T1, FLAIR and DWI, so dark outliers that their
   mirror shares are anatomy. Bright outliers shared by the mirror (CSF on T2) are damped
   too, less (``bright_gating``), as bilateral bright lesions exist.
6. **Components**: hysteresis on the larger of the two maps (regions above
   ``grow_threshold`` holding a seed above ``seed_threshold`` away from the brain's rim),
   ``scipy.ndimage`` connected components; the box follows the part of a component above
   ``core_fraction`` of its peak, so surrounding oedema does not inflate it. Hyper- and
   hypointense parts of one lesion (a ring-enhancing mass) stay one component; its signal
   is the polarity of most of its pixels.
7. **Confidence**: ``1 - exp(-evidence / confidence_scale)``, the evidence being the
   component's summed excess score per mille of the brain's area, so large, strong findings
   score near 1 and faint specks near 0. Greedy non-maximum suppression, then the
   ``max_boxes`` most confident.

Deterministic; about 15-30 ms per 480x480 slice on one core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from novabench.models.classical import image_analysis as ia

__all__ = [
    "Candidate",
    "Detection",
    "DetectorParams",
    "LesionAnalysis",
    "analyse_lesions",
    "detect_lesions",
]


@dataclass(frozen=True)
class Detection:
    """One box in pixels of the input image: top-left (x, y), size, confidence in [0, 1]."""

    x: float
    y: float
    width: float
    height: float
    score: float


@dataclass(frozen=True)
class DetectorParams:
    """Tunable settings (defaults chosen on the project's synthetic NOVA-like sample).

    Lengths are in working-grid pixels; scores in robust z units above the floors.
    """

    working_size: int = 240  # longest side of the working grid
    midline_size: int = 96  # longest side of the grid the midline is searched on
    smoothing_sigma: float = 1.5  # Gaussian smoothing inside the brain
    intensity_floor: float = 2.0  # outlier z-scores up to this are normal
    asymmetry_floor: float = 2.0  # asymmetry z-scores up to this are normal
    intensity_weight: float = 1.0
    asymmetry_weight: float = 1.0
    dark_weight: float = 0.6  # down-weights the hypointense map (CSF, vessels are dark)
    dark_cap: float = 4.0  # caps dark outlier evidence per pixel
    bright_gating: float = 0.75  # how far bright outliers shared by the mirror are damped
    min_symmetry: float = 0.3  # asymmetry ignored below this intensity symmetry ...
    full_symmetry: float = 0.7  # ... and fully trusted from this one on
    min_shape_symmetry: float = 0.85  # the same for the outline's symmetry
    full_shape_symmetry: float = 0.93
    seed_threshold: float = 1.5  # a component needs a pixel above this ...
    grow_threshold: float = 0.5  # ... and extends over pixels above this
    rim_fraction: float = 0.05  # no seeds within this fraction of the brain's depth
    min_area_fraction: float = 0.0005  # smallest component, as a share of the brain
    core_fraction: float = 0.2  # the box covers the part above this share of the peak
    confidence_scale: float = 30.0  # evidence giving confidence 1 - 1/e
    nms_iou: float = 0.3  # boxes overlapping a better one more than this are dropped


@dataclass(frozen=True)
class Candidate:
    """A detection with what the captioner needs to describe it."""

    detection: Detection
    signal: str  # "hyperintense" or "hypointense"
    centroid_y: float  # full-resolution pixels
    centroid_x: float
    peak: float  # highest combined score inside the component
    evidence: float  # summed excess score per mille of the brain area


@dataclass(frozen=True, eq=False)
class LesionAnalysis:
    """Intermediate results of one run, on the working grid (``factor`` x coarser)."""

    working: np.ndarray
    factor: int
    brain: np.ndarray
    midline: ia.Midline
    bright_map: np.ndarray
    dark_map: np.ndarray
    candidates: tuple[Candidate, ...]

    @property
    def detections(self) -> list[Detection]:
        return [c.detection for c in self.candidates]


def _box_iou(a: Detection, b: Detection) -> float:
    """Intersection over union of two boxes.

    Written out here (not taken from ``novabench.metrics``) so that running the detector does
    not import pandas and pycocotools.
    """
    ix = max(0.0, min(a.x + a.width, b.x + b.width) - max(a.x, b.x))
    iy = max(0.0, min(a.y + a.height, b.y + b.height) - max(a.y, b.y))
    inter = ix * iy
    union = a.width * a.height + b.width * b.height - inter
    return inter / union if union > 0 else 0.0


def _empty(image: np.ndarray, factor: int = 1) -> LesionAnalysis:
    zeros = np.zeros(image.shape, dtype=np.float32)
    return LesionAnalysis(
        working=image,
        factor=factor,
        brain=np.zeros(image.shape, dtype=bool),
        midline=ia.Midline(image.shape[0] / 2, image.shape[1] / 2, 0.0, 0.0),
        bright_map=zeros,
        dark_map=zeros,
        candidates=(),
    )


def _symmetry_weight(midline: ia.Midline, params: DetectorParams) -> float:
    """How far the asymmetry cue can be trusted: 0 for sagittal-like, 1 for symmetric slices."""

    def ramp(value: float, low: float, high: float) -> float:
        return float(np.clip((value - low) / max(high - low, 1e-6), 0.0, 1.0))

    return ramp(midline.symmetry, params.min_symmetry, params.full_symmetry) * ramp(
        midline.shape_symmetry, params.min_shape_symmetry, params.full_shape_symmetry
    )


def _score_maps(
    working: np.ndarray, brain: np.ndarray, midline: ia.Midline, params: DetectorParams
) -> tuple[np.ndarray, np.ndarray]:
    """Bright and dark evidence maps (0 outside the brain)."""
    # Normalised convolution: smooth inside the brain only, so that the dark background does
    # not bleed into the rim and look like a hypointense band.
    weight_sum = ndimage.gaussian_filter(brain.astype(np.float32), params.smoothing_sigma)
    smooth = ndimage.gaussian_filter(np.where(brain, working, 0.0), params.smoothing_sigma)
    smooth = np.where(brain, smooth / np.maximum(weight_sum, 1e-3), 0.0).astype(np.float32)
    values = smooth[brain]
    median, scale = ia.robust_location_scale(values, min_scale=0.01)
    # Tails are scored against the upper and the lower half of the brain's intensities
    # (median and MAD of each half): on a bimodal grey/white histogram the global MAD is
    # half the grey-white gap, which would hide a lesion only a little brighter than white
    # matter (enhancement on T1).
    floor = max(0.01, 0.1 * scale)
    upper, upper_scale = ia.robust_location_scale(values[values >= median], min_scale=floor)
    lower, lower_scale = ia.robust_location_scale(values[values <= median], min_scale=floor)
    z_bright = (smooth - upper) / upper_scale
    z_dark = (lower - smooth) / lower_scale

    mirror = ia.reflect(smooth, midline)
    mirror_brain = ia.reflect(brain.astype(np.float32), midline) > 0.5
    paired = brain & mirror_brain
    difference = smooth - mirror
    # The floor keeps a perfectly symmetric (template) brain from turning faint
    # interpolation differences into huge z-scores.
    _, diff_scale = ia.robust_location_scale(difference[paired], min_scale=0.25 * scale)
    z_asym = np.where(paired, difference / diff_scale, 0.0)
    # Attribute each asymmetric pair to the side farther from the median intensity.
    pair_bias = smooth + mirror - 2.0 * median
    weight = _symmetry_weight(midline, params)
    asym_bright = np.where(pair_bias > 0, np.maximum(z_asym - params.asymmetry_floor, 0.0), 0.0)
    asym_dark = np.where(pair_bias < 0, np.maximum(-z_asym - params.asymmetry_floor, 0.0), 0.0)

    bright = params.intensity_weight * np.maximum(z_bright - params.intensity_floor, 0.0)
    # CSF is dark on most sequences, so dark intensity evidence is capped.
    dark = params.intensity_weight * np.clip(z_dark - params.intensity_floor, 0.0, params.dark_cap)
    # On a symmetric slice an outlier that its mirror shares (ventricles, the falx, bilateral
    # CSF spaces) is more likely anatomy: there it counts only as far as the pair is
    # asymmetric the same way (fully so for dark outliers, ``bright_gating`` for bright ones,
    # as bilateral bright lesions exist). Where symmetry is unreliable (sagittal) it counts.
    unshared_dark = np.clip(-z_asym / (2.0 * params.asymmetry_floor), 0.0, 1.0)
    dark = dark * ((1.0 - weight) + weight * unshared_dark)
    unshared_bright = np.clip(z_asym / (2.0 * params.asymmetry_floor), 0.0, 1.0)
    gate = params.bright_gating * weight
    bright = bright * ((1.0 - gate) + gate * unshared_bright)
    asym = params.asymmetry_weight * weight
    bright = np.where(brain, bright + asym * asym_bright, 0.0).astype(np.float32)
    dark = np.where(brain, params.dark_weight * (dark + asym * asym_dark), 0.0)
    return bright, dark.astype(np.float32)


def _component_stats(
    score: np.ndarray,
    grown: np.ndarray,
    labels: np.ndarray,
    count: int,
    seeds_allowed: np.ndarray,
    params: DetectorParams,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per component: area, summed excess over the grow threshold, peak, and whether it
    holds a seed."""
    # Over the grown pixels only, with bincount and maximum.at, which are several times
    # faster here than ndimage's labelled reductions.
    ids = labels[grown]
    values = score[grown]
    n = count + 1
    areas = np.bincount(ids, minlength=n)[1:].astype(float)
    excess = np.bincount(ids, weights=values - params.grow_threshold, minlength=n)[1:]
    peaks = np.zeros(n)
    np.maximum.at(peaks, ids, values)
    seed_peaks = np.zeros(n)
    np.maximum.at(seed_peaks, ids, np.where(seeds_allowed[grown], values, 0.0))
    return areas, excess, peaks[1:], seed_peaks[1:] > params.seed_threshold


def _core_box(
    local: np.ndarray,
    region: tuple[slice, slice],
    peak: float,
    factor: int,
    shape: tuple[int, int],
    params: DetectorParams,
) -> tuple[tuple[int, int, int, int], tuple[float, float]]:
    """The box ``x0, y0, x1, y1`` in image pixels of the core around the component's peak,
    and the core's centroid (row, column) on the working grid."""
    # The box follows the part above a fraction of the peak, around the peak: a lesion's
    # oedema or a faint neighbouring area can keep the grown region connected far
    # beyond the lesion itself.
    core = local > max(params.grow_threshold, params.core_fraction * peak)
    core_labels, _ = ndimage.label(core)
    peak_at = np.unravel_index(int(np.argmax(local)), local.shape)
    core = core_labels == core_labels[peak_at]
    core_rows, core_cols = np.nonzero(core)
    r0, r1 = region[0].start + core_rows.min(), region[0].start + core_rows.max() + 1
    c0, c1 = region[1].start + core_cols.min(), region[1].start + core_cols.max() + 1
    height, width = shape
    box = (c0 * factor, r0 * factor, min(c1 * factor, width), min(r1 * factor, height))
    cy = region[0].start + float(core_rows.mean())
    cx = region[1].start + float(core_cols.mean())
    return box, (cy, cx)


def _candidate(
    box: tuple[int, int, int, int],
    centroid: tuple[float, float],
    peak: float,
    evidence: float,
    bright_share: float,
    factor: int,
    params: DetectorParams,
) -> Candidate:
    x0, y0, x1, y1 = box
    cy, cx = centroid
    confidence = 1.0 - math.exp(-evidence / params.confidence_scale)
    return Candidate(
        detection=Detection(
            float(x0), float(y0), float(x1 - x0), float(y1 - y0), round(confidence, 6)
        ),
        signal="hyperintense" if bright_share >= 0.5 else "hypointense",
        centroid_y=float(cy * factor + (factor - 1) / 2),
        centroid_x=float(cx * factor + (factor - 1) / 2),
        peak=peak,
        evidence=evidence,
    )


def _components(
    score: np.ndarray,
    is_bright: np.ndarray,
    seeds_allowed: np.ndarray,
    brain_area: int,
    factor: int,
    shape: tuple[int, int],
    params: DetectorParams,
) -> list[Candidate]:
    grown = score > params.grow_threshold
    labels, count = ndimage.label(grown)
    if count == 0:
        return []
    areas, excess, peaks, seeded = _component_stats(
        score, grown, labels, count, seeds_allowed, params
    )
    slices = ndimage.find_objects(labels)
    min_area = max(2.0, params.min_area_fraction * brain_area)
    found = []
    for i in np.nonzero(seeded & (areas >= min_area))[0]:
        region = slices[i]
        inside = labels[region] == i + 1
        local = np.where(inside, score[region], 0.0)
        box, centroid = _core_box(local, region, float(peaks[i]), factor, shape, params)
        evidence = 1000.0 * float(excess[i]) / max(brain_area, 1)
        bright_share = float(np.mean(is_bright[region][inside]))
        found.append(
            _candidate(box, centroid, float(peaks[i]), evidence, bright_share, factor, params)
        )
    return found


def _non_maximum_suppression(candidates: list[Candidate], iou: float) -> list[Candidate]:
    # Stable sort: ties keep the components' scan order, so the output is deterministic.
    ordered = sorted(candidates, key=lambda c: -c.detection.score)
    kept: list[Candidate] = []
    for cand in ordered:
        if all(_box_iou(cand.detection, k.detection) <= iou for k in kept):
            kept.append(cand)
    return kept


def analyse_lesions(image: np.ndarray, params: DetectorParams | None = None) -> LesionAnalysis:
    """Run the detector and keep its intermediate maps (all candidates, best first)."""
    params = params or DetectorParams()
    full = ia.as_float_image(image)
    working, factor = ia.downsample(full, params.working_size)
    brain = ia.brain_mask(working)
    if not brain.any():
        return _empty(working, factor)

    # The midline search runs on a coarser grid made from the working one.
    small, small_factor = ia.downsample(working, params.midline_size)
    small_brain = ia.downsample(brain.astype(np.float32), params.midline_size)[0] > 0.5
    if small_brain.any():
        midline = ia.estimate_midline(small, small_brain).scaled(small_factor)
    else:
        midline = ia.estimate_midline(working, brain)

    bright, dark = _score_maps(working, brain, midline, params)
    depth = ndimage.distance_transform_cdt(brain, metric="taxicab")
    seeds_allowed = depth > max(1.0, params.rim_fraction * float(depth.max()))
    brain_area = int(brain.sum())
    candidates = _components(
        np.maximum(bright, dark),
        bright >= dark,
        seeds_allowed,
        brain_area,
        factor,
        full.shape,
        params,
    )
    kept = _non_maximum_suppression(candidates, params.nms_iou)
    return LesionAnalysis(working, factor, brain, midline, bright, dark, tuple(kept))


def detect_lesions(
    image: np.ndarray, *, max_boxes: int = 3, params: DetectorParams | None = None
) -> list[Detection]:
    """Lesion boxes for one slice, by descending confidence, at most ``max_boxes``.

    Returns ``[]`` for slices without a detectable brain (blank or constant images).
    """
    if max_boxes <= 0:
        return []
    return analyse_lesions(image, params).detections[:max_boxes]
