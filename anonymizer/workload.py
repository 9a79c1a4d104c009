"""The query workload of the utility measure: explicit ranges, and how random ones are drawn.

docs/design.md section 8, after paper 001 (Xiao & Tao, SIGMOD 2006, section 5.2). A query is
``COUNT(*) WHERE A1 ∈ R1 AND … AND A_qd ∈ R_qd AND S ∈ R_S``; :mod:`anonymizer.queries`
answers it on a snapshot and a release. Ranges are leaf sets: a boolean leaf mask per
attribute, all True where a query does not constrain the attribute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.hierarchy_index import HierarchyIndex

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

#: Categorical ranges: a node is a candidate when its leaf fraction f satisfies
#: ``|log2(f / target)| <= CATEGORICAL_BAND`` (within a factor 2 of the target).
CATEGORICAL_BAND = 1.0


@dataclass(frozen=True, eq=False)
class QueryRanges:
    """Explicit ranges of Q count queries.

    Attributes:
        qi: per quasi-identifier, the leaf membership of its range, bool array of shape
            (Q, n_leaves) indexed by the hierarchy's leaf ids. A QI missing from the mapping,
            or a row that is all True, leaves that attribute unconstrained.
        sensitive_values: the sensitive domain, the column order of ``sensitive``.
        sensitive: membership of R_S, bool array of shape (Q, len(sensitive_values)).
            Records whose sensitive value is not in ``sensitive_values`` satisfy no query.
    """

    qi: Mapping[str, BoolArray]
    sensitive_values: tuple[Any, ...]
    sensitive: BoolArray

    @property
    def n_queries(self) -> int:
        return int(self.sensitive.shape[0])

    def take(self, index: npt.ArrayLike) -> QueryRanges:
        """The queries at ``index`` (integer or boolean array), in that order."""
        idx = np.asarray(index)
        return QueryRanges({a: m[idx] for a, m in self.qi.items()}, self.sensitive_values, self.sensitive[idx])

    @staticmethod
    def concat(parts: Sequence[QueryRanges]) -> QueryRanges:
        """Queries of several batches drawn over the same attributes and sensitive domain."""
        if not parts:
            raise ValueError("nothing to concatenate")
        first = parts[0]
        return QueryRanges(
            {a: np.concatenate([p.qi[a] for p in parts]) for a in first.qi},
            first.sensitive_values,
            np.concatenate([p.sensitive for p in parts]),
        )


def check_parameters(n_queries: int, qd: int, selectivity: float) -> None:
    """Raise ValueError naming the first of ``n_queries``, ``qd``, ``selectivity`` out of range."""
    if n_queries < 0:
        raise ValueError(f"n_queries must be >= 0, got {n_queries}")
    if qd < 0:
        raise ValueError(f"qd must be >= 0, got {qd}")
    if not 0 < selectivity <= 1:
        raise ValueError(f"selectivity must lie in (0, 1], got {selectivity}")


def _categorical_candidates(spans: HierarchyIndex, n_leaves: int, target: float) -> IntArray:
    distance = np.abs(np.log2(spans.size / n_leaves / target))
    inside = np.flatnonzero(distance <= CATEGORICAL_BAND + 1e-12)
    if inside.size:
        return inside.astype(np.int64)
    return np.flatnonzero(distance <= distance.min() + 1e-12).astype(np.int64)


def draw_queries(
    hierarchies: Mapping[str, Hierarchy],
    sensitive_values: Sequence[Any],
    n_queries: int,
    qd: int,
    selectivity: float,
    rng: np.random.Generator,
) -> QueryRanges:
    """Draw random range-count queries (docs/design.md section 8).

    Selectivity rule. With ``q = min(qd, n_QIs)`` attributes per query, every one of the
    q + 1 conditions gets the target fraction ``t = selectivity ** (1 / (q + 1))`` *of its
    domain* (not of the records' distribution), so that the expected selectivity is about
    ``selectivity`` when the attributes are independent and uniform over their domains:

    * the q attributes are drawn uniformly without replacement;
    * ordered attribute (``Hierarchy.numeric``): an interval of ``w = clip(round(t · n_leaves),
      1, n_leaves)`` consecutive leaves in numeric order, its start uniform over the
      ``n_leaves − w + 1`` positions (as Xiao & Tao's "random interval covering 20 % of A's
      domain");
    * categorical attribute: the leaf set of a node drawn uniformly among the candidate nodes,
      those (leaves and '*' included) whose leaf fraction f is within a factor 2 of t
      (``|log2(f / t)| <= 1``); if no node is, those with the smallest ``|log2(f / t)|``;
    * R_S: ``clip(round(t · n_S), 1, n_S)`` sensitive values drawn without replacement from
      the domain ``sensitive_values``.

    Args:
        hierarchies: the QI attributes and their hierarchies.
        sensitive_values: the sensitive domain, length n_S >= 1.
        n_queries: number of queries Q >= 0.
        qd: QI attributes per query, >= 0; all of them if there are fewer.
        selectivity: expected selectivity s, in (0, 1].
        rng: the random generator (consumed; the result is a function of its state).

    Returns:
        :class:`QueryRanges` with a mask for every QI (all True for the attributes a query
        does not use).

    Raises:
        ValueError: on arguments out of range.
    """
    check_parameters(n_queries, qd, selectivity)
    n_sens = len(sensitive_values)
    if n_sens == 0:
        raise ValueError("the sensitive domain is empty")
    names = list(hierarchies)
    q_eff = min(qd, len(names))
    target = selectivity ** (1.0 / (q_eff + 1))
    n = n_queries
    rows = np.arange(n)[:, None]

    chosen = np.zeros((n, len(names)), dtype=bool)
    if q_eff == len(names):
        chosen[:] = True
    elif q_eff > 0:
        picks = np.argsort(rng.random((n, len(names))), axis=1)[:, :q_eff]
        chosen[rows, picks] = True

    qi: dict[str, BoolArray] = {}
    for i, (name, h) in enumerate(hierarchies.items()):
        leaves = h.n_leaves
        if h.numeric:
            rank = np.empty(leaves, dtype=np.int64)
            rank[np.argsort(h.leaf_numbers(), kind="stable")] = np.arange(leaves)
            width = min(max(math.floor(target * leaves + 0.5), 1), leaves)
            start = rng.integers(0, leaves - width + 1, size=n)
            mask = (rank[None, :] >= start[:, None]) & (rank[None, :] < start[:, None] + width)
        else:
            sp = h.index
            candidates = _categorical_candidates(sp, leaves, target)
            mask = sp.leaf_mask(candidates[rng.integers(0, len(candidates), size=n)])
        mask[~chosen[:, i]] = True
        qi[name] = mask

    k = min(max(math.floor(target * n_sens + 0.5), 1), n_sens)
    if k == n_sens:
        s_mask = np.ones((n, n_sens), dtype=bool)
    else:
        s_mask = _smallest(rng.random((n, n_sens)), k)
    return QueryRanges(qi, tuple(sensitive_values), s_mask)


def _smallest(draws: FloatArray, k: int) -> BoolArray:
    """Per row, True at the columns of its ``k`` smallest draws, shape of ``draws``: the set
    ``np.argsort(draws, axis=1)[:, :k]`` holds. A partition finds each row's k-th smallest
    draw and the row keeps the draws up to it, without sorting the whole row; a row where
    another draw ties with its k-th smallest keeps more than k, and is
    sorted as before, so the sets are the sort's in every case."""
    kth = np.partition(draws, k - 1, axis=1)[:, k - 1]
    mask = draws <= kth[:, None]
    tied = np.flatnonzero(mask.sum(axis=1) != k)
    if tied.size:
        mask[tied] = False
        mask[tied[:, None], np.argsort(draws[tied], axis=1)[:, :k]] = True
    return mask
