"""One release end to end, on integer codes: requirements, generalization, suppression,
and the statistics-file update (paper 004, sections 6-7; docs/design.md sections 1-4).

No I/O: the caller passes the register and the snapshot as integer codes and the state as
dense (individual × protected value) arrays, and gets back which records are published,
in which group, and the new state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer import privacy, topdown
from anonymizer.arrays import Rows, distinct_counts, factorize, factorize_rows
from anonymizer.bottomup import generalize
from anonymizer.hierarchy import Hierarchy
from anonymizer.noisy_split import NoisyPartition, NoisySplitTest
from anonymizer.placement import cell_estimates
from anonymizer.search import Cells, Generalization
from anonymizer.settings import (
    MAX_EPSILON,
    AfterKPrime,
    Algorithm,
    Guarantee,
    PartitionModel,
    PartitionTest,
    SplitRule,
    Strategy,
    SuppressionModel,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
#: individuals updated this many at a time by :func:`advance_history` (int64 keys per block)
_BLOCK = 1 << 22


@dataclass(frozen=True)
class PrivacyParams:
    """ℓ, the strategy and its parameter, and which guarantee to enforce.

    ``guarantee="localized"`` is paper 004's Principle 1 baseline: every release on its
    own keeps n/n_s >= ℓ and the history is ignored, which is what per-release
    ℓ-diversity tools do; it exists to show what that leaks.

    ``suppression_model`` says which counts the requirement and the statistics file
    charge (docs/threat-model.md). ``"mechanism"`` (the default): n*_{j,s}, every snapshot
    record of s in the region, published or not. An adversary who knows the algorithm
    knows that value-selective suppression removes exactly the records of over-represented
    values (the minimality attack of Wong, Fu, Wang and Pei, VLDB 2007), so a suppressed
    record is charged like a published one; suppression then buys nothing and is refused
    (the budget must be 0). ``"paper"``: paper 004's published counts, with value-selective
    suppression, kept only to reproduce the paper.

    ``algorithm`` is the search (docs/anonymization.md): ``"topdown"`` (the default,
    :mod:`anonymizer.topdown`) splits the QI domain region by region and never suppresses;
    ``"bottomup"`` (:mod:`anonymizer.bottomup`, paper 004's choice) keeps one cut per QI
    and is the only one that can use a suppression budget (paper model). The adversary is
    assumed to know which one ran: the manifest records it.

    ``after_k_prime`` (constant strategy): ``"renew"`` (the default) lets a pair past k'
    linked releases be linked again at :func:`anonymizer.privacy.renewed_targets`, its
    unspent budget spread over k' more; ``"stop"`` is paper 004's rule (never again).

    ``partition_model`` (top-down search only; :data:`anonymizer.topdown.partition`'s
    ``model``): ``"published"`` (the default) decides every split on counts the release
    publishes, so the partition tells an adversary who knows the algorithm nothing more;
    ``"parts"`` reads each part's own counts, for finer groups, and leaves the residual
    risk of docs/threat-model.md. The bottom-up search always reads its cells' counts.

    ``partition_test`` (top-down, ``published`` model, register dilution): ``"sound"`` (the
    default) or ``"noisy"`` (:mod:`anonymizer.noisy_split`), whose refusals may raise a
    posterior to e^ε × its charge, ε = ``partition_epsilon`` (at most ln 2), with noise
    from a secret seed the caller passes (:func:`anonymize_history`'s ``noise``).

    ``split_rule`` (top-down, register dilution): ``"widest"`` (the default) or
    ``"history"`` (:mod:`anonymizer.placement`), which chooses among the same admissible
    splits by the rates the statistics file estimates, a function of the published releases.
    ``propensity_ratio`` ρ (a whole number, 1 by default: paper 004's uniform charge, or a
    tuple of one whole number per protected value) charges each group ρ_s times its records
    of value s, ``min(n_j, ρ·n_{j,s})`` in place of
    ``n_{j,s}`` in every factor and requirement (:func:`anonymizer.privacy.charged_counts`), which covers every
    adversary whose propensity for the value is at most ρ times its mean over the group's
    candidates (docs/threat-model.md, "The learning adversary").
    """

    ell: float
    strategy: Strategy = Strategy.CONSTANT
    k_prime: int | None = 20
    alpha: float | None = None
    guarantee: Guarantee = Guarantee.GLOBAL
    suppression_model: SuppressionModel = SuppressionModel.MECHANISM
    algorithm: Algorithm = Algorithm.TOPDOWN
    after_k_prime: AfterKPrime = AfterKPrime.RENEW
    partition_model: PartitionModel = PartitionModel.PUBLISHED
    partition_test: PartitionTest = PartitionTest.SOUND
    partition_epsilon: float | None = None
    split_rule: SplitRule = SplitRule.WIDEST
    propensity_ratio: privacy.PropensityRatio = 1

    def __post_init__(self) -> None:
        # a setting given by its spelling becomes its enumeration member; any other is refused here
        for name, kind in (
            ("strategy", Strategy),
            ("guarantee", Guarantee),
            ("suppression_model", SuppressionModel),
            ("after_k_prime", AfterKPrime),
            ("algorithm", Algorithm),
            ("partition_model", PartitionModel),
            ("partition_test", PartitionTest),
            ("split_rule", SplitRule),
        ):
            value = getattr(self, name)
            if value not in set(kind):
                raise ValueError(f"{name} must be one of {tuple(m.value for m in kind)}, got {value!r}")
            object.__setattr__(self, name, kind(value))
        if not self.ell >= 2:
            raise ValueError(f"ℓ must be at least 2, got {self.ell}")
        privacy.propensity_ratios(self.propensity_ratio)  # raises on anything but whole numbers >= 1
        if self.strategy is Strategy.CONSTANT and (self.k_prime is None or self.k_prime < 1):
            raise ValueError(f"the constant-ratio strategy needs k' >= 1, got {self.k_prime}")
        if self.strategy is Strategy.GEOMETRIC and (self.alpha is None or not self.alpha > 1):
            raise ValueError(f"the geometric strategy needs α > 1, got {self.alpha}")
        if self.partition_test is PartitionTest.NOISY:
            eps = self.partition_epsilon
            if eps is None or not (0 < eps <= MAX_EPSILON * (1 + 1e-12)):
                raise ValueError(
                    f"partition_test noisy needs partition_epsilon in (0, ln 2 = {MAX_EPSILON:.4f}], got {eps!r}"
                )
            if self.algorithm is not Algorithm.TOPDOWN or self.partition_model is not PartitionModel.PUBLISHED:
                raise ValueError("partition_test noisy needs algorithm topdown and partition_model published")
        if self.split_rule is SplitRule.HISTORY and self.algorithm is not Algorithm.TOPDOWN:
            raise ValueError("split_rule history needs algorithm topdown")

    def noisy_test(self) -> NoisySplitTest | None:
        """The noisy split test of these settings, None under the sound test."""
        if self.partition_test is not PartitionTest.NOISY or self.partition_epsilon is None:
            return None
        return NoisySplitTest.for_epsilon(self.partition_epsilon)


@dataclass(frozen=True)
class History:
    """The statistics file in compressed, exact form.

    Individuals with identical histories share their figures, so the state is kept per
    *history class*: ``class_of[i]`` is individual i's class, and ``survival[c, s]`` and
    ``linked[c, s]`` are the survival product Π(1 - n_{j,s}/n_j) and the number of linked
    releases of every member of class c for protected value s. Under register dilution a
    class is (nearly) a QI cell, so the state grows with distinct histories, not people.
    The classes also separate personal thresholds: ``ell[c]`` is the ℓ of class c.

    Attributes:
        class_of: shape (N,), int64 in [0, K).
        survival: shape (K, V), float64 in [0, 1].
        linked: shape (K, V), int64 >= 0.
        ell: shape (K,), float64 >= 2.
    """

    class_of: IntArray
    survival: FloatArray
    linked: IntArray
    ell: FloatArray

    @classmethod
    def empty(cls, ell: FloatArray, n_sets: int) -> History:
        """Before the first release: one class per distinct ℓ (ell has shape (N,))."""
        ell = np.asarray(ell, dtype=np.float64).reshape(-1)
        if ell.size and bool((ell == ell[0]).all()):  # one ℓ for all, as configured: no sort of N values
            values, class_of = ell[:1].copy(), np.zeros(ell.size, dtype=np.int64)
        else:
            values, class_of = np.unique(ell, return_inverse=True)
        k = values.size
        return cls(
            class_of.reshape(-1).astype(np.int64), np.ones((k, n_sets)), np.zeros((k, n_sets), dtype=np.int64), values
        )

    @classmethod
    def from_dense(cls, survival: FloatArray, linked: IntArray, ell: FloatArray) -> History:
        """Compress per-individual arrays of shape (N, V) (and ℓ of shape (N,))."""
        rows = np.concatenate([survival, linked.astype(np.float64), np.asarray(ell, dtype=np.float64)[:, None]], axis=1)
        uniq, class_of = np.unique(rows, axis=0, return_inverse=True)
        v = survival.shape[1]
        return cls(
            class_of.reshape(-1).astype(np.int64),
            uniq[:, :v].copy(),
            uniq[:, v : 2 * v].astype(np.int64),
            uniq[:, 2 * v].copy(),
        )

    def dense(self) -> tuple[FloatArray, IntArray]:
        """Per-individual survival and linked counts, shape (N, V) each."""
        return self.survival[self.class_of], self.linked[self.class_of]

    def max_breach(self) -> float:
        """Largest p(o, s) over all individuals and values (float; privacy.exceeds_threshold
        gives the exact verdict)."""
        used = np.bincount(self.class_of, minlength=self.survival.shape[0]) > 0
        return float(1.0 - self.survival[used].min()) if self.survival.size and used.any() else 0.0


@dataclass(frozen=True)
class ReleaseResult:
    """What one release publishes and how the state moves.

    Attributes:
        published: per snapshot record, False when suppressed, shape (R,).
        group_of_record: group index per record, -1 where suppressed, shape (R,).
        group_nodes: node id per QI of every published group, shape (G, d).
        group_candidates: n_j of every published group, shape (G,).
        group_counts: published records per protected value, shape (G, V).
        group_records: published records per group, shape (G,).
        history: the state after this release.
        suppressed: number of suppressed records.
        generalization: the search result (cut, steps).
    """

    published: BoolArray
    group_of_record: IntArray
    group_nodes: IntArray
    group_candidates: IntArray
    group_counts: IntArray
    group_records: IntArray
    history: History
    suppressed: int
    generalization: Generalization

    @property
    def max_breach(self) -> float:
        return self.history.max_breach()

    @property
    def survival(self) -> FloatArray:
        """Per-individual survival products after this release, shape (N, V)."""
        return self.history.dense()[0]

    @property
    def linked(self) -> IntArray:
        """Per-individual counts of linked releases after this release, shape (N, V)."""
        return self.history.dense()[1]


def class_targets(params: PrivacyParams, history: History) -> FloatArray:
    """Target ratio ``n_j / n_{j,s}`` per (history class, protected value), shape (K, V):
    the strategy's target times ρ_s (``propensity_ratio``), since a group is charged
    ρ_s·n_{j,s} records (:func:`anonymizer.privacy.charged_counts`)."""
    ell_b = np.broadcast_to(history.ell[:, None], history.survival.shape)
    rho = privacy.propensity_ratios(params.propensity_ratio, history.survival.shape[1])
    if params.guarantee is Guarantee.LOCALIZED:
        return np.array(ell_b, dtype=np.float64) * rho

    def targets(survival: FloatArray, linked: IntArray, ell: FloatArray) -> FloatArray:
        return privacy.strategy_targets(
            survival,
            linked,
            ell,
            params.strategy,
            params.k_prime,
            params.alpha,
            renew=params.after_k_prime is AfterKPrime.RENEW,
        )

    # the target is a function of each pair's (P, linked releases, ℓ) alone, and at national
    # scale all but a few pairs were never linked (P = 1, none linked): those take their
    # class's ℓ's target, computed once per distinct ℓ by the same formula, so every target
    # is the one the formula gives for that pair
    never = (history.linked == 0) & (history.survival == 1.0)
    ells, ell_code = np.unique(history.ell, return_inverse=True)
    out = np.empty(history.survival.shape)
    out[:] = targets(np.ones(ells.size), np.zeros(ells.size, dtype=np.int64), ells)[ell_code.reshape(-1), None]
    rest = ~never
    if rest.any():
        out[rest] = targets(history.survival[rest], history.linked[rest], ell_b[rest])
    return rho * out


def advance_history(
    history: History,
    group_of_ind: IntArray,
    n_j: IntArray,
    counts: IntArray,
    *,
    overwrite: bool = False,
    propensity_ratio: privacy.PropensityRatio = 1,
) -> tuple[History, IntArray, IntArray]:
    """The state after one more published release (paper 004, Lemma 4 and §7; docs/design.md section 4).

    Every candidate of a group holding protected value s (``counts[g, s] > 0``) gets the
    factor ``1 - n_{j,s}/n_j`` and one more linked release; every class is split by the
    group that linked its members, so individuals keep sharing a class exactly while their
    histories are equal. The one implementation of the update: the anonymizer, imports and
    ``serialpub state verify`` all call it, so their products are bit-identical.

    Args:
        history: the state before the release.
        group_of_ind: the group whose candidate each individual is, -1 for none, shape (N,).
        n_j: candidates of every group, shape (G,), > 0.
        counts: published records per group and protected value, shape (G, V).
        overwrite: ``group_of_ind`` is the caller's own int64 array and may be overwritten
            (the update's key per individual is then written into it, not into another 8
            bytes per individual).
        propensity_ratio: ρ of the release, one number or one per protected value
            (:func:`anonymizer.privacy.charged_counts`): the factor is ``1 - min(n_j, ρ_s·n_{j,s})/n_j``.

    Returns:
        the new history, and per new class its parent class and the group that linked it
        (``G`` for none), both shape (K',), for callers that carry per-class flags.
    """
    n_groups, n_sets = int(n_j.size), history.survival.shape[1]
    if history.class_of.shape != np.shape(group_of_ind):
        raise ValueError(f"a history of {history.class_of.size} individuals and groups for {np.size(group_of_ind)}")
    holds = counts > 0
    factor = np.ones((n_groups + 1, n_sets))  # last row: not linked by this release
    n_holds = np.broadcast_to(n_j[:, None], holds.shape)[holds]
    charged = privacy.charged_counts(n_j[:, None], counts, propensity_ratio)[holds]  # ρ_s along the values
    factor[:-1][holds] = privacy.release_factor(n_holds, charged, complement=True)
    holds_ext = np.vstack([holds, np.zeros((1, n_sets), dtype=bool)])
    # class * (G+1) + group, G for none; in place and by blocks: one int64 array per
    # individual (the caller's, with ``overwrite``), no temporary one
    key = group_of_ind if overwrite else np.array(group_of_ind, dtype=np.int64)
    if key.dtype != np.int64 or not key.flags.writeable:
        raise ValueError("overwrite needs the caller's own writeable int64 group_of_ind")
    for start in range(0, key.size, _BLOCK):
        block = key[start : start + _BLOCK]
        block[block < 0] = n_groups
        block += np.multiply(history.class_of[start : start + block.size], n_groups + 1, dtype=np.int64)
    new_class_of, class_first = factorize(key)
    uniq = key[class_first]
    del key
    old_class, via = uniq // (n_groups + 1), uniq % (n_groups + 1)
    new = History(
        class_of=new_class_of,
        survival=history.survival[old_class] * factor[via],
        linked=history.linked[old_class] + holds_ext[via],
        ell=history.ell[old_class],
    )
    return new, old_class, via


@dataclass(frozen=True)
class SnapshotCodes:
    """A snapshot as the search sees it (docs/design.md section 3).

    Attributes:
        individual: register row of every snapshot record, shape (R,), unique.
        value_set: protected value (set) index of every record, -1 when unprotected, shape (R,).
        n_sets: V, the number of protected values (disjoint sets).
    """

    individual: IntArray
    value_set: IntArray
    n_sets: int


def anonymize_release(
    register_keys: Rows,
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
    """:func:`anonymize_history` for a state given as dense per-individual arrays
    ``survival``, ``linked`` of shape (N, V) and ``ell`` of shape (N,) (the tests' and the
    paper's examples' form)."""
    return anonymize_history(
        register_keys,
        SnapshotCodes(record_individual, record_set, n_sets),
        History.from_dense(survival, linked, ell),
        params,
        hierarchies,
        presence,
        budget=budget,
        seed=seed,
    )


def anonymize_history(
    register_keys: Rows,
    snapshot: SnapshotCodes,
    history: History,
    params: PrivacyParams,
    hierarchies: Sequence[Hierarchy],
    presence: bool,
    *,
    budget: int = 0,
    seed: int = 0,
    explain: bool = False,
    noise: np.random.Generator | None = None,
    split_rule: str | None = None,
) -> ReleaseResult:
    """Anonymize one snapshot and compute the state after publishing it.

    Args:
        register_keys: leaf id per QI of every register individual, shape (N, d), any integer
            dtype, dense or as :class:`anonymizer.arrays.CodedRows` (the register's: its
            codes are then the cells of everyone, not grouped again).
        snapshot: the snapshot's records as register rows and protected-value indexes.
        history: the state before the release.
        params: strategy and guarantee.
        hierarchies: one per QI, in column order.
        presence: candidates are the present individuals (dilution off).
        budget: most records that may be suppressed; must be 0 under the mechanism-aware
            model (``params.suppression_model``), where every group meets its requirement
            with all of its records and nothing is suppressed.
        seed: chooses which records of a violating (group, value) are suppressed.
        explain: the top-down search also reports what blocked its splits, per level
            (``result.generalization.levels``, :func:`anonymizer.topdown.level_report`).
        noise: the release's secret noise under ``partition_test: noisy``
            (:func:`anonymizer.noisy_split.noise_generator`); required then, ignored otherwise.
        split_rule: the top-down search's split rule (:data:`anonymizer.topdown.SPLIT_RULES`);
            None: ``params.split_rule``. ``"history"`` reads ``history``'s survival products
            (:func:`anonymizer.placement.cell_estimates`), which are public only under
            register dilution.

    Raises:
        anonymizer.search.InfeasibleError: no partition meets the requirement (within the
            budget, for the bottom-up search).
        ValueError: a positive budget under the mechanism-aware model or with the top-down search;
            the noisy test without ``noise`` or under presence dilution (the candidate split
            would read who is present); the history rule under presence dilution (the
            statistics file then reads who was present).
    """
    if params.suppression_model is SuppressionModel.MECHANISM and budget != 0:
        raise ValueError(
            f"a suppression budget of {budget} records under the mechanism-aware model: a suppressed record "
            "is still charged (paper model only)"
        )
    if params.algorithm is Algorithm.TOPDOWN and budget != 0:
        raise ValueError(
            f"a suppression budget of {budget} records with the top-down search, which never suppresses; "
            "use algorithm bottomup for the paper model's suppression"
        )
    test = params.noisy_test()
    if test is not None and (noise is None or presence):
        raise ValueError("partition_test noisy needs the secret noise and register dilution")
    rule = str(params.split_rule if split_rule is None else split_rule)
    if rule == SplitRule.HISTORY and presence:
        raise ValueError("split_rule history needs register dilution (the statistics file would read who was present)")
    record_individual, record_set, n_sets = snapshot.individual, snapshot.value_set, snapshot.n_sets
    n_ind = register_keys.shape[0]
    if history.class_of.shape != (n_ind,):
        raise ValueError(f"a history of {history.class_of.size} individuals for a register of {n_ind}")
    n_classes = history.survival.shape[0]
    targets = class_targets(params, history)
    # cells: distinct leaf combinations of the individuals that can be candidates: the
    # present ones, or everyone as a slice (a view: an arange and the copies it indexed
    # would each hold an int64 per register individual, several at once)
    members: slice | IntArray = record_individual if presence else slice(None)
    # everyone's keys as given: coded rows are grouped already
    member_keys = register_keys[members] if presence else register_keys
    cell_of_member, first = factorize_rows(member_keys, [h.n_leaves for h in hierarchies])
    n_cells = first.size
    # requirement: the largest target over the (cell, history class) pairs present
    class_of_member = history.class_of[members]
    # the pairs present and their members, counted by blocks: no key nor code per member
    pair, pair_count = distinct_counts(
        cell_of_member.size, lambda start, stop: cell_of_member[start:stop] * n_classes + class_of_member[start:stop]
    )
    requirement = np.full((n_cells, n_sets), 1.0)
    if n_sets and pair.size:
        # pair is ascending, so cell-major, and every cell has a member: the largest target
        # of each cell's run of pairs (a maximum, exact in any order), not ufunc.at's
        # unbuffered scatter of a row per pair
        cell = pair // n_classes
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        runs = np.maximum.reduceat(targets[pair % n_classes], starts, axis=0)
        requirement[cell[starts]] = np.maximum(requirement[cell[starts]], runs)
    # a present individual's member row is its record's (record_individual is unique)
    cell_of_record = cell_of_member if presence else cell_of_member[record_individual]
    protected = record_set >= 0
    counts = np.bincount(
        cell_of_record[protected] * n_sets + record_set[protected], minlength=n_cells * n_sets
    ).reshape(n_cells, n_sets)
    cells = Cells(
        keys=register_keys[record_individual[first] if presence else first].astype(np.int64),
        candidates=np.bincount(pair // n_classes, weights=pair_count, minlength=n_cells).astype(np.int64),
        records=np.bincount(cell_of_record, minlength=n_cells).astype(np.int64),
        counts=counts.astype(np.int64),
        requirement=requirement,
    )
    if params.algorithm is Algorithm.TOPDOWN:
        noisy = NoisyPartition(test, noise) if test is not None and noise is not None else None
        estimate = None
        if rule == SplitRule.HISTORY:
            estimate = cell_estimates(pair // n_classes, pair_count, pair % n_classes, history.survival, n_cells)
        gen = topdown.partition(
            cells,
            hierarchies,
            presence,
            rule,
            model=params.partition_model,
            explain=explain,
            noisy=noisy,
            estimate=estimate,
        )
    else:
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
    member_group = gen.group_of_cell[cell_of_member].astype(np.int64, copy=False)
    member_group[~live[member_group]] = -1  # in place: the group of every member, -1 for none
    group_of_ind = member_group
    if presence:
        group_of_ind = np.full(n_ind, -1, dtype=np.int64)
        group_of_ind[members] = member_group
    # group_of_ind is this call's own array: the update may write its keys into it
    new_history = advance_history(
        history,
        group_of_ind,
        n_j,
        np.where(live[:, None], kept_counts, 0),
        overwrite=True,
        propensity_ratio=params.propensity_ratio,
    )[0]
    return ReleaseResult(
        published=published,
        group_of_record=np.where(published, renumber[group_of_record], -1),
        group_nodes=gen.groups.keys[live],
        group_candidates=n_j[live],
        group_counts=kept_counts[live],
        group_records=kept_records[live],
        history=new_history,
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
