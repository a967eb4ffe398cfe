"""The brain template behind the sample images, and where lesions may sit.

The anatomy is the MNI152 2009a template that nilearn ships with its package data (T1, gray
and white matter probability maps, brain mask), so nothing is downloaded. The template is
skull-stripped; a skull and scalp are added from the distance to a smoothed brain hull.
All coordinates are MNI millimetres (RAS: +x is the patient's right).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

# Channels of BrainTemplate.channels.
T1, BRAIN, WM, GM, HULL_DISTANCE = range(5)
CHANNEL_FILL = (0.0, 0.0, 0.0, 0.0, 60.0)  # value outside the volume: air, far from the head

# Where the field of view is centred in each plane (roughly the centre of the brain).
BRAIN_CENTRE_MM = np.array([0.0, -17.0, 8.0])


@dataclass(frozen=True)
class BrainTemplate:
    """Template volumes on a 1 mm grid, plus candidate lesion sites."""

    channels: np.ndarray  # (5, X, Y, Z) float32, see the channel constants above
    origin_mm: np.ndarray  # MNI coordinate of voxel (0, 0, 0)
    depth_mm: np.ndarray  # distance inside the brain mask, 2 mm grid
    sites: dict[str, np.ndarray]  # site name -> (N, 3) candidate lesion centres in mm

    def depth_at(self, point_mm: np.ndarray) -> float:
        """Distance (mm) of a point from the brain surface, 0 outside the brain."""
        index = (np.asarray(point_mm) - self.origin_mm) / 2.0
        return float(ndi.map_coordinates(self.depth_mm, index[:, None], order=1)[0])

    def value_at(self, channel: int, point_mm: np.ndarray) -> float:
        """Interpolated value of one channel at a point."""
        index = np.asarray(point_mm) - self.origin_mm
        return float(
            ndi.map_coordinates(
                self.channels[channel], index[:, None], order=1, cval=CHANNEL_FILL[channel]
            )[0]
        )


def _load_volumes() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # nilearn is imported lazily: it is slow to import and only this module needs it.
    from nilearn import datasets

    t1_img = datasets.load_mni152_template(resolution=1)
    volumes = [
        np.asarray(img.get_fdata(dtype=np.float32), dtype=np.float32)
        for img in (
            t1_img,
            datasets.load_mni152_brain_mask(resolution=1),
            datasets.load_mni152_wm_template(resolution=1),
            datasets.load_mni152_gm_template(resolution=1),
        )
    ]
    origin = np.asarray(t1_img.affine[:3, 3], dtype=float)
    return (*volumes, origin)


def _signed_hull_distance(brain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Signed distance (mm) to a smooth hull around the brain, and depth inside the brain.

    Computed on a 2 mm grid (the field is smooth, and this is 8x cheaper), then upsampled.
    """
    coarse = brain[::2, ::2, ::2] > 0.5
    # Blurring then thresholding closes the sulci and gives a skull-like envelope.
    hull = ndi.gaussian_filter(coarse.astype(np.float32), sigma=2.0) > 0.4
    outside = ndi.distance_transform_edt(~hull, sampling=2.0)
    inside = ndi.distance_transform_edt(hull, sampling=2.0)
    signed = (outside - inside).astype(np.float32)
    depth = ndi.distance_transform_edt(coarse, sampling=2.0).astype(np.float32)
    full = ndi.zoom(signed, 2.0, order=1, grid_mode=True, mode="nearest")
    full = full[: brain.shape[0], : brain.shape[1], : brain.shape[2]]
    pad = [(0, s - f) for s, f in zip(brain.shape, full.shape, strict=True)]
    return np.pad(full, pad, mode="edge"), depth


def _candidate_sites(
    t1: np.ndarray, wm: np.ndarray, gm: np.ndarray, depth: np.ndarray, origin: np.ndarray
) -> dict[str, np.ndarray]:
    """Voxel centres (mm, 2 mm grid) where each sort of lesion may be centred."""
    t1c, wmc, gmc = (v[::2, ::2, ::2] for v in (t1, wm, gm))
    idx = np.indices(depth.shape).reshape(3, -1).T
    mm = idx * 2.0 + origin
    x, y, z = mm.T
    d = depth.ravel()
    w, g = wmc.ravel(), gmc.ravel()
    posterior_fossa = (z < -8) & (y < -38)
    brainstem = (np.abs(x) < 14) & (z < -5) & (y > -45) & (y < -10)
    supratentorial = (z > -35) & ~posterior_fossa & ~brainstem
    ventricles = (depth > 10) & (t1c < 0.4)
    near_ventricle = ndi.distance_transform_edt(~ventricles, sampling=2.0).ravel()
    masks = {
        # Deep hemispheric white matter and deep gray: gliomas, lymphoma, abscesses.
        "hemisphere": supratentorial & (d >= 14) & (w + g > 0.85) & (np.abs(x) > 8),
        # Cortex and subcortical white matter: infarcts.
        "cortex": supratentorial & (d >= 3) & (d <= 12) & (g > 0.5) & (np.abs(x) > 12),
        # Grey-white junction: metastases, septic emboli.
        "junction": (d >= 5) & (d <= 22) & (w > 0.3) & (w < 0.7) & (np.abs(x) > 12),
        # Periventricular white matter: demyelinating plaques.
        "periventricular": (w > 0.8) & (near_ventricle >= 2) & (near_ventricle <= 12) & (z > -10),
        # Any deep or juxtacortical white matter: scattered plaques.
        "white_matter": supratentorial & (w > 0.85) & (d >= 6),
        # Brain surface over the convexities: meningiomas and other dural masses.
        "convexity": (d > 0) & (d <= 4) & (z > 5) & (z < 60),
        # Middle cranial fossa surface near the temporal pole: arachnoid cysts.
        "temporal_fossa": (d > 0)
        & (d <= 6)
        & (z < -8)
        & (z > -40)
        & (y > -20)
        & (y < 15)
        & (np.abs(x) > 28),
        # Cerebellar hemispheres.
        "cerebellum": (z < -22) & (y < -45) & (d >= 8) & (np.abs(x) > 10),
        # Corpus callosum.
        "callosal": (np.abs(x) < 8) & (w > 0.8) & (z > 5) & (z < 30),
    }
    return {name: mm[mask] for name, mask in masks.items()}


@functools.cache
def load_template() -> BrainTemplate:
    """Load the template once per process."""
    t1, brain, wm, gm, origin = _load_volumes()
    hull_distance, depth = _signed_hull_distance(brain)
    channels = np.stack([t1, brain, wm, gm, hull_distance]).astype(np.float32)
    sites = _candidate_sites(t1, wm, gm, depth, origin)
    return BrainTemplate(channels=channels, origin_mm=origin, depth_mm=depth, sites=sites)


def describe_location(template: BrainTemplate, centre_mm: np.ndarray, *, extra_axial=False) -> str:
    """Name the anatomical region of a point, in radiology report wording.

    Hand-written coordinate rules: nilearn ships no anatomical atlas offline, and the
    coarse names a figure legend uses (lobe, deep gray, posterior fossa) are easy to bound.
    """
    x, y, z = (float(v) for v in centre_mm)
    side = "left" if x < 0 else "right"
    wm = template.value_at(WM, centre_mm)
    depth = template.depth_at(centre_mm)
    if z < -22 and y < -42:
        return "cerebellar vermis" if abs(x) < 8 else f"{side} cerebellar hemisphere"
    if abs(x) < 14 and z < -8 and -42 < y < -12:
        return "pons" if z < -20 else "midbrain"
    lobe = _lobe(x, y, z)
    if extra_axial:
        if abs(x) < 12 and z > 10:
            return "falx" if abs(x) < 3 else f"{side} parafalcine region"
        if lobe == "temporal lobe" and z < -5:
            return f"{side} middle cranial fossa"
        return f"{side} {lobe.removesuffix(' lobe')} convexity"
    if abs(x) < 10 and wm > 0.6 and 0 < z < 32:
        part = "splenium" if y < -30 else ("genu" if y > 12 else "body")
        return f"{part} of the corpus callosum"
    if abs(x) < 30 and -35 < y < 22 and -8 < z < 20 and depth > 18 and wm < 0.6:
        return f"{side} thalamus" if y < -10 and abs(x) < 22 else f"{side} basal ganglia"
    if 28 < abs(x) < 42 and -20 < y < 15 and -5 < z < 18 and depth > 8 and wm < 0.5:
        return f"{side} insula"
    if wm > 0.6 and depth > 14 and 8 < z < 38 and abs(x) < 36 and y > -50:
        return f"{side} corona radiata" if z < 30 else f"{side} centrum semiovale"
    return f"{side} {lobe}"


def _lobe(x: float, y: float, z: float) -> str:
    if y < -72 or (y < -60 and z < 5):
        return "occipital lobe"
    if z < 8 and abs(x) > 28 and y > -65:
        return "temporal lobe"
    if y < -22:
        return "parietal lobe"
    return "frontal lobe"
