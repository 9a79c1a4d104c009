"""Brute-force possible-world oracle for serial publishing (paper 004, Definitions 1-2).

Independent of :mod:`anonymizer.privacy`: nothing here uses the closed form
``1 - Π(1 - n_s/n)``. The adversary's view of a release series is a list of releases, each
a list of groups; a group is ``(candidates, values)``: the ids of the individuals that may
own its records, and the published sensitive values of its records (owners unknown).

A *possible world* of one release picks, in every group, an injective assignment of the
group's records to its candidates (candidates left over are absent from the release).
Releases are independent (transient sensitive values), so the worlds of the series are the
Cartesian product of the releases' worlds, all equally likely. ``p(o, s)`` is the fraction
of worlds in which o is assigned s in at least one release.

How it is counted, exactly (``fractions.Fraction``):

1. Groups of one release are independent and o is a candidate of at most one of them, so
   the fraction of a release's worlds that give o the value s is the fraction of its
   group's assignments (``itertools.permutations`` of candidates, one per record) that do;
   the other groups of the release only multiply both counts by the same factor.
2. Across releases, every combination of per-release outcomes ("o gets s" / "o does not")
   is enumerated with ``itertools.product``, weighted by the number of worlds giving it,
   and the weights of the combinations with at least one hit are summed.

Fine for groups of up to about 8 candidates and a handful of releases.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from fractions import Fraction
from functools import lru_cache

Group = tuple[Sequence[Hashable], Sequence[Hashable]]
Release = Sequence[Group]


@lru_cache(maxsize=4096)
def _assignment_counts(n_candidates: int, values: tuple[Hashable, ...]) -> tuple[int, tuple[dict[Hashable, int], ...]]:
    """Enumerate every injective assignment of the records (``values``) to candidate slots
    ``0..n_candidates-1``.

    Returns:
        (number of assignments, per slot: {value: number of assignments giving it that value}).
    """
    if len(values) > n_candidates:
        raise ValueError(f"a group has {len(values)} records but only {n_candidates} candidates")
    per_slot: list[dict[Hashable, int]] = [{} for _ in range(n_candidates)]
    total = 0
    for owners in itertools.permutations(range(n_candidates), len(values)):
        total += 1
        for record, slot in enumerate(owners):
            counts = per_slot[slot]
            counts[values[record]] = counts.get(values[record], 0) + 1
    return total, tuple(per_slot)


def release_marginals(release: Release) -> dict[Hashable, tuple[int, dict[Hashable, int]]]:
    """Per individual covered by a group of the release: (worlds of its group, {value: worlds
    of its group in which it is assigned that value}).

    Raises:
        ValueError: an individual is a candidate of two groups (the release is not a
            partition), a candidate is listed twice, or a group has more records than
            candidates.
    """
    out: dict[Hashable, tuple[int, dict[Hashable, int]]] = {}
    for candidates, values in release:
        cands = list(candidates)
        if len(set(cands)) != len(cands):
            raise ValueError(f"a group lists a candidate twice: {cands}")
        total, per_slot = _assignment_counts(len(cands), tuple(values))
        for slot, o in enumerate(cands):
            if o in out:
                raise ValueError(f"individual {o!r} is a candidate of two groups of one release")
            out[o] = (total, per_slot[slot])
    return out


def breach_probability(releases: Sequence[Release], individual: Hashable, value: Hashable) -> Fraction:
    """Exact p(o, s): fraction of possible worlds linking ``individual`` to ``value`` in at
    least one release."""
    # per release: list of (outcome "o gets s", number of worlds of o's group giving it)
    outcomes: list[list[tuple[bool, int]]] = []
    for release in releases:
        marg = release_marginals(release)
        if individual not in marg:
            continue  # not a candidate: o is not linked to anything in this release
        total, hits = marg[individual]
        hit = hits.get(value, 0)
        outcomes.append([(True, hit), (False, total - hit)])
    worlds = 0
    linked = 0
    for cell in itertools.product(*outcomes):
        weight = 1
        for _, count in cell:
            weight *= count
        worlds += weight
        if any(hit for hit, _ in cell):
            linked += weight
    return Fraction(linked, worlds) if worlds else Fraction(0)


def breach_table(releases: Sequence[Release], values: Sequence[Hashable]) -> dict[tuple[Hashable, Hashable], Fraction]:
    """p(o, s) for every individual that is a candidate in some release and every value given."""
    individuals: dict[Hashable, None] = {}
    for release in releases:
        for candidates, _ in release:
            individuals.update(dict.fromkeys(candidates))
    return {(o, s): breach_probability(releases, o, s) for o in individuals for s in values}
