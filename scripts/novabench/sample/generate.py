"""Write a NOVA-like sample dataset in the layout of the current Hugging Face release.

    out_dir/data/nova-v1.parquet   one row per image, rows shuffled (not in filename order)
    out_dir/images/caseNNNN_MMM.png   8-bit grayscale, 480 x 480

Everything is drawn from ``numpy.random.default_rng`` streams keyed by the seed: one per
case (``[seed, 0, case]``), one per block of case kinds (``[seed, 1, block]``) and one for
the row order (``[seed, 2]``). The same seed and arguments give byte-identical files with
the same library versions; case k is the same whatever ``n_cases`` is.

Decisions:
- A gold box covers the pixels where a lesion (body and core) fills at least half the pixel,
  one box per connected lesion: pixels x .. x + width - 1 and y .. y + height - 1. Edema is
  not boxed (see ``lesions``).
- Every image of a lesion case is aimed through a lesion; if six aims in a row miss every
  lesion, the image is kept as lesion-free (null boxes, "normal" caption). None of the
  9,159 images of a 2,810-case run needed this.
- meta.synthetic is always true, so synthetic rows can never pass for NOVA data.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from novabench.errors import ConfigError
from novabench.io import atomic_path
from novabench.sample import text
from novabench.sample.anatomy import (
    BRAIN_CENTRE_MM,
    BrainTemplate,
    describe_location,
    load_template,
)
from novabench.sample.catalog import Diagnosis, diagnoses_of_kind
from novabench.sample.lesions import (
    CYST,
    EXTRA_AXIAL,
    INFARCT,
    KINDS,
    MASS,
    METASTASES,
    NORMAL,
    RING,
    WHITE_MATTER,
    Lesion,
    LesionKind,
    LesionLayer,
    compose,
    draw_lesions,
    sample_lesions,
)
from novabench.sample.raters import RATERS, rater_boxes
from novabench.sample.render import (
    DWI,
    FLAIR,
    PLANES,
    SEQUENCES,
    T1C,
    T1W,
    T2W,
    SliceView,
    base_signal,
    finish_image,
    sample_channels,
    skull_thickness,
)

PARQUET_PATH = "data/nova-v1.parquet"
IMAGES_DIR = "images"

# Case kinds are dealt in shuffled blocks, so any 12 consecutive cases cover every kind
# and one case in twelve is normal.
_KIND_BLOCK = (MASS, RING, INFARCT, WHITE_MATTER, METASTASES, CYST, EXTRA_AXIAL, NORMAL)
_KIND_BLOCK += (RING, MASS, INFARCT, METASTASES)

# How often each sequence is shown for a kind of case (teaching files favor the
# sequence that makes the point, e.g. DWI for infarcts).
_SEQUENCE_WEIGHTS = {
    MASS: {FLAIR: 3, T1C: 3, T2W: 2, T1W: 1, DWI: 1},
    RING: {T1C: 4, FLAIR: 2, DWI: 2, T2W: 2, T1W: 1},
    INFARCT: {DWI: 4, FLAIR: 3, T2W: 2, T1W: 1, T1C: 0.5},
    WHITE_MATTER: {FLAIR: 4, T2W: 2, T1C: 2, T1W: 1, DWI: 0.5},
    METASTASES: {T1C: 4, FLAIR: 3, T2W: 1, T1W: 1, DWI: 0.5},
    CYST: {T2W: 3, FLAIR: 3, T1W: 2, DWI: 2, T1C: 1},
    EXTRA_AXIAL: {T1C: 4, T2W: 2, FLAIR: 2, T1W: 1, DWI: 0.5},
    NORMAL: {FLAIR: 2, T2W: 2, T1W: 2, DWI: 1, T1C: 1},
}
_PLANE_WEIGHTS = {"axial": 0.6, "coronal": 0.22, "sagittal": 0.18}
_DWI_PLANE_WEIGHTS = {"axial": 0.9, "coronal": 0.1, "sagittal": 0.0}
# Slice positions (mm along the plane normal) for images without a lesion to aim at.
_NORMAL_SLICES = {"axial": (-15.0, 45.0), "coronal": (-60.0, 20.0), "sagittal": (-40.0, 40.0)}
_NOVA_IMAGES_PER_CASE = 906 / 281
_ATTEMPTS = 6  # re-aims when a slice happens to miss every lesion

_BOX_TYPE = pa.struct(
    [
        ("x", pa.float64()),
        ("y", pa.float64()),
        ("width", pa.float64()),
        ("height", pa.float64()),
        ("source", pa.string()),
    ]
)
_META_TYPE = pa.struct(
    [
        ("clinical_history", pa.string()),
        ("final_diagnosis", pa.string()),
        ("age", pa.int32()),
        ("sex", pa.string()),
        ("lesion_kind", pa.string()),
        ("sequence", pa.string()),
        ("plane", pa.string()),
        ("location", pa.string()),
        ("n_lesions", pa.int32()),
        ("pixel_spacing_mm", pa.float64()),
        ("slice_position_mm", pa.float64()),
        ("synthetic", pa.bool_()),
    ]
)
SCHEMA = pa.schema(
    [
        ("filename", pa.string()),
        ("case_id", pa.string()),
        ("scan_id", pa.string()),
        ("caption_text", pa.string()),
        ("image_path", pa.string()),
        ("meta", _META_TYPE),
        ("bboxes", pa.list_(_BOX_TYPE)),
    ]
)
_IMAGE_NAME = re.compile(r"case\d{4,}_\d{3}\.png")


@dataclass(frozen=True)
class _Case:
    number: int
    kind: str
    diagnosis: Diagnosis
    spec: LesionKind
    lesions: list[Lesion]
    sex: str
    age: int
    history: str


@dataclass(frozen=True)
class _Image:
    pixels: np.ndarray
    view: SliceView
    layer: LesionLayer
    brain: np.ndarray


# The most cases a sample may have (the config schema's bound of dataset.sample.n_cases).
MAX_CASES = 9999


def _validate(n_cases: int, seed: int, images_per_case: tuple[int, int]) -> tuple[int, int]:
    if isinstance(n_cases, bool) or not isinstance(n_cases, int) or not 1 <= n_cases <= MAX_CASES:
        raise ConfigError(
            f"sample n_cases must be an integer from 1 to {MAX_CASES}, got {n_cases!r}",
            "set sample.n_cases to e.g. 12",
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(
            f"sample seed must be a non-negative integer, got {seed!r}", "set sample.seed"
        )
    try:
        low, high = (int(v) for v in images_per_case)
    except (TypeError, ValueError):
        raise ConfigError(
            f"sample images_per_case must be two integers [min, max], got {images_per_case!r}",
            "set sample.images_per_case to e.g. [1, 4]",
        ) from None
    if not 1 <= low <= high <= 999:
        raise ConfigError(
            f"sample images_per_case must satisfy 1 <= min <= max <= 999, got {images_per_case!r}",
            "set sample.images_per_case to e.g. [1, 4]",
        )
    return low, high


def _case_kind(seed: int, number: int) -> str:
    block, slot = divmod(number, len(_KIND_BLOCK))
    order = np.random.default_rng([seed, 1, block]).permutation(len(_KIND_BLOCK))
    return _KIND_BLOCK[int(order[slot])]


def _contralateral(lesion: Lesion) -> str:
    # MNI x < 0 is the patient's left; hemispheric deficits appear on the opposite side.
    return "right" if float(lesion.centre_mm[0]) < 0 else "left"


def _make_case(
    template: BrainTemplate, seed: int, number: int
) -> tuple[_Case, np.random.Generator]:
    rng = np.random.default_rng([seed, 0, number])
    kind = _case_kind(seed, number)
    options = diagnoses_of_kind(kind)
    diagnosis = options[int(rng.integers(len(options)))]
    spec = replace(KINDS[kind], **diagnosis.lesion)
    lesions = sample_lesions(spec, template, rng)
    sex, age = text.sex_and_age(diagnosis, rng)
    contra = _contralateral(lesions[0]) if lesions else ("left", "right")[int(rng.integers(2))]
    history = text.clinical_history(diagnosis, sex, age, contra, rng)
    return _Case(number, kind, diagnosis, spec, lesions, sex, age, history), rng


@functools.cache
def _images_per_case_probabilities(low: int, high: int) -> np.ndarray:
    """P(n images) on [low, high]: NOVA's mean where the range allows it, else uniform.

    NOVA has 906 images over 281 cases (1 to 17 per case, most cases have few). We use
    P(n) proportional to q ** (n - low), with q in (0, 1] set by bisection so that the mean
    is 906/281 (~3.2); ranges whose uniform mean is already lower, like the default
    (1, 4), stay uniform.
    """
    counts = np.arange(low, high + 1, dtype=float)

    def mean(q: float) -> float:
        p = q ** (counts - low)
        return float((counts * p).sum() / p.sum())

    q = 1.0
    if mean(1.0) > _NOVA_IMAGES_PER_CASE:
        lo_q, hi_q = 0.0, 1.0
        for _ in range(60):
            q = (lo_q + hi_q) / 2
            lo_q, hi_q = (q, hi_q) if mean(q) < _NOVA_IMAGES_PER_CASE else (lo_q, q)
    p = q ** (counts - low)
    return p / p.sum()


def _images_in_case(low: int, high: int, rng: np.random.Generator) -> int:
    p = _images_per_case_probabilities(low, high)
    return low + int(rng.choice(len(p), p=p))


def _pick_views(kind: str, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """Distinct (sequence, plane) pairs for a case's images, by kind-specific weights."""
    pairs, weights = [], []
    for seq in SEQUENCES:
        planes = _DWI_PLANE_WEIGHTS if seq == DWI else _PLANE_WEIGHTS
        for plane in PLANES:
            pairs.append((seq, plane))
            weights.append(_SEQUENCE_WEIGHTS[kind][seq] * planes[plane])
    p = np.array(weights) / np.sum(weights)
    distinct = int(np.count_nonzero(p))
    chosen = list(rng.choice(len(pairs), size=min(n, distinct), replace=False, p=p))
    chosen += list(rng.choice(len(pairs), size=n - len(chosen), replace=True, p=p))
    return [pairs[int(i)] for i in chosen]


def _aim(case: _Case, plane: str, rng: np.random.Generator) -> SliceView:
    """A view through the case's lesions (or a typical slice for a normal case)."""
    axis = {"axial": 2, "coronal": 1, "sagittal": 0}[plane]
    centre = BRAIN_CENTRE_MM.copy()
    for a in range(3):
        if a != axis:
            centre[a] += rng.normal(0.0, 4.0)
    if case.lesions:
        # Prefer a lesion whose slice also cuts many others (more lesions per image).
        positions = np.array([lesion.centre_mm[axis] for lesion in case.lesions])
        radii = np.array([lesion.mean_radius_mm for lesion in case.lesions])
        neighbours = (np.abs(positions[:, None] - positions[None]) < 0.6 * radii[None]).sum(1)
        weights = neighbours.astype(float) ** 2
        target = int(rng.choice(len(case.lesions), p=weights / weights.sum()))
        centre[axis] = positions[target] + rng.uniform(-0.25, 0.25) * radii[target]
    else:
        centre[axis] = rng.uniform(*_NORMAL_SLICES[plane])
    return SliceView(plane, centre, float(rng.uniform(0.44, 0.52)), float(rng.uniform(-10, 10)))


def _render(
    template: BrainTemplate, case: _Case, sequence: str, plane: str, rng: np.random.Generator
) -> _Image:
    for _ in range(_ATTEMPTS):
        view = _aim(case, plane, rng)
        channels = sample_channels(template, view)
        layer = draw_lesions(case.lesions, view, channels)
        if layer.boxes or not case.lesions:
            break
    # After _ATTEMPTS misses the image is kept without lesion (and captioned as such).
    signal = base_signal(channels, sequence, skull_thickness(view, rng))
    signal = compose(signal, layer, sequence)
    pixels = finish_image(signal, channels.brain, sequence, rng)
    return _Image(pixels, view, layer, channels.brain)


def _finding(template: BrainTemplate, case: _Case, sequence: str, image: _Image) -> text.Finding:
    layer = image.layer
    visible = [case.lesions[i] for i in layer.visible] if layer.boxes else []
    extra_axial = case.kind == EXTRA_AXIAL or (
        case.kind == CYST and visible and visible[0].confine == "intracranial"
    )
    locations = tuple(
        describe_location(template, lesion.centre_mm, extra_axial=bool(extra_axial))
        for lesion in visible
    )
    size_mm = max((max(w, h) for _, _, w, h in layer.boxes), default=0) * image.view.pixel_mm
    first = visible[0] if visible else None
    return text.Finding(
        kind=case.kind,
        sequence=sequence,
        plane=image.view.plane,
        locations=locations,
        n_lesions=len(layer.boxes),
        size_mm=float(size_mm),
        body=first.body if first else None,
        core=next((lesion.core for lesion in visible if lesion.core), None),
        thin_wall=bool(first and first.core_ratio >= 0.75),
        has_edema=layer.edema is not None and bool(np.any(layer.edema > 0.5)),
        n_enhancing=sum(lesion.enhancing for lesion in visible),
        radial=case.spec.radial,
    )


def _box_rows(image: _Image, rng: np.random.Generator) -> list[dict] | None:
    gold = [tuple(float(v) for v in box) for box in image.layer.boxes]
    if not gold:
        return None  # like upstream: null, not an empty list, for an image without a lesion
    keys = ("x", "y", "width", "height")
    rows = [{**dict(zip(keys, box, strict=True)), "source": "gold"} for box in gold]
    for style in RATERS:
        for box in rater_boxes(gold, style, image.brain, rng):
            rows.append({**dict(zip(keys, box, strict=True)), "source": style.name})
    return rows


def _write_png(pixels: np.ndarray, path: Path) -> None:
    # Pillow writes no timestamp or other varying chunk, so the bytes depend on pixels only.
    # Level 1: 4x faster than the default for files ~15% larger.
    Image.fromarray(pixels).save(path, format="PNG", compress_level=1)


def _remove_stale_images(images_dir: Path, keep: set[str]) -> None:
    """Delete sample images of an earlier, larger run so the folder matches the table."""
    for path in images_dir.iterdir():
        if _IMAGE_NAME.fullmatch(path.name) and path.name not in keep:
            path.unlink()


def _meta(case: _Case, sequence: str, plane: str, finding: text.Finding, image: _Image) -> dict:
    return {
        "clinical_history": case.history,
        "final_diagnosis": case.diagnosis.name,
        "age": case.age,
        "sex": case.sex,
        "lesion_kind": case.kind,
        "sequence": sequence,
        "plane": plane,
        "location": finding.locations[0] if finding.locations else None,
        "n_lesions": finding.n_lesions,
        "pixel_spacing_mm": round(image.view.pixel_mm, 4),
        "slice_position_mm": round(image.view.position_mm, 2),
        "synthetic": True,
    }


def _case_rows(
    template: BrainTemplate,
    case: _Case,
    images_per_case: tuple[int, int],
    rng: np.random.Generator,
    images_dir: Path,
) -> list[dict]:
    """Render, caption and write the images of one case; returns their table rows."""
    n_images = _images_in_case(*images_per_case, rng)
    views = _pick_views(case.kind, n_images, rng)
    figure = int(rng.integers(1, 7)) if rng.random() < 0.45 else None
    rows = []
    for index, (sequence, plane) in enumerate(views, start=1):
        image = _render(template, case, sequence, plane, rng)
        finding = _finding(template, case, sequence, image)
        panel = f"{figure}{chr(ord('a') + (index - 1) % 26)}" if figure else None
        filename = f"case{case.number:04d}_{index:03d}.png"
        _write_png(image.pixels, images_dir / filename)
        caption = text.caption(finding, panel, rng)  # before the boxes: same rng stream
        rows.append(
            {
                "filename": filename,
                "case_id": f"case{case.number:04d}",
                "scan_id": f"scan{case.number:04d}_{index:03d}",
                "caption_text": caption,
                "image_path": f"{IMAGES_DIR}/{filename}",
                "meta": _meta(case, sequence, plane, finding, image),
                "bboxes": _box_rows(image, rng),
            }
        )
    return rows


def _write_table(rows: list[dict], seed: int, target: Path) -> None:
    """Write the rows to Parquet in a seeded shuffled order, atomically."""
    order = np.random.default_rng([seed, 2]).permutation(len(rows))
    if len(rows) > 1 and np.all(order == np.arange(len(rows))):
        order = np.roll(order, 1)  # upstream rows are never in filename order
    table = pa.Table.from_pylist([rows[int(i)] for i in order], schema=SCHEMA)
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def generate_sample(
    out_dir: Path,
    *,
    n_cases: int = 12,
    seed: int = 20250520,
    images_per_case: tuple[int, int] = (1, 4),
) -> dict:
    """Write a NOVA-like dataset to out_dir and return counts of what was written.

    Layout: ``data/nova-v1.parquet`` (columns filename, case_id, scan_id, caption_text,
    image_path, meta, bboxes; rows shuffled) and ``images/<filename>`` (480x480 8-bit PNG).
    Boxes are [x, y, width, height] in pixels, (x, y) the top-left corner; ``source`` is
    "gold" for the reference and "rater1"/"rater2" for the two raters; ``bboxes`` is null
    for images without a lesion. Returns counts: n_cases, n_images, n_normal_images,
    n_gold_boxes, n_rater_boxes and cases_per_kind. Images of an earlier run that are not
    part of this one are deleted from ``images/``.
    """
    low, high = _validate(n_cases, seed, images_per_case)
    out_dir = Path(out_dir)
    images_dir = out_dir / IMAGES_DIR
    images_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / PARQUET_PATH).parent.mkdir(parents=True, exist_ok=True)
    template = load_template()

    rows: list[dict] = []
    kinds: dict[str, int] = {}
    for number in range(1, n_cases + 1):
        case, rng = _make_case(template, seed, number)
        kinds[case.kind] = kinds.get(case.kind, 0) + 1
        rows += _case_rows(template, case, (low, high), rng, images_dir)

    _remove_stale_images(images_dir, {row["filename"] for row in rows})
    _write_table(rows, seed, out_dir / PARQUET_PATH)

    boxes = [box for row in rows for box in row["bboxes"] or ()]
    return {
        "n_cases": n_cases,
        "n_images": len(rows),
        "n_normal_images": sum(row["bboxes"] is None for row in rows),
        "n_gold_boxes": sum(box["source"] == "gold" for box in boxes),
        "n_rater_boxes": sum(box["source"] != "gold" for box in boxes),
        "cases_per_kind": dict(sorted(kinds.items())),
    }
