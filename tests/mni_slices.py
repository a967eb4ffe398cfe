"""MNI152 test slices with known plane, sequence contrast and lesion.

Rendered from nilearn's MNI152 grey/white-matter templates (a symmetric brain); lesions
are discs of known centre and radius, so the expected box is known exactly. Shared by the
detector and captioner tests.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import ndimage

from novabench.models.classical import detector
from novabench.tasks.localization.metrics import iou_matrix

# (CSF, grey matter, white matter) intensities: T1 dark CSF and white > grey; T2 bright CSF;
# FLAIR dark CSF and white < grey; DWI low contrast, blurred and noisy.
CONTRASTS = {
    "T1": (0.12, 0.48, 0.78),
    "T2": (0.95, 0.55, 0.38),
    "FLAIR": (0.08, 0.62, 0.45),
    "DWI": (0.10, 0.50, 0.42),
}
SLICE_AT = {"axial": 0.45, "coronal": 0.5, "sagittal": 0.35}


@functools.cache
def _tissue_volumes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from nilearn import datasets

    t1 = datasets.load_mni152_template(resolution=1).get_fdata()
    grey = datasets.load_mni152_gm_template(resolution=1).get_fdata()
    white = datasets.load_mni152_wm_template(resolution=1).get_fdata()
    brain = ndimage.binary_fill_holes(t1 > 0.05)
    csf = np.clip(brain - grey - white, 0.0, 1.0) * brain
    return grey, white, csf


def _cut(volume: np.ndarray, plane: str, fraction: float) -> np.ndarray:
    """One slice, displayed as usual: anterior/superior up, anterior left on sagittal."""
    axis = {"sagittal": 0, "coronal": 1, "axial": 2}[plane]
    index = int(fraction * volume.shape[axis])
    cut = np.take(volume, index, axis=axis)
    return np.fliplr(np.rot90(cut))


def _square(cut: np.ndarray, size: int) -> np.ndarray:
    side = max(cut.shape)
    canvas = np.zeros((side, side))
    top, left = (side - cut.shape[0]) // 2, (side - cut.shape[1]) // 2
    canvas[top : top + cut.shape[0], left : left + cut.shape[1]] = cut
    zoomed = ndimage.zoom(canvas, size / side, order=1)
    return np.pad(zoomed, ((0, size - zoomed.shape[0]), (0, size - zoomed.shape[1])))[:size, :size]


@functools.cache
def render(
    plane: str = "axial",
    sequence: str = "FLAIR",
    size: int = 480,
    lesion: tuple[float, float, float, float] | None = None,
    fraction: float | None = None,
) -> np.ndarray:
    """An 8-bit slice; ``lesion`` = (row, col, radius, intensity) in pixels / 0-1."""
    grey, white, csf = (
        _square(_cut(v, plane, fraction or SLICE_AT[plane]), size) for v in _tissue_volumes()
    )
    c, g, w = CONTRASTS[sequence]
    image = c * csf + g * grey + w * white
    tissue = (grey + white + csf) > 0.3
    if sequence == "DWI":
        image = ndimage.gaussian_filter(image, 2.0)
    if lesion is not None:
        row, col, radius, value = lesion
        yy, xx = np.mgrid[:size, :size]
        disc = np.clip(radius + 0.5 - np.hypot(yy - row, xx - col), 0.0, 1.0) * tissue
        image = image * (1 - disc) + value * disc
    noise = 0.04 if sequence == "DWI" else 0.01
    image = image + np.random.default_rng(0).normal(0.0, noise, image.shape)
    image = np.clip(image, 0.0, 1.0) * ((grey + white + csf) > 0.05)
    return np.round(image * 255).astype(np.uint8)


def brain_box(image: np.ndarray) -> tuple[int, int, int, int]:
    """Rows and columns spanned by non-zero pixels: top, bottom, left, right."""
    rows = np.nonzero(image.any(axis=1))[0]
    cols = np.nonzero(image.any(axis=0))[0]
    return int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])


def lesion_at(plane: str, size: int, down: float, across: float, radius_fraction: float = 0.05):
    """A lesion position inside the brain: fractions of the brain's extent (0-1)."""
    top, bottom, left, right = brain_box(render(plane, "T1", size))
    row = top + down * (bottom - top)
    col = left + across * (right - left)
    return round(row, 1), round(col, 1), round(radius_fraction * size, 1)


def iou(detection: detector.Detection, box: tuple[float, float, float, float]) -> float:
    pred = [detection.x, detection.y, detection.width, detection.height]
    return float(iou_matrix([pred], [list(box)])[0, 0])


def disc_box(row: float, col: float, radius: float) -> tuple[float, float, float, float]:
    return (col - radius, row - radius, 2 * radius, 2 * radius)
