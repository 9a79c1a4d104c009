"""Possible-world oracle of an adversary who knows the algorithm (docs/threat-model.md).

The adversary knows the register (every individual's QI leaves), the hierarchies, the
parameters, the state before the release (computable from the published releases) and
serialpub's deterministic anonymizer, seed included. A *world* is what the adversary does
not know about one snapshot: who is present (under register dilution; under presence the
present individuals are public) and every present individual's sensitive value. Under a
uniform prior over worlds, the adversary's posterior that o has s in the release is the
fraction of the worlds the mechanism maps to the *observed* output (every published group
with the multiset of its published values, and the suppressed count of the manifest) in
which o is present with s.

Two channels:

- :func:`fixed_partition_output`: the partition (the cut) is held fixed at the observed
  one; only what the mechanism does inside it (value-selective suppression under the
  paper's model, nothing under the mechanism-aware one) depends on the world. This is the
  suppression channel of the minimality attack (Wong, Fu, Wang, Pei, VLDB 2007).
- :func:`whole_output`: the whole anonymizer runs on every world, so the partition itself
  is evidence: a region left unsplit tells something about its parts.

Nothing here uses the closed form of the charge: posteriors are counted world by world,
in exact fractions. Tiny instances only (a few hundred to a few thousand worlds).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from hierarchy_oracle import ancestor_matrix

from anonymizer.hierarchy import Hierarchy
from anonymizer.release import (
    History,
    PrivacyParams,
    ReleaseResult,
    SnapshotCodes,
    _choose_published,
    anonymize_history,
    class_targets,
)
from anonymizer.search import InfeasibleError, settle_suppression


@dataclass(frozen=True)
class Instance:
    """What the adversary knows besides the output.

    Attributes:
        keys: leaf id per QI of every register individual, shape (N, d).
        hierarchies: one per QI.
        domain: every sensitive value a record can carry.
        protected: the protected values (a subset of ``domain``), in state column order.
        params: ℓ, strategy, guarantee, suppression model.
        presence: candidates are the present individuals (presence is public).
        budget: suppression budget in records (0 under the mechanism-aware model).
    """

    keys: np.ndarray
    hierarchies: Sequence[Hierarchy]
    domain: tuple[str, ...]
    protected: tuple[str, ...]
    params: PrivacyParams
    presence: bool
    budget: int


@dataclass(frozen=True)
class World:
    """One snapshot: the present register rows (sorted) and the value of each."""

    rows: tuple[int, ...]
    values: tuple[str, ...]


def record_sets(inst: Instance, world: World) -> np.ndarray:
    index = {v: i for i, v in enumerate(inst.protected)}
    return np.array([index.get(v, -1) for v in world.values], dtype=np.int64)


def anonymize(inst: Instance, history: History, world: World, seed: int) -> ReleaseResult:
    """The real anonymizer on one world (raises InfeasibleError as it does)."""
    snapshot = SnapshotCodes(np.asarray(world.rows, dtype=np.int64), record_sets(inst, world), len(inst.protected))
    return anonymize_history(
        inst.keys, snapshot, history, inst.params, list(inst.hierarchies), inst.presence, budget=inst.budget, seed=seed
    )


def _canonical(group_keys: Sequence[tuple[int, ...]], group_values: Sequence[list[str]], suppressed: int) -> Hashable:
    """The output as a reader of the release sees it: the published groups (node tuple and
    sorted values, in no particular order) and the suppressed count."""
    groups = sorted((key, tuple(sorted(vals))) for key, vals in zip(group_keys, group_values, strict=True) if vals)
    return (tuple(groups), suppressed)


def whole_output(inst: Instance, history: History, world: World, seed: int) -> Hashable:
    """The published output of the whole mechanism on ``world``; None when it refuses."""
    try:
        result = anonymize(inst, history, world, seed)
    except InfeasibleError:
        return None
    values: list[list[str]] = [[] for _ in range(result.group_nodes.shape[0])]
    for r, g in enumerate(result.group_of_record.tolist()):
        if g >= 0:
            values[g].append(world.values[r])
    keys = [tuple(int(x) for x in row) for row in result.group_nodes]
    return _canonical(keys, values, result.suppressed)


def fixed_partition_output(inst: Instance, history: History, world: World, seed: int, regions: np.ndarray) -> Hashable:
    """The output with the partition held fixed (:func:`fixed_partition_channel` for one world)."""
    return fixed_partition_channel(inst, history, seed, regions)(world)


def fixed_partition_channel(
    inst: Instance, history: History, seed: int, regions: np.ndarray
) -> Callable[[World], Hashable]:
    """The output with the partition held fixed, as a function of the world: ``regions``
    (G, d) are the node tuples of every region of the observed partition
    (``result.generalization.groups.keys``, those without records included), whatever the
    search (a cut or top-down boxes). Then only the mechanism's suppression step depends on
    the world's counts, as :func:`anonymizer.release.anonymize_history` performs it (nothing
    is suppressed under the mechanism-aware model, whose budget is 0). Which regions hold
    each register individual depends on neither the world nor its values, so it is worked
    out once for all the worlds a posterior enumerates."""
    d = inst.keys.shape[1]
    anc = [ancestor_matrix(h) for h in inst.hierarchies]
    holding = [
        [g for g in range(regions.shape[0]) if all(anc[a][inst.keys[i, a], regions[g, a]] for a in range(d))]
        for i in range(inst.keys.shape[0])
    ]
    keys = [tuple(int(x) for x in row) for row in regions]
    n_groups, n_sets = regions.shape[0], len(inst.protected)
    targets = class_targets(inst.params, history)

    def output(world: World) -> Hashable:
        members = np.asarray(world.rows, dtype=np.int64) if inst.presence else np.arange(inst.keys.shape[0])
        group_of_ind = np.full(inst.keys.shape[0], -1, dtype=np.int64)
        for i in members.tolist():
            assert len(holding[i]) == 1, (i, holding[i])  # the regions tile the members' part of the domain
            group_of_ind[i] = holding[i][0]
        rows = np.asarray(world.rows, dtype=np.int64)
        sets = record_sets(inst, world)
        group_of_record = group_of_ind[rows]
        candidates = np.bincount(group_of_ind[members], minlength=n_groups)
        records = np.bincount(group_of_record, minlength=n_groups)
        counts = np.zeros((n_groups, n_sets), dtype=np.int64)
        np.add.at(counts, (group_of_record[sets >= 0], sets[sets >= 0]), 1)
        requirement = np.ones((n_groups, n_sets))
        np.maximum.at(requirement, group_of_ind[members], targets[history.class_of[members]])
        suppress = np.zeros_like(counts)
        if inst.params.suppression_model == "paper":
            suppress = settle_suppression(records if inst.presence else candidates, counts, requirement, inst.presence)
        published = _choose_published(group_of_record, sets, suppress, seed)
        values: list[list[str]] = [[] for _ in range(n_groups)]
        for r in np.flatnonzero(published).tolist():
            values[int(group_of_record[r])].append(world.values[r])
        return _canonical(keys, values, int((~published).sum()))

    return output


def worlds(inst: Instance, observed: World) -> list[World]:
    """Every world the adversary cannot rule out before looking at the groups: the same
    number of records (the manifest gives published plus suppressed), present individuals
    public under presence, any of them under register dilution; any values."""
    r = len(observed.rows)
    choices = [observed.rows] if inst.presence else list(itertools.combinations(range(inst.keys.shape[0]), r))
    return [World(tuple(rows), tuple(vals)) for rows in choices for vals in itertools.product(inst.domain, repeat=r)]


def published_values(output: Hashable) -> tuple[str, ...] | None:
    """The values an output (:func:`_canonical`) publishes, sorted; None for a refusal."""
    if output is None:
        return None
    groups, _ = output
    return tuple(sorted(v for _, values in groups for v in values))


def posterior(
    inst: Instance, observed: World, channel: Callable[[World], Hashable], *, prune: bool = True
) -> tuple[dict[tuple[int, str], Fraction], int]:
    """P(o has s | output) for every register individual o and protected value s, over the
    worlds ``channel`` maps to the observed world's output; and how many worlds those are.

    With ``prune``, when the observed output publishes every one of its r records, the
    channel runs only on the worlds whose values are the observed ones in some order: a
    world's output publishes some of the world's own values (both channels build it so), so
    an output that shows r values from a world of r records shows all of them, and a world
    with other values cannot give it. The consistent worlds, hence the posterior, are the
    same as without pruning (``tests/test_adversary_oracle.py`` compares both); only the
    mechanism is run fewer times."""
    seen = channel(observed)
    candidates = worlds(inst, observed)
    shown = published_values(seen)
    if prune and shown is not None and len(shown) == len(observed.rows):
        candidates = [w for w in candidates if tuple(sorted(w.values)) == shown]
    consistent = [w for w in candidates if channel(w) == seen]
    hits: dict[tuple[int, str], int] = {}
    for w in consistent:
        for o, v in zip(w.rows, w.values, strict=True):
            if v in inst.protected:
                hits[(o, v)] = hits.get((o, v), 0) + 1
    total = len(consistent)
    return {k: Fraction(c, total) for k, c in hits.items()}, total


def charges(inst: Instance, observed: World, result: ReleaseResult) -> dict[tuple[int, str], Fraction]:
    """What the statistics file charges o for s in this release: n_{j,s}/n_j of the group
    whose region holds o (o present, under presence), exactly; absent pairs are 0."""
    out: dict[tuple[int, str], Fraction] = {}
    anc = [ancestor_matrix(h) for h in inst.hierarchies]
    eligible = observed.rows if inst.presence else range(inst.keys.shape[0])
    for o in eligible:
        for g in range(result.group_nodes.shape[0]):
            if all(anc[a][inst.keys[o, a], result.group_nodes[g, a]] for a in range(inst.keys.shape[1])):
                for v, s in enumerate(inst.protected):
                    if result.group_counts[g, v]:
                        out[(o, s)] = Fraction(int(result.group_counts[g, v]), int(result.group_candidates[g]))
    return out
