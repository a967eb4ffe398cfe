"""The offline keyword judge on hand-written captions."""

import hashlib

import pytest
import yaml

from novabench.errors import ConfigError
from novabench.judges import KeywordSet
from novabench.judges.keywords import DEFAULT_LEXICON, KeywordJudge
from novabench.metrics.captioning import MODALITY_KEYWORDS, keyword_f1, split_keywords


def verdict(modality, clinical, abnormal) -> KeywordSet:
    """A caption judge's verdict, written as the benchmark splits it (modality, clinical)."""
    return KeywordSet(frozenset(modality) | frozenset(clinical), abnormal)


def clinical_of(found: KeywordSet) -> frozenset[str]:
    return split_keywords(found.keywords)[0]


def modality_of(found: KeywordSet) -> frozenset[str]:
    return split_keywords(found.keywords)[1]


@pytest.fixture(scope="module")
def judge() -> KeywordJudge:
    return KeywordJudge()


def keywords(judge: KeywordJudge, text: str) -> frozenset[str]:
    found = judge.extract(text)
    return found.keywords


@pytest.mark.parametrize(
    ("variants", "expected"),
    [
        (["T2-weighted", "T2 weighted", "T2w", "T2WI", "T2"], "t2"),
        (["T1-weighted", "T1W", "MPRAGE"], "t1"),
        (["FLAIR", "fluid-attenuated inversion recovery", "T2-FLAIR"], "flair"),
        (["DWI", "diffusion-weighted imaging"], "dwi"),
        (["transverse", "axial", "transaxial"], "axial"),
        (["high signal", "hyperintense", "hyperintensities", "bright"], "hyperintense"),
        (["infarction", "infarct", "infarcts", "stroke"], "infarct"),
        (["oedema", "edema", "vasogenic oedema"], "edema"),
        (["haemorrhage", "hemorrhage", "hemorrhagic", "bleeding"], "hemorrhage"),
        (["tumour", "tumor", "neoplasm"], "tumor"),
        (["lesions", "lesion"], "lesion"),
        (["metastases", "metastatic", "metastasis"], "metastasis"),
        (["ring-enhancing", "rim enhancement", "ring enhancement"], "ring enhancement"),
        (["diffusion restriction", "restricts diffusion"], "restricted diffusion"),
        (["GBM", "glioblastoma multiforme"], "glioblastoma"),
    ],
)  # fmt: skip
def test_synonyms_become_one_keyword(judge, variants, expected):
    for variant in variants:
        assert keywords(judge, variant) == {expected}, variant


@pytest.mark.parametrize("text", ["T1+C", "T1-Gd", "T1 post-contrast", "contrast-enhanced T1WI"])
def test_post_contrast_abbreviations(judge, text):
    found = judge.extract(text)
    assert modality_of(found) == {"t1"}
    assert clinical_of(found) == {"post-contrast"}
    assert not found.abnormal  # naming a sequence is not a finding


def test_case_sensitive_abbreviation(judge):
    assert "multiple sclerosis" in keywords(judge, "Periventricular MS plaques.")
    assert "multiple sclerosis" not in keywords(judge, "TE 90 ms")


def test_modality_split_is_the_benchmark_set(judge):
    found = judge.extract("Axial T2 and coronal FLAIR, DWI and ADC map, SWI.")
    assert modality_of(found) == {"axial", "t2", "coronal", "flair", "dwi"}
    assert clinical_of(found) == {"adc", "swi"}
    assert modality_of(found) <= MODALITY_KEYWORDS


def test_laterality_is_its_own_keyword(judge):
    assert keywords(judge, "left frontal lobe") == {"left", "frontal lobe"}
    assert keywords(judge, "right frontal lobe") == {"right", "frontal lobe"}
    assert keywords(judge, "bilateral thalamic lesions") == {"bilateral", "thalamus", "lesion"}
    assert keywords(judge, "bithalamic") == {"bilateral", "thalamus"}


def test_longest_match_avoids_false_planes_and_findings(judge):
    assert keywords(judge, "transverse sinus") == {"venous sinus"}
    assert keywords(judge, "superior sagittal sinus thrombosis") == {"venous sinus", "thrombosis"}
    assert keywords(judge, "intra-axial") == {"intra-axial"}
    assert keywords(judge, "mass effect") == {"mass effect"}
    # Panel labels like "(c)" are not the "+C" of a contrast sequence.
    assert keywords(judge, "Axial T1 (c)") == {"axial", "t1"}


@pytest.mark.parametrize(
    ("text", "expected", "abnormal"),
    [
        ("No hemorrhage.", {"neg:hemorrhage"}, False),
        ("Lesion without mass effect.", {"lesion", "neg:mass effect"}, True),
        ("No evidence of restricted diffusion.", {"neg:restricted diffusion"}, False),
        ("No hemorrhage or edema.", {"neg:hemorrhage", "neg:edema"}, False),
        # Scope ends at "but" and at sentence punctuation.
        ("No edema but ring enhancement.", {"neg:edema", "ring enhancement"}, True),
        ("No hemorrhage. Edema in the pons.", {"neg:hemorrhage", "edema", "pons"}, True),
        ("No hemorrhage, calcification present.", {"neg:hemorrhage", "calcification"}, True),
        # Negation after the finding.
        ("Hemorrhage is not seen.", {"neg:hemorrhage"}, False),
        ("Restricted diffusion was excluded.", {"neg:restricted diffusion"}, False),
        # A negated concept in one word.
        ("Non-enhancing cystic lesion.", {"neg:enhancement", "cyst", "lesion"}, True),
        # Anatomy in the scope stays plain.
        ("No enhancement in the left thalamus.", {"neg:enhancement", "left", "thalamus"}, False),
        # The location of a negated finding is not negated.
        (
            "No restricted diffusion within the lesion.",
            {"neg:restricted diffusion", "lesion"},
            True,
        ),
        ("Findings argue against abscess.", {"neg:abscess"}, False),
    ],
)
def test_negation(judge, text, expected, abnormal):
    found = judge.extract(text)
    assert modality_of(found) | clinical_of(found) == expected
    assert found.abnormal is abnormal


@pytest.mark.parametrize(
    "text",
    [
        "Axial FLAIR image of the brain.",
        "Normal MRI, no abnormality.",
        "Unremarkable study.",
        "",
    ],
)
def test_true_negatives(judge, text):
    found = judge.extract(text)
    assert clinical_of(found) == frozenset()
    assert found.abnormal is False


def test_abnormal_caption(judge):
    found = judge.extract(
        "Axial T2-weighted image shows a high signal lesion in the left frontal lobe with "
        "surrounding oedema and mass effect (arrow)."
    )
    assert modality_of(found) == {"axial", "t2"}
    assert clinical_of(found) == {
        "hyperintense", "lesion", "left", "frontal lobe", "edema", "mass effect",
    }  # fmt: skip
    assert found.abnormal is True


# Keywords read off each caption by hand with the lexicon's rules (synonyms, sides apart,
# "T1+C" is T1 plus post-contrast, negation up to the next boundary).
HAND_READ = [
    (
        "Axial FLAIR: hyperintense lesion in the right temporal lobe, no hemorrhage.",
        {"axial", "flair"},
        {"hyperintense", "lesion", "right", "temporal lobe", "neg:hemorrhage"},
    ),
    (
        "Coronal T1+C: ring-enhancing mass with central necrosis and surrounding oedema.",
        {"coronal", "t1"},
        {"post-contrast", "ring enhancement", "mass", "necrosis", "edema"},
    ),
    (
        "Sagittal T2: cystic lesion in the posterior fossa with hydrocephalus.",
        {"sagittal", "t2"},
        {"cyst", "lesion", "posterior fossa", "hydrocephalus"},
    ),
]


@pytest.mark.parametrize(("caption", "modality", "clinical"), HAND_READ)
def test_reference_captions_give_the_hand_read_keywords(judge, caption, modality, clinical):
    found = judge.extract(caption)
    assert modality_of(found) == modality
    assert clinical_of(found) == clinical
    assert found.abnormal is True


def test_keyword_f1_against_hand_read_sets(judge):
    references = [clinical for _, _, clinical in HAND_READ]
    extracted = [clinical_of(judge.extract(caption)) for caption, _, _ in HAND_READ]
    assert keyword_f1(references, extracted)["macro"] == 100.0
    # Same side and finding, wrong lobe, hemorrhage not mentioned: 3 shared of 5 and 4.
    hypothesis = judge.extract(
        "Axial FLAIR image shows a hyperintense lesion in the right frontal lobe."
    )
    assert clinical_of(hypothesis) == {"hyperintense", "lesion", "right", "frontal lobe"}
    f1 = keyword_f1([references[0]], [clinical_of(hypothesis)])["macro"]
    assert f1 == pytest.approx(100 * 2 * 3 / (5 + 4))
    assert keyword_f1([{"axial", "flair"}], [modality_of(hypothesis)])["macro"] == 100.0


def test_identity_names_the_lexicon(judge):
    identity = judge.identity()
    assert identity["name"] == "keyword-lexicon"
    assert identity["version"] == yaml.safe_load(DEFAULT_LEXICON.read_text())["version"]
    assert identity["lexicon_sha256"] == hashlib.sha256(DEFAULT_LEXICON.read_bytes()).hexdigest()


MINIMAL = """
name: test
version: "0.1"
negation: {before: ["no"], after: ["absent"], scope_enders: ["but"]}
groups:
  plane: {abnormal: false, negatable: false, concepts: {axial: [axial]}}
  finding: {abnormal: true, negatable: true, concepts: {cyst: [cyst, cystic]}}
"""


def test_a_custom_lexicon_drives_the_judge(tmp_path):
    path = tmp_path / "lexicon.yaml"
    path.write_text(MINIMAL)
    judge = KeywordJudge(path)
    assert judge.extract("Axial: cystic, no cyst") == verdict(
        frozenset({"axial"}), frozenset({"cyst", "neg:cyst"}), True
    )
    assert judge.extract("hemorrhage") == verdict(frozenset(), frozenset(), False)
    assert judge.identity()["version"] == "0.1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("cystic]", "cystic, axial]"), "two meanings"),
        (('before: ["no"]', "before: [no]"), "quote it"),
        (("scope_enders", "x: 1}\ncompounds: {both: [axial, cyst, nodule]}\n#"), "unknown concept"),
    ],
)
def test_lexicon_mistakes_are_config_errors(tmp_path, change, message):
    path = tmp_path / "lexicon.yaml"
    path.write_text(MINIMAL.replace(*change))
    with pytest.raises(ConfigError, match=message):
        KeywordJudge(path)


@pytest.mark.parametrize(
    "caption",
    ["No hemorrhage, edema or mass effect.", "No hemorrhage, edema, or mass effect."],
)
def test_a_negated_list_negates_every_item(caption):
    found = KeywordJudge().extract(caption)
    assert {"neg:hemorrhage", "neg:edema", "neg:mass effect"} <= clinical_of(found)
    assert not found.abnormal


def test_a_comma_without_a_list_still_ends_the_negation():
    found = KeywordJudge().extract(
        "Axial FLAIR, no restricted diffusion, hyperintense lesion in the left frontal lobe."
    )
    assert "neg:restricted diffusion" in clinical_of(found)
    assert {"hyperintense", "lesion"} <= clinical_of(found) and found.abnormal
