"""Keywords made equal strings: cleaning, and sequence and plane names mapped onto the
benchmark's modality words. One function of a string, so what the LLM made equal stays
equal."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

EDGE_PUNCTUATION = " .,;:!?\"'`()[]{}"


def clean_keyword(text: Any) -> str:
    """Lower case, NFKC, hyphens/underscores/slashes as spaces, single spaces, no edge
    punctuation: "Ring-enhancing " and "ring enhancing" are one keyword."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    text = re.sub(r"[-‐‑‒–—_/]+", " ", text)
    return " ".join(text.split()).strip(EDGE_PUNCTUATION)


# Sequence names onto the words of the benchmark's modality set (and the keyword judge's
# other sequence keys). A small table rather than a library: the targets are the
# benchmark's own words. Applied to the cleaned keyword (hyphens already spaces).
# Not derived from the keyword lexicon (resources/lexicon.yaml): its sequence, plane and
# technique forms give other words for 88 of them ("gre" for "t2*", "contrast-enhanced"
# for "post-contrast", "t2" for "haste"), and it has no pre-contrast concept, so deriving
# these would change the LLM judges' verdicts.
_SEQUENCE_WORDS: tuple[tuple[str, str], ...] = (
    (r"\bdti\b|diffusion tensor|tractograph|fractional anisotropy", "dti"),
    (r"\bdwi\b|diffusion weighted|^diffusion$|\bb ?1000\b", "dwi"),
    (r"\badc\b|apparent diffusion", "adc"),
    (r"\bswi\b|susceptibility", "swi"),
    (r"\bstir\b|short tau", "stir"),
    (r"\bpdw?\b|proton density", "pd"),
    (r"perfusion|\bdsc\b|\basl\b|\bcbv\b", "perfusion"),
)
_PRE_CONTRAST = re.compile(
    r"\bpre ?contrast|\bnon ?contrast|\bunenhanced|\bnon ?enhanced|before contrast|"
    r"without contrast|pre gadolinium"
)
_POST_CONTRAST = re.compile(
    r"\bpost ?contrast|gadolinium|\bgd\b|\bgado\b|contrast enhanced|\+ ?c\b|\bc ?\+|"
    r"after contrast|with contrast|\bpost gd\b"
)
_T1 = re.compile(r"\bt1(?:w|wi)?\b|\bt1 weighted|\bmp ?rage\b|\bspgr\b")
_FLAIR = re.compile(r"\bflair\b|fluid attenuated inversion")
_T2_STAR = re.compile(r"\bt2 ?\*|\bgre\b|gradient (?:recalled )?echo")
_T2 = re.compile(r"\bt2(?:w|wi)?\b|\bt2 weighted")
_PLANES = (
    (re.compile(r"\baxial\b|\btransverse\b|\btrans ?axial\b"), "axial"),
    (re.compile(r"\bcoronal\b"), "coronal"),
    (re.compile(r"\bsagittal\b"), "sagittal"),
)


def sequence_keywords(text: Any) -> set[str]:
    """One sequence keyword -> benchmark words: "T1-weighted post-gadolinium" gives
    {"t1", "post-contrast"}, "T2-FLAIR" {"flair"}; unknown names stay as cleaned."""
    cleaned = clean_keyword(text)
    if not cleaned:
        return set()
    found: set[str] = set()
    # "T1-FLAIR" is a T1 sequence, "T2-FLAIR" a FLAIR one (as in the keyword lexicon).
    if _T1.search(cleaned):
        found.add("t1")
    elif _FLAIR.search(cleaned):
        found.add("flair")
    elif _T2_STAR.search(cleaned):
        found.add("t2*")
    elif _T2.search(cleaned):
        found.add("t2")
    found.update(key for pattern, key in _SEQUENCE_WORDS if re.search(pattern, cleaned))
    if "dti" in found:
        found.discard("dwi")  # "diffusion tensor" is not diffusion-weighted imaging
    if _PRE_CONTRAST.search(cleaned):
        found.add("pre-contrast")
    elif _POST_CONTRAST.search(cleaned):
        found.add("post-contrast")
    return found or {cleaned}


def plane_keywords(text: Any) -> set[str]:
    cleaned = clean_keyword(text)
    found = {key for pattern, key in _PLANES if pattern.search(cleaned)}
    return found or ({cleaned} if cleaned else set())


def modality_keywords(text: Any) -> set[str]:
    """One keyword of the combined sequence-and-plane category: its planes, and the
    sequence words of the rest ("axial FLAIR" gives {"axial", "flair"})."""
    cleaned = clean_keyword(text)
    planes = {key for pattern, key in _PLANES if pattern.search(cleaned)}
    rest = cleaned
    for pattern, _ in _PLANES:
        rest = pattern.sub(" ", rest)
    rest = " ".join(rest.split())
    return planes | (sequence_keywords(rest) if rest else set())
