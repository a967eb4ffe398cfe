"""The text layer (novabench.text): each normalization step and the phrase index."""

import pytest

from novabench import text
from novabench.text import PhraseIndex, longest_of


def test_fold_accents_drops_diacritics_and_spells_out_letters_on_request():
    assert text.fold_accents("Baló Barré Sjögren") == "Balo Barre Sjogren"
    assert text.fold_accents("Købe œdème") == "Købe œdeme"
    assert text.fold_accents("Købe œdème", letters=True) == "Kobe oedeme"


@pytest.mark.parametrize(
    ("british", "american"),
    [
        ("Haemorrhagic Tumour", "hemorrhagic tumor"),
        ("ischaemic leukaemia", "ischemic leukemia"),
        ("grey matter, greyish", "gray matter, greyish"),
        ("apnoea and diarrhoea", "apnea and diarrhea"),
        ("encephalocoele", "encephalocele"),
        ("organisation", "organisation"),  # -isation is the word list's, not this one's
    ],
)
def test_american_spelling_rewrites_the_whole_text(british, american):
    assert text.american_spelling(british) == american


@pytest.mark.parametrize(
    ("british", "american"),
    [
        ("haematoma", "hematoma"),
        ("ischaemic", "ischemic"),  # "aem" anywhere in the word
        ("oedema", "edema"),
        ("grey", "gray"),
        ("greyish", "greyish"),  # ^grey$ only
        ("organisation", "organization"),
        ("rising", "rising"),  # a kept word
        ("arising", "arising"),
        ("labelling", "labeling"),
    ],
)
def test_american_word_rewrites_one_word_and_keeps_the_kept_ones(british, american):
    assert text.american_word(british) == american


def test_regular_plurals_of_the_last_word():
    assert text.regular_plurals(("white", "matter", "lesion")) == [("white", "matter", "lesions")]
    assert text.regular_plurals(("abscess",)) == [("abscesss",), ("abscesses",)]
    assert text.regular_plurals(("artery",)) == [("arterys",), ("arteries",)]
    assert text.regular_plurals(("ray",)) == [("rays",)]
    assert text.regular_plurals(("t2",)) == []


@pytest.mark.parametrize(
    ("plural", "singular"),
    [
        ("meningiomata", "meningioma"),
        ("arteries", "artery"),
        ("abscesses", "abscess"),
        ("sclerosis", "sclerosis"),
        ("lesions", "lesion"),
        ("mets", "mets"),  # four letters or fewer: an abbreviation
        ("t2ws", "t2ws"),
        ("metastases", "metastasis"),  # an exception
    ],
)
def test_singular(plural, singular):
    assert text.singular(plural, {"metastases": "metastasis"}) == singular


@pytest.mark.parametrize(
    ("word", "after_number_word", "after_code", "digits"),
    [
        ("iii", False, False, "3"),
        ("viii", False, False, "8"),
        ("i", False, False, "i"),
        ("i", True, False, "1"),
        ("v", True, False, "5"),
        ("iib", False, False, "2b"),
        ("ia", False, False, "ia"),
        ("ia", False, True, "1a"),
        ("ia", True, False, "1a"),
        ("x", True, False, "x"),
    ],
)
def test_roman_numeral(word, after_number_word, after_code, digits):
    assert text.roman_numeral(word, after_number_word, after_code) == digits


INDEX = PhraseIndex(
    {
        ("mass",): "mass",
        ("mass", "effect"): "mass effect",
        ("transverse",): "axial",
        ("transverse", "sinus"): "vein",
        ("a", "b", "c"): "abc",
    }
)


def test_the_longest_phrase_at_a_position_wins():
    tokens = ["no", "mass", "effect", "on", "the", "transverse", "sinus"]
    assert INDEX.longest(tokens, 1) == (2, "mass effect")
    assert INDEX.longest(tokens, 5) == (2, "vein")
    assert INDEX.longest(tokens, 0) == (0, None)
    assert INDEX.longest(["mass"]) == (1, "mass")


def test_a_longer_phrase_that_does_not_finish_falls_back_to_the_shorter():
    assert INDEX.longest(["a", "b"]) == (0, None)
    assert INDEX.longest(["transverse", "plane"]) == (1, "axial")


def test_scan_is_greedy_left_to_right():
    tokens = ["mass", "effect", "and", "a", "b", "c", "mass"]
    assert list(INDEX.scan(tokens)) == [(0, 2, "mass effect"), (3, 3, "abc"), (6, 1, "mass")]


def test_a_phrase_keeps_its_first_value_unless_replaced():
    index = PhraseIndex({("cyst",): "first"})
    index.add(("cyst",), "second")
    assert index.get(("cyst",)) == "first"
    index.add(("cyst",), "third", replace=True)
    assert (index.get(("cyst",)), index.get(("cy",), "none"), len(index)) == ("third", "none", 1)


def test_between_indexes_the_longest_wins_and_a_tie_goes_to_the_first():
    exact = PhraseIndex({("MS",): "multiple sclerosis"})
    lowered = PhraseIndex({("ms",): "milliseconds", ("ms", "lesion"): "lesion"})
    original, lower = ["MS", "plaque"], ["ms", "plaque"]
    assert longest_of((exact, original), (lowered, lower), start=0) == (1, "multiple sclerosis")
    assert longest_of((lowered, lower), (exact, original), start=0) == (1, "milliseconds")
    tokens = ["MS", "lesion"]
    found = longest_of((exact, tokens), (lowered, [t.lower() for t in tokens]), start=0)
    assert found == (2, "lesion")


def test_drop_possessives_in_lower_case_or_any_case():
    assert text.drop_possessives("Wilson's and WILSON'S, Creutzfeldt’s") == (
        "Wilson and WILSON'S, Creutzfeldt"
    )
    assert text.drop_possessives("WILSON'S disease", any_case=True) == "WILSON disease"


def test_plain_words_is_a_light_lookup_key():
    assert text.plain_words("Non-Hodgkin's  Lymphoma (Tumour)") == "non hodgkin s lymphoma tumor"


def test_ize_spelling_after_three_letters():
    assert text.ize_spelling("necrotising generalised organisation rising") == (
        "necrotizing generalized organization rising"
    )
