"""The register-joint estimator of count queries on a published release, with certain bounds.

A release publishes, per group G (records sharing one generalized QI tuple), the exact count
c_s(G) of its records with every sensitive value s; its region is the box of its nodes'
leaf sets (docs/design.md section 1). The population register is public in the threat
model (docs/threat-model.md: the adversary holds it, and ``public-copy --with-register``
ships it), so a data user may read its **joint** QI distribution. For a count query Q
(conditions on QIs: leaf sets per attribute; a set S of sensitive values) and a group G
with c_S(G) = Σ_{s∈S} c_s(G) records of S:

* **estimate** c_S(G) · in_Q(G) / n(G), where n(G) is the number of register individuals
  in G's region and in_Q(G) those of them satisfying Q's QI conditions. This spreads G's
  records over its region as the register's individuals are spread (the assumption: within
  a region, whether someone has a record with s does not depend on where in the region they
  live). It generalizes the uniform spread of paper 001 (Xiao & Tao, SIGMOD 2006, section
  5.2), which takes every leaf combination of the box as equally populated, and the
  register-marginal spread of :mod:`anonymizer.queries`, which takes the QIs as independent.
* **certain bounds**: G's records are records of register individuals of its region, one
  per individual, so at most min(c_S(G), in_Q(G)) of its S-records satisfy Q and at least
  max(0, c_S(G) − (n(G) − in_Q(G))) do. Summed over the groups they bound the count of the
  published records satisfying Q; records the release suppressed (the manifest's
  ``suppressed``) can add up to that many, so the upper bound of the snapshot's count adds
  them (:attr:`JointRelease.suppressed`).

* **error figure** (the model's standard error): the same model draws G's c_S(G) records
  of S as c_S(G) distinct individuals of its n(G), uniformly without replacement, so the
  number of them satisfying Q is hypergeometric with mean the estimate and variance
  c_S(G) · w · (1 − w) · (n(G) − c_S(G)) / (n(G) − 1), w = in_Q(G) / n(G): the binomial
  c·w·(1 − w) times the finite-population correction (:func:`allocation_variance`). Its
  support is exactly the certain bounds of G. Regions are disjoint, so the groups' draws are
  independent and their variances add. It measures the allocation's randomness only, not
  the model's bias: where the sensitive value depends on a QI inside a region, the estimate
  is pulled toward independence and the error figure does not cover that (docs/data-users.md,
  "How far to trust the error figure"). :attr:`JointAnswers.generalized` names, per query,
  the QIs whose condition cuts a generalized value of a group whose count is uncertain.

The answer of a query is the sum over groups. Both dilution modes read the same way: under
``register`` a group's candidates are the register individuals of its region; under
``presence`` they are the individuals present in the period, which the public cannot tell
apart, so the register individuals of the region stand in for them. The bounds stay certain
(the present individuals are among them); the estimate assumes that presence, like the
sensitive value, does not depend on the place within a region.

Evaluation is matrix arithmetic on the register's distinct QI combinations (cells,
:class:`anonymizer.regions.RegisterCells`), never a loop over individuals or groups: per
set of constrained attributes the cells are re-aggregated on (group, those attributes),
and for a chunk of queries in_Q(G) sums the weights of the rows each query holds, found by
one boolean AND per constrained attribute. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import CodedRows, factorize, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.queries import _overlap_fractions
from anonymizer.regions import RegisterCells, cover_pairs, groups_of_nodes, record_nodes
from anonymizer.workload import QueryRanges

if TYPE_CHECKING:
    import pandas as pd
    from scipy import sparse

    from anonymizer.queries import Workload

__all__ = [
    "GroupValueCounts",
    "JointAnswers",
    "JointRelease",
    "JointWorkloadError",
    "allocation_variance",
    "error_interval",
    "histogram_release",
    "joint_answers",
    "joint_estimates",
    "joint_workload_error",
    "series_answers",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: The normal quantiles of the nominal two-sided intervals :func:`error_interval` gives:
#: 1.645 for 90 %, 1.960 for 95 % (NormalDist().inv_cdf(0.95), .inv_cdf(0.975)).
Z_90 = 1.6448536269514715
Z_95 = 1.959963984540054

#: Upper bound on the elements of one (queries × cells or groups) work matrix, so that memory
#: stays bounded whatever the number of queries.
CHUNK_ELEMENTS = 1 << 21
#: whole numbers below this are exact in float32 (its 24-bit significand)
FLOAT32_EXACT = 1 << 24


@dataclass(frozen=True, eq=False)
class GroupValueCounts:
    """The published counts c_s(G) of a release, (G, V), by their nonzero entries: a group
    holds few of the sensitive values, so the dense table (16,581 groups of 2,000 values at
    1M records over the 5M register) would be hundreds of times larger than its entries.

    Attributes:
        column: the value of every entry, int64 (E,), entries in row-major (group, value)
            order.
        count: its count, float64 (E,), whole numbers.
        starts: the first entry of every group that holds one, int64 (G',).
        groups: those groups, ascending, int64 (G',).
        shape: (G, V).
    """

    column: IntArray
    count: FloatArray
    starts: IntArray
    groups: IntArray
    shape: tuple[int, int]

    @classmethod
    def of_dense(cls, counts: npt.ArrayLike) -> GroupValueCounts:
        """The nonzero entries of a dense integer table (G, V)."""
        table = np.asarray(counts)
        rows, cols = np.nonzero(table)
        return cls._of_entries(rows, cols, table[rows, cols], (int(table.shape[0]), int(table.shape[1])))

    @classmethod
    def of_records(cls, group: IntArray, value: IntArray, shape: tuple[int, int]) -> GroupValueCounts:
        """The counts of records given by their group (R,) in [0, G) and value (R,) in
        [0, V): one sort of the R (group, value) keys, never a dense (G, V) table."""
        keys, count = np.unique(group.astype(np.int64) * shape[1] + value, return_counts=True)
        return cls.of_flat(keys, count, shape)

    @classmethod
    def of_flat(cls, at: IntArray, count: npt.ArrayLike, shape: tuple[int, int]) -> GroupValueCounts:
        """Entries given by their row-major position ``at`` (E,), ascending, in a (G, V)
        table and their nonzero counts (E,)."""
        rows, cols = np.divmod(np.asarray(at, dtype=np.int64), max(shape[1], 1))
        return cls._of_entries(rows, cols, np.asarray(count), shape)

    @classmethod
    def _of_entries(
        cls, rows: IntArray, cols: IntArray, count: npt.ArrayLike, shape: tuple[int, int]
    ) -> GroupValueCounts:
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]]) if rows.size else np.zeros(0, dtype=np.int64)
        count64 = np.asarray(count).astype(np.float64)
        return cls(np.asarray(cols, dtype=np.int64), count64, starts, np.asarray(rows[starts], dtype=np.int64), shape)

    @property
    def rows(self) -> IntArray:
        """The group of every entry, int64 (E,)."""
        return np.repeat(self.groups, np.diff(np.r_[self.starts, self.column.size]))

    def per_group(self) -> IntArray:
        """Published records per group, int64 (G,): Σ_s c_s(G)."""
        return np.bincount(self.rows, weights=self.count, minlength=self.shape[0]).astype(np.int64)

    def dense(self) -> IntArray:
        """The dense table c_s(G), int64 (G, V), read-only."""
        out = np.zeros(self.shape, dtype=np.int64)
        out[self.rows, self.column] = self.count.astype(np.int64)
        out.flags.writeable = False  # the estimates read the entries: a change here would not reach them
        return out


@dataclass(frozen=True, eq=False)
class JointRelease:
    """One release resolved against the register it was published with.

    Attributes:
        qis: the quasi-identifiers, in column order of the arrays below.
        hierarchies: the hierarchy each QI is read with (for a numeric QI the release's
            own, whose ``[lo, hi]`` intervals are nodes: :func:`anonymizer.intervals.release_hierarchies`);
            leaf ids are the declared hierarchy's.
        sensitive_values: the sensitive values counted, the columns of ``counts``.
        group_nodes: node id per QI of every group, shape (G, d).
        nonzero: the published records per (group, sensitive value), c_s(G), by their
            nonzero entries (:class:`GroupValueCounts`); :attr:`counts` is the dense table.
        cell_leaves: leaf id per QI of every distinct register QI combination, shape (C, d).
        cell_counts: register individuals per cell, shape (C,).
        group_of_cell: the group whose region holds each cell, -1 for none, shape (C,).
        suppressed: records of the snapshot that the release left out (0 if unknown).
    """

    qis: tuple[str, ...]
    hierarchies: tuple[Hierarchy, ...]
    sensitive_values: tuple[str, ...]
    group_nodes: IntArray
    nonzero: GroupValueCounts
    cell_leaves: IntArray
    cell_counts: IntArray
    group_of_cell: IntArray
    suppressed: int = 0

    @property
    def register_in_group(self) -> IntArray:
        """n(G): register individuals in every group's region, shape (G,)."""
        inside = self.group_of_cell >= 0
        return np.bincount(
            self.group_of_cell[inside], weights=self.cell_counts[inside], minlength=self.nonzero.shape[0]
        ).astype(np.int64)

    @cached_property
    def counts(self) -> IntArray:
        """c_s(G) as a dense table, int64 (G, V), made when first read (the estimator reads
        :attr:`nonzero`; the learners read rows of this)."""
        return self.nonzero.dense()

    @classmethod
    def of(
        cls,
        data: pd.DataFrame,
        qis: Sequence[str],
        sensitive: str,
        hierarchies: Sequence[Hierarchy],
        register_leaves: npt.NDArray[np.integer] | CodedRows,
        sensitive_values: Sequence[str] | None = None,
        suppressed: int = 0,
        register_counts: npt.ArrayLike | None = None,
        nodes: IntArray | None = None,
    ) -> JointRelease:
        """Resolve a published table against a register.

        Args:
            data: the release, one row per record: a column of generalized labels per QI
                (nodes of ``hierarchies``) and ``sensitive``.
            qis: the QI columns, in the order of ``hierarchies``.
            sensitive: the sensitive column.
            hierarchies: one per QI (see :attr:`hierarchies`).
            register_leaves: leaf id per QI of every register individual, shape (N, d) (an
                array or :class:`anonymizer.arrays.CodedRows`), or of every distinct
                combination when ``register_counts`` is given.
            register_counts: individuals per row of ``register_leaves``, shape (N,) (default 1).
            sensitive_values: the values counted (default: those published, sorted).
            suppressed: records the release left out (the manifest's ``suppressed``).
            nodes: ``data``'s QI labels resolved in ``hierarchies``
                (:func:`anonymizer.regions.record_nodes`), shape (R, d), when the caller
                has them (default: resolved here).

        Raises:
            ValueError: a QI label that is not a node of its hierarchy, a missing value, a
                published sensitive value outside ``sensitive_values``, or a group whose
                region holds fewer register individuals than records (the register is
                not the release's).
        """
        import pandas as pd

        if nodes is None or nodes.shape != (len(data), len(qis)):
            nodes = record_nodes(data, list(qis), list(hierarchies))
        bad = np.flatnonzero((nodes < 0).any(axis=1))
        if bad.size:
            row = int(bad[0])
            col = int(np.flatnonzero(nodes[row] < 0)[0])
            raise ValueError(
                f"record {row + 1}: {qis[col]} = {data[qis[col]].iloc[row]!r} is not a node of its hierarchy"
            )
        column = data[sensitive].astype(str)
        # each distinct value looked up once (a release holds a few thousand among 1M records)
        found, distinct = pd.factorize(column, use_na_sentinel=True)
        values = tuple(sorted(str(v) for v in distinct)) if sensitive_values is None else tuple(sensitive_values)
        position = np.append(pd.Index(list(values)).get_indexer(pd.Index(distinct)), -1).astype(np.int64)
        value = position[found]  # a missing value's code -1 takes the last entry: not counted
        if (value < 0).any():
            raise ValueError(f"sensitive value {column.iloc[int(np.flatnonzero(value < 0)[0])]!r} is not counted")
        of_record, group_nodes, records = groups_of_nodes(nodes, list(hierarchies))
        nonzero = GroupValueCounts.of_records(of_record, value, (int(records.size), len(values)))
        del of_record
        if isinstance(register_leaves, CodedRows):  # its distinct rows are the cells already
            leaves, register_counts = np.asarray(register_leaves.table), register_leaves.counts
        else:
            leaves = np.asarray(register_leaves)
        cells = RegisterCells.of(leaves.astype(np.int64), list(hierarchies))
        if register_counts is not None:
            per_row = np.asarray(register_counts, dtype=np.int64)
            cell_counts = np.bincount(cells.of_individual, weights=per_row, minlength=cells.counts.size)
            cells = RegisterCells(cells.of_individual, cells.leaves, cells.first, cell_counts.astype(np.int64))
        spans = [h.index for h in hierarchies]
        ci, gi = cover_pairs(group_nodes, cells.leaves, spans)
        group_of_cell = np.full(cells.counts.size, -1, dtype=np.int64)
        group_of_cell[ci] = gi
        out = cls(
            tuple(qis),
            tuple(hierarchies),
            values,
            group_nodes,
            nonzero,
            cells.leaves,
            cells.counts,
            group_of_cell,
            int(suppressed),
        )
        short = np.flatnonzero(out.register_in_group < records)
        if short.size:
            raise ValueError(
                f"{short.size} group(s) hold more records than register individuals in their region; "
                "the register is not the one this release was published with"
            )
        return out


@dataclass(frozen=True, eq=False)
class JointAnswers:
    """Answers of Q count queries on one release.

    Attributes:
        estimate: the register-joint estimate, records, float64 (Q,).
        lower, upper: certain bounds of the snapshot's count, int64 (Q,): the published
            records satisfying Q lie in [lower, upper − suppressed].
        uniform: paper 001's estimate (uniform over each generalized value's leaves), (Q,).
        variance: the estimate's variance under the register-joint model, records², float64
            (Q,): Σ_G of :func:`allocation_variance` (the module docstring).
        generalized: bool (Q, d), columns in :attr:`JointRelease.qis` order: True where the
            query's condition on that QI cuts the generalized value (a node some but not all
            of whose leaves satisfy it) of a group with a positive variance, where the
            estimate rests on the within-region spread and may be pulled toward independence.
    """

    estimate: FloatArray
    lower: IntArray
    upper: IntArray
    uniform: FloatArray
    variance: FloatArray
    generalized: BoolArray

    @property
    def se(self) -> FloatArray:
        """The standard error, records, float64 (Q,): the square root of :attr:`variance`."""
        return np.sqrt(self.variance)

    def interval(self, z: float = Z_90) -> tuple[FloatArray, FloatArray]:
        """The nominal interval estimate ± z · se clipped to the certain bounds
        (:func:`error_interval`), two float64 arrays (Q,)."""
        return error_interval(self.estimate, self.se, self.lower, self.upper, z)


def allocation_variance(c: npt.ArrayLike, in_q: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """The variance of the records of a group that satisfy a query, under the register-joint
    model: the group's ``c`` records of S belong to ``c`` distinct individuals of the ``n`` of
    its region, drawn uniformly without replacement; ``in_q`` of the ``n`` satisfy the query.
    The count is hypergeometric, with variance c · w · (1 − w) · (n − c) / (n − 1), w = in_q / n
    (0 when n <= 1). The one formula of the error figure; elementwise, float64 of the
    broadcast shape. Requires 0 <= c <= n and 0 <= in_q <= n (not checked).

    Source: the module docstring; the hypergeometric variance (e.g. Feller, An Introduction
    to Probability Theory, vol. I, section IX.6).
    """
    c_ = np.asarray(c, dtype=np.float64)
    k = np.asarray(in_q, dtype=np.float64)
    n_ = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = c_ * k * (n_ - k) * (n_ - c_) / (n_ * n_ * (n_ - 1.0))
    return np.asarray(np.where(n_ > 1, np.maximum(v, 0.0), 0.0), dtype=np.float64)


def error_interval(
    estimate: npt.ArrayLike, se: npt.ArrayLike, lower: npt.ArrayLike, upper: npt.ArrayLike, z: float = Z_90
) -> tuple[FloatArray, FloatArray]:
    """The nominal interval of an estimate: estimate ± z · se (``Z_90`` gives 90 %, ``Z_95``
    95 %, by the normal approximation), clipped to the certain bounds [lower, upper], which
    the true count cannot leave. Two float64 arrays of the broadcast shape (records)."""
    est = np.asarray(estimate, dtype=np.float64)
    half = z * np.asarray(se, dtype=np.float64)
    low = np.asarray(lower, dtype=np.float64)
    high = np.asarray(upper, dtype=np.float64)
    return np.clip(est - half, low, high), np.clip(est + half, low, high)


def joint_answers(release: JointRelease, ranges: QueryRanges) -> JointAnswers:
    """The register-joint estimate, its certain bounds and the uniform estimate of every query.

    Args:
        release: the release and its register (:meth:`JointRelease.of`).
        ranges: the queries: per QI a leaf mask (Q, n_leaves) over the leaf ids of its
            hierarchy (QIs left out are unconstrained); ``sensitive_values`` and the mask
            ``sensitive`` (Q, V') give S; values the release does not hold count 0.

    Returns:
        :class:`JointAnswers`, with the error figure of the module docstring.

    Raises:
        ValueError: a range on an attribute that is not a QI of the release, a mask of
            the wrong shape, or a group holding more records than register individuals
            in its region (not a release of this register).

    Source: the module docstring; paper 001 (Xiao & Tao, SIGMOD 2006), section 5.2 for the
    uniform estimate.
    """
    return _evaluate(release, ranges, bounds=True, with_uniform=True)


def joint_estimates(
    release: JointRelease, ranges: QueryRanges, uniform: bool = False, *, sparse_product: bool = False
) -> tuple[FloatArray, FloatArray]:
    """Only the register-joint estimates of :func:`joint_answers` (and, with ``uniform``,
    paper 001's), the same float64 arrays (Q,) to the bit, without the bounds, the error
    figure or the cut QIs: what the draft's utility figure and the plan read. Without
    ``uniform`` the second array is all zeros. Arguments and errors as :func:`joint_answers`.

    ``sparse_product``: sum c_S(G) with scipy's sparse product (:func:`_product_counts`)
    instead of once per distinct value set: the writer side's, for workloads whose every
    query counts its own set of values (the draft's 5,000 queries), where it is several
    times faster. The same floats to the bit either way; a data user's query never sets it,
    so it never imports scipy."""
    a = _evaluate(release, ranges, bounds=False, with_uniform=uniform, sparse_product=sparse_product)
    return a.estimate, a.uniform


def _evaluate(
    release: JointRelease, ranges: QueryRanges, bounds: bool, with_uniform: bool, sparse_product: bool = False
) -> JointAnswers:
    """:func:`joint_answers`; ``bounds`` False leaves ``lower``, ``upper``, ``variance`` and
    ``generalized`` zero, ``with_uniform`` False the uniform estimate (callers that read
    neither); ``sparse_product`` as :func:`joint_estimates`."""
    q = ranges.n_queries
    names = list(release.qis)
    for a, m in ranges.qi.items():
        if a not in names:
            raise ValueError(f"range on {a!r}, which is not a quasi-identifier of the release ({', '.join(names)})")
        h = release.hierarchies[names.index(a)]
        if m.shape != (q, h.n_leaves):
            raise ValueError(f"range mask of {a!r} has shape {m.shape}; expected ({q}, {h.n_leaves})")
    # S as a mask over the release's values (those it does not hold count nothing), once per
    # distinct set of values the queries count
    sets = _value_sets(ranges, release.sensitive_values)
    # c_S(G) per chunk of queries from the sparse (group, value) counts: never a dense (Q, G)
    # matrix nor a float copy of the (G, V) counts. Its entries are exact integers (sums of
    # whole counts far below 2**53), so they do not depend on the order of summation
    counts = release.nonzero
    product = _csr_counts(counts) if sparse_product else None
    # c_S(G) of every distinct set at once when they fit, so that a batch counting the same
    # values (a data user's: all of them, or --sensitive's) sums them once, not once a chunk
    fits = sets.masks.shape[0] * counts.shape[0] <= SET_ELEMENTS
    per_set = _set_counts(counts, sets.masks) if product is None and fits else None
    n_g = release.register_in_group.astype(np.float64)
    g = counts.shape[0]
    if (counts.per_group() > n_g).any():  # the bounds rest on one record per individual
        raise ValueError("a group holds more records than register individuals in its region")

    estimate = np.zeros(q, dtype=np.float64)
    lower = np.zeros(q, dtype=np.int64)
    upper = np.zeros(q, dtype=np.int64)
    uniform = np.zeros(q, dtype=np.float64)
    variance = np.zeros(q, dtype=np.float64)
    generalized = np.zeros((q, len(names)), dtype=bool)
    if q == 0 or g == 0:
        return JointAnswers(estimate, lower, upper + release.suppressed, uniform, variance, generalized)

    constrained = np.zeros((q, len(names)), dtype=bool)
    for i, a in enumerate(names):
        if a in ranges.qi:
            constrained[:, i] = ~ranges.qi[a].all(axis=1)
    patterns, pattern_of = np.unique(constrained, axis=0, return_inverse=True)
    pattern_of = pattern_of.reshape(-1)
    covered = release.group_of_cell >= 0
    spans = [h.index for h in release.hierarchies]
    with np.errstate(invalid="ignore", divide="ignore"):
        share_den = np.where(n_g > 0, 1.0 / n_g, 0.0)
    for p, pattern in enumerate(patterns):
        queries = np.flatnonzero(pattern_of == p)
        attrs: list[int] = [int(a) for a in np.flatnonzero(pattern)]
        # the covered cells re-aggregated on (group, constrained attributes)
        cols = [release.group_of_cell[covered], *(release.cell_leaves[covered, k] for k in attrs)]
        radices = [g, *(release.hierarchies[k].n_leaves for k in attrs)]
        rows, first = factorize(row_keys(np.stack(cols, axis=1), radices))
        # the rows renumbered by group, so that a query's rows come out group by group
        # (_in_query sums each (query, group) run without a (queries x groups) array)
        by_group = np.argsort(cols[0][first], kind="stable")
        renumber = np.empty_like(by_group)
        renumber[by_group] = np.arange(by_group.size, dtype=by_group.dtype)
        rows, first = renumber[rows], first[by_group]
        weight = np.asarray(
            np.bincount(rows, weights=release.cell_counts[covered], minlength=first.size), dtype=np.float64
        )
        row_group = cols[0][first]
        row_leaves = [c[first] for c in cols[1:]]
        step = max(1, CHUNK_ELEMENTS // max(first.size, g, 1))
        for start in range(0, queries.size, step):
            chunk = queries[start : start + step]
            # c_S(G) of the chunk's queries: row ``of[i]`` of ``table`` (n, G) for query i
            table, of = _chunk_sets(sets, sets.set_of[chunk], counts, per_set, product)
            # a (query, group) pair with in_Q(G) = 0 adds nothing: not to the estimate or the
            # upper bound, nor to the lower bound, as c_S(G) <= n(G) (checked above)
            at, grp, in_q = _in_query(ranges, [names[k] for k in attrs], row_leaves, row_group, weight, chunk, n_g)
            cs = table[of[at], grp]
            estimate[chunk] = np.bincount(at, weights=cs * in_q * share_den[grp], minlength=chunk.size)
            # paper 001: each group's records spread uniformly over the leaves of its nodes
            fractions = [_overlap_fractions(ranges.qi[names[k]][chunk], spans[k]) for k in attrs] if (
                with_uniform or bounds) else []  # fmt: skip
            if with_uniform:
                uniform[chunk] = _uniform(fractions, [release.group_nodes[:, k] for k in attrs], table, of)
            if not bounds:
                continue
            low = np.maximum(0.0, cs - (n_g[grp] - in_q))
            lower[chunk] = np.rint(np.bincount(at, weights=low, minlength=chunk.size)).astype(np.int64)
            high = np.minimum(cs, in_q)
            upper[chunk] = np.rint(np.bincount(at, weights=high, minlength=chunk.size)).astype(np.int64)
            var = allocation_variance(cs, in_q, n_g[grp])
            variance[chunk] = np.bincount(at, weights=var, minlength=chunk.size)
            uncertain = var > 0
            for f, k in zip(fractions, attrs, strict=True):  # one step per constrained QI
                part = f[at, release.group_nodes[grp, k]]
                cut = uncertain & (part > 0) & (part < 1)
                generalized[chunk[at[cut]], k] = True
    return JointAnswers(estimate, lower, upper + release.suppressed, uniform, variance, generalized)


@dataclass(frozen=True, eq=False)
class _ValueSets:
    """The sets S of sensitive values a batch of queries counts, coded once: ``set_of`` the
    set of every query, int64 (Q,), and ``masks`` each distinct set as 0 and 1 over the
    release's values, (sets, V): bool when the queries' masks are, else float64."""

    set_of: IntArray
    masks: npt.NDArray[np.bool_] | FloatArray


def _value_sets(ranges: QueryRanges, values: Sequence[object]) -> _ValueSets:
    """:class:`_ValueSets` of ``ranges``' value masks, over the release's ``values``.

    Each query's row of ``ranges.sensitive`` is read as one opaque item of its bytes, so the
    distinct sets come from one sort of Q items, not of Q rows of V floats compared value by
    value; the masks are made for the distinct sets only (never a (Q, V) float array)."""
    index = {v: k for k, v in enumerate(ranges.sensitive_values)}
    pos = np.array([index.get(v, -1) for v in values], dtype=np.intp)  # one step per value
    held = pos >= 0
    rows = np.ascontiguousarray(ranges.sensitive)
    q = rows.shape[0]
    if rows.ndim != 2 or rows.shape[1] == 0 or q == 0:
        first, set_of = np.zeros(min(q, 1), dtype=np.int64), np.zeros(q, dtype=np.int64)
    else:
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(q)
        _, first, set_of = np.unique(keys, return_index=True, return_inverse=True)
    # boolean where the queries' masks are (a data user's and the draft's): a byte per
    # element, where float64 made this (distinct sets x values) array the largest of the
    # draft's joint figure; both sums below read it as 0 and 1 exactly
    masks: npt.NDArray[np.bool_] | FloatArray = np.zeros(
        (first.size, len(values)), dtype=np.bool_ if rows.dtype == np.bool_ else np.float64
    )
    if first.size:
        masks[:, held] = rows[first][:, pos[held]]
    return _ValueSets(np.asarray(set_of, dtype=np.int64).reshape(q), masks)


#: Upper bound on the elements of the (distinct value sets × groups) array of c_S(G) that
#: :func:`joint_answers` keeps for the whole batch; beyond it each chunk sums its own sets.
SET_ELEMENTS = 1 << 23


def _set_counts(counts: GroupValueCounts, masks: npt.NDArray[np.bool_] | FloatArray) -> FloatArray:
    """c_S(G) = Σ_{s∈S} c_s(G) of every set S of ``masks`` (sets, V) of 0 and 1, float64
    (sets, G), from the nonzero counts: whole numbers, exact in float64 whatever the order of
    summation. One row of (sets, E) entries per step, at most :data:`CHUNK_ELEMENTS` elements
    at a time."""
    g = counts.shape[0]
    per_set = np.zeros((masks.shape[0], g), dtype=np.float64)
    if counts.starts.size:
        step = max(1, CHUNK_ELEMENTS // counts.column.size)
        for start in range(0, masks.shape[0], step):  # one step per block of distinct value sets
            held = masks[start : start + step][:, counts.column] * counts.count
            per_set[start : start + step, counts.groups] = np.add.reduceat(held, counts.starts, axis=1)
    return per_set


def _chunk_sets(
    sets: _ValueSets,
    set_of: IntArray,
    counts: GroupValueCounts,
    per_set: FloatArray | None,
    product: sparse.csr_matrix | None,
) -> tuple[FloatArray, IntArray]:
    """c_S(G) of a chunk of queries whose sets are ``set_of`` (chunk,), as a table (n, G) and
    the row of it each query reads (chunk,): the batch's own ``per_set`` when it was made;
    else the chunk's distinct sets summed (found among the coded ids, no sort of masks), or
    with ``product`` every query's row by the sparse product. The same whole numbers either
    way."""
    if product is not None:
        return _product_counts(product, sets.masks[set_of]), np.arange(set_of.size, dtype=np.int64)
    if per_set is not None:
        return per_set, set_of
    seen = np.zeros(sets.masks.shape[0], dtype=bool)
    seen[set_of] = True
    ids = np.flatnonzero(seen)
    return _set_counts(counts, sets.masks[ids]), np.searchsorted(ids, set_of).astype(np.int64)


def _csr_counts(counts: GroupValueCounts) -> sparse.csr_matrix:
    """The nonzero counts as a scipy CSR matrix (G, V), for :func:`_product_counts`."""
    from scipy import sparse  # the writer side's: a data user's query never imports scipy

    g, v = counts.shape
    indptr = np.zeros(g + 1, dtype=np.int64)
    indptr[counts.groups + 1] = np.diff(np.r_[counts.starts, counts.column.size])
    np.cumsum(indptr, out=indptr)
    # every c_S(G) is a sum of whole counts no larger than the records published in all: below
    # 2**24 they are exact in float32, whose product moves half the bytes (and int32 indices
    # half again) for the same whole numbers, so the same float64 figures to the bit
    narrow = counts.count.sum() < FLOAT32_EXACT
    data = counts.count.astype(np.float32) if narrow else counts.count
    index = np.int32 if max(counts.column.size, v) < 2**31 else np.int64
    return sparse.csr_matrix((data, counts.column.astype(index), indptr.astype(index)), shape=(g, v))


def _product_counts(matrix: sparse.csr_matrix, s_mask: npt.NDArray[np.bool_] | FloatArray) -> FloatArray:
    """:func:`_set_counts` by scipy's sparse product of the nonzero counts
    (:func:`_csr_counts`) with the chunk's value masks: one pass over the E nonzero counts
    adding each to the chunk's row of its group, where :func:`_set_counts` gathers,
    multiplies and reduces a (sets, E) array per block of distinct value sets, several times
    the memory traffic when every query counts its own set (the draft's 5,000 queries,
    E = 614K at 1M records over the 5M register). The same whole numbers, exact in float64
    in any order of summation, so the same floats to the bit (float32 when
    :func:`_csr_counts` found them exact in it, returned as float64)."""
    product = np.asarray(matrix @ np.ascontiguousarray(s_mask.T, dtype=matrix.dtype)).T
    return product.astype(np.float64, copy=False)


def _in_query(
    ranges: QueryRanges,
    attrs: list[str],
    row_leaves: list[IntArray],
    row_group: IntArray,
    weight: FloatArray,
    chunk: IntArray,
    n_g: FloatArray,
) -> tuple[IntArray, IntArray, FloatArray]:
    """in_Q(G) of the queries ``chunk`` where it is positive: the register individuals of a
    group's region that satisfy a query's conditions on ``attrs``, as (position in
    ``chunk``, group, in_Q(G)) triples, each of shape (P,).

    The rows are the register's cells aggregated on (group, leaves of ``attrs``), with
    ``weight`` individuals each. Which rows a query holds is one boolean AND per attribute
    (a byte per element: the masks are boolean), and only the rows it holds are summed, so
    the work follows the query's selectivity, not queries × rows in floating point. The
    weights are whole numbers and the sums stay far below 2**53, so in_Q is exact.
    """
    g = n_g.size
    if not attrs:  # no condition on a QI: every individual of the region
        at = np.repeat(np.arange(chunk.size, dtype=np.int64), g)
        grp = np.tile(np.arange(g, dtype=np.int64), chunk.size)
        return at, grp, n_g[grp]
    inside = np.asarray(ranges.qi[attrs[0]][chunk], dtype=bool)[:, row_leaves[0]]
    for a, leaves in zip(attrs[1:], row_leaves[1:], strict=True):
        inside &= np.asarray(ranges.qi[a][chunk], dtype=bool)[:, leaves]
    q_idx, r_idx = np.nonzero(inside)  # by query, then by row: the rows are numbered by group
    if q_idx.size == 0:
        return q_idx.astype(np.int64), q_idx.astype(np.int64), np.zeros(0, dtype=np.float64)
    key = q_idx * g + row_group[r_idx]  # non-decreasing: each (query, group) pair is one run
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    in_q = np.add.reduceat(weight[r_idx], starts)
    held = in_q > 0
    pairs, in_q = key[starts[held]].astype(np.int64), in_q[held]
    return pairs // g, pairs % g, np.asarray(in_q, dtype=np.float64)


def _uniform(fractions: list[FloatArray], nodes: list[IntArray], table: FloatArray, of: IntArray) -> FloatArray:
    """Paper 001's estimate of a chunk of queries, shape (chunk,): Σ_G c_S(G) · Π_k the
    fraction of G's node on attribute k inside the query's range (``fractions[k]``, shape
    (chunk, nodes); ``nodes[k]`` G's node, shape (G,); c_S(G) of query i is row ``of[i]`` of
    ``table``, shape (n, G)). Only the (query, group) pairs whose box meets the query are
    multiplied out."""
    if not fractions:
        return np.asarray(table.sum(axis=1)[of], dtype=np.float64)
    meets = (fractions[0] > 0)[:, nodes[0]]
    for f, n in zip(fractions[1:], nodes[1:], strict=True):
        meets &= (f > 0)[:, n]
    at, grp = np.nonzero(meets)
    value = table[of[at], grp]
    for f, n in zip(fractions, nodes, strict=True):
        value = value * f[at, n[grp]]
    return np.asarray(np.bincount(at, weights=value, minlength=of.size), dtype=np.float64)


def series_answers(
    releases: Sequence[JointRelease], ranges: QueryRanges | Sequence[QueryRanges], numbers: Sequence[int] | None = None
) -> pd.DataFrame:
    """:func:`joint_answers` on every release of a series: a time series per query.

    Args:
        releases: the releases, each resolved against the register version it was
            published with (a changing register: docs/design.md section 10).
        ranges: the queries, or one :class:`QueryRanges` per release (the same queries
            written over each release's hierarchies, when their leaves changed).
        numbers: the release numbers (default 1, 2, ...).

    Returns:
        one row per (release, query): columns ``release``, ``query`` (0-based), ``estimate``,
        ``se`` (the error figure: :attr:`JointAnswers.se`), ``lower``, ``upper``, ``uniform``.
    """
    import pandas as pd

    per = [ranges] * len(releases) if isinstance(ranges, QueryRanges) else list(ranges)
    if len(per) != len(releases):
        raise ValueError("ranges: one per release is needed")
    numbers = list(range(1, len(releases) + 1)) if numbers is None else list(numbers)
    frames = []
    for number, release, r in zip(numbers, releases, per, strict=True):  # one step per release, not per record
        a = joint_answers(release, r)
        frames.append(
            pd.DataFrame(
                {
                    "release": number,
                    "query": np.arange(r.n_queries),
                    "estimate": a.estimate,
                    "se": a.se,
                    "lower": a.lower,
                    "upper": a.upper,
                    "uniform": a.uniform,
                }
            )
        )
    return (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["release", "query", "estimate", "se", "lower", "upper", "uniform"])
    )


def histogram_release(release: JointRelease, values: Sequence[str], counts: npt.ArrayLike) -> JointRelease:
    """The baseline of ``release``: a release of one group, every QI ``*``, publishing only
    the sensitive histogram ``counts`` (records per value of ``values``; the snapshot's),
    over the same register. What a release tells beyond the histogram is its gain over this
    baseline (docs/data-users.md)."""
    roots = np.array([[h.root for h in release.hierarchies]], dtype=np.int64)
    hist = GroupValueCounts.of_dense(np.asarray(counts, dtype=np.int64).reshape(1, -1))
    return JointRelease(
        release.qis,
        release.hierarchies,
        tuple(values),
        roots,
        hist,
        release.cell_leaves,
        release.cell_counts,
        np.zeros(release.cell_counts.size, dtype=np.int64),
    )


@dataclass(frozen=True, eq=False)
class JointWorkloadError:
    """Relative errors of a query workload under the register-joint estimator, beside the
    baseline that publishes only the snapshot's sensitive histogram.

    Attributes:
        mean, median, p85: of the release's relative errors (fractions).
        baseline_mean: mean relative error of the histogram-only baseline.
        estimate: the release's estimates, float64 (Q,).
        errors, baseline_errors: relative errors, float64 (Q,).
    """

    mean: float
    median: float
    p85: float
    baseline_mean: float
    estimate: FloatArray
    errors: FloatArray
    baseline_errors: FloatArray

    @property
    def gain(self) -> float:
        """baseline_mean − mean: how much closer the release brings a data user's answers
        than the sensitive histogram alone (in mean relative error; <= 0: nothing gained)."""
        return self.baseline_mean - self.mean


def joint_workload_error(workload: Workload, release: JointRelease, histogram: npt.ArrayLike) -> JointWorkloadError:
    """The register-joint estimator's errors on a drawn workload, and its baseline's.

    Args:
        workload: queries and exact answers on the snapshot
            (:func:`anonymizer.queries.draw_workload`).
        release: the release resolved against its register (:meth:`JointRelease.of`).
        histogram: the snapshot's records per value of ``workload.ranges.sensitive_values``.

    Source: the module docstring; paper 001 (Xiao & Tao, SIGMOD 2006), section 5.2 for the
    workload and the relative error.
    """
    actual = workload.actual.astype(np.float64)
    ranges = workload.ranges
    # the writer side's (the draft, the experiments): every query counts its own value set
    est = joint_estimates(release, _as_text(ranges), sparse_product=True)[0]
    base = histogram_release(release, [str(v) for v in ranges.sensitive_values], histogram)
    base_est = joint_estimates(base, _as_text(ranges), sparse_product=True)[0]
    errors = np.abs(actual - est) / actual
    base_errors = np.abs(actual - base_est) / actual
    return JointWorkloadError(
        float(errors.mean()),
        float(np.median(errors)),
        float(np.percentile(errors, 85)),
        float(base_errors.mean()),
        est,
        errors,
        base_errors,
    )


def _as_text(ranges: QueryRanges) -> QueryRanges:
    return QueryRanges(ranges.qi, tuple(str(v) for v in ranges.sensitive_values), ranges.sensitive)
