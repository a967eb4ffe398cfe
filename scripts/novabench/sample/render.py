"""Slice geometry and MRI contrasts: from template channels to an 8-bit image.

Images are displayed the radiological way: on axial and coronal slices the patient's
right is on the image's left; sagittal slices face left (anterior on the image's left);
superior is up. A small in-plane rotation turns the anatomy and the lesions together, so
lesion masks computed on the output grid are already in the final image frame.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
from scipy import ndimage as ndi

from novabench.sample.anatomy import (
    BRAIN,
    CHANNEL_FILL,
    HULL_DISTANCE,
    T1,
    WM,
    BrainTemplate,
)

IMAGE_SIZE = 480

T1W, T1C, T2W, FLAIR, DWI = "T1", "T1 post-contrast", "T2", "FLAIR", "DWI"
SEQUENCES = (T1W, T1C, T2W, FLAIR, DWI)
PLANES = ("axial", "coronal", "sagittal")

# plane -> (normal axis, image column direction, image row direction), MNI axes.
_PLANE_AXES = {
    "axial": (2, (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0)),
    "coronal": (1, (-1.0, 0.0, 0.0), (0.0, 0.0, -1.0)),
    "sagittal": (0, (0.0, -1.0, 0.0), (0.0, 0.0, -1.0)),
}

# Brain signal as a function of the template's T1 value (CSF ~0.25, GM ~0.65, WM ~0.87):
# reading the contrast off the real T1 keeps its partial-volume detail on every sequence.
_T1_KNOTS = np.array([0.20, 0.30, 0.45, 0.63, 0.72, 0.87, 1.00])
_BRAIN_SIGNAL = {
    T2W: np.array([1.00, 0.97, 0.78, 0.56, 0.50, 0.37, 0.33]),
    FLAIR: np.array([0.06, 0.08, 0.33, 0.62, 0.58, 0.47, 0.45]),
    DWI: np.array([0.04, 0.06, 0.22, 0.42, 0.40, 0.33, 0.32]),
}

# Outside the brain the signal follows the distance (mm) from the brain hull:
# CSF, inner table, diploe, outer table, scalp, air.
_HULL_KNOTS = np.array([-1.0, 0.6, 1.3, 3.0, 3.8, 5.0, 5.8, 7.2, 8.0, 10.2, 11.0, 11.8])
_HEAD_SIGNAL = {
    T1W: np.array([0.25, 0.22, 0.04, 0.04, 0.34, 0.34, 0.04, 0.04, 0.80, 0.74, 0.35, 0.0]),
    T1C: np.array([0.25, 0.24, 0.05, 0.05, 0.38, 0.38, 0.05, 0.05, 0.82, 0.76, 0.38, 0.0]),
    T2W: np.array([1.00, 0.95, 0.03, 0.03, 0.22, 0.22, 0.03, 0.03, 0.55, 0.50, 0.30, 0.0]),
    FLAIR: np.array([0.07, 0.07, 0.03, 0.03, 0.25, 0.25, 0.03, 0.03, 0.60, 0.55, 0.30, 0.0]),
    DWI: np.array([0.04, 0.04, 0.02, 0.02, 0.03, 0.03, 0.02, 0.02, 0.06, 0.06, 0.04, 0.0]),
}

# Normal white matter signal per sequence: the reference for "hyper-/hypointense".
WHITE_MATTER_SIGNAL = {T1W: 0.87, T1C: 0.87, T2W: 0.37, FLAIR: 0.47, DWI: 0.33}


@dataclass(frozen=True)
class SliceView:
    """One 2D slice: plane, position, field of view and in-plane rotation."""

    plane: str
    centre_mm: np.ndarray  # the 3D point at the image centre; fixes the slice position
    pixel_mm: float
    angle_deg: float
    size: int = IMAGE_SIZE

    @property
    def normal_axis(self) -> int:
        return _PLANE_AXES[self.plane][0]

    @property
    def position_mm(self) -> float:
        return float(self.centre_mm[self.normal_axis])

    def _directions(self) -> tuple[np.ndarray, np.ndarray]:
        """Unit vectors (mm) of one step right and one step down in the final image."""
        _, u, v = _PLANE_AXES[self.plane]
        u, v = np.asarray(u), np.asarray(v)
        a = np.deg2rad(self.angle_deg)
        return np.cos(a) * u + np.sin(a) * v, -np.sin(a) * u + np.cos(a) * v

    def grid_mm(self, rows: slice = slice(None), cols: slice = slice(None)) -> np.ndarray:
        """MNI coordinates (3, h, w) of the pixel centres in a window of the image."""
        right, down = self._directions()
        offsets = (np.arange(self.size) + 0.5 - self.size / 2) * self.pixel_mm
        return (
            self.centre_mm[:, None, None]
            + right[:, None, None] * offsets[cols][None, None, :]
            + down[:, None, None] * offsets[rows][None, :, None]
        )

    def to_pixel(self, point_mm: np.ndarray) -> tuple[float, float, float]:
        """(row, column, signed distance from the plane in mm) of a 3D point."""
        right, down = self._directions()
        rel = np.asarray(point_mm, dtype=float) - self.centre_mm
        col = rel @ right / self.pixel_mm + self.size / 2 - 0.5
        row = rel @ down / self.pixel_mm + self.size / 2 - 0.5
        return float(row), float(col), float(rel[self.normal_axis])


@dataclass(frozen=True)
class SliceChannels:
    """Template channels on the output grid; white matter is resampled on demand."""

    view: SliceView
    t1: np.ndarray
    brain: np.ndarray
    hull_distance: np.ndarray
    _wm_slab: np.ndarray | None
    _in_plane_origin: np.ndarray  # origin of the slab's two axes, mm

    def _slab_coords(self, rows: slice, cols: slice) -> np.ndarray:
        grid = self.view.grid_mm(rows, cols)
        axis = self.view.normal_axis
        in_plane = [a for a in range(3) if a != axis]
        return grid[in_plane] - self._in_plane_origin[:, None, None]

    def white_matter(self, rows: slice, cols: slice) -> np.ndarray:
        """White matter probability in a window (only lesion neighbourhoods need it)."""
        if self._wm_slab is None:
            shape = self.view.grid_mm(rows, cols).shape[1:]
            return np.zeros(shape, dtype=np.float32)
        coords = self._slab_coords(rows, cols)
        return ndi.map_coordinates(self._wm_slab, coords, order=1, mode="constant", cval=0.0)


def sample_channels(template: BrainTemplate, view: SliceView) -> SliceChannels:
    """Resample the template channels onto the view's pixel grid (bilinear)."""
    axis = view.normal_axis
    channels = template.channels
    # Cut the slab at the (fractional) slice position first: 2D resampling is ~2x cheaper.
    pos = view.position_mm - template.origin_mm[axis]
    i0 = int(np.clip(np.floor(pos), 0, channels.shape[axis + 1] - 2))
    frac = float(np.clip(pos - i0, 0.0, 1.0))
    inside_volume = 0.0 <= pos <= channels.shape[axis + 1] - 1
    index = [slice(None)] * 3
    slabs = {}
    for channel in (T1, BRAIN, WM, HULL_DISTANCE):
        volume = channels[channel]
        index[axis] = i0
        lower = volume[tuple(index)]
        index[axis] = i0 + 1
        slabs[channel] = lower * (1 - frac) + volume[tuple(index)] * frac
    in_plane = [a for a in range(3) if a != axis]
    result = SliceChannels(
        view=view,
        t1=np.empty(0),
        brain=np.empty(0),
        hull_distance=np.empty(0),
        _wm_slab=slabs[WM] if inside_volume else None,
        _in_plane_origin=template.origin_mm[in_plane],
    )
    coords = result._slab_coords(slice(None), slice(None))
    full = {}
    for channel in (T1, BRAIN, HULL_DISTANCE):
        fill = CHANNEL_FILL[channel]
        if inside_volume:
            full[channel] = ndi.map_coordinates(
                slabs[channel], coords, order=1, mode="constant", cval=fill
            )
        else:
            full[channel] = np.full(coords.shape[1:], fill, dtype=np.float32)
    return replace(result, t1=full[T1], brain=full[BRAIN], hull_distance=full[HULL_DISTANCE])


def base_signal(
    channels: SliceChannels, sequence: str, thickness: np.ndarray | float = 1.0
) -> np.ndarray:
    """Noise-free signal of normal anatomy for one sequence.

    ``thickness`` divides the head layers' depth (skull and scalp get thinner where > 1).
    """
    t1 = channels.t1
    # T1 images use the template as is; the other contrasts are read off it.
    brain = t1 if sequence in (T1W, T1C) else np.interp(t1, _T1_KNOTS, _BRAIN_SIGNAL[sequence])
    head = np.interp(channels.hull_distance * thickness, _HULL_KNOTS, _HEAD_SIGNAL[sequence])
    m = np.clip(channels.brain, 0.0, 1.0)
    return (m * brain + (1 - m) * head).astype(np.float32)


_ANGLE_BINS = 720


@functools.cache
def _angle_bins(size: int) -> np.ndarray:
    """Polar angle of every pixel around the image centre, as an index into 720 bins."""
    yy, xx = (np.mgrid[0:size, 0:size] + 0.5) / size - 0.5
    theta = np.arctan2(yy, xx)
    bins = np.round((theta + np.pi) / (2 * np.pi) * _ANGLE_BINS).astype(np.int32) % _ANGLE_BINS
    bins.setflags(write=False)
    return bins


def skull_thickness(view: SliceView, rng: np.random.Generator) -> np.ndarray:
    """Smoothly varying scale for the skull and scalp layers around the image."""
    theta = np.linspace(-np.pi, np.pi, _ANGLE_BINS, endpoint=False)
    scale = np.ones(_ANGLE_BINS, dtype=np.float32)
    for k in (1, 2, 3):
        scale += rng.uniform(0.03, 0.12) / k * np.cos(k * theta + rng.uniform(0, 6.3))
    return scale[_angle_bins(view.size)]


def finish_image(
    signal: np.ndarray, brain: np.ndarray, sequence: str, rng: np.random.Generator
) -> np.ndarray:
    """Blur, bias field, Rician noise and display windowing -> uint8 image."""
    size = signal.shape[0]
    # DWI is acquired at a coarse matrix; the rest only lose a little sharpness.
    sigma = rng.uniform(1.3, 1.9) if sequence == DWI else rng.uniform(0.4, 0.8)
    image = ndi.gaussian_filter(signal, sigma)
    # Smooth multiplicative bias field (coil sensitivity), a few low spatial frequencies.
    # cos(a + b) = cos a cos b - sin a sin b: two outer products instead of a 2D cosine.
    axis = np.arange(size, dtype=np.float32) / size
    bias = np.ones_like(image)
    for _ in range(3):
        fx, fy = rng.uniform(-1.2, 1.2, size=2)
        amplitude, phase = rng.uniform(0.02, 0.06), rng.uniform(0, 6.3)
        across, down = 2 * np.pi * fx * axis, 2 * np.pi * fy * axis + phase
        bias += amplitude * (
            np.outer(np.cos(down), np.cos(across)) - np.outer(np.sin(down), np.sin(across))
        )
    image = image * bias
    # Rician noise: magnitude of a complex signal with Gaussian noise in both channels.
    noise = rng.uniform(0.03, 0.05) if sequence == DWI else rng.uniform(0.012, 0.03)
    real = image + noise * rng.standard_normal(image.shape, dtype=np.float32)
    imag = noise * rng.standard_normal(image.shape, dtype=np.float32)
    image = np.sqrt(real * real + imag * imag)
    inside = image[brain > 0.5]
    top = float(np.percentile(inside, 99.7)) if inside.size else float(image.max())
    scale = 255.0 * rng.uniform(0.88, 1.0) / max(top, 1e-6)
    return np.clip(np.rint(image * scale), 0, 255).astype(np.uint8)
