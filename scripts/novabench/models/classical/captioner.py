"""Image-analysis captioner: a radiology-style sentence from one brain MRI slice.

No training and no weights. It reads four things off the image and writes them out:

- **Sequence**, from tissue contrast (``image_analysis.tissue_statistics``): low signal to
  noise means diffusion-weighted (DWI); CSF as the brightest class, or a long bright tail,
  means T2-weighted; otherwise CSF is dark and white matter brighter than grey matter means
  T1-weighted, white matter darker than grey matter FLAIR. A T1-weighted slice with a
  hyperintense candidate finding (even a faint one, ``ENHANCEMENT_CONFIDENCE``) is called
  post-contrast T1-weighted, because on T1 most lesions are dark unless they enhance. SWI,
  ADC and other sequences are not recognised and fall into the nearest of these five.
- **Plane**, from the brain's outline: sagittal slices are not left-right symmetric (their
  outline does not match its mirror image about the best midline); axial slices are longer
  front to back than wide, coronal ones about as wide as tall or narrowing towards the
  brainstem.
- **Findings**, from the lesion detector (``.detector``): the most confident one if
  at or above ``min_confidence``, further ones from ``ADDITIONAL_CONFIDENCE``. Each gets a
  signal (hyper- or hypointense, "enhancing" on post-contrast T1), a side (radiological
  convention: the patient's left is on the image's right; none on sagittal slices) and a
  rough region from its position within the brain for the plane (sagittal slices are
  assumed to face left, as usually displayed).
- **Sentence**: one of a few templates, e.g. "Axial FLAIR image shows a hyperintense lesion in
  the left frontal lobe." or "Coronal T2-weighted image without focal abnormality."
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from novabench.models.classical import detector
from novabench.models.classical import image_analysis as ia

__all__ = [
    "PLANES",
    "SEQUENCES",
    "UNKNOWN",
    "ImageFindings",
    "LesionFinding",
    "analyse_image",
    "caption_image",
    "estimate_plane",
    "estimate_sequence",
    "write_caption",
]

SEQUENCES = ("T1", "T1 post-contrast", "T2", "FLAIR", "DWI")
PLANES = ("axial", "coronal", "sagittal")
UNKNOWN = "unknown"

# How each sequence is written in a caption.
SEQUENCE_WORDS = {
    "T1": "T1-weighted",
    "T1 post-contrast": "post-contrast T1-weighted",
    "T2": "T2-weighted",
    "FLAIR": "FLAIR",
    "DWI": "diffusion-weighted (DWI)",
}

# Sequence thresholds (see ``estimate_sequence``).
DWI_NOISE = 0.06  # pixel noise / median brain intensity above which the slice is DWI
T2_BRIGHT_TAIL = 1.55  # 98th percentile / median above which CSF must be bright
T2_BRIGHT_TAIL_WITH_CSF = 1.35  # the same, when the CSF class is already the brightest

# Plane thresholds (see ``estimate_plane``).
SAGITTAL_SHAPE_SYMMETRY = 0.88  # outline-vs-mirror overlap below which a slice may be sagittal
SAGITTAL_MAX_SYMMETRY = 0.65  # ... unless its intensities are this symmetric
AXIAL_MIN_ASPECT = 1.0  # height / width of the brain at or above which a slice may be axial
AXIAL_MIN_BOTTOM_WIDTH = 0.6  # width near the bottom / widest width, below: coronal

# Findings.
MIN_CONFIDENCE = 0.25
# Further findings are mentioned only from this confidence on.
ADDITIONAL_CONFIDENCE = 0.5
# A hyperintense candidate at least this confident makes a T1-weighted slice post-contrast.
ENHANCEMENT_CONFIDENCE = 0.2
MIDLINE_BAND = 0.06  # fraction of the brain's half-width counted as "midline"


@dataclass(frozen=True)
class LesionFinding:
    """One finding as the caption describes it."""

    signal: str  # "hyperintense", "hypointense" or "enhancing"
    side: str | None  # "left", "right", "midline"; None on sagittal slices
    region: str  # e.g. "frontal", "periventricular", "posterior fossa"
    size: str  # "small", "" or "large"
    confidence: float
    box: detector.Detection


@dataclass(frozen=True)
class ImageFindings:
    """What the captioner read off one slice."""

    sequence: str
    plane: str
    lesions: list[LesionFinding] = field(default_factory=list)
    symmetry: float = 0.0
    shape_symmetry: float = 0.0
    tissue: ia.TissueStatistics | None = None

    @property
    def abnormal(self) -> bool:
        return bool(self.lesions)


def estimate_sequence(tissue: ia.TissueStatistics, *, bright_finding: bool = False) -> str:
    """Sequence name (one of ``SEQUENCES``) from the slice's tissue contrast."""
    if tissue.median <= 0:
        return UNKNOWN
    if tissue.noise >= DWI_NOISE:
        return "DWI"
    if tissue.bright_tail >= T2_BRIGHT_TAIL or (
        tissue.csf_is_bright and tissue.bright_tail >= T2_BRIGHT_TAIL_WITH_CSF
    ):
        return "T2"
    if tissue.white_brighter_than_grey:
        return "T1 post-contrast" if bright_finding else "T1"
    return "FLAIR"


@dataclass(frozen=True)
class _Outline:
    top: int
    bottom: int
    left: int
    right: int
    aspect: float  # height / width
    bottom_width: float  # width at 85% of the height / widest width


def _outline(brain: np.ndarray) -> _Outline:
    rows = np.nonzero(brain.any(axis=1))[0]
    cols = np.nonzero(brain.any(axis=0))[0]
    top, bottom, left, right = int(rows[0]), int(rows[-1]), int(cols[0]), int(cols[-1])
    widths = brain[top : bottom + 1].sum(axis=1)
    height = bottom - top + 1
    near_bottom = widths[round(0.85 * (height - 1))]
    return _Outline(
        top,
        bottom,
        left,
        right,
        aspect=height / (right - left + 1),
        bottom_width=float(near_bottom / max(widths.max(), 1)),
    )


def estimate_plane(brain: np.ndarray, midline: ia.Midline) -> str:
    """Plane name (one of ``PLANES``) from the brain's outline and symmetry."""
    if not brain.any():
        return UNKNOWN
    if (
        midline.shape_symmetry < SAGITTAL_SHAPE_SYMMETRY
        and midline.symmetry < SAGITTAL_MAX_SYMMETRY
    ):
        return "sagittal"
    outline = _outline(brain)
    if outline.aspect >= AXIAL_MIN_ASPECT and outline.bottom_width >= AXIAL_MIN_BOTTOM_WIDTH:
        return "axial"
    return "coronal"


def _region(plane: str, down: float, forward: float, lateral: float) -> str:
    """Rough region name from the position in the brain's bounding box.

    ``down`` runs 0 (top) to 1 (bottom), ``forward`` 0 (back) to 1 (front, sagittal only) and
    ``lateral`` 0 (midline) to 1 (the brain's edge). Deliberately coarse: slice level is
    unknown, so e.g. a posterior axial finding is "occipital" whatever the level.
    """
    if plane == "axial":
        if down < 0.33:
            return "frontal"
        if down > 0.72:
            return "occipital"
        return "periventricular" if lateral < 0.35 else "parietal"
    if plane == "coronal":
        if down > 0.65 and lateral > 0.45:
            return "temporal"
        if down > 0.75:
            return "posterior fossa"
        if lateral < 0.35 and down > 0.3:
            return "periventricular"
        return "frontoparietal"
    # sagittal, anterior assumed on the image's left
    if forward > 0.65:
        return "frontal"
    if forward < 0.4 and down > 0.6:
        return "posterior fossa"
    if forward < 0.3:
        return "occipital"
    return "parietal" if down < 0.45 else "temporal"


def _describe(
    candidate: detector.Candidate,
    plane: str,
    sequence: str,
    brain: np.ndarray,
    midline: ia.Midline,
    factor: int,
) -> LesionFinding:
    outline = _outline(brain)
    # Brain extent in full-resolution pixels (working pixel k covers [f*k, f*k + f)).
    top, bottom = outline.top * factor, (outline.bottom + 1) * factor
    left, right = outline.left * factor, (outline.right + 1) * factor
    cy, cx = candidate.centroid_y, candidate.centroid_x
    down = (cy - top) / max(bottom - top, 1)
    forward = 1.0 - (cx - left) / max(right - left, 1)
    line = midline.scaled(factor)
    offset = line.side(cy, cx)
    lateral = abs(offset) / max((right - left) / 2, 1)
    side: str | None = None
    if plane != "sagittal":
        # Radiological convention: the image's right is the patient's left.
        side = "midline" if lateral < MIDLINE_BAND else ("left" if offset > 0 else "right")
    signal = candidate.signal
    if sequence == "T1 post-contrast" and signal == "hyperintense":
        signal = "enhancing"
    box = candidate.detection
    brain_area = float(brain.sum()) * factor * factor
    share = box.width * box.height / max(brain_area, 1.0)
    size = "small" if share < 0.005 else ("large" if share > 0.08 else "")
    return LesionFinding(
        signal=signal,
        side=side,
        region=_region(plane, float(down), float(forward), float(lateral)),
        size=size,
        confidence=float(box.score),
        box=box,
    )


def analyse_image(
    image: np.ndarray,
    *,
    min_confidence: float = MIN_CONFIDENCE,
    max_findings: int = 3,
    params: detector.DetectorParams | None = None,
) -> ImageFindings:
    """Sequence, plane and findings of one slice (see the module docstring)."""
    analysis = detector.analyse_lesions(image, params)
    if not analysis.brain.any():
        return ImageFindings(sequence=UNKNOWN, plane=UNKNOWN)
    suspicious = (analysis.bright_map > 0) | (analysis.dark_map > 0)
    tissue = ia.tissue_statistics(analysis.working, analysis.brain, analysis.factor, suspicious)
    confident = [c for c in analysis.candidates if c.detection.score >= min_confidence]
    bright = any(
        c.signal == "hyperintense" and c.detection.score >= ENHANCEMENT_CONFIDENCE
        for c in analysis.candidates
    )
    sequence = estimate_sequence(tissue, bright_finding=bright)
    plane = estimate_plane(analysis.brain, analysis.midline)
    # The main finding needs ``min_confidence``; further ones a higher bar, as a caption
    # listing faint candidates would mostly list false positives.
    chosen = confident[:1] + [
        c for c in confident[1:] if c.detection.score >= max(min_confidence, ADDITIONAL_CONFIDENCE)
    ]
    lesions = [
        _describe(c, plane, sequence, analysis.brain, analysis.midline, analysis.factor)
        for c in chosen[:max_findings]
    ]
    return ImageFindings(
        sequence=sequence,
        plane=plane,
        lesions=lesions,
        symmetry=analysis.midline.symmetry,
        shape_symmetry=analysis.midline.shape_symmetry,
        tissue=tissue,
    )


LOBES = frozenset({"frontal", "parietal", "occipital", "temporal"})


def _place(finding: LesionFinding) -> str:
    noun = "lobe" if finding.region in LOBES else "region"
    side = f"{finding.side} " if finding.side else ""
    return f"the {side}{finding.region} {noun}"


def write_caption(findings: ImageFindings) -> str:
    """The caption sentence(s) for ``findings``."""
    if findings.sequence == UNKNOWN or findings.plane == UNKNOWN:
        return "MRI slice without recognisable brain tissue; no assessment possible."
    view = f"{findings.plane.capitalize()} {SEQUENCE_WORDS[findings.sequence]} image"
    if not findings.lesions:
        return f"{view} without focal abnormality."
    main = findings.lesions[0]
    noun = "focus" if main.size == "small" else "lesion"
    words = " ".join(w for w in (main.size, main.signal, noun) if w)
    article = "an" if words[0] in "aeiou" else "a"
    sentence = f"{view} shows {article} {words} in {_place(main)}."
    others: list[str] = []
    for finding in findings.lesions[1:]:
        place = _place(finding)
        if place != _place(main) and place not in others:
            others.append(place)
    if others:
        more = "lesion" if len(others) == 1 else "lesions"
        sentence += f" Additional {more} in {' and '.join(others)}."
    return sentence


def caption_image(image: np.ndarray) -> str:
    """One or two radiology-style sentences describing the slice."""
    return write_caption(analyse_image(image))
