"""One release end to end, on integer codes: requirements, generalization, suppression,
and the statistics-file update (paper 004, sections 6-7; DESIGN.md sections 1-4).

No I/O: the caller passes the register and the snapshot as integer codes and the state as
dense (individual × protected value) arrays, and gets back which records are published,
in which group, and the new state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer import privacy
from anonymizer.bottomup import Cells, Generalization, generalize
from anonymizer.hierarchy import Hierarchy

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

GUARANTEES = ("global", "localized")
STRATEGIES = ("constant", "geometric")


@dataclass(frozen=True)
class PrivacyParams:
    """ℓ, the strategy and its parameter, and which guarantee to enforce.

    ``guarantee="localized"`` is paper 004's Principle 1 baseline: every release on its
    own keeps n/n_s >= ℓ and the history is ignored, which is what per-release
    ℓ-diversity tools do; it exists to show what that leaks.
    """

    ell: float
    strategy: str = "constant"
    k_prime: int | None = 20
    alpha: float | None = None
    guarantee: str = "global"

    def __post_init__(self) -> None:
        if not self.ell >= 2:
            raise ValueError(f"ℓ must be at least 2, got {self.ell}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.strategy == "constant" and (self.k_prime is None or self.k_prime < 1):
            raise ValueError(f"the constant-ratio strategy needs k' >= 1, got {self.k_prime}")
        if self.strategy == "geometric" and (self.alpha is None or not self.alpha > 1):
            raise ValueError(f"the geometric strategy needs α > 1, got {self.alpha}")
        if self.guarantee not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {GUARANTEES}, got {self.guarantee!r}")


@dataclass(frozen=True)
class ReleaseResult:
    """What one release publishes and how the state moves.

    Attributes:
        published: per snapshot record, False when suppressed, shape (R,).
        group_of_record: group index per record (meaningful where published), shape (R,).
        group_nodes: node id per QI of every published group, shape (G, d).
        group_candidates: n_j of every published group, shape (G,).
        group_counts: published records per protected value, shape (G, V).
        group_records: published records per group, shape (G,).
        survival, linked: the state after this release, shape (N, V).
        linked_now: pairs linked by this release, shape (N, V).
        suppressed: number of suppressed records.
        generalization: the search result (cut, steps).
    """

    published: BoolArray
    group_of_record: IntArray
    group_nodes: IntArray
    group_candidates: IntArray
    group_counts: IntArray
    group_records: IntArray
    survival: FloatArray
    linked: IntArray
    linked_now: BoolArray
    suppressed: int
    generalization: Generalization

    @property
    def max_breach(self) -> float:
        """Largest p(o, s) over every pair after this release (float; see privacy.exceeds_threshold
        for the exact verdict)."""
        return float(1.0 - self.survival.min()) if self.survival.size else 0.0


def targets_for(params: PrivacyParams, survival: FloatArray, linked: IntArray, ell: FloatArray) -> FloatArray:
    """Target ratio per (individual, protected value), shape (N, V).

    ``ell`` is ℓ per individual, shape (N,) (personal thresholds; a constant array
    otherwise).
    """
    ell_b = np.broadcast_to(ell[:, None], survival.shape)
    if params.guarantee == "localized":
        return np.array(ell_b, dtype=np.float64)
    return privacy.strategy_targets(
        survival.ravel(), linked.ravel(), ell_b.ravel(), params.strategy, params.k_prime, params.alpha
    ).reshape(survival.shape)


def anonymize_release(
    register_keys: IntArray,
    record_individual: IntArray,
    record_set: IntArray,
    n_sets: int,
    survival: FloatArray,
    linked: IntArray,
    ell: FloatArray,
    params: PrivacyParams,
    hierarchies: Sequence[Hierarchy],
    presence: bool,
    budget: int,
    seed: int,
) -> ReleaseResult:
    """Anonymize one snapshot and compute the state after publishing it.

    Args:
        register_keys: leaf id per QI of every register individual, shape (N, d).
        record_individual: register row of every snapshot record, shape (R,), unique.
        record_set: protected value (set) index of every record, -1 when unprotected, shape (R,).
        n_sets: V, the number of protected values (disjoint sets).
        survival, linked: state before the release, shape (N, V).
        ell: ℓ per individual, shape (N,).
        params: strategy and guarantee.
        hierarchies: one per QI, in column order.
        presence: candidates are the present individuals (dilution off).
        budget: most records that may be suppressed.
        seed: chooses which records of a violating (group, value) are suppressed.

    Raises:
        anonymizer.bottomup.InfeasibleError: the budget cannot be met.
    """
    n_ind = register_keys.shape[0]
    targets = targets_for(params, survival, linked, ell)
    # cells: distinct leaf combinations of the individuals that can be candidates
    members = record_individual if presence else np.arange(n_ind)
    uniq_keys, cell_of_member = np.unique(register_keys[members], axis=0, return_inverse=True)
    cell_of_member = cell_of_member.reshape(-1)
    n_cells = uniq_keys.shape[0]
    requirement = np.full((n_cells, n_sets), 1.0)
    if n_sets:
        np.maximum.at(requirement, cell_of_member, targets[members])
    cell_of_ind = np.full(n_ind, -1, dtype=np.int64)
    cell_of_ind[members] = cell_of_member
    cell_of_record = cell_of_ind[record_individual]
    protected = record_set >= 0
    counts = np.zeros((n_cells, n_sets), dtype=np.int64)
    np.add.at(counts, (cell_of_record[protected], record_set[protected]), 1)
    cells = Cells(
        keys=uniq_keys.astype(np.int64),
        candidates=np.bincount(cell_of_member, minlength=n_cells).astype(np.int64),
        records=np.bincount(cell_of_record, minlength=n_cells).astype(np.int64),
        counts=counts,
        requirement=requirement,
    )
    gen = generalize(cells, hierarchies, presence, budget)
    group_of_record = gen.group_of_cell[cell_of_record]
    published = _choose_published(group_of_record, record_set, gen.suppress, seed)

    # the groups as published: suppressed records removed, empty groups dropped
    n_groups = gen.groups.keys.shape[0]
    kept_records = np.bincount(group_of_record[published], minlength=n_groups)
    kept_counts = gen.groups.counts - gen.suppress
    live = kept_records > 0
    renumber = np.cumsum(live) - 1
    n_j = kept_records if presence else gen.groups.candidates
    # state update: every candidate of a live group holding s gets 1 - n_s/n (Lemma 4);
    # under presence the suppressed but present individuals stay linked (conservative)
    factor = np.ones((n_groups, n_sets))
    holds = (kept_counts > 0) & live[:, None]
    factor[holds] = 1.0 - kept_counts[holds] / np.broadcast_to(n_j[:, None], holds.shape)[holds]
    new_survival = survival.copy()
    new_linked = linked.copy()
    linked_now = np.zeros_like(survival, dtype=bool)
    group_of_member = gen.group_of_cell[cell_of_member]
    new_survival[members] *= factor[group_of_member]
    linked_now[members] = holds[group_of_member]
    new_linked[members] += linked_now[members]
    return ReleaseResult(
        published=published,
        group_of_record=np.where(published, renumber[group_of_record], -1),
        group_nodes=gen.groups.keys[live],
        group_candidates=n_j[live],
        group_counts=kept_counts[live],
        group_records=kept_records[live],
        survival=new_survival,
        linked=new_linked,
        linked_now=linked_now,
        suppressed=int((~published).sum()),
        generalization=gen,
    )


def _choose_published(group_of_record: IntArray, record_set: IntArray, suppress: IntArray, seed: int) -> BoolArray:
    """Mark ``suppress[g, s]`` records of each (group, value) as suppressed, chosen by a
    seeded random order so the choice is deterministic but not tied to input order."""
    published = np.ones(group_of_record.size, dtype=bool)
    idx = np.flatnonzero(record_set >= 0)
    if idx.size == 0 or not suppress.any():
        return published
    priority = np.random.default_rng(seed).random(group_of_record.size)[idx]
    g, s = group_of_record[idx], record_set[idx]
    order = np.lexsort((priority, s, g))
    g_o, s_o = g[order], s[order]
    new_run = np.r_[True, (g_o[1:] != g_o[:-1]) | (s_o[1:] != s_o[:-1])]
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(order.size), 0))
    rank = np.arange(order.size) - run_start
    drop = rank < suppress[g_o, s_o]
    published[idx[order[drop]]] = False
    return published
