"""The anatomy hierarchy and the joint standardization of a caption pair."""

from novabench.judges.anatomy import AnatomyTree

TREE = AnatomyTree(
    {
        "caudate": ["basal ganglia"],
        "putamen": ["lentiform nucleus", "basal ganglia"],
        "lentiform nucleus": ["basal ganglia"],
        "basal ganglia": ["deep gray matter"],
        "fourth ventricle": ["ventricles", "posterior fossa"],
        "carotid bifurcation": ["carotid space"],
        "carotid space": ["neck"],
    }
)


def test_containers_with_their_distance():
    assert TREE.containers("putamen") == {
        "lentiform nucleus": 1,
        "basal ganglia": 1,
        "deep gray matter": 2,
    }
    assert TREE.containers("deep gray matter") == {}


def test_the_nearest_named_container_wins():
    assert TREE.nearest_container("putamen", {"deep gray matter", "lentiform nucleus"}) == (
        "lentiform nucleus"
    )
    assert TREE.nearest_container("putamen", {"deep gray matter"}) == "deep gray matter"
    assert TREE.nearest_container("putamen", {"thalamus"}) is None


def test_each_side_is_coarsened_to_the_other_sides_own_words():
    ref, pred = TREE.standardize(
        frozenset({"caudate", "putamen", "hyperintensity"}),
        frozenset({"basal ganglia", "hyperintensity"}),
    )
    assert ref == pred == {"basal ganglia", "hyperintensity"}
    # Without a container on the other side a structure keeps its own level.
    ref, pred = TREE.standardize(frozenset({"caudate", "putamen"}), frozenset({"thalamus"}))
    assert ref == {"caudate", "putamen"} and pred == {"thalamus"}


def test_a_structure_the_other_side_reaches_by_standardizing_is_kept():
    # The bifurcation becomes "carotid space", so the prediction's "carotid space" stays,
    # although the reference also names the neck, which contains it.
    ref, pred = TREE.standardize(
        frozenset({"neck", "carotid bifurcation"}), frozenset({"neck", "carotid space"})
    )
    assert ref == {"neck", "carotid space"}
    assert pred == {"neck", "carotid space"}


def test_a_structure_in_two_containers_takes_the_one_named():
    ref, _ = TREE.standardize(frozenset({"fourth ventricle"}), frozenset({"posterior fossa"}))
    assert ref == {"posterior fossa"}
