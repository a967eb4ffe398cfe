"""Clinical histories and figure-legend captions of the sample cases.

Captions are written like the legends of a teaching file: an optional panel label, the
plane and sequence, a verb, and the finding with its signal, size and location. Only the
rendered sequence is named, so the sequence can be read back from the caption.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from novabench.sample.catalog import Diagnosis
from novabench.sample.lesions import (
    COMPARTMENT_SIGNAL,
    CYST,
    ENHANCING,
    EXTRA_AXIAL,
    INFARCT,
    MASS,
    METASTASES,
    RING,
    WHITE_MATTER,
)
from novabench.sample.render import DWI, FLAIR, T1C, T1W, T2W, WHITE_MATTER_SIGNAL

# How each sequence is written in a caption; tests read the sequence back with these.
SEQUENCE_NAMES = {
    T1W: ("T1-weighted", "T1-weighted", "T1"),
    T1C: (
        "contrast-enhanced T1-weighted",
        "post-contrast T1-weighted",
        "gadolinium-enhanced T1-weighted",
        "T1 post-contrast",
    ),
    T2W: ("T2-weighted", "T2-weighted", "T2"),
    FLAIR: ("FLAIR", "T2 FLAIR", "fluid-attenuated inversion recovery (FLAIR)"),
    DWI: ("diffusion-weighted", "DWI", "diffusion-weighted (b=1000)"),
}
_GRAY_MATTER_SIGNAL = {T1W: 0.65, T1C: 0.65, T2W: 0.55, FLAIR: 0.62, DWI: 0.42}
_VERBS = ("shows", "demonstrates", "reveals", "depicts", "shows")
_IMAGE_NOUNS = (" image", " image", " MR image", "", " scan")
_NUMBER_WORDS = {2: "two", 3: "three", 4: "four"}

_ONSET = {
    "acute": (
        "",
        " Symptoms began 6 hours before imaging.",
        " Onset was sudden, the previous evening.",
        " The deficit appeared on waking.",
    ),
    "subacute": (
        "",
        " Symptoms developed over two weeks.",
        " The illness evolved over about 10 days.",
        " Symptoms worsened over a month.",
    ),
    "chronic": (
        "",
        " Symptoms had been present for about three months.",
        " The complaints progressed slowly over several months.",
        " Symptoms began a year ago.",
    ),
}
_KIND_PACE = {INFARCT: "acute", RING: "subacute", WHITE_MATTER: "subacute"}


def sex_and_age(diagnosis: Diagnosis, rng: np.random.Generator) -> tuple[str, int]:
    """Draw the patient's sex ("F"/"M") and age in years."""
    sex = "F" if rng.random() < diagnosis.female else "M"
    return sex, int(rng.integers(diagnosis.ages[0], diagnosis.ages[1] + 1))


def _person(sex: str, age: int) -> str:
    if age < 16:
        return "girl" if sex == "F" else "boy"
    return "woman" if sex == "F" else "man"


def clinical_history(
    diagnosis: Diagnosis, sex: str, age: int, contra_side: str, rng: np.random.Generator
) -> str:
    """A one- or two-sentence clinical history consistent with the diagnosis."""
    n = 2 if len(diagnosis.symptoms) > 1 and rng.random() < 0.35 else 1
    picked = sorted(int(i) for i in rng.choice(len(diagnosis.symptoms), size=n, replace=False))
    symptoms = ", along with ".join(diagnosis.symptoms[i] for i in picked)
    symptoms = symptoms.format(contra=contra_side)
    pace = diagnosis.onset or _KIND_PACE.get(diagnosis.kind, "chronic")
    onset = _ONSET[pace][int(rng.integers(len(_ONSET[pace])))]
    background = ""
    if diagnosis.background and rng.random() < 0.7:
        background = diagnosis.background[int(rng.integers(len(diagnosis.background)))]
    person = _person(sex, age)
    adult_word = ("female" if sex == "F" else "male") if age >= 16 else person
    style = int(rng.integers(5))
    if style == 1 and background:
        text = f"{age}-year-old {adult_word} with {background}, presenting with {symptoms}."
    elif style == 2:
        text = f"{adult_word.capitalize()}, {age} years. {symptoms[0].upper()}{symptoms[1:]}."
        text += f" Background: {background}." if background else ""
    elif style == 3 and background:
        text = f"{age}-year-old {person} referred for MRI because of {symptoms}."
        text += f" History of {background}."
    elif style == 4 and background:
        text = f"The patient is a {age}-year-old {person} with {symptoms}."
        text += f" Relevant history: {background}."
    else:
        text = f"A {age}-year-old {person} presented with {symptoms}."
        text += f" Past history of {background}." if background else ""
    return text + onset


@dataclass(frozen=True)
class Finding:
    """What one image shows, for its caption."""

    kind: str
    sequence: str
    plane: str
    locations: tuple[str, ...]  # of the lesions cut by the slice, in order
    n_lesions: int  # gold boxes on the image
    size_mm: float  # largest extent of the largest boxed lesion
    body: str | None = None
    core: str | None = None
    thin_wall: bool = False
    has_edema: bool = False
    n_enhancing: int = 0
    radial: bool = False  # white matter lesions point away from the ventricles


def _signal_word(compartment: str, sequence: str, *, predicative: bool = False) -> str:
    """Signal relative to normal white matter ("hyperintense"...), as a radiologist says it."""
    signal = COMPARTMENT_SIGNAL[compartment][sequence]
    if predicative and sequence != DWI and abs(signal - _GRAY_MATTER_SIGNAL[sequence]) < 0.05:
        return "isointense to gray matter"
    ratio = signal / WHITE_MATTER_SIGNAL[sequence]
    if ratio >= 1.8:
        return "markedly hyperintense"
    if ratio >= 1.15:
        return "hyperintense"
    if ratio >= 0.87:
        return "isointense"
    return "hypointense" if ratio >= 0.5 else "markedly hypointense"


def _article(phrase: str) -> str:
    """'a' or 'an' by sound, numbers included ('an 8 mm', 'a 1.8 cm', 'an 11 mm')."""
    first = phrase.split(" ", 1)[0]
    number = first.split(".", 1)[0]
    if number.isdigit():
        return "an" if number in ("8", "11", "18") or number.startswith("8") else "a"
    return "an" if first[:1].lower() in "aeiou" else "a"


def _size(size_mm: float) -> str:
    return f"{size_mm / 10:.1f} cm" if size_mm >= 10 else f"{round(size_mm):d} mm"


_PLURALS = {"thalamus": "thalami", "insula": "insulae", "convexity": "convexities"}


def _bilateral(structure: str) -> str:
    head, _, last = structure.rpartition(" ")
    if last in _PLURALS:
        last = _PLURALS[last]
    elif last in ("lobe", "hemisphere", "region"):
        last += "s"
    return f"{head} {last} bilaterally".lstrip()


def _join(items: tuple[str, ...]) -> str:
    """Locations of several lesions, read after 'in the'."""
    unique = list(dict.fromkeys(items))
    sides = {loc.split(" ", 1)[0] for loc in unique}
    if len(unique) == 2 and sides == {"left", "right"}:
        first, second = (loc.split(" ", 1)[1] for loc in unique)
        if first == second:
            return _bilateral(first)
    if len(unique) > 3:
        if {"left", "right"} <= sides:
            return _bilateral("cerebral hemisphere")
        side = "left" if "left" in sides else "right"
        return f"{side} cerebral hemisphere"
    if len(unique) == 1:
        return unique[0]
    return ", ".join(unique[:-1]) + " and " + unique[-1]


def _count(n: int) -> str:
    return _NUMBER_WORDS.get(n, "multiple")


def _pick(rng: np.random.Generator, options: tuple[str, ...]) -> str:
    return options[int(rng.integers(len(options)))]


def _mass(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    adj = _pick(rng, ("ill-defined", "lobulated", "infiltrative", "heterogeneous"))
    if f.sequence == T1C:
        enh = (
            _pick(rng, ("homogeneously enhancing", "avidly enhancing"))
            if f.body in ENHANCING
            else "non-enhancing"
        )
        return f"{_article(sized or enh)} {sized}{enh} {adj} mass in the {loc}"
    if f.sequence == DWI:
        high = COMPARTMENT_SIGNAL[f.body][DWI] >= 0.7
        text = f"{_article(sized or adj)} {sized}{adj} mass in the {loc}"
        return text + (" with restricted diffusion" if high else " without restricted diffusion")
    sig = _signal_word(f.body, f.sequence)
    text = f"{_article(sized or sig)} {sized}{sig} {adj} mass in the {loc}"
    if f.has_edema and f.sequence in (T2W, FLAIR):
        text += _pick(rng, (" with surrounding vasogenic edema", " with perilesional edema"))
    return text


def _ring(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    core = f.core or "necrosis"
    centre = {"pus": "cavity", "fluid": "cystic center", "plaque": "center"}.get(
        core, "necrotic center"
    )
    several = f.n_lesions > 1
    noun = (
        f"{_count(f.n_lesions)} lesions" if several else f"{_article(sized or 'l')} {sized}lesion"
    )
    if f.sequence == T1C:
        wall = "thin, smooth" if f.thin_wall else "thick, irregular"
        ring = (
            f"{_count(f.n_lesions)} ring-enhancing lesions"
            if several
            else (f"{_article(sized or 'r')} {sized}ring-enhancing lesion")
        )
        return f"{ring} in the {loc} with a {wall} enhancing wall and a non-enhancing {centre}"
    if f.sequence == DWI:
        if COMPARTMENT_SIGNAL[core][DWI] >= 0.7:
            return f"marked restricted diffusion within the {centre} of the {loc} lesion"
        return f"no restricted diffusion within the {centre} of the {loc} lesion"
    core_sig = _signal_word(core, f.sequence)
    rim_sig = _signal_word(f.body, f.sequence)
    text = (
        f"{noun} in the {loc} with {_article(core_sig)} {core_sig} {centre} "
        f"and {_article(rim_sig)} {rim_sig} rim"
    )
    if f.has_edema and f.sequence in (T2W, FLAIR):
        text += _pick(rng, (" and extensive surrounding edema", ", surrounded by vasogenic edema"))
    return text


def _infarct(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    if f.sequence == DWI:
        return _pick(
            rng,
            (
                f"an area of restricted diffusion in the {loc}",
                f"{_article(sized or 'f')} {sized}focus of marked diffusion restriction "
                f"involving the {loc}",
            ),
        )
    if f.sequence == T1C:
        return f"no abnormal enhancement of the subtle hypointense area in the {loc}"
    sig = _signal_word("infarct", f.sequence)
    if f.sequence == T1W:
        return f"subtle {sig} signal with sulcal effacement in the {loc}"
    return _pick(
        rng,
        (
            f"{_article(sig)} {sig} signal abnormality of the cortex and subcortical "
            f"white matter in the {loc}",
            f"{sig} swollen gyri in the {loc}",
        ),
    )


def _white_matter(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    several = f.n_lesions > 1
    lesions = "lesions" if several else "lesion"
    many = _count(f.n_lesions) if several else "a"
    shape = _pick(rng, ("ovoid", "round", "confluent")) if several else "ovoid"
    if f.sequence == T1C:
        if f.n_enhancing:
            n = "one" if f.n_enhancing == 1 else _count(f.n_enhancing)
            verb = "enhances" if f.n_enhancing == 1 else "enhance"
            return f"{many} white matter {lesions} in the {loc}, of which {n} {verb}"
        return f"{many} non-enhancing white matter {lesions} in the {loc}"
    if f.sequence == DWI:
        return f"{many} faint white matter {lesions} in the {loc} without restricted diffusion"
    sig = _signal_word(f.body or "plaque", f.sequence)
    if f.sequence == T1W:
        many = many if several else _article(sig)
        return f"{many} {sig} white matter {lesions} in the {loc}"
    many = many if several else _article(sig)
    text = f"{many} {sig} {shape} white matter {lesions} in the {loc}"
    if several and f.radial and rng.random() < 0.5:
        text += ", oriented perpendicular to the lateral ventricles"
    return text


def _metastases(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    several = f.n_lesions > 1
    lesions = "lesions" if several else "lesion"
    if f.sequence == T1C:
        pattern = "ring-enhancing" if f.core else "enhancing"
        many = _count(f.n_lesions) if several else _article(pattern)
        return f"{many} {pattern} {lesions} at the gray-white matter junction in the {loc}"
    many = _count(f.n_lesions) if several else "a"
    if f.sequence == DWI:
        high = COMPARTMENT_SIGNAL[f.core or f.body][DWI] >= 0.7
        return f"{many} {lesions} in the {loc}" + (
            " with central restricted diffusion" if high else " without restricted diffusion"
        )
    sig = _signal_word(f.body, f.sequence)
    many = many if several else _article(sig)
    text = f"{many} {sig} {lesions} in the {loc}"
    if f.has_edema and f.sequence in (T2W, FLAIR):
        text += " with disproportionate surrounding vasogenic edema"
    return text


def _cyst(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    body = f.body or "fluid"
    start = f"{_article(sized or 'w')} {sized}well-circumscribed cystic lesion in the {loc}"
    if f.sequence == FLAIR:
        return start + (
            " with complete suppression of its fluid signal"
            if body == "fluid"
            else " without complete suppression of its signal"
        )
    if f.sequence == DWI:
        high = COMPARTMENT_SIGNAL[body][DWI] >= 0.7
        return start + (" with restricted diffusion" if high else " without restricted diffusion")
    if f.sequence == T1C:
        return start + " without enhancement of its wall"
    return start + f" that is {_signal_word(body, f.sequence, predicative=True)}, following CSF"


def _extra_axial(f: Finding, rng: np.random.Generator, sized: str, loc: str) -> str:
    noun = f"{_article(sized or 'e')} {sized}extra-axial mass along the {loc}"
    if f.sequence == T1C:
        return (
            f"{_article(sized or 'a')} {sized}avidly and homogeneously enhancing extra-axial "
            f"mass along the {loc} with a broad dural base"
        )
    if f.sequence == DWI:
        return f"{noun} without marked restricted diffusion"
    text = f"{noun} that is {_signal_word(f.body or 'meningioma', f.sequence, predicative=True)}"
    if f.has_edema and f.sequence in (T2W, FLAIR):
        text += " with edema in the adjacent brain"
    return text


_NORMAL = {
    T1W: ("no focal parenchymal abnormality", "normal gray-white matter differentiation"),
    T1C: ("no abnormal parenchymal or meningeal enhancement", "no enhancing lesion"),
    T2W: ("no focal signal abnormality", "normal ventricles and sulci without mass effect"),
    FLAIR: ("no abnormal parenchymal hyperintensity", "no focal signal abnormality"),
    DWI: ("no restricted diffusion", "no focus of abnormal diffusion signal"),
}
_WRITERS = {
    MASS: _mass,
    RING: _ring,
    INFARCT: _infarct,
    WHITE_MATTER: _white_matter,
    METASTASES: _metastases,
    CYST: _cyst,
    EXTRA_AXIAL: _extra_axial,
}


def caption(finding: Finding, panel: str | None, rng: np.random.Generator) -> str:
    """A figure-legend style caption for one image."""
    seq = _pick(rng, SEQUENCE_NAMES[finding.sequence])
    subject = f"{finding.plane.capitalize()} {seq}{_pick(rng, _IMAGE_NOUNS)}"
    if panel:
        subject = f"({panel}) {subject}"
    verb = _pick(rng, _VERBS)
    if finding.n_lesions == 0:
        return f"{subject} {verb} {_pick(rng, _NORMAL[finding.sequence])}."
    sized = f"{_size(finding.size_mm)} " if rng.random() < 0.5 else ""
    loc = _join(finding.locations)
    text = _WRITERS[finding.kind](finding, rng, sized, loc)
    sentence = f"{subject} {verb} {text}."
    if finding.kind in (MASS, RING, EXTRA_AXIAL) and finding.size_mm > 35 and rng.random() < 0.5:
        sentence += " There is mass effect on the adjacent structures."
    return sentence
