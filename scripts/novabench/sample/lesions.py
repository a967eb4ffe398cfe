"""Lesions: 3D shapes in template space, their MRI signal, and their gold boxes.

A lesion is a perturbed ellipsoid in MNI millimetres, so every slice of a case (any plane,
any sequence) cuts the same lesion. It has a body (solid tumor, enhancing rim, plaque,
fluid...), optionally a core (necrosis, pus) and a halo of edema that spreads along white
matter. Fractions of each compartment are evaluated on the pixel grid of the final image
frame, and mixed with the normal anatomy by their signal on the rendered sequence.

Gold boxes: one box per connected component of the lesion itself (body and core); the
surrounding edema is *not* boxed, so a lesion's box is the same on every sequence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage as ndi

from novabench.sample.anatomy import BRAIN_CENTRE_MM, BrainTemplate
from novabench.sample.render import DWI, FLAIR, T1C, T1W, T2W, SliceChannels, SliceView

# Kinds of case (meta.lesion_kind).
MASS = "mass"
RING = "ring_enhancing"
INFARCT = "infarct"
WHITE_MATTER = "white_matter_lesions"
METASTASES = "metastases"
CYST = "cyst"
EXTRA_AXIAL = "extra_axial_mass"
NORMAL = "normal"
LESION_KINDS = (MASS, RING, INFARCT, WHITE_MATTER, METASTASES, CYST, EXTRA_AXIAL, NORMAL)

# Smallest lesion cross-section that is drawn and boxed (pixels); smaller cuts are dropped.
MIN_AREA_PX = 24


def _signals(t1: float, t1c: float, t2: float, flair: float, dwi: float) -> dict[str, float]:
    return {T1W: t1, T1C: t1c, T2W: t2, FLAIR: flair, DWI: dwi}


# Signal of each compartment (normal white matter: T1 0.87, T2 0.37, FLAIR 0.47, DWI 0.33).
COMPARTMENT_SIGNAL = {
    "edema": _signals(0.55, 0.55, 0.85, 0.82, 0.40),
    "solid": _signals(0.58, 0.60, 0.76, 0.80, 0.45),  # non-enhancing infiltrative tumor
    "enhancing": _signals(0.60, 1.05, 0.62, 0.70, 0.55),
    "lymphoma": _signals(0.58, 1.00, 0.50, 0.62, 0.85),  # hypercellular: dark T2, bright DWI
    "rim": _signals(0.62, 1.08, 0.30, 0.40, 0.42),  # collagenous capsule: dark on T2
    "necrosis": _signals(0.32, 0.34, 0.93, 0.62, 0.15),
    "pus": _signals(0.40, 0.42, 0.90, 0.74, 1.00),
    "infarct": _signals(0.55, 0.58, 0.82, 0.80, 1.00),
    "plaque": _signals(0.60, 0.62, 0.86, 0.90, 0.42),
    "plaque_active": _signals(0.58, 0.98, 0.88, 0.92, 0.50),
    "fluid": _signals(0.24, 0.24, 1.00, 0.07, 0.05),
    "epidermoid": _signals(0.30, 0.30, 0.95, 0.42, 0.95),
    "meningioma": _signals(0.62, 1.02, 0.58, 0.62, 0.50),
    "melanoma": _signals(0.98, 1.05, 0.40, 0.55, 0.45),  # melanin shortens T1
}
ENHANCING = frozenset(("enhancing", "lymphoma", "rim", "plaque_active", "meningioma", "melanoma"))


@dataclass(frozen=True)
class LesionKind:
    """How the lesions of one kind of case are drawn."""

    count: tuple[int, int] = (1, 1)
    radius_mm: tuple[float, float] = (8.0, 16.0)
    aspect: tuple[float, float] = (0.75, 1.0)  # minor / major radius
    irregularity: float = 0.15  # amplitude of the boundary's lobulation
    # (weight, body, core) choices per lesion.
    variants: tuple[tuple[float, str, str | None], ...] = ((1.0, "solid", None),)
    core_ratio: tuple[float, float] = (0.6, 0.75)
    core_irregularity: float = 0.1
    edema_ratio: tuple[float, float] | None = None  # outer edema boundary / lesion radius
    sites: tuple[str, ...] = ("hemisphere",)
    confine: str = "brain"  # brain | tissue (not CSF) | intracranial (inside the skull)
    radial: bool = False  # long axis points away from the ventricles (Dawson's fingers)


KINDS = {
    MASS: LesionKind(radius_mm=(11, 22), irregularity=0.2, edema_ratio=(1.4, 2.0)),
    RING: LesionKind(
        radius_mm=(9, 18),
        variants=((1.0, "rim", "necrosis"),),
        core_ratio=(0.55, 0.75),
        core_irregularity=0.2,
        edema_ratio=(1.7, 2.5),
    ),
    INFARCT: LesionKind(
        radius_mm=(7, 17),
        aspect=(0.5, 0.9),
        irregularity=0.3,
        variants=((1.0, "infarct", None),),
        sites=("cortex",),
        confine="tissue",
    ),
    WHITE_MATTER: LesionKind(
        count=(14, 28),
        radius_mm=(4.0, 8.0),
        aspect=(0.45, 0.7),
        irregularity=0.1,
        variants=((0.75, "plaque", None), (0.25, "plaque_active", None)),
        sites=("periventricular", "periventricular", "white_matter"),
        confine="tissue",
        radial=True,
    ),
    METASTASES: LesionKind(
        count=(3, 8),
        radius_mm=(4.0, 11.0),
        aspect=(0.8, 1.0),
        irregularity=0.08,
        variants=((0.6, "enhancing", None), (0.4, "rim", "necrosis")),
        core_ratio=(0.5, 0.7),
        edema_ratio=(2.0, 3.2),
        sites=("junction", "junction", "junction", "cerebellum"),
    ),
    CYST: LesionKind(
        radius_mm=(9, 20),
        aspect=(0.65, 0.95),
        irregularity=0.06,
        variants=((1.0, "fluid", None),),
        sites=("temporal_fossa",),
        confine="intracranial",
    ),
    EXTRA_AXIAL: LesionKind(
        radius_mm=(11, 20),
        aspect=(0.7, 0.95),
        irregularity=0.06,
        variants=((1.0, "meningioma", None),),
        edema_ratio=(1.0, 1.35),
        sites=("convexity",),
        confine="intracranial",
    ),
    NORMAL: LesionKind(count=(0, 0)),
}


@dataclass(frozen=True)
class _Shape:
    """Low-frequency lobulation of an ellipsoid's surface."""

    directions: np.ndarray  # (K, 3) unit vectors
    amplitudes: np.ndarray  # (K,)
    frequencies: np.ndarray  # (K,)
    phases: np.ndarray  # (K,)

    @staticmethod
    def random(rng: np.random.Generator, amplitude: float, k: int = 4) -> _Shape:
        directions = rng.normal(size=(k, 3))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        amplitudes = rng.dirichlet(np.ones(k)) * amplitude
        return _Shape(directions, amplitudes, rng.uniform(1.0, 3.0, k), rng.uniform(0, 6.3, k))

    @property
    def max_amplitude(self) -> float:
        return float(self.amplitudes.sum())

    def scale(self, unit: np.ndarray) -> np.ndarray:
        """1 + lobulation along unit directions (3, ...)."""
        proj = np.tensordot(self.directions, unit, axes=(1, 0))  # (K, ...)
        expand = (-1,) + (1,) * (proj.ndim - 1)
        waves = np.cos(
            np.pi * self.frequencies.reshape(expand) * proj + self.phases.reshape(expand)
        )
        return 1.0 + np.tensordot(self.amplitudes, waves, axes=(0, 0))


@dataclass(frozen=True)
class _Texture:
    """Smooth 3D signal heterogeneity inside a lesion: a few plane waves, sd ~1."""

    wavevectors: np.ndarray  # (K, 3) radians per mm
    phases: np.ndarray  # (K,)

    @staticmethod
    def random(rng: np.random.Generator, k: int = 10) -> _Texture:
        # Enough waves in random directions that no stripe pattern shows.
        directions = rng.normal(size=(k, 3))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        wavelengths = rng.uniform(5.0, 14.0, size=(k, 1))
        return _Texture(2 * np.pi * directions / wavelengths, rng.uniform(0, 6.3, k))

    def at(self, local_mm: np.ndarray) -> np.ndarray:
        """Texture at points (3, ...) relative to the lesion centre."""
        expand = (-1,) + (1,) * (local_mm.ndim - 1)
        waves = np.cos(
            np.tensordot(self.wavevectors, local_mm, axes=1) + self.phases.reshape(expand)
        )
        return waves.sum(axis=0) * np.sqrt(2.0 / len(self.phases))


@dataclass(frozen=True)
class Lesion:
    """One lesion in template space."""

    centre_mm: np.ndarray
    radii_mm: np.ndarray  # semi-axes along the columns of `rotation`
    rotation: np.ndarray  # (3, 3) orthonormal
    shape: _Shape
    texture: _Texture
    body: str
    core: str | None = None
    core_ratio: float = 0.0
    core_shape: _Shape | None = None
    edema_ratio: float = 1.0
    edema_shape: _Shape | None = None
    confine: str = "brain"

    @property
    def enhancing(self) -> bool:
        return self.body in ENHANCING

    @property
    def mean_radius_mm(self) -> float:
        return float(np.prod(self.radii_mm) ** (1 / 3))

    def offset(self, points: np.ndarray) -> np.ndarray:
        """Points (3, ...) relative to the lesion centre."""
        return points - self.centre_mm.reshape((3,) + (1,) * (points.ndim - 1))

    def extent_mm(self) -> float:
        """Radius of a sphere that contains the lesion and its edema."""
        reach = float(self.radii_mm.max()) * (1 + self.shape.max_amplitude)
        if self.edema_shape is not None:
            reach *= self.edema_ratio * (1 + self.edema_shape.max_amplitude)
        return reach

    def fractions(
        self, points: np.ndarray, confine: np.ndarray, white_matter: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Body, core and edema fractions at points (3, ...), each in [0, 1]."""
        local = np.tensordot(self.rotation.T, self.offset(points), axes=1)
        q = local / self.radii_mm.reshape(3, 1, 1)
        r = np.sqrt((q * q).sum(axis=0)) + 1e-9
        unit = q / r
        # Normalised radius: 1 on the lobulated surface. Edges are soft over ~1 mm.
        edge = 1.0 / self.mean_radius_mm
        rho = r / self.shape.scale(unit)
        inside = np.clip(0.5 + (1.0 - rho) / edge, 0.0, 1.0) * confine
        core = np.zeros_like(inside)
        if self.core is not None and self.core_shape is not None:
            rho_core = r / self.core_shape.scale(unit)
            core = np.clip(0.5 + (self.core_ratio - rho_core) / edge, 0.0, 1.0) * inside
        edema = np.zeros_like(inside)
        if self.edema_shape is not None:
            rho_edema = r / self.edema_shape.scale(unit)
            # Edema fades out over a few mm and follows the white matter tracts.
            fade = np.clip((self.edema_ratio - rho_edema) / (3.0 / self.mean_radius_mm), 0, 1)
            edema = fade * (1.0 - inside) * white_matter
        return inside - core, core, edema


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def _radial_rotation(centre: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Rotation whose first axis points from the ventricles towards the centre."""
    axis = centre - (BRAIN_CENTRE_MM + np.array([0.0, 0.0, 8.0]))
    axis = axis / (np.linalg.norm(axis) + 1e-9)
    other = np.cross(axis, rng.normal(size=3))
    other /= np.linalg.norm(other) + 1e-9
    return np.stack([axis, other, np.cross(axis, other)], axis=1)


def sample_lesions(
    kind: LesionKind, template: BrainTemplate, rng: np.random.Generator
) -> list[Lesion]:
    """Draw the lesions of one case."""
    n = int(rng.integers(kind.count[0], kind.count[1] + 1))
    weights = np.array([v[0] for v in kind.variants])
    lesions = []
    for _ in range(n):
        site = kind.sites[int(rng.integers(len(kind.sites)))]
        candidates = template.sites[site]
        centre = candidates[int(rng.integers(len(candidates)))] + rng.uniform(-1, 1, 3)
        major = rng.uniform(*kind.radius_mm)
        radii = major * np.array([1.0, rng.uniform(*kind.aspect), rng.uniform(*kind.aspect)])
        rotation = _radial_rotation(centre, rng) if kind.radial else _random_rotation(rng)
        _, body, core = kind.variants[int(rng.choice(len(weights), p=weights / weights.sum()))]
        edema_ratio = 1.0 if kind.edema_ratio is None else float(rng.uniform(*kind.edema_ratio))
        lesions.append(
            Lesion(
                centre_mm=centre,
                radii_mm=radii,
                rotation=rotation,
                shape=_Shape.random(rng, kind.irregularity),
                texture=_Texture.random(rng),
                body=body,
                core=core,
                core_ratio=float(rng.uniform(*kind.core_ratio)),
                core_shape=_Shape.random(rng, kind.core_irregularity) if core else None,
                edema_ratio=edema_ratio,
                edema_shape=_Shape.random(rng, 0.3) if kind.edema_ratio else None,
                confine=kind.confine,
            )
        )
    return lesions


@dataclass
class LesionLayer:
    """Lesion compartments drawn on one slice, in the final image frame."""

    fractions: dict[str, np.ndarray] = field(default_factory=dict)
    edema: np.ndarray | None = None
    # Texture of the lesions, weighted by how much lesion each pixel holds.
    texture_sum: np.ndarray | None = None
    texture_weight: np.ndarray | None = None
    visible: list[int] = field(default_factory=list)  # indices of lesions shown and boxed
    boxes: list[tuple[int, int, int, int]] = field(default_factory=list)  # x, y, w, h (px)

    def total(self, shape: tuple[int, int]) -> np.ndarray:
        total = np.zeros(shape, dtype=np.float32)
        for frac in self.fractions.values():
            total += frac
        return total


def draw_lesions(lesions: list[Lesion], view: SliceView, channels: SliceChannels) -> LesionLayer:
    """Cut the lesions with the slice: compartment fractions and gold boxes."""
    shape = channels.brain.shape
    layer = LesionLayer()
    brain = np.clip(channels.brain, 0, 1)
    cuts: list[tuple[int, tuple[slice, slice], np.ndarray]] = []  # lesions cut by the slice
    for index, lesion in enumerate(lesions):
        row, col, offset = view.to_pixel(lesion.centre_mm)
        reach = lesion.extent_mm()
        if abs(offset) >= reach:
            continue
        half = int(np.ceil(np.sqrt(reach**2 - offset**2) / view.pixel_mm)) + 2
        r0, r1 = max(int(row) - half, 0), min(int(row) + half + 2, shape[0])
        c0, c1 = max(int(col) - half, 0), min(int(col) + half + 2, shape[1])
        if r0 >= r1 or c0 >= c1:
            continue
        patch = (slice(r0, r1), slice(c0, c1))
        if lesion.confine == "tissue":
            # Not CSF: infarcts and plaques spare sulci and ventricles.
            confine = np.clip((channels.t1[patch] - 0.35) / 0.25, 0, 1) * brain[patch]
        elif lesion.confine == "intracranial":
            confine = np.clip(0.5 - channels.hull_distance[patch], 0, 1)
        else:
            confine = brain[patch]
        wm = channels.white_matter(*patch)
        white_matter = np.clip(wm * 1.2 + 0.2, 0, 1) * brain[patch]
        points = channels.view.grid_mm(*patch)
        side = float(np.sign(lesion.centre_mm[0]))
        if abs(lesion.centre_mm[0]) > 6:
            # The falx: a lesion off the midline stays in its own hemisphere.
            falx = np.clip(0.5 + side * points[0], 0, 1)
            confine = confine * falx
            white_matter = white_matter * falx
        body, core, edema = lesion.fractions(points, confine, white_matter)
        own = body + core > 0.5
        if np.count_nonzero(own) < MIN_AREA_PX:
            continue
        cuts.append((index, patch, own))
        for name, frac in ((lesion.body, body), (lesion.core, core)):
            if name is None:
                continue
            full = layer.fractions.setdefault(name, np.zeros(shape, dtype=np.float32))
            np.maximum(full[patch], frac, out=full[patch])
        if lesion.edema_shape is not None:
            if layer.edema is None:
                layer.edema = np.zeros(shape, dtype=np.float32)
            np.maximum(layer.edema[patch], edema, out=layer.edema[patch])
        if layer.texture_sum is None:
            layer.texture_sum = np.zeros(shape, dtype=np.float32)
            layer.texture_weight = np.zeros(shape, dtype=np.float32)
        weight = body + core + edema
        layer.texture_sum[patch] += weight * lesion.texture.at(lesion.offset(points))
        layer.texture_weight[patch] += weight
    _gold_boxes(layer, shape)
    if cuts:
        kept = layer.total(shape) > 0.5
        layer.visible = [index for index, patch, own in cuts if np.any(kept[patch] & own)]
    return layer


def _gold_boxes(layer: LesionLayer, shape: tuple[int, int]) -> None:
    """One box per connected lesion; fragments too small to box are erased."""
    if not layer.fractions:
        return
    mask = layer.total(shape) > 0.5
    labels, _ = ndi.label(mask, structure=np.ones((3, 3)))
    for k, found in enumerate(ndi.find_objects(labels), start=1):
        if found is None:
            continue
        rows, cols = found
        component = labels[found] == k
        if np.count_nonzero(component) < MIN_AREA_PX:
            # A sliver at the edge of a cut: erase it (and its soft rim) rather than box it.
            erase = ndi.binary_dilation(labels == k, iterations=2)
            for frac in layer.fractions.values():
                frac[erase] = 0.0
            continue
        layer.boxes.append((cols.start, rows.start, cols.stop - cols.start, rows.stop - rows.start))


def compose(base: np.ndarray, layer: LesionLayer, sequence: str) -> np.ndarray:
    """Mix the lesion compartments into the normal anatomy's signal."""
    if layer.texture_sum is None or layer.texture_weight is None:
        return base
    total = layer.total(base.shape)
    scale = 1.0 / np.maximum(total, 1.0)
    total = total * scale
    edema = np.zeros_like(base) if layer.edema is None else np.minimum(layer.edema, 1 - total)
    texture = layer.texture_sum / np.maximum(layer.texture_weight, 1e-6)
    mottle = 1.0 + 0.07 * texture
    lesion = edema * COMPARTMENT_SIGNAL["edema"][sequence]
    for name, frac in layer.fractions.items():
        lesion += frac * scale * COMPARTMENT_SIGNAL[name][sequence]
    return base * (1.0 - total - edema) + lesion * mottle
