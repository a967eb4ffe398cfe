"""Tests of the image-analysis captioner.

Slices come from the MNI152 renderer of ``mni_slices`` (rendered with known plane,
sequence contrast and lesion); the caption templates are checked on hand-made findings.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mni_slices import disc_box, iou, lesion_at, render
from novabench.models.classical import captioner
from novabench.models.classical import image_analysis as ia
from novabench.models.classical.detector import Detection


@pytest.mark.parametrize(
    ("plane", "fraction"),
    [
        ("axial", 0.45),
        ("axial", 0.6),
        ("coronal", 0.45),
        ("coronal", 0.55),
        ("sagittal", 0.3),
        ("sagittal", 0.4),
    ],
)
def test_plane_of_rendered_slices(plane, fraction):
    findings = captioner.analyse_image(render(plane, "T1", 480, None, fraction))
    assert findings.plane == plane


@pytest.mark.parametrize("sequence", ["T1", "T2", "FLAIR", "DWI"])
@pytest.mark.parametrize("plane", ["axial", "coronal"])
def test_sequence_of_rendered_slices(plane, sequence):
    assert captioner.analyse_image(render(plane, sequence, 480)).sequence == sequence


def test_sequence_of_a_sagittal_t2_slice():
    assert captioner.analyse_image(render("sagittal", "T2", 480)).sequence == "T2"


@pytest.mark.parametrize(
    ("plane", "sequence", "expected"),
    [
        ("axial", "FLAIR", "Axial FLAIR image without focal abnormality."),
        ("coronal", "T2", "Coronal T2-weighted image without focal abnormality."),
        ("axial", "T1", "Axial T1-weighted image without focal abnormality."),
    ],
)
def test_normal_slice_caption(plane, sequence, expected):
    assert captioner.caption_image(render(plane, sequence, 480)) == expected


def test_lesion_caption_names_sequence_plane_signal_and_side():
    # A bright lesion in the front of the image's right half: the patient's left frontal lobe.
    row, col, radius = lesion_at("axial", 480, 0.25, 0.7)
    caption = captioner.caption_image(render("axial", "FLAIR", 480, (row, col, radius, 0.95)))
    assert caption.startswith("Axial FLAIR image shows")
    assert "hyperintense" in caption
    assert "left frontal lobe" in caption


def test_lesion_on_image_left_is_the_patients_right():
    row, col, radius = lesion_at("axial", 480, 0.8, 0.3)
    findings = captioner.analyse_image(render("axial", "T2", 480, (row, col, radius, 1.0)))
    assert findings.lesions and findings.lesions[0].side == "right"
    assert findings.lesions[0].region == "occipital"


def test_bright_lesion_on_t1_reads_as_post_contrast_enhancement():
    row, col, radius = lesion_at("axial", 480, 0.45, 0.7)
    findings = captioner.analyse_image(render("axial", "T1", 480, (row, col, radius, 1.0)))
    assert findings.sequence == "T1 post-contrast"
    assert findings.lesions[0].signal == "enhancing"
    caption = captioner.write_caption(findings)
    assert caption.startswith("Axial post-contrast T1-weighted image shows")
    assert "enhancing" in caption


def test_sagittal_finding_has_no_side():
    row, col, radius = lesion_at("sagittal", 480, 0.35, 0.4)
    findings = captioner.analyse_image(render("sagittal", "FLAIR", 480, (row, col, radius, 0.95)))
    assert findings.plane == "sagittal" and findings.lesions
    assert findings.lesions[0].side is None
    assert " left " not in captioner.write_caption(findings)


def test_drawn_lesion_gets_the_sentence_written_by_hand():
    # A bright disc in the front of the image's left half: the patient's right frontal lobe.
    row, col, radius = lesion_at("axial", 480, 0.3, 0.3)
    image = render("axial", "FLAIR", 480, (row, col, radius, 0.95))
    untouched = image.copy()
    expected = "Axial FLAIR image shows a hyperintense lesion in the right frontal lobe."
    # Twice: nothing carried over between calls changes the answer.
    assert captioner.caption_image(image) == expected
    assert captioner.caption_image(image) == expected
    assert np.array_equal(image, untouched)
    (lesion,) = captioner.analyse_image(image).lesions
    assert iou(lesion.box, disc_box(row, col, radius)) > 0.5


def test_blank_image_caption():
    findings = captioner.analyse_image(np.zeros((480, 480), np.uint8))
    assert findings.sequence == "unknown" and findings.plane == "unknown"
    assert not findings.abnormal
    assert "no assessment" in captioner.caption_image(np.zeros((480, 480), np.uint8))


# --- templates and rules on hand-made inputs -------------------------------------------------


def _finding(side, region, signal="hyperintense", size="", confidence=0.9):
    return captioner.LesionFinding(
        signal=signal,
        side=side,
        region=region,
        size=size,
        confidence=confidence,
        box=Detection(10.0, 20.0, 30.0, 40.0, confidence),
    )


@pytest.mark.parametrize(
    ("findings", "expected"),
    [
        (
            captioner.ImageFindings("T2", "coronal"),
            "Coronal T2-weighted image without focal abnormality.",
        ),
        (
            captioner.ImageFindings("FLAIR", "axial", [_finding("left", "frontal")]),
            "Axial FLAIR image shows a hyperintense lesion in the left frontal lobe.",
        ),
        (
            captioner.ImageFindings(
                "DWI", "axial", [_finding("right", "periventricular", size="small")]
            ),
            "Axial diffusion-weighted (DWI) image shows a small hyperintense focus in the right"
            " periventricular region.",
        ),
        (
            captioner.ImageFindings(
                "T1 post-contrast",
                "sagittal",
                [_finding(None, "parietal", signal="enhancing", size="large")],
            ),
            "Sagittal post-contrast T1-weighted image shows a large enhancing lesion in the"
            " parietal lobe.",
        ),
        (
            captioner.ImageFindings(
                "T1",
                "axial",
                [
                    _finding("right", "occipital", signal="hypointense"),
                    _finding("left", "frontal"),
                    _finding("right", "occipital"),  # same place as the main finding
                    _finding("midline", "periventricular"),
                ],
            ),
            "Axial T1-weighted image shows a hypointense lesion in the right occipital lobe."
            " Additional lesions in the left frontal lobe and the midline periventricular"
            " region.",
        ),
        (
            captioner.ImageFindings(captioner.UNKNOWN, captioner.UNKNOWN),
            "MRI slice without recognisable brain tissue; no assessment possible.",
        ),
    ],
)
def test_write_caption_templates(findings, expected):
    assert captioner.write_caption(findings) == expected


BASE_TISSUE = ia.TissueStatistics(
    median=0.5,
    spread=0.1,
    csf=0.1,
    grey=0.45,
    white=0.7,
    csf_share=0.1,
    csf_is_bright=False,
    bright_tail=1.3,
    noise=0.01,
)


@pytest.mark.parametrize(
    ("changes", "bright_finding", "expected"),
    [
        ({}, False, "T1"),
        ({}, True, "T1 post-contrast"),
        ({"grey": 0.6, "white": 0.45}, False, "FLAIR"),
        ({"grey": 0.6, "white": 0.45}, True, "FLAIR"),
        ({"noise": 0.08}, False, "DWI"),
        ({"bright_tail": 1.8}, False, "T2"),
        ({"csf": 0.9, "csf_is_bright": True, "bright_tail": 1.4}, False, "T2"),
        ({"csf": 0.9, "csf_is_bright": True, "bright_tail": 1.2}, False, "T1"),
        ({"median": 0.0}, False, "unknown"),
    ],
)
def test_sequence_rules(changes, bright_finding, expected):
    tissue = dataclasses.replace(BASE_TISSUE, **changes)
    assert captioner.estimate_sequence(tissue, bright_finding=bright_finding) == expected


def test_plane_rules_on_drawn_outlines():
    yy, xx = np.mgrid[:200, :200]
    symmetric = ia.Midline(100.0, 100.0, 0.0, symmetry=0.9, shape_symmetry=0.97)
    tall_ellipse = ((yy - 100) / 80.0) ** 2 + ((xx - 100) / 65.0) ** 2 <= 1
    assert captioner.estimate_plane(tall_ellipse, symmetric) == "axial"
    wide_ellipse = ((yy - 100) / 65.0) ** 2 + ((xx - 100) / 80.0) ** 2 <= 1
    assert captioner.estimate_plane(wide_ellipse, symmetric) == "coronal"
    lopsided = dataclasses.replace(symmetric, symmetry=0.4, shape_symmetry=0.7)
    assert captioner.estimate_plane(wide_ellipse, lopsided) == "sagittal"
    assert captioner.estimate_plane(np.zeros((50, 50), bool), symmetric) == "unknown"
