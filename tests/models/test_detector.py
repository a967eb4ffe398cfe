"""Tests of the classical lesion detector and the image analysis under it.

Slices come from the MNI152 renderer of ``mni_slices`` (a symmetric brain)
with sequence-like tissue contrasts; lesions are discs of known centre and radius, so the
expected box is known exactly. IoUs are computed with the benchmark's own scorer
(``novabench.tasks.localization.metrics.iou_matrix``), independently of the detector.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import ndimage

from mni_slices import disc_box, iou, lesion_at, render
from novabench.errors import DatasetError
from novabench.models.classical import detector
from novabench.models.classical import image_analysis as ia


@pytest.mark.parametrize(
    ("plane", "sequence", "down", "across", "value"),
    [
        ("axial", "FLAIR", 0.3, 0.3, 0.95),  # bright lesion, front, image left
        ("axial", "T2", 0.65, 0.75, 1.0),  # bright lesion, back, image right
        ("axial", "T1", 0.45, 0.7, 1.0),  # enhancing-like lesion brighter than white matter
        ("axial", "T1", 0.5, 0.3, 0.2),  # dark lesion on T1 (found through asymmetry)
        ("coronal", "FLAIR", 0.3, 0.7, 0.95),
        ("sagittal", "FLAIR", 0.35, 0.4, 0.95),  # no symmetry to use: intensity only
        ("axial", "DWI", 0.4, 0.7, 0.9),
    ],
)
def test_top_detection_overlaps_inserted_lesion(plane, sequence, down, across, value):
    row, col, radius = lesion_at(plane, 480, down, across)
    image = render(plane, sequence, 480, (row, col, radius, value))
    found = detector.detect_lesions(image)
    assert found, "no detection at all"
    assert iou(found[0], disc_box(row, col, radius)) > 0.3
    assert found[0].score > 0.5


@pytest.mark.parametrize(
    ("plane", "sequence"),
    [("axial", "T1"), ("axial", "FLAIR"), ("coronal", "T1"), ("coronal", "FLAIR")],
)
def test_symmetric_normal_slice_has_no_confident_detection(plane, sequence):
    found = detector.detect_lesions(render(plane, sequence, 480))
    assert all(d.score < 0.3 for d in found), found


def test_detection_is_deterministic():
    row, col, radius = lesion_at("axial", 480, 0.3, 0.3)
    image = render("axial", "FLAIR", 480, (row, col, radius, 0.95))
    first = detector.detect_lesions(image.copy())
    second = detector.detect_lesions(image.copy())
    assert first == second
    assert first  # the comparison above must not be between two empty lists


@pytest.mark.parametrize("max_boxes", [1, 2, 3, 5])
def test_boxes_lie_inside_the_image_sorted_and_capped(max_boxes):
    # Lesions next to the brain's edge and several at once, on a noisy DWI-like slice.
    size = 480
    image = render("axial", "DWI", size).astype(np.float64)
    yy, xx = np.mgrid[:size, :size]
    for down, across in [(0.05, 0.5), (0.5, 0.97), (0.95, 0.4), (0.5, 0.25)]:
        row, col, radius = lesion_at("axial", size, down, across, 0.04)
        image[np.hypot(yy - row, xx - col) <= radius] = 240
    found = detector.detect_lesions(image.astype(np.uint8), max_boxes=max_boxes)
    assert 1 <= len(found) <= max_boxes
    scores = [d.score for d in found]
    assert scores == sorted(scores, reverse=True)
    for d in found:
        assert 0.0 <= d.score <= 1.0
        assert d.width > 0 and d.height > 0
        assert d.x >= 0 and d.y >= 0
        assert d.x + d.width <= size and d.y + d.height <= size


def test_zero_boxes_requested_gives_none():
    assert detector.detect_lesions(render("axial", "FLAIR", 480), max_boxes=0) == []


@pytest.mark.parametrize(
    "image",
    [
        np.zeros((480, 480), np.uint8),
        np.full((480, 480), 255, np.uint8),
        np.full((300, 200), 97, np.uint8),
        np.zeros((480, 480), np.float32),
        np.full((64, 64), 0.5, np.float64),
    ],
    ids=["black", "white", "constant-uint8", "black-float", "constant-float"],
)
def test_blank_or_constant_image_gives_no_detection(image):
    assert detector.detect_lesions(image) == []


def test_rgb_and_grayscale_inputs_agree():
    row, col, radius = lesion_at("axial", 480, 0.3, 0.3)
    gray = render("axial", "FLAIR", 480, (row, col, radius, 0.95))
    rgb = np.repeat(gray[..., None], 3, axis=2)
    assert detector.detect_lesions(rgb) == detector.detect_lesions(gray)


def test_wrong_shapes_are_rejected_with_a_dataset_error():
    with pytest.raises(DatasetError):
        detector.detect_lesions(np.zeros((4, 480, 480), np.uint8))
    with pytest.raises(DatasetError):
        detector.detect_lesions(np.zeros((5, 5), np.uint8))


@pytest.mark.parametrize("size", [192, 256, 333, 600])
def test_other_square_sizes(size):
    row, col, radius = lesion_at("axial", size, 0.3, 0.7)
    image = render("axial", "FLAIR", size, (row, col, radius, 0.95))
    found = detector.detect_lesions(image)
    assert found and iou(found[0], disc_box(row, col, radius)) > 0.3
    assert all(d.x + d.width <= size and d.y + d.height <= size for d in found)


def test_non_square_image():
    row, col, radius = lesion_at("axial", 480, 0.3, 0.7)
    image = render("axial", "FLAIR", 480, (row, col, radius, 0.95))[:, 40:430]  # 480 x 390
    found = detector.detect_lesions(image)
    assert found and iou(found[0], disc_box(row, col - 40, radius)) > 0.3
    assert all(d.x + d.width <= 390 and d.y + d.height <= 480 for d in found)


def test_lesion_signal_is_reported():
    row, col, radius = lesion_at("axial", 480, 0.3, 0.3)
    bright = detector.analyse_lesions(render("axial", "FLAIR", 480, (row, col, radius, 0.95)))
    assert bright.candidates[0].signal == "hyperintense"
    row, col, radius = lesion_at("axial", 480, 0.5, 0.3)
    dark = detector.analyse_lesions(render("axial", "T1", 480, (row, col, radius, 0.2)))
    assert dark.candidates[0].signal == "hypointense"


# --- image analysis -------------------------------------------------------------------------


def test_otsu_threshold_separates_two_levels():
    values = np.array([10.0] * 60 + [200.0] * 40)
    threshold = ia.otsu_threshold(values)
    assert 10.0 < threshold < 200.0
    # Hand-worked: any cut between the two levels gives the same between-class variance
    # (0.6 * 0.4 * 190^2); the first such histogram edge above 10 is kept.
    assert threshold <= 10.0 + 190.0 / 256 * 2


def test_downsample_block_averages():
    image = np.arange(36, dtype=np.float32).reshape(6, 6)
    small, factor = ia.downsample(image, 3)
    assert factor == 2
    np.testing.assert_allclose(small[0, 0], (0 + 1 + 6 + 7) / 4)
    np.testing.assert_allclose(small[2, 2], (28 + 29 + 34 + 35) / 4)


def test_brain_mask_covers_the_rendered_brain():
    image = render("axial", "T1", 480)
    working, _ = ia.downsample(ia.as_float_image(image), 240)
    mask = ia.brain_mask(working)
    truth = ia.downsample((image > 0).astype(np.float32), 240)[0] > 0.5
    overlap = (mask & truth).sum() / (mask | truth).sum()
    assert overlap > 0.9


def test_brain_mask_excludes_a_surrounding_scalp_ring():
    image = render("axial", "T1", 480).astype(np.float64)
    head = ndimage.binary_fill_holes(image > 0)
    distance = ndimage.distance_transform_edt(~head)
    image[(distance > 8) & (distance < 20)] = 200  # bright scalp beyond a dark bone gap
    working, _ = ia.downsample(ia.as_float_image(image.astype(np.uint8)), 240)
    mask = ia.brain_mask(working)
    brain = ia.downsample(head.astype(np.float32), 240)[0] > 0.5
    assert (mask & ~ia.dilate(brain, 2)).sum() == 0  # nothing of the ring
    assert (mask & brain).sum() > 0.9 * brain.sum()


@pytest.mark.parametrize(("angle", "shift"), [(0.0, 0), (7.0, 12), (-5.0, -20)])
def test_midline_of_a_tilted_shifted_symmetric_brain(angle, shift):
    base = render("axial", "T1", 480).astype(np.float64)
    # The MNI template is symmetric about the image's centre column; rotate about the
    # image centre and shift sideways, so the true axis passes through (239.5, 239.5 + shift).
    moved = ndimage.shift(ndimage.rotate(base, angle, reshape=False, order=1), (0, shift), order=1)
    image = np.clip(moved, 0, 255).astype(np.uint8)
    working, factor = ia.downsample(ia.as_float_image(image), 120)
    midline = ia.estimate_midline(working, ia.brain_mask(working)).scaled(factor)
    assert abs(abs(midline.angle_deg) - abs(angle)) <= 1.5
    assert midline.column_at(239.5) == pytest.approx(239.5 + shift, abs=4.0)
    assert midline.symmetry > 0.9 and midline.shape_symmetry > 0.9
    # Mirroring about the estimated line reproduces the brain.
    full = ia.as_float_image(image)
    mirrored = ia.reflect(full, midline)
    inside = ndimage.binary_erosion(full > 0.05, iterations=10)
    assert np.corrcoef(full[inside], mirrored[inside])[0, 1] > 0.9


def test_midline_sign_convention_follows_the_tilt():
    base = render("axial", "T1", 480).astype(np.float64)
    tilted = ndimage.rotate(base, 8.0, reshape=False, order=1)
    working, factor = ia.downsample(ia.as_float_image(np.clip(tilted, 0, 255)), 120)
    midline = ia.estimate_midline(working, ia.brain_mask(working)).scaled(factor)
    # A point 100 rows below the centre on the true axis: rotating the image by +8 degrees
    # (scipy: counter-clockwise as displayed) moves it to the right by 100 * sin(8 degrees).
    expected = 239.5 + 100 * math.sin(math.radians(8.0))
    assert midline.column_at(339.5) == pytest.approx(expected, abs=4.0)


def test_sagittal_slice_is_not_symmetric():
    image = render("sagittal", "T1", 480)
    working, _ = ia.downsample(ia.as_float_image(image), 120)
    midline = ia.estimate_midline(working, ia.brain_mask(working))
    assert midline.shape_symmetry < 0.88 and midline.symmetry < 0.65


def test_intensity_classes_recover_three_levels():
    rng = np.random.default_rng(1)
    values = np.concatenate(
        [rng.normal(0.1, 0.01, 1000), rng.normal(0.5, 0.01, 3000), rng.normal(0.8, 0.01, 2000)]
    )
    means, shares, bounds = ia.intensity_classes(values)
    np.testing.assert_allclose(means, [0.1, 0.5, 0.8], atol=0.01)
    np.testing.assert_allclose(shares, [1 / 6, 1 / 2, 1 / 3], atol=0.01)
    assert 0.1 < bounds[0] < 0.5 < bounds[1] < 0.8
