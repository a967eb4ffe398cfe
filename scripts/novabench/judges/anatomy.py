"""Anatomy hierarchy of the keyword judge, and joint standardization of a caption pair.

The benchmark's judge standardizes the keywords of a reference and a prediction together:
anatomy named at different levels ends up as one string ("caudate and putamen" against
"basal ganglia" is "basal ganglia" on both sides). The rule, as the labelling protocol of
the judge validation set writes it: for each structure one caption names, keep it if the
other caption names it too; otherwise, if the other caption names a structure that
contains it, replace it by the smallest such container; otherwise keep it. Only the other
caption's own words count (no chains through replaced words).

Containment comes from the lexicon's ``anatomy_parents`` (structure -> its direct
containers; a structure may have several, e.g. the fourth ventricle is in the ventricular
system and in the posterior fossa). Written by hand: no anatomy ontology that ships offline
with a usable licence and install size was found (see the lexicon header).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class AnatomyTree:
    """Direct containers of each structure, and the nearest container from a set."""

    def __init__(self, parents: Mapping[str, Iterable[str]]):
        self._parents = {child: tuple(ups) for child, ups in parents.items()}

    def containers(self, structure: str) -> dict[str, int]:
        """Every structure containing ``structure``, with its distance in steps (1 = direct)."""
        distance: dict[str, int] = {}
        frontier = [structure]
        steps = 0
        while frontier:
            steps += 1
            upper = []
            for node in frontier:
                for parent in self._parents.get(node, ()):
                    if parent not in distance:
                        distance[parent] = steps
                        upper.append(parent)
            frontier = upper
        return distance

    def nearest_container(self, structure: str, named: Iterable[str]) -> str | None:
        """The smallest structure of ``named`` that contains ``structure`` (None if none)."""
        distance = self.containers(structure)
        found = [(distance[name], name) for name in named if name in distance]
        return min(found)[1] if found else None

    def coarsen(
        self, own: frozenset[str], other: frozenset[str], keep: frozenset[str] = frozenset()
    ) -> frozenset[str]:
        """``own`` keywords with each structure that neither ``other`` nor ``keep`` holds
        replaced by its nearest container in ``other`` (non-structures pass through)."""
        out = set()
        for keyword in own:
            if keyword in other or keyword in keep:
                out.add(keyword)
                continue
            out.add(self.nearest_container(keyword, other) or keyword)
        return frozenset(out)

    def standardize(
        self, reference: frozenset[str], prediction: frozenset[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        """Both sides of a pair standardized jointly (each against the other's own words).

        A structure is also kept when the other side's *standardized* keywords hold it:
        "carotid space" against "neck" and "carotid bifurcation" stays "carotid space",
        because the bifurcation becomes "carotid space".
        """
        ref_first = self.coarsen(reference, prediction)
        pred_first = self.coarsen(prediction, reference)
        return (
            self.coarsen(reference, prediction, keep=pred_first),
            self.coarsen(prediction, reference, keep=ref_first),
        )
