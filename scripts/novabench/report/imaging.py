"""Sequence and plane of an image, read from its reference caption (for breakdowns).

NOVA's captions are figure legends that name the sequence and the plane ("(2b) Coronal
FLAIR image shows ..."). The parser is a few regular expressions:

- sequence: ``FLAIR`` (FLAIR, fluid-attenuated inversion recovery; "T2 FLAIR" is FLAIR),
  ``DWI`` (diffusion-weighted, DWI, ADC, apparent diffusion coefficient), ``SWI/GRE``
  (susceptibility-weighted, SWI, gradient echo, GRE, T2*), ``T1 post-contrast`` (a T1
  mention with post-contrast, contrast-enhanced, gadolinium, Gd or +C), ``T1``, ``T2``;
- plane: ``axial`` (also transverse, transaxial; not extra-/intra-axial), ``coronal``,
  ``sagittal``.

A caption naming exactly one sequence (plane) gets it; one naming several gets
``multiple``; one naming none gets ``unspecified``. Words like "diffusion restriction" or
"enhancement" alone do not name a sequence: only sequence names do.
"""

from __future__ import annotations

import re

MULTIPLE, UNSPECIFIED = "multiple", "unspecified"
SEQUENCES = ("T1", "T1 post-contrast", "T2", "FLAIR", "DWI", "SWI/GRE")
PLANES = ("axial", "coronal", "sagittal")

_FLAIR = re.compile(r"\b(?:t2[\s-]*)?flair\b|fluid[\s-]+attenuated\s+inversion\s+recovery", re.I)
_DWI = re.compile(
    r"\bdiffusion[\s-]+weighted\b|\bdwi\b|\badc\b|\bapparent\s+diffusion\s+coefficient\b", re.I
)
_SWI = re.compile(
    r"\bsusceptibility[\s-]+weighted\b|\bswi\b|\bgradient[\s-]+(?:recalled[\s-]+)?echo\b"
    r"|\bgre\b|\bt2\s*\*|\bt2[\s-]+star\b",
    re.I,
)
_T1 = re.compile(r"\bt1(?:[\s-]*weighted|w)?\b(?!\s*\*)", re.I)
_T2 = re.compile(r"\bt2(?:[\s-]*weighted|w)?\b(?!\s*\*)", re.I)
_CONTRAST = re.compile(
    r"post[\s-]*contrast|contrast[\s-]+enhanced|gadolinium|post[\s-]*gad\b|\bgd\b|\+\s*c\b"
    r"|\bt1\s*\+\s*c\b",
    re.I,
)
_PLANES = {
    # not "extra-axial" / "intra-axial" (locations, not planes)
    "axial": re.compile(r"(?<![\w-])(?:axial|transverse|transaxial)\b", re.I),
    "coronal": re.compile(r"\bcoronal\b", re.I),
    "sagittal": re.compile(r"\bsagittal\b", re.I),
}


def _one(found: set[str]) -> str:
    if not found:
        return UNSPECIFIED
    return found.pop() if len(found) == 1 else MULTIPLE


def parse_sequence(caption: str) -> str:
    """The MR sequence a caption names, ``multiple`` or ``unspecified``."""
    text = caption or ""
    found = set()
    # Remove what is matched so that "T2 FLAIR" and "T2*" do not also count as T2.
    for name, pattern in (("FLAIR", _FLAIR), ("DWI", _DWI), ("SWI/GRE", _SWI)):
        if pattern.search(text):
            found.add(name)
            text = pattern.sub(" ", text)
    if _T1.search(text):
        found.add("T1 post-contrast" if _CONTRAST.search(text) else "T1")
    if _T2.search(text):
        found.add("T2")
    return _one(found)


def parse_plane(caption: str) -> str:
    """The imaging plane a caption names, ``multiple`` or ``unspecified``."""
    return _one({name for name, pattern in _PLANES.items() if pattern.search(caption or "")})
