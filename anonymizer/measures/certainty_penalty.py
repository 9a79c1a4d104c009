"""The normalized certainty penalty NCP of a release (Xu, Wang, Pei, Wang, Shi & Fu, KDD 2006;
not in ``papers/``: the definition is the one the field cites).

Conventions (suppressed records, nodes not labels) are :mod:`.utility`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures._checks import check_count, check_hierarchies, check_nodes
from anonymizer.measures.published import PublishedNodes

FloatArray = npt.NDArray[np.float64]


def node_ncp(h: Hierarchy) -> FloatArray:
    """Normalized certainty penalty of publishing each node, shape (n_nodes,), in [0, 1].

    Xu et al. KDD 2006: categorical QI, NCP = 0 for a single value and
    |leaves under the node| / |leaves of the domain| otherwise; numeric QI,
    NCP = (hi − lo) / (max − min), where [lo, hi] is the generalized interval (here the min
    and max of the numbers of the node's leaves, ``Hierarchy.leaf_numbers``) and [min, max]
    spans the domain. Xu et al. take max − min over the table's values (as we read their
    definition; the paper is not in papers/); we take the hierarchy's leaves, the declared
    domain, so the figure does not depend on which values happen to occur in a snapshot
    (the two agree when both extreme values occur). A numeric
    domain of a single value, or with a non-finite number, is treated as categorical.
    """
    sizes = h.index.size.astype(np.float64)
    categorical = np.where(sizes <= 1, 0.0, sizes / h.n_leaves)
    if not h.numeric:
        return categorical
    numbers = h.leaf_numbers()
    span = float(numbers.max() - numbers.min()) if numbers.size else 0.0
    if not np.all(np.isfinite(numbers)) or span <= 0.0:
        return categorical
    lo = np.full(h.n_nodes, np.inf)
    hi = np.full(h.n_nodes, -np.inf)
    for row in h.leaf_nodes:
        np.minimum.at(lo, row, numbers)
        np.maximum.at(hi, row, numbers)
    return np.asarray((hi - lo) / span, dtype=np.float64)


def ncp(
    hierarchies: Sequence[Hierarchy],
    published: npt.ArrayLike,
    suppressed: int = 0,
    weights: npt.ArrayLike | None = None,
) -> float:
    """Normalized certainty penalty of a release, the mean over records, in [0, 1].

    A record's NCP is ``Σ_j w_j · NCP_j(node_j)`` (:func:`node_ncp` per QI); the table value
    is its mean over the snapshot's records, published and suppressed, a suppressed record
    costing the root's NCP (1, or 0 for a QI with a single value). Xu et al. sum over records
    (and over attributes with weights); the mean with weights summing to 1 keeps the figure in
    [0, 1] and comparable across releases: 0 = nothing generalized, 1 = everything suppressed.

    Args:
        hierarchies: one per QI, d in all.
        published: published node id per QI of every published record, shape (R, d).
        suppressed: number of suppressed snapshot records.
        weights: attribute weights w_j, shape (d,), non-negative, summing to 1; default 1/d
            each (every QI counts the same).

    Raises:
        ValueError: shapes or node ids that do not fit the hierarchies, bad weights, a negative
            suppressed count, or no record at all.

    Source: Xu, Wang, Pei, Wang, Shi & Fu, "Utility-based anonymization using local
    recoding", KDD 2006.
    """
    hs = check_hierarchies(hierarchies)
    nodes = check_nodes(hs, published, "published")
    sup = check_count(suppressed, "suppressed")
    d = len(hs)
    if weights is None:
        w = np.full(d, 1.0 / d)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (d,) or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
            raise ValueError(f"weights must be {d} non-negative numbers summing to 1, got {weights!r}")
    n = nodes.shape[0] + sup
    if n == 0:
        raise ValueError("no records: the NCP of an empty snapshot is undefined")
    return checked_ncp(hs, PublishedNodes.per_record(nodes), sup, w)


def checked_ncp(hs: list[Hierarchy], nodes: PublishedNodes, suppressed: int, w: FloatArray) -> float:
    """:func:`ncp` of arguments it has checked: at least one record, weights ``w`` (d,)."""
    total = 0.0
    for j, h in enumerate(hs):
        table = node_ncp(h)
        per_node = nodes.node_counts(j, h.n_nodes)
        total += w[j] * (float(per_node @ table) + suppressed * float(table[h.root]))
    return total / (nodes.shape[0] + suppressed)
