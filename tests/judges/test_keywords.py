"""The offline keyword judge on hand-written captions.

The keywords are the benchmark judge's protocol written with the canonical strings of the
judge validation set's labelling rules: "hyperintensity", "contrast-enhanced", no keyword for
laterality or generic nouns ("lesion"), "normal" for a normal statement. The captions below
are written for these tests (none is copied from the validation set).
"""

import hashlib

import pytest
import yaml

from novabench.caption_keywords import MODALITY_KEYWORDS, split_keywords
from novabench.errors import ConfigError, NovaError
from novabench.judges import KeywordSet
from novabench.judges.keywords import DEFAULT_LEXICON, RULE_IDS, KeywordJudge
from novabench.tasks.captioning.metrics import keyword_f1


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
        (["high signal", "hyperintense", "hyperintensities", "bright"], "hyperintensity"),
        (["infarction", "infarct", "infarcts", "stroke"], "infarct"),
        (["oedema", "edema", "vasogenic oedema"], "edema"),
        (["haemorrhage", "hemorrhage", "hemorrhagic", "bleeding"], "hemorrhage"),
        (["tumour", "tumor", "neoplasm"], "tumor"),
        (["ischaemia", "infarcts", "ischemic stroke"], "infarct"),
        (["grey matter", "gray matter"], "gray matter"),
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
    assert clinical_of(found) == {"contrast-enhanced"}
    assert not found.abnormal  # naming a sequence is not a finding


def test_case_sensitive_abbreviation(judge):
    assert "multiple sclerosis" in keywords(judge, "Periventricular MS plaques.")
    assert "multiple sclerosis" not in keywords(judge, "TE 90 ms")


def test_modality_split_is_the_benchmark_set(judge):
    found = judge.extract("Axial T2 and coronal FLAIR, DWI and ADC map, SWI.")
    assert modality_of(found) == {"axial", "t2", "coronal", "flair", "dwi"}
    assert clinical_of(found) == {"adc", "swi"}
    assert modality_of(found) <= MODALITY_KEYWORDS


def test_laterality_and_generic_nouns_are_dropped(judge):
    # The protocol drops laterality (a 2D slice rarely fixes the side, and a wrong side
    # would cost a whole anatomy keyword) and generic nouns such as "lesion".
    assert keywords(judge, "left frontal lobe") == {"frontal lobe"}
    assert keywords(judge, "right frontal lobe") == {"frontal lobe"}
    assert keywords(judge, "bilateral thalamic lesions") == {"thalamus"}
    assert keywords(judge, "bithalamic") == {"thalamus"}
    # A lesion gives no keyword but still makes the caption abnormal.
    assert judge.extract("A lesion in the pons.") == KeywordSet(frozenset({"pons"}), True)


def test_longest_match_avoids_false_planes_and_findings(judge):
    assert keywords(judge, "transverse sinus") == {"transverse sinus"}
    assert keywords(judge, "superior sagittal sinus thrombosis") == {
        "superior sagittal sinus",
        "thrombosis",
    }
    assert keywords(judge, "intra-axial") == {"intra-axial"}
    assert keywords(judge, "mass effect") == {"mass effect"}
    # Panel labels like "(c)" are not the "+C" of a contrast sequence.
    assert keywords(judge, "Axial T1 (c)") == {"axial", "t1"}


@pytest.mark.parametrize(
    ("text", "expected", "abnormal"),
    [
        ("No hemorrhage.", {"neg:hemorrhage"}, False),
        ("Lesion without mass effect.", {"neg:mass effect"}, True),
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
        ("Non-enhancing cystic lesion.", {"neg:enhancement", "cyst"}, True),
        # Anatomy in the scope stays plain.
        ("No enhancement in the left thalamus.", {"neg:enhancement", "thalamus"}, False),
        # The location of a negated finding is not negated.
        ("No restricted diffusion within the lesion.", {"neg:restricted diffusion"}, True),
        ("Findings argue against abscess.", {"neg:abscess"}, False),
    ],
)
def test_negation(judge, text, expected, abnormal):
    found = judge.extract(text)
    assert modality_of(found) | clinical_of(found) == expected
    assert found.abnormal is abnormal


@pytest.mark.parametrize(
    ("text", "clinical"),
    [
        ("Axial FLAIR image of the brain.", set()),
        ("Normal MRI, no abnormality.", {"normal"}),
        ("Unremarkable study.", {"normal"}),
        ("", set()),
    ],
)
def test_true_negatives(judge, text, clinical):
    found = judge.extract(text)
    assert clinical_of(found) == clinical
    assert found.abnormal is False


def test_abnormal_caption(judge):
    found = judge.extract(
        "Axial T2-weighted image shows a high signal lesion in the left frontal lobe with "
        "surrounding oedema and mass effect (arrow)."
    )
    assert modality_of(found) == {"axial", "t2"}
    assert clinical_of(found) == {"hyperintensity", "frontal lobe", "edema", "mass effect"}
    assert found.abnormal is True


# Keywords read off each caption by hand with the protocol's rules (synonyms, no sides,
# "T1+C" is T1 plus contrast-enhanced, negation up to the next boundary).
HAND_READ = [
    (
        "Axial FLAIR: hyperintense lesion in the right temporal lobe, no hemorrhage.",
        {"axial", "flair"},
        {"hyperintensity", "temporal lobe", "neg:hemorrhage"},
    ),
    (
        "Coronal T1+C: ring-enhancing mass with central necrosis and surrounding oedema.",
        {"coronal", "t1"},
        {"contrast-enhanced", "ring enhancement", "mass", "necrosis", "edema"},
    ),
    (
        "Sagittal T2: cystic lesion in the posterior fossa with hydrocephalus.",
        {"sagittal", "t2"},
        {"cyst", "posterior fossa", "hydrocephalus"},
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
    # Same finding, wrong lobe, hemorrhage not mentioned: 1 shared of 3 and 2.
    hypothesis = judge.extract(
        "Axial FLAIR image shows a hyperintense lesion in the right frontal lobe."
    )
    assert clinical_of(hypothesis) == {"hyperintensity", "frontal lobe"}
    f1 = keyword_f1([references[0]], [clinical_of(hypothesis)])["macro"]
    assert f1 == pytest.approx(100 * 2 * 1 / (3 + 2))
    assert keyword_f1([{"axial", "flair"}], [modality_of(hypothesis)])["macro"] == 100.0


def test_identity_names_the_lexicon(judge):
    identity = judge.identity()
    assert identity["name"] == "keyword-lexicon"
    assert identity["lexicon_version"] == yaml.safe_load(DEFAULT_LEXICON.read_text())["version"]
    assert identity["lexicon_sha256"] == hashlib.sha256(DEFAULT_LEXICON.read_bytes()).hexdigest()


# The built-in lexicon's engine section, and the concepts it names, each with one form.
ENGINE = yaml.safe_load(DEFAULT_LEXICON.read_text(encoding="utf-8"))["engine"]
RULE_CONCEPTS = [
    *(v for k, v in ENGINE["concepts"].items() if k not in ("sequences", "perfusion_signal")),
    *ENGINE["concepts"]["sequences"],
    *(x for pair in ENGINE["concepts"]["perfusion_signal"].items() for x in pair),
]
RULE_CONCEPTS_GROUP = (
    "  rules: {abnormal: true, negatable: true, concepts: {"
    + ", ".join(f"{key}: [zz{i}]" for i, key in enumerate(RULE_CONCEPTS))
    + "}}\n"
)
MINIMAL = (
    """
name: test
version: "0.1"
negation: {before: ["no"], after: ["absent"], scope_enders: ["but"]}
groups:
  plane: {abnormal: false, negatable: false, concepts: {axial: [axial]}}
  finding: {abnormal: true, negatable: true, concepts: {cyst: [cyst, cystic]}}
"""
    + RULE_CONCEPTS_GROUP
    + "engine: "
    + yaml.safe_dump(ENGINE, default_flow_style=True, width=10_000)
)


def test_a_custom_lexicon_drives_the_judge(tmp_path):
    path = tmp_path / "lexicon.yaml"
    path.write_text(MINIMAL)
    judge = KeywordJudge(path)
    assert judge.extract("Axial: cystic, no cyst") == verdict(
        frozenset({"axial"}), frozenset({"cyst", "neg:cyst"}), True
    )
    assert judge.extract("hemorrhage") == verdict(frozenset(), frozenset(), False)
    assert judge.identity()["lexicon_version"] == "0.1"


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


@pytest.mark.parametrize("key", ["thickening", "normal variant", "hypoperfusion"])
def test_a_lexicon_lacking_a_concept_the_rules_name_is_refused(tmp_path, key):
    path = tmp_path / "lexicon.yaml"
    path.write_text(MINIMAL.replace(f"{key}: [", "other: ["))
    with pytest.raises(ConfigError) as caught:
        KeywordJudge(path)
    assert str(caught.value) == (
        f"judge lexicon {path}: the judge's rules name the concept {key!r}, which the "
        f"lexicon does not define; fix: add {key!r} to the concepts of a group of the lexicon"
    )


def test_open_names_need_the_groups_they_are_recorded_under(tmp_path):
    path = tmp_path / "lexicon.yaml"
    path.write_text(MINIMAL + "open_names: {heads: [syndrome]}\n")
    with pytest.raises(ConfigError, match="the judge's rules name the group 'diagnosis'"):
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
    assert {"hyperintensity", "frontal lobe"} <= clinical_of(found) and found.abnormal


# -- failures reported on labelled radiology captions, one test each (own wording) -------


def test_pair_standardizes_anatomy_to_the_other_sides_container(judge):
    ref, pred = judge.judge_pair(
        "Coronal FLAIR: bright signal in both caudate heads and putamina.",
        "Coronal FLAIR shows symmetric basal ganglia hyperintensity.",
    )
    assert clinical_of(ref) == clinical_of(pred) == {"hyperintensity", "basal ganglia"}
    ref, pred = judge.judge_pair(
        "Sagittal T1: a 6 mm pituitary nodule.", "Sagittal T1 image shows a sellar mass."
    )
    assert clinical_of(ref) == {"nodule", "sella"}
    assert clinical_of(pred) == {"mass", "sella"}
    # Judged alone, each caption keeps its own level.
    assert clinical_of(judge.extract("Bright caudate heads and putamina.")) == {
        "hyperintensity",
        "caudate",
        "putamen",
    }


def test_pair_standardization_needs_a_container_named_by_the_other_side(judge):
    # "periventricular white matter" is in the white matter, not in the pons: both stay.
    ref, pred = judge.judge_pair(
        "Axial FLAIR: periventricular white matter lesions.", "Axial FLAIR: pontine lesion."
    )
    assert clinical_of(ref) == {"periventricular white matter"}
    assert clinical_of(pred) == {"pons"}
    # A tissue compartment is never folded into a lobe.
    ref, pred = judge.judge_pair("Frontal cortex hyperintensity.", "Frontal lobe hyperintensity.")
    assert clinical_of(ref) == {"frontal lobe", "cortex", "hyperintensity"}


@pytest.mark.parametrize(
    ("caption", "sign"),
    [
        (
            "Axial T2: a cross-shaped pontine hyperintensity, the hot-cross-bun sign.",
            "hot cross bun sign",
        ),
        ("Axial T1 through the midbrain: molar tooth appearance.", "molar tooth sign"),
        ("Sagittal FLAIR: callosal lesions forming Dawson's fingers.", "dawson fingers"),
        ("Axial FLAIR: sulcal hyperintensity over the left hemisphere (ivy sign).", "ivy sign"),
        ("Coronal post-contrast T1: empty delta sign in the sagittal sinus.", "empty delta sign"),
    ],
)
def test_named_signs_are_one_keyword_each(judge, caption, sign):
    found = judge.extract(caption)
    assert sign in clinical_of(found)
    assert found.abnormal is True


@pytest.mark.parametrize(
    ("caption", "diagnosis"),
    [
        ("Sagittal T2: long-segment cord hyperintensity, likely myelitis.", "myelitis"),
        ("Coronal STIR: swollen bright left optic nerve, optic neuritis.", "optic neuritis"),
        (
            "Sagittal T1: brainstem sagging from intracranial hypotension.",
            "intracranial hypotension",
        ),
    ],
)
def test_spinal_optic_and_csf_pressure_diagnoses_are_known(judge, caption, diagnosis):
    found = judge.extract(caption)
    assert diagnosis in clinical_of(found)
    assert found.abnormal is True


def test_transverse_myelitis_is_a_disease_not_the_axial_plane(judge):
    found = judge.extract("Sagittal T2 of the thoracic cord in keeping with transverse myelitis.")
    assert modality_of(found) == {"sagittal", "t2"}
    assert clinical_of(found) == {"thoracic spinal cord", "transverse myelitis"}
    assert found.abnormal is True
    assert modality_of(judge.extract("Transverse T2 image.")) == {"axial", "t2"}


def test_not_restricting_diffusion_names_no_diffusion_sequence(judge):
    found = judge.extract("The cyst does not restrict diffusion.")
    assert modality_of(found) == frozenset()
    assert clinical_of(found) == {"cyst", "neg:restricted diffusion"}
    # Naming the sequence still counts: "on DWI".
    assert modality_of(judge.extract("No restriction on DWI.")) == {"dwi"}


def test_spectroscopy_and_perfusion_findings_are_clinical_findings(judge):
    found = judge.extract(
        "MR spectroscopy of the mass: choline is markedly elevated, NAA is reduced and "
        "there is a lipid-lactate peak."
    )
    assert modality_of(found) == frozenset()
    assert clinical_of(found) == {
        "mrs",
        "mass",
        "elevated choline",
        "reduced naa",
        "lipid-lactate peak",
    }
    assert found.abnormal is True
    perfusion = judge.extract("DSC perfusion: increased rCBV in the enhancing rim.")
    assert clinical_of(perfusion) == {"perfusion", "elevated rcbv", "ring enhancement"}
    assert perfusion.abnormal is True
    # On an ASL map alone, "increased signal" is increased perfusion.
    asl = judge.extract("ASL shows increased signal in the right parietal cortex.")
    assert clinical_of(asl) == {"perfusion", "hyperperfusion", "parietal lobe", "cortex"}


def test_an_abnormal_spectrum_is_abnormal_and_a_normal_one_is_not(judge):
    assert judge.extract("Single-voxel MRS: NAA markedly reduced.").abnormal is True
    normal = judge.extract("Single-voxel MRS shows a normal spectrum.")
    assert clinical_of(normal) == {"mrs", "normal spectrum"}
    assert normal.abnormal is False


def test_close_concepts_stay_distinct(judge):
    assert clinical_of(judge.extract("Hypoplastic vermis.")) == {"hypoplasia", "cerebellar vermis"}
    assert clinical_of(judge.extract("Agenesis of the vermis.")) == {
        "agenesis",
        "cerebellar vermis",
    }
    lepto = clinical_of(judge.extract("Leptomeningeal enhancement."))
    pachy = clinical_of(judge.extract("Pachymeningeal enhancement."))
    assert lepto == {"leptomeningeal enhancement"} and pachy == {"pachymeningeal enhancement"}
    assert clinical_of(judge.extract("Dural thickening.")) == {"pachymeningeal thickening"}
    assert clinical_of(judge.extract("Gyral enhancement.")) == {"gyriform enhancement"}


def test_absent_structure_is_agenesis_and_absent_finding_is_negated(judge):
    assert clinical_of(judge.extract("Absent septum pellucidum.")) == {
        "agenesis",
        "septum pellucidum",
    }
    assert clinical_of(judge.extract("Absent flow void in the left carotid artery.")) == {
        "neg:flow void",
        "carotid artery",
    }
    # Losing a normal sign is the abnormal finding.
    found = judge.extract("Sagittal T1: absence of the posterior pituitary bright spot.")
    assert clinical_of(found) == {"neg:posterior pituitary bright spot"}
    assert found.abnormal is True


@pytest.mark.parametrize(
    ("caption", "clinical", "abnormal"),
    [
        # Hedged findings count as stated.
        ("A glioma cannot be excluded.", {"glioma"}, True),
        ("Possible subacute infarct.", {"subacute infarct"}, True),
        # Only the improbable is negated.
        ("Findings favour lymphoma over glioblastoma.", {"lymphoma", "neg:glioblastoma"}, True),
        ("Gliosis rather than tumour.", {"gliosis", "neg:tumor"}, True),
        (
            "Ring enhancement; metastasis is less likely.",
            {"ring enhancement", "neg:metastasis"},
            True,
        ),
        ("Findings are unlikely to represent an abscess.", {"neg:abscess"}, False),
        # What cannot be assessed gives no keyword.
        ("No enhancing nodule can be assessed on this sequence.", set(), False),
    ],
)
def test_uncertainty_and_negation_follow_context_rules(judge, caption, clinical, abnormal):
    found = judge.extract(caption)
    assert clinical_of(found) == clinical
    assert found.abnormal is abnormal


@pytest.mark.parametrize(
    ("caption", "clinical"),
    [
        (
            "Normal enhancement of the dural sinuses.",
            {"normal", "enhancement", "dural venous sinus"},
        ),
        (
            "Low signal in the globi pallidi, physiological mineralization.",
            {"hypointensity", "globus pallidus", "normal", "mineralization"},
        ),
        ("Hypoplastic right transverse sinus.", {"hypoplasia", "transverse sinus"}),
        (
            "Cavum septum pellucidum, a normal variant.",
            {"cavum septum pellucidum", "normal variant"},
        ),
        ("No focal lesion.", {"normal"}),
    ],
)
def test_normal_statements_and_variants_are_not_abnormal(judge, caption, clinical):
    found = judge.extract(caption)
    assert clinical_of(found) == clinical
    assert found.abnormal is False


def test_unknown_syndromes_and_disease_words_become_keywords(judge):
    found = judge.extract("Findings suggest Smith-Lemli syndrome or a pineocytoid neuroblastoma.")
    assert "smith lemli syndrome" in clinical_of(found)
    assert found.abnormal is True
    assert "xanthogranulomatosis" in clinical_of(judge.extract("Possible xanthogranulomatosis."))
    # A proper name before a known disease head stays part of it.
    assert clinical_of(judge.extract("Consistent with Bickerstaff encephalitis.")) == {
        "bickerstaff encephalitis"
    }


def test_british_spelling_and_accents_are_read(judge):
    assert clinical_of(judge.extract("Haemorrhagic tumour with oedema.")) == {
        "hemorrhage",
        "tumor",
        "edema",
    }
    assert "balo concentric sclerosis" in clinical_of(judge.extract("Baló concentric sclerosis."))
    assert "guillain-barre syndrome" in clinical_of(judge.extract("Guillain-Barré syndrome."))


def test_pair_scores_match_hand_read_keywords():
    """Clinical F1 of a pair from judge_pair equals the F1 of keywords read by hand."""
    judge = KeywordJudge()
    reference = (
        "Axial FLAIR: hyperintensity of the left hippocampus and amygdala with swelling, "
        "suspicious for limbic encephalitis."
    )
    prediction = "Axial FLAIR shows mesial temporal hyperintensity; no mass effect."
    # Hand reading: the hippocampus and amygdala become the medial temporal lobe that the
    # prediction names; "no mass effect" is a negated finding.
    hand_ref = {"hyperintensity", "medial temporal lobe", "swelling", "limbic encephalitis"}
    hand_pred = {"medial temporal lobe", "hyperintensity", "neg:mass effect"}
    ref, pred = judge.judge_pair(reference, prediction)
    assert (clinical_of(ref), clinical_of(pred)) == (hand_ref, hand_pred)
    assert keyword_f1([clinical_of(ref)], [clinical_of(pred)])["macro"] == pytest.approx(
        100 * 2 * 2 / (4 + 3)
    )


def test_anatomy_parents_must_name_anatomy(tmp_path):
    path = tmp_path / "lexicon.yaml"
    path.write_text(MINIMAL + "anatomy_parents: {cyst: [axial]}\n")
    with pytest.raises(ConfigError, match="anatomy_parents names 'cyst', not an anatomy concept"):
        KeywordJudge(path)


def test_the_lexicon_is_an_input_of_scoring(tmp_path):
    """Editing the lexicon re-scores: a configured one is among the score job's inputs, the
    built-in one in the judge's code fingerprint (not an absolute path that moves)."""
    from novabench.code_fingerprint import code_graph
    from novabench.judges.base import judge_kind

    kind = judge_kind("keyword-lexicon")
    assert kind.input_files("keywords", {}, "captioning", str) == []
    assert DEFAULT_LEXICON.resolve() in code_graph().files(["novabench.judges.keywords"])
    own = {"lexicon_path": "my/lexicon.yaml"}
    resolved = kind.input_files("keywords", own, "captioning", lambda p: f"/base/{p}")
    assert resolved == ["/base/my/lexicon.yaml"]


def test_every_rule_has_examples_and_each_example_fires_its_rule():
    rules = yaml.safe_load(DEFAULT_LEXICON.read_text(encoding="utf-8"))["rules"]
    assert set(rules) == set(RULE_IDS)
    judge = KeywordJudge()
    for rule, spec in rules.items():
        for example in spec["examples"]:
            assert rule in [f.rule for f in judge.explain(example).fired], (rule, example)


def test_explain_lists_the_rules_in_order_and_the_deciding_one():
    found = KeywordJudge().explain("No hemorrhage, edema or mass effect. Enlarged optic nerve.")
    assert [(f.rule, f.phrase, f.concept) for f in found.fired] == [
        ("negation.before", "no", ""),
        ("phrase.concept", "hemorrhage", "hemorrhage"),
        ("negation.list-continues", ",", ""),
        ("phrase.concept", "edema", "edema"),
        ("phrase.concept", "mass effect", "mass effect"),
        ("phrase.concept", "enlarged", "enlargement"),
        ("phrase.concept", "optic nerve", "optic nerve"),
        ("caption.thickening", "", "thickening"),
        ("verdict.abnormal", "phrase.concept", "thickening"),
    ]
    assert found.decided == found.fired[-1]
    assert found.keywords == KeywordJudge().extract(
        "No hemorrhage, edema or mass effect. Enlarged optic nerve."
    )
    assert KeywordJudge().explain("Unremarkable.").decided.rule == "verdict.normal"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("name: test", "nmae: test"), "unknown key nmae; fix: use one of anatomy_parents, "),
        (("list_closers", "closers"), "unknown key engine.closers; fix: use one of concepts, "),
        (("generic: generic", "generik: generic"), "unknown key engine.groups.generik; fix: "),
        (("version", "rules: {phrase.x: {examples: [a]}}\nversion"), "unknown key rules.phrase.x"),
        (
            ("version", "rules: {phrase.concept: {}}\nversion"),
            "rules.phrase.concept needs examples",
        ),
        (("generic: generic, ", ""), "engine lacks generic; fix: name the lexicon's own group"),
    ],
)
def test_lexicon_keys_are_checked_when_it_is_loaded(tmp_path, change, message):
    path = tmp_path / "lexicon.yaml"
    text = MINIMAL.replace(*change)
    assert text != MINIMAL
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        KeywordJudge(path)
    assert str(caught.value).startswith("judge lexicon lexicon.yaml: ")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_lexicon_with_a_key_given_twice_is_refused_naming_its_line(tmp_path):
    """YAML keeps the last of two equal keys: a rule or a group would vanish silently."""
    text = DEFAULT_LEXICON.read_text()
    head, sep, rest = text.partition("\nversion:")
    assert sep, "the lexicon has a top-level version key"
    lexicon = tmp_path / "lexicon.yaml"
    lexicon.write_text(f"{head}{sep}{rest}\nversion: 2\n")
    line = lexicon.read_text().count("\n")
    with pytest.raises(NovaError, match=f"lexicon.yaml:{line}: the key 'version' is given twice"):
        KeywordJudge(lexicon)
