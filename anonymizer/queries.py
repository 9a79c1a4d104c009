"""Utility measure: average relative error of random range-count queries.

The workload (docs/design.md section 8) follows paper 001 (Xiao & Tao, SIGMOD 2006,
section 5.2), which paper 004 (Wong et al., section 8) adopts for serial publishing. A query is::

    COUNT(*) WHERE A1 ∈ R1 AND … AND A_qd ∈ R_qd AND S ∈ R_S

* **actual**: the number of records of the raw snapshot (every record, suppressed or not)
  that satisfy all conditions;
* **estimate**: on the published release, every original value is assumed uniformly
  distributed over the leaves of its generalized value, so a published record whose value
  of A_i is node g_i contributes ``Π_i |leaves(g_i) ∩ R_i| / |leaves(g_i)|`` times
  ``[s ∈ R_S]`` (its sensitive value is published as is). Suppressed records are absent
  from the release and contribute nothing;
* **relative error**: ``|actual − estimate| / actual``; queries with actual = 0 are redrawn.

The **register-weighted estimator** answers the same queries with one change: a generalized
value is spread over its leaves in proportion to the register's count of each leaf,
``Π_i w(leaves(g_i) ∩ R_i) / w(leaves(g_i))``, instead of uniformly. Every release
publishes those counts (the manifest's ``register_marginals``; docs/design.md section 8),
so a data user can do the same; they are public in the threat model, which already grants
the adversary the whole register. On skewed attributes (a country of birth that is one
value for nine people in ten) the uniform estimator's error is mostly the skew, not the
generalization.

Ranges are leaf sets (:mod:`anonymizer.workload` holds them and draws random ones). A range
is given as a boolean leaf mask per attribute; an attribute a query does not constrain has
an all-True mask (every node then contributes 1), so queries on different attribute subsets
share one representation.

Evaluation is matrix arithmetic, never a loop over records: each table is first aggregated
into distinct (node tuple, sensitive value) rows with counts; queries are grouped by the set
of attributes they constrain, the table is re-aggregated on those attributes only, and for a
chunk of Q queries the answers are ``Σ_s S[:, s] · (C @ Π_i F_i[:, g_i]ᵀ)[s]``, where ``F_i``
(Q × n_nodes) holds the overlap fractions of the ranges with every node, ``Π_i F_i[:, g_i]``
is taken over the table's distinct QI rows g only, and ``C`` (sensitive values × distinct QI
rows) holds the counts as a sparse matrix: one pass over the table's distinct rows per query
instead of one per attribute. The
overlap counts come from prefix sums over the leaves in depth-first order, where every node's
leaves are contiguous, so no dense leaf × node matrix is needed.

This module does no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex
from anonymizer.regions import label_nodes
from anonymizer.workload import QueryRanges, check_parameters, draw_queries

if TYPE_CHECKING:
    import pandas as pd
    from scipy import sparse

    from anonymizer.joint import JointWorkloadError

__all__ = [
    "QueryErrorResult",
    "QueryRanges",
    "WeightedEstimate",
    "Workload",
    "average_relative_error",
    "draw_queries",
    "draw_workload",
    "estimate_workload",
    "evaluate_queries",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Upper bound on the elements of one (queries × distinct rows) work matrix (float64).
CHUNK_ELEMENTS = 1 << 21

#: Keys with at most this many possible values (or four per row) are grouped by counting
#: every possible value (``np.bincount``, an int64 per value) instead of hashing or sorting the rows.
DENSE_ELEMENTS = 1 << 22

#: At most this many queries per requested query are drawn before giving up on finding
#: queries with a non-zero actual answer.
MAX_DRAWS_PER_QUERY = 100


# --------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class QueryErrorResult:
    """Relative errors of a query workload on one release.

    Attributes:
        mean: average relative error (a ratio; 0.25 means 25 %).
        median: median relative error.
        p85: 85th percentile of the relative errors (numpy's linear interpolation); the
            "average + standard deviation" bar of Xiao & Tao (paper 001, section 5.2) is
            about this percentile.
        n_queries: number of queries evaluated (all with actual > 0).
        qd: number of QI attributes per query actually used, ``min(requested qd, n_QIs)``.
        selectivity: the requested expected selectivity s (a fraction of the records).
        seed: seed of the random generator.
        actual: exact answers on the raw snapshot, int64 of shape (n_queries,), all > 0.
        estimate: estimated answers on the release, float64 of shape (n_queries,).
        errors: relative errors, float64 of shape (n_queries,).
        n_draws: queries drawn in total: the accepted ones, those rejected for an actual of
            0, and the surplus of the last round of draws.
        mean_selectivity: mean of ``actual / len(raw)``, the realized selectivity.
        ranges: the queries themselves.
    """

    mean: float
    median: float
    p85: float
    n_queries: int
    qd: int
    selectivity: float
    seed: int
    actual: IntArray
    estimate: FloatArray
    errors: FloatArray
    n_draws: int
    mean_selectivity: float
    ranges: QueryRanges
    weighted: WeightedEstimate | None = None
    #: the register-joint estimator and its histogram baseline (:mod:`anonymizer.joint`)
    joint: JointWorkloadError | None = None


@dataclass(frozen=True, eq=False)
class WeightedEstimate:
    """The same queries answered by the register-weighted estimator: a generalized value is
    spread over its leaves in proportion to given leaf weights (the register's count of
    each leaf, which every release publishes; docs/design.md section 8) instead of uniformly.

    Attributes:
        mean, median, p85: of the relative errors, as in :class:`QueryErrorResult`.
        estimate: estimated answers, float64 of shape (n_queries,).
        errors: relative errors against the same actual answers, shape (n_queries,).
    """

    mean: float
    median: float
    p85: float
    estimate: FloatArray
    errors: FloatArray


# --------------------------------------------------------------------------------------
# Overlap with the ranges
# --------------------------------------------------------------------------------------


def _overlap_fractions(mask: BoolArray, spans: HierarchyIndex, weights: FloatArray | None = None) -> FloatArray:
    """Share of every node that lies in the range, for every query and node, shape (Q, n_nodes).

    ``weights`` None: ``|leaves(node) ∩ R| / |leaves(node)|`` (the uniform estimator).
    Otherwise ``w(leaves(node) ∩ R) / w(leaves(node))`` with ``weights`` per leaf id (the
    register-weighted estimator); a node whose leaves all weigh 0 falls back to the uniform
    share. Exactly 0.0 or 1.0 on leaf nodes either way.
    """
    uniform = np.zeros((mask.shape[0], mask.shape[1] + 1), dtype=np.int64)
    np.cumsum(mask[:, spans.order], axis=1, out=uniform[:, 1:])
    share = (uniform[:, spans.hi + 1] - uniform[:, spans.lo]) / spans.size.astype(np.float64)
    if weights is None:
        return share
    w = weights[spans.order]
    total = np.concatenate([[0.0], np.cumsum(w)])
    node_w = total[spans.hi + 1] - total[spans.lo]
    cum = np.zeros((mask.shape[0], mask.shape[1] + 1), dtype=np.float64)
    np.cumsum(mask[:, spans.order] * w, axis=1, out=cum[:, 1:])
    with np.errstate(invalid="ignore", divide="ignore"):
        weighted = (cum[:, spans.hi + 1] - cum[:, spans.lo]) / node_w
    # clip: prefix-sum differences of floats may leave 1 + 1e-16
    return np.where(node_w > 0, np.clip(weighted, 0.0, 1.0), share)


def _leaf_weights(
    hierarchies: Mapping[str, Hierarchy], leaf_weights: Mapping[str, npt.ArrayLike] | None
) -> list[FloatArray | None]:
    """Per QI (in ``hierarchies`` order) its leaf weights as float64 of shape (n_leaves,), or
    None for the uniform estimator (no weights given, or none for that QI).

    Raises:
        ValueError: weights of a QI without hierarchy, of the wrong shape, negative or not finite.
    """
    if leaf_weights is None:
        return [None] * len(hierarchies)
    unknown = sorted(set(leaf_weights) - set(hierarchies))
    if unknown:
        raise ValueError(f"leaf weights given for {unknown}, which are not quasi-identifiers of the release")
    out: list[FloatArray | None] = []
    for a, h in hierarchies.items():
        if a not in leaf_weights:
            out.append(None)
            continue
        w = np.asarray(leaf_weights[a], dtype=np.float64)
        if w.shape != (h.n_leaves,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(
                f"leaf weights of {a!r} must be {h.n_leaves} finite non-negative numbers (one per leaf), "
                f"got shape {w.shape}"
            )
        out.append(w)
    return out


# --------------------------------------------------------------------------------------
# Tables as distinct rows
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    codes: list[IntArray]  # per QI, node id of every distinct row, shape (D,)
    sens: IntArray  # (D,) sensitive code, ascending; n_sens for values outside the domain
    counts: FloatArray  # (D,) records per distinct row
    n_records: int
    # re-aggregations on a subset of the QIs (by QI position), computed once (factor)
    projections: dict[tuple[int, ...], tuple[list[IntArray], sparse.csr_matrix]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def factor(
        self, attrs: tuple[int, ...], sizes: Sequence[int], n_sens: int
    ) -> tuple[list[IntArray], sparse.csr_matrix]:
        """The table re-aggregated on ``attrs`` (``sizes`` their node counts), as its distinct
        QI rows (per attribute the node of every distinct row, shape (D,)) and the counts
        per (sensitive code, distinct row), a sparse (n_sens, D) matrix; computed once."""
        import pandas as pd

        if attrs not in self.projections:
            if attrs:
                qi_rows, row_of = _distinct([self.codes[i] for i in attrs], sizes)
            else:
                qi_rows, row_of = [], np.zeros(len(self.counts), dtype=np.int64)
            width = len(qi_rows[0]) if attrs else 1
            # one entry per (sensitive code, distinct QI row): the table's rows that agree on
            # ``attrs`` are summed here once, so every product costs the projection's entries
            # (tens of thousands) instead of the table's rows (half a million at 1M records).
            # The key is sensitive-major, so the entries come out in CSR order without a sort
            pair = self.sens * width + row_of
            total = n_sens * width
            if _dense(total, len(pair)):
                dense = np.bincount(pair, weights=self.counts, minlength=total)
                keys = np.flatnonzero(dense)
                summed = dense[keys]
            else:
                # hashing, then a sort of the distinct keys only (a fraction of the rows): the
                # same keys and sums as np.unique, each key's weights added in row order
                inverse, found = pd.factorize(pair, sort=False)
                unsorted = np.bincount(inverse, weights=self.counts, minlength=len(found))
                order = np.argsort(found)
                keys, summed = np.asarray(found)[order], unsorted[order]
            sens_of, column = np.divmod(keys, width)
            indptr = np.zeros(n_sens + 1, dtype=np.int64)
            np.cumsum(np.bincount(sens_of, minlength=n_sens), out=indptr[1:])
            from scipy import sparse  # the writer side's: a data user's query never imports scipy

            matrix = sparse.csr_matrix((summed, column, indptr), shape=(n_sens, width))
            self.projections[attrs] = (qi_rows, matrix)
        return self.projections[attrs]


def _node_codes(column: pd.Series, h: Hierarchy, leaves_only: bool, table: str) -> IntArray:
    if column.isna().any():
        raise ValueError(f"{table} table: column {column.name!r} has missing values")
    nodes = label_nodes(column, h)
    bad = nodes < 0
    if leaves_only:
        bad |= nodes >= h.n_leaves
    if bad.any():  # the first offending row holds the first offending distinct label
        label = str(column.iloc[int(np.flatnonzero(bad)[0])])
        if not h.has_label(label):
            raise ValueError(f"{table} table: value {label!r} of column {column.name!r} is not in its hierarchy")
        raise ValueError(
            f"{table} table: value {label!r} of column {column.name!r} is a generalized value; "
            "the raw snapshot must hold leaves"
        )
    return nodes


def _group(columns: Sequence[IntArray], sizes: Sequence[int], weights: FloatArray) -> tuple[list[IntArray], FloatArray]:
    """Distinct rows of the integer columns (each in [0, size)) and their summed weights."""
    import pandas as pd

    n = len(weights)
    total = math.prod(sizes)
    if n == 0:
        return [np.zeros(0, dtype=np.int64) for _ in columns], np.zeros(0, dtype=np.float64)
    if total < 2**62:  # the exact mixed-radix number: np.unravel_index decodes it
        key = _mixed_key(columns, sizes, n)
        if _dense(total, n):
            dense = np.asarray(np.bincount(key, weights=weights, minlength=total), np.float64)
            keys = np.flatnonzero(dense)
            summed = dense[keys]
        else:
            inverse, keys = pd.factorize(key, sort=False)  # hashing, O(n)
            summed = np.asarray(np.bincount(inverse, weights=weights, minlength=len(keys)), np.float64)
        return [np.asarray(c, dtype=np.int64) for c in np.unravel_index(keys, tuple(sizes))], summed
    stacked = np.stack(list(columns), axis=1)
    rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
    summed = np.asarray(np.bincount(inverse.reshape(-1), weights=weights, minlength=len(rows)), np.float64)
    return [rows[:, i].astype(np.int64) for i in range(rows.shape[1])], summed


def _dense(total: int, n: int) -> bool:
    """Whether ``n`` keys with ``total`` possible values are grouped by counting every value."""
    return total <= max(4 * n, DENSE_ELEMENTS)


def _mixed_key(columns: Sequence[IntArray], sizes: Sequence[int], n: int) -> IntArray:
    """``Σ_j columns[j] · Π_{i>j} sizes[i]`` (the product of ``sizes`` below 2**62): the
    same key as :func:`anonymizer.arrays.row_keys`, without stacking the columns."""
    key = np.zeros(n, dtype=np.int64)
    for col, size in zip(columns, sizes, strict=True):
        key *= int(size)
        key += col
    return key


def _distinct(columns: Sequence[IntArray], sizes: Sequence[int]) -> tuple[list[IntArray], IntArray]:
    """Distinct rows of the integer columns (each in [0, size)), as columns, and the index
    of every input row among them."""
    import pandas as pd

    n = len(columns[0])
    total = math.prod(sizes)
    if _dense(total, n):  # a count of every possible row: no hashing, no sort
        key = _mixed_key(columns, sizes, n)
        present = np.bincount(key, minlength=total) > 0
        keys = np.flatnonzero(present)
        inverse = (np.cumsum(present) - 1)[key]
        rows = np.unravel_index(keys, tuple(sizes))
        return [np.asarray(c, dtype=np.int64) for c in rows], inverse
    if total < 2**62:
        key = _mixed_key(columns, sizes, n)
        inverse, keys = pd.factorize(key, sort=False)  # hashing, O(n)
        rows = np.unravel_index(np.asarray(keys), tuple(sizes))
        return [np.asarray(c, dtype=np.int64) for c in rows], np.asarray(inverse, dtype=np.int64)
    uniq, inverse = np.unique(np.stack(list(columns), axis=1), axis=0, return_inverse=True)
    return [uniq[:, i].astype(np.int64) for i in range(uniq.shape[1])], inverse.reshape(-1).astype(np.int64)


def _encode(
    df: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    sensitive: str,
    sensitive_values: Sequence[Any],
    leaves_only: bool,
    table: str,
    nodes: IntArray | None = None,
) -> _Table:
    """The table's records grouped on (QI nodes, sensitive value). ``nodes``: the node id
    per QI of every record, (R, d), when the caller resolved the labels already (read
    as the columns are: one that is not a node of its hierarchy is resolved again here, for
    the same error)."""
    import pandas as pd

    missing = [c for c in [*hierarchies, sensitive] if c not in df.columns]
    if missing:
        raise ValueError(f"{table} table lacks column(s) {missing}")
    if nodes is not None and nodes.shape == (len(df), len(hierarchies)) and not leaves_only and (nodes >= 0).all():
        qi_codes = [nodes[:, i] for i in range(len(hierarchies))]
    else:
        qi_codes = [_node_codes(df[a], h, leaves_only, table) for a, h in hierarchies.items()]
    n_sens = len(sensitive_values)
    # each distinct value is looked up once (1M records hold a few thousand values)
    found, values = pd.factorize(df[sensitive], use_na_sentinel=True)
    position = pd.Index(list(sensitive_values)).get_indexer(values).astype(np.int64)
    position = np.append(position, -1)  # the missing values' code -1 takes the last entry
    sens = position[found]
    sens[sens < 0] = n_sens
    sizes = [h.n_nodes for h in hierarchies.values()] + [n_sens + 1]
    cols, counts = _group([*qi_codes, sens], sizes, np.ones(len(df), dtype=np.float64))
    by_sens = np.argsort(cols[-1], kind="stable")
    # node ids fit int32 (a hierarchy's nodes number far fewer): half the table's codes
    narrow = np.int32 if max(sizes) < 2**31 else np.int64
    return _Table([c[by_sens].astype(narrow) for c in cols[:-1]], cols[-1][by_sens], counts[by_sens], len(df))


# --------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------


def _check_ranges(hierarchies: Mapping[str, Hierarchy], ranges: QueryRanges) -> None:
    q = ranges.n_queries
    if len(set(ranges.sensitive_values)) != len(ranges.sensitive_values):
        raise ValueError("sensitive_values holds a value twice")
    if ranges.sensitive.ndim != 2 or ranges.sensitive.shape[1] != len(ranges.sensitive_values):
        raise ValueError(
            f"sensitive mask has shape {ranges.sensitive.shape}; expected (Q, {len(ranges.sensitive_values)})"
        )
    for a, m in ranges.qi.items():
        if a not in hierarchies:
            raise ValueError(f"range on {a!r}, which has no hierarchy")
        if m.dtype != np.bool_ or m.shape != (q, hierarchies[a].n_leaves):
            raise ValueError(
                f"range mask of {a!r} has shape {m.shape} and dtype {m.dtype}; "
                f"expected bool of shape ({q}, {hierarchies[a].n_leaves})"
            )


def _answers(
    table: _Table,
    hierarchies: Mapping[str, Hierarchy],
    spans: Sequence[HierarchyIndex],
    ranges: QueryRanges,
    weights: Sequence[FloatArray | None] | None = None,
) -> FloatArray:
    """Expected count of every query on ``table``, shape (Q,); exact counts for leaf-only tables.
    ``weights``: per QI its leaf weights (:func:`_leaf_weights`), None for uniform shares."""
    return _answers_each(table, hierarchies, spans, ranges, [weights])[0]


def _answers_each(
    table: _Table,
    hierarchies: Mapping[str, Hierarchy],
    spans: Sequence[HierarchyIndex],
    ranges: QueryRanges,
    variants: Sequence[Sequence[FloatArray | None] | None],
    keep: bool = True,
) -> list[FloatArray]:
    """:func:`_answers` for each of ``variants`` (its ``weights``), in one pass over the
    queries' sets of constrained QIs: each set's re-aggregation of the table is made once for
    all of them, and with ``keep`` False dropped once its queries are answered (a caller that
    answers every query at once needs no more than one at a time). The same floats as one
    :func:`_answers` call per variant."""
    per_variant = [[None] * len(spans) if w is None else w for w in variants]
    names = list(hierarchies)
    q = ranges.n_queries
    outs = [np.zeros(q, dtype=np.float64) for _ in per_variant]
    if q == 0 or len(table.counts) == 0:
        return outs
    # which attributes each query constrains; queries are grouped by that set
    constrained = np.zeros((q, len(names)), dtype=bool)
    for i, a in enumerate(names):
        if a in ranges.qi:
            constrained[:, i] = ~ranges.qi[a].all(axis=1)
    if names:
        patterns, group_of = np.unique(constrained, axis=0, return_inverse=True)
        group_of = group_of.reshape(-1)
    else:
        patterns, group_of = np.zeros((1, 0), dtype=bool), np.zeros(q, dtype=np.int64)
    # the value masks as floats a chunk at a time: for all queries at once, (Q, V + 1) float64
    # is the largest array of the estimate (thousands of values)
    n_sens = len(ranges.sensitive_values) + 1
    by_group = np.argsort(group_of, kind="stable")
    bounds = np.searchsorted(group_of[by_group], np.arange(len(patterns) + 1))
    for g, pattern in enumerate(patterns):
        queries = by_group[bounds[g] : bounds[g + 1]]
        attrs = tuple(np.flatnonzero(pattern).tolist())
        qi_rows, by_value = table.factor(attrs, [hierarchies[names[i]].n_nodes for i in attrs], n_sens)
        width = max(len(qi_rows[0]) if attrs else 1, *(hierarchies[names[i]].n_nodes for i in attrs), n_sens)
        step = max(1, CHUNK_ELEMENTS // width)
        for start in range(0, len(queries), step):
            chunk = queries[start : start + step]
            s_mask = np.zeros((len(chunk), n_sens), dtype=np.float64)
            s_mask[:, :-1] = ranges.sensitive[chunk]
            for weights, out in zip(per_variant, outs, strict=True):
                # F[q, r]: the share of distinct QI row r inside query q's ranges (Π_i F_i)
                shares = np.ones((len(chunk), len(qi_rows[0]) if attrs else 1), dtype=np.float64)
                for i, col in zip(attrs, qi_rows, strict=True):
                    fractions = _overlap_fractions(ranges.qi[names[i]][chunk], spans[i], weights[i])
                    shares *= np.take(fractions, col, axis=1)
                # per sensitive value s: Σ_r count(r, s) · F[q, r], one sparse product
                per_value = by_value @ shares.T  # (n_sens, chunk)
                out[chunk] = np.einsum("sq,qs->q", per_value, s_mask)
        if not keep:
            table.projections.pop(attrs, None)
    return outs


def evaluate_queries(
    raw: pd.DataFrame,
    published: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    sensitive: str,
    ranges: QueryRanges,
    leaf_weights: Mapping[str, npt.ArrayLike] | None = None,
) -> tuple[IntArray, FloatArray]:
    """Actual and estimated answers of explicitly given queries.

    Args:
        raw: the snapshot before anonymization, one row per record; every QI column (one per
            key of ``hierarchies``) holds leaf labels, plus the ``sensitive`` column.
        published: the release; QI columns hold node labels of the hierarchies (leaf, inner
            node or '*'); may have fewer rows than ``raw`` (suppressed records removed).
        hierarchies: the QI attributes and their hierarchies.
        sensitive: name of the sensitive column (published unchanged).
        ranges: the queries; see :class:`QueryRanges`.
        leaf_weights: per QI, a weight per leaf id (shape (n_leaves,)): the estimate spreads
            a generalized value over its leaves in proportion to them (the register-weighted
            estimator); None, or a QI left out, spreads uniformly (the paper's estimator).

    Returns:
        ``(actual, estimate)``: int64 and float64 arrays of shape (Q,), in records.

    Raises:
        ValueError: a missing column, a missing value or a label not in its hierarchy in a
            QI column, a generalized value in ``raw``, masks of the wrong shape or dtype, a
            range on an attribute without hierarchy, or a repeated sensitive value.

    Source: docs/design.md section 8; paper 001 (Xiao & Tao, SIGMOD 2006), section 5.2 (uniform
    assumption).
    """
    _check_ranges(hierarchies, ranges)
    spans = [h.index for h in hierarchies.values()]
    raw_t = _encode(raw, hierarchies, sensitive, ranges.sensitive_values, True, "raw")
    pub_t = _encode(published, hierarchies, sensitive, ranges.sensitive_values, False, "published")
    weights = _leaf_weights(hierarchies, leaf_weights)
    actual = np.rint(_answers(raw_t, hierarchies, spans, ranges)).astype(np.int64)
    return actual, _answers(pub_t, hierarchies, spans, ranges, weights)


# --------------------------------------------------------------------------------------
# The measure
# --------------------------------------------------------------------------------------


def _sensitive_domain(column: pd.Series) -> tuple[Any, ...]:
    import pandas as pd

    if column.isna().any():
        raise ValueError(f"raw table: sensitive column {column.name!r} has missing values")
    values = list(pd.unique(column))
    try:
        return tuple(sorted(values))
    except TypeError:
        return tuple(sorted(values, key=str))


@dataclass(frozen=True, eq=False)
class Workload:
    """The queries of a workload and their actual answers on the raw snapshot: everything of
    the measure that does not depend on the release, so that it can be computed while the
    snapshot is anonymized (docs/scaling.md, "Anonymizing ahead").
    :func:`estimate_workload` answers the same queries on a release.

    Attributes:
        ranges: the accepted queries, in draw order.
        actual: their exact answers on the raw snapshot, int64 of shape (n_queries,), all > 0.
        n_draws: queries drawn in total (as :class:`QueryErrorResult`).
        n_records: records of the raw snapshot.
        qd: QI attributes per query actually used, ``min(requested qd, n_QIs)``.
        selectivity: the requested expected selectivity.
        seed: seed of the random generator.
        leaves: per QI, in the order of the hierarchies drawn with, its leaf labels: a
            release is read with hierarchies that have the same leaves (the masks index them).
    """

    ranges: QueryRanges
    actual: IntArray
    n_draws: int
    n_records: int
    qd: int
    selectivity: float
    seed: int
    leaves: tuple[tuple[str, tuple[str, ...]], ...]


def average_relative_error(
    raw: pd.DataFrame,
    published: pd.DataFrame,
    hierarchies: dict[str, Hierarchy],
    sensitive: str,
    n_queries: int = 5000,
    qd: int = 3,
    selectivity: float = 0.05,
    seed: int = 0,
    leaf_weights: Mapping[str, npt.ArrayLike] | None = None,
) -> QueryErrorResult:
    """Average relative error of random range-count queries on a release (docs/design.md section 8).

    Draws queries with :func:`draw_queries` (``np.random.default_rng(seed)``; see there for
    the selectivity rule), the sensitive domain being the distinct values of
    ``raw[sensitive]`` (sorted). Queries whose actual answer is 0 are dropped and replaced by
    fresh draws, in rounds, keeping the first ``n_queries`` accepted in draw order; the result
    is a function of the inputs and the seed only. The same as :func:`draw_workload` on
    ``raw`` followed by :func:`estimate_workload` on ``published``.

    Args:
        raw: the snapshot before anonymization: one row per record, the QI columns (one per
            key of ``hierarchies``) holding leaf labels, plus ``sensitive``.
        published: the release: QI columns holding node labels (leaf, inner node or '*'),
            the same sensitive column; may have fewer rows than ``raw`` (suppressed records
            removed). The estimate uses only its rows, the actual answer all raw rows.
        hierarchies: the QI attributes and their hierarchies.
        sensitive: name of the sensitive column.
        n_queries: number of queries, >= 1 (Xiao & Tao and Wong et al. use 5,000).
        qd: QI attributes per query (default 3); all QIs if there are fewer.
        selectivity: expected selectivity s of a query, a fraction in (0, 1] (default 0.05).
        seed: seed of the query generator.
        leaf_weights: per QI, a weight per leaf id; given, the same queries are also
            answered by the register-weighted estimator (:class:`WeightedEstimate`, in the
            result's ``weighted``). The queries drawn do not depend on it.

    Returns:
        :class:`QueryErrorResult`; errors are ratios (1.0 = 100 %).

    Raises:
        ValueError: ``raw`` is empty; arguments out of range; a missing column or value; a
            QI label not in its hierarchy (or a non-leaf in ``raw``); a published sensitive
            value that does not occur in ``raw``; or fewer than ``n_queries`` queries with a
            non-zero actual answer among ``MAX_DRAWS_PER_QUERY · n_queries`` draws (the raw
            table is too small or too concentrated for this selectivity: raise it or lower qd).

    Sources: docs/design.md section 8; paper 001 (Xiao & Tao, SIGMOD 2006), section 5.2
    (uniform estimator, the "average + std" marker ≈ 85th percentile); Wong et al.
    (paper 004) section 8 (5,000 range queries per release, following Xiao & Tao).
    """
    _check_arguments(raw, hierarchies, sensitive, n_queries, qd, selectivity)
    if sensitive not in published.columns:
        raise ValueError(f"published table lacks the sensitive column {sensitive!r}")
    # before the draws, which take seconds on a large snapshot
    _check_published_values(_sensitive_domain(raw[sensitive]), published, sensitive)
    workload = draw_workload(raw, hierarchies, sensitive, n_queries, qd, selectivity, seed)
    return estimate_workload(workload, published, hierarchies, sensitive, leaf_weights)


def draw_workload(
    raw: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    sensitive: str,
    n_queries: int = 5000,
    qd: int = 3,
    selectivity: float = 0.05,
    seed: int = 0,
) -> Workload:
    """The queries of :func:`average_relative_error` and their actual answers on ``raw``,
    before any release exists. Arguments, selection of the queries and the errors raised
    about ``raw`` and the parameters as there.

    A release read with other hierarchies of the same leaves (:func:`release_hierarchies
    <anonymizer.intervals.release_hierarchies>` adds interval nodes to numeric QIs) draws
    the same queries: the draws read only the leaves of a numeric QI, and a categorical
    QI's hierarchy is the declared one.
    """
    _check_arguments(raw, hierarchies, sensitive, n_queries, qd, selectivity)
    domain = _sensitive_domain(raw[sensitive])
    spans = [h.index for h in hierarchies.values()]
    raw_t = _encode(raw, hierarchies, sensitive, domain, True, "raw")

    rng = np.random.default_rng(seed)
    max_draws = MAX_DRAWS_PER_QUERY * n_queries
    kept: list[QueryRanges] = []
    kept_actual: list[FloatArray] = []
    n_kept = 0
    n_draws = 0
    while n_kept < n_queries:
        need = n_queries - n_kept
        if n_draws >= max_draws:
            raise ValueError(
                f"only {n_kept} of {n_queries} queries had a non-zero actual answer after {n_draws} draws "
                f"(qd={qd}, selectivity={selectivity}, {len(raw)} raw records); raise the selectivity or lower qd"
            )
        rate = n_kept / n_draws if n_draws else 1.0
        # enough draws to fill the gap at the acceptance rate so far, at most 10 · n_queries at once
        batch = min(max_draws - n_draws, 10 * n_queries, max(need, math.ceil(1.1 * need / max(rate, 0.01))))
        ranges = draw_queries(hierarchies, domain, batch, qd, selectivity, rng)
        n_draws += batch
        actual = _answers(raw_t, hierarchies, spans, ranges)
        good = np.flatnonzero(actual > 0.5)[:need]
        kept.append(ranges.take(good))
        kept_actual.append(actual[good])
        n_kept += len(good)
    return Workload(
        ranges=QueryRanges.concat(kept),
        actual=np.rint(np.concatenate(kept_actual)).astype(np.int64),
        n_draws=n_draws,
        n_records=len(raw),
        qd=min(qd, len(hierarchies)),
        selectivity=selectivity,
        seed=seed,
        leaves=tuple((a, h.leaves) for a, h in hierarchies.items()),
    )


def _check_arguments(
    raw: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    sensitive: str,
    n_queries: int,
    qd: int,
    selectivity: float,
) -> None:
    if n_queries < 1:
        raise ValueError(f"n_queries must be >= 1, got {n_queries}")
    check_parameters(n_queries, qd, selectivity)
    if len(raw) == 0:
        raise ValueError("raw table is empty: no query can have a non-zero answer")
    if sensitive in hierarchies:
        raise ValueError(f"{sensitive!r} is both the sensitive attribute and a quasi-identifier")
    if sensitive not in raw.columns:
        raise ValueError(f"raw table lacks the sensitive column {sensitive!r}")


def _check_published_values(domain: tuple[Any, ...], published: pd.DataFrame, sensitive: str) -> None:
    import pandas as pd

    unknown = ~published[sensitive].isin(pd.Index(list(domain)))
    if unknown.any():
        raise ValueError(
            f"published sensitive value {published[sensitive][unknown].iloc[0]!r} does not occur in the raw "
            "table; the release must hold records of the raw snapshot"
        )


def estimate_workload(
    workload: Workload,
    published: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
    sensitive: str,
    leaf_weights: Mapping[str, npt.ArrayLike] | None = None,
    nodes: IntArray | None = None,
) -> QueryErrorResult:
    """The errors of a :func:`draw_workload` workload on a release: the second half of
    :func:`average_relative_error`, whose arguments these are. ``nodes``: the published
    table's labels resolved in ``hierarchies`` (:func:`anonymizer.regions.record_nodes`),
    shape (R, d), when the caller has them (the draft resolves them once for this and the
    register-joint figure).

    Raises:
        ValueError: ``hierarchies`` are not over the workload's QIs and leaves; a missing
            column or value, or a label not in its hierarchy, in ``published``; a published
            sensitive value outside the raw snapshot's.
    """
    if tuple((a, h.leaves) for a, h in hierarchies.items()) != workload.leaves:
        raise ValueError("the release is read with hierarchies whose QIs or leaves differ from the workload's")
    if sensitive not in published.columns:
        raise ValueError(f"published table lacks the sensitive column {sensitive!r}")
    ranges, actual_i = workload.ranges, workload.actual
    _check_published_values(ranges.sensitive_values, published, sensitive)
    weights = _leaf_weights(hierarchies, leaf_weights)
    spans = [h.index for h in hierarchies.values()]
    pub_t = _encode(published, hierarchies, sensitive, ranges.sensitive_values, False, "published", nodes)
    # the uniform and the register-weighted estimates in one pass: the release's projections
    # are made once and none is kept past its queries
    variants = [None, weights] if leaf_weights is not None else [None]
    answers = _answers_each(pub_t, hierarchies, spans, ranges, variants, keep=False)
    estimate = answers[0]
    errors = np.abs(actual_i - estimate) / actual_i
    weighted = None
    if leaf_weights is not None:
        w_estimate = answers[1]
        w_errors = np.abs(actual_i - w_estimate) / actual_i
        weighted = WeightedEstimate(
            float(w_errors.mean()), float(np.median(w_errors)), float(np.percentile(w_errors, 85)), w_estimate, w_errors
        )
    return QueryErrorResult(
        mean=float(errors.mean()),
        median=float(np.median(errors)),
        p85=float(np.percentile(errors, 85)),
        n_queries=len(actual_i),
        qd=workload.qd,
        selectivity=workload.selectivity,
        seed=workload.seed,
        actual=actual_i,
        estimate=estimate,
        errors=errors,
        n_draws=workload.n_draws,
        mean_selectivity=float((actual_i / workload.n_records).mean()),
        ranges=ranges,
        weighted=weighted,
    )
