"""Information loss of a release against its snapshot: the utility figures of a release.

The project's own utility figure, the average relative error of random range-count queries
(Xiao & Tao, paper 001 §5.2), lives in :mod:`anonymizer.queries`. The classical information-loss
measures, so that a release can be compared with the literature, are by family:

- :mod:`.group_size`: the discernibility metric C_DM (Bayardo & Agrawal, ICDE 2005), the
  average QI-group (equivalence-class) size and C_AVG (LeFevre, DeWitt & Ramakrishnan,
  ICDE 2006), the suppression rate;
- :mod:`.certainty_penalty`: the normalized certainty penalty NCP (Xu, Wang, Pei, Wang, Shi &
  Fu, KDD 2006); these three papers are not in ``papers/``: the definitions are the ones the
  field cites;
- :mod:`.information_loss`: the thesis's measures (Hsu 2008, paper 000, chapter 4,
  §4.1-4.4): redaction counting and the tree measure (§4.1), the
  entropy measure Π_e (Def 4.2.1), the monotone entropy measure Π_me (Def 4.2.4), the
  non-uniform entropy measure Π_ne (Def 4.2.6) and the tuple-wise variance loss Π_tv
  (Defs 4.4.1-4.4.2) with the 0/1 ground distance.

This module turns the anonymizer's result into the per-record arrays they take
(:func:`snapshot_nodes`) and computes every figure of a release (:func:`utility_figures`); the
report's wording of them is :mod:`serialpub.report.wording.utility`'s.

Conventions (the same for every measure here):

- **The snapshot is the original table T.** Probabilities of the entropy measures are the
  leaf frequencies of the whole snapshot, suppressed records included, because the thesis
  takes them from T (§4.2: ``Pr(X_j = a) = |{t ∈ T : t[A_j] = a}| / n``) and T is every
  record the release was made from. log is log₂ (§4.2), so entropies are in bits.
- **A suppressed record counts as fully generalized**: every QI cell is the root ``*`` of
  its hierarchy. This is the thesis's suppression (Def 2.3.1: a cell becomes A_i) applied to
  every cell, which keeps T* a generalization of all of T (Def 2.3.4, one tuple of T* per
  tuple of T). So a suppressed record costs d redactions, d under the tree measure, Σ_j H(X_j)
  under Π_e and Π_me, Σ_j −log₂ Pr(its leaf) under Π_ne and 1 under NCP; in the
  discernibility metric it costs |D| (Bayardo & Agrawal's penalty for a suppressed record).
  Π_tv keeps its sensitive value, as the thesis never generalizes the sensitive attribute.
- **Nodes, not labels.** Published values are node ids of the QI's
  :class:`~anonymizer.hierarchy.Hierarchy`; a published node must be the record's own leaf
  or one of its ancestors (ValueError otherwise).

Everything is vectorized over records (lookup tables per node, bincount); a 1,000,000-record
release with 8 QIs takes a few seconds. This module does no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures._checks import (
    IntArray,
    check_generalizes,
    check_hierarchies,
    check_leaves,
    check_nodes,
    int_array,
)
from anonymizer.measures.certainty_penalty import checked_ncp
from anonymizer.measures.group_size import (
    average_group_size,
    discernibility,
    normalized_average_group_size,
    suppression_rate,
)
from anonymizer.measures.information_loss import (
    InformationLoss,
    TupleVariance,
    check_sensitive,
    checked_information_loss,
    checked_tuple_wise_variance,
)
from anonymizer.measures.published import PublishedNodes


def snapshot_nodes(
    hierarchies: Sequence[Hierarchy], group_of_record: npt.ArrayLike, group_nodes: npt.ArrayLike
) -> IntArray:
    """Published node id per QI of every snapshot record, shape (N, d), roots where suppressed.

    Args:
        hierarchies: one per QI, d in all.
        group_of_record: QI-group code per snapshot record, shape (N,), −1 where suppressed
            (``ReleaseResult.group_of_record``).
        group_nodes: node id per QI of every group, shape (G, d) (``ReleaseResult.group_nodes``).

    Raises:
        ValueError: group codes outside [−1, G), or node ids outside the hierarchies.
    """
    hs = check_hierarchies(hierarchies)
    nodes = _grouped_snapshot_nodes(hs, group_of_record, group_nodes)
    out = np.empty(nodes.shape, dtype=np.int64)
    for j in range(len(hs)):
        out[:, j] = nodes.column(j)
    return out


def _grouped_snapshot_nodes(
    hs: list[Hierarchy], group_of_record: npt.ArrayLike, group_nodes: npt.ArrayLike
) -> PublishedNodes:
    """:func:`snapshot_nodes` held per group: the groups' rows, then a row of roots that the
    suppressed records' code −1 takes."""
    gn = check_nodes(hs, group_nodes, "group_nodes")
    group = int_array(group_of_record, "group_of_record", 1)
    if group.size and (group.min() < -1 or group.max() >= gn.shape[0]):
        raise ValueError(f"group_of_record must hold codes in [-1, {gn.shape[0]}), -1 for suppressed records")
    roots = np.array([[h.root for h in hs]], dtype=np.int64)
    return PublishedNodes.grouped(np.concatenate([gn.astype(np.int64, copy=False), roots]), group)


@dataclass(frozen=True)
class UtilityFigures:
    """The table-level utility figures of a release.

    Attributes:
        records: n, the snapshot's records (published + suppressed).
        published: r, the published records.
        suppressed: n − r.
        qis: d, the number of QIs.
        groups: non-empty QI-groups.
        k: the k of C_AVG, as given or the smallest QI-group (the k the release achieves);
            None when nothing is published.
        k_given: whether k was given (else it is the smallest QI-group).
        suppression_rate: suppressed / snapshot records, in [0, 1].
        discernibility: C_DM, in records² (exact integer).
        average_group_size: records per QI-group; None when nothing is published.
        normalized_average_group_size: C_AVG, a ratio (1 = every group of size k); None when
            nothing is published.
        ncp: NCP, a fraction in [0, 1]; None for an empty snapshot.
        loss: redactions, tree measure, Π_e, Π_me and Π_ne per QI (sum them for the table);
            None for an empty snapshot.
        tuple_variance: Var_T, Var_T* and Π_tv over all QIs; None without sensitive values or
            for an empty snapshot.
    """

    records: int
    published: int
    suppressed: int
    qis: int
    groups: int
    k: float | None
    k_given: bool
    suppression_rate: float
    discernibility: int
    average_group_size: float | None
    normalized_average_group_size: float | None
    ncp: float | None
    loss: InformationLoss | None
    tuple_variance: TupleVariance | None


def utility_figures(
    hierarchies: Sequence[Hierarchy],
    original: npt.ArrayLike,
    group_of_record: npt.ArrayLike,
    group_nodes: npt.ArrayLike,
    sensitive: npt.ArrayLike | None = None,
    k: float | None = None,
) -> UtilityFigures:
    """Every information-loss figure of a release.

    Args:
        hierarchies: one per QI, d in all.
        original: leaf id per QI of every snapshot record, shape (N, d).
        group_of_record: QI-group code per snapshot record, shape (N,), −1 where suppressed.
        group_nodes: node id per QI of every group, shape (G, d); groups without records are
            ignored.
        sensitive: sensitive-value code per snapshot record, shape (N,); without it Π_tv is
            left out.
        k: the k of C_AVG; default the smallest published QI-group (the k the release achieves).

    Raises:
        ValueError: inconsistent shapes or ids (as
            :func:`~anonymizer.measures.information_loss.information_loss`), or k ≤ 0.

    Sources: as the family modules (:mod:`.group_size`, :mod:`.certainty_penalty`,
    :mod:`.information_loss`). The average relative error of range-count queries (paper 001
    §5.2) is :mod:`anonymizer.queries`' and is not repeated here.
    """
    hs = check_hierarchies(hierarchies)
    leaves = check_leaves(hs, original, "original")
    nodes = _grouped_snapshot_nodes(hs, group_of_record, group_nodes)
    if nodes.shape[0] != leaves.shape[0]:
        raise ValueError(f"group_of_record has {nodes.shape[0]} records but original has {leaves.shape[0]}")
    if k is not None and not (isinstance(k, int | float | np.integer | np.floating) and np.isfinite(k) and k > 0):
        raise ValueError(f"k must be a positive number, got {k!r}")
    group = nodes.group
    assert group is not None
    published = group >= 0
    n = int(group.size)
    r = int(published.sum())
    suppressed = n - r
    # the groups' sizes, less the last row (the suppressed records' roots)
    sizes_all = nodes.sizes[:-1]
    sizes = sizes_all[sizes_all > 0]
    counts = [np.bincount(leaves[:, j], minlength=h.n_leaves) for j, h in enumerate(hs)]
    # every input is checked once here, not again by each measure: a suppressed record's roots
    # generalize any leaf, so every record is checked for the measures of all and of the published
    if n:
        check_generalizes(hs, nodes, leaves)
    s = check_sensitive(sensitive, n) if n and sensitive is not None else None
    # a release without suppression (the top-down search's) publishes every row: no copies
    pub_nodes = nodes if r == n else PublishedNodes.grouped(nodes.table[:-1], group[published])
    pub_leaves = leaves if r == n else leaves[published]
    k_used: float | None = None
    avg: float | None = None
    cavg: float | None = None
    if sizes.size:
        k_used = float(k) if k is not None else float(sizes.min())
        avg = average_group_size(sizes)
        cavg = normalized_average_group_size(sizes, k_used)
    tv: TupleVariance | None = None
    if s is not None:
        tv = checked_tuple_wise_variance(hs, leaves, nodes, s, tuple(range(len(hs))))
    return UtilityFigures(
        records=n,
        published=r,
        suppressed=suppressed,
        qis=len(hs),
        groups=int(sizes.size),
        k=k_used,
        k_given=k is not None,
        suppression_rate=suppression_rate(suppressed, n),
        discernibility=discernibility(sizes, suppressed),
        average_group_size=avg,
        normalized_average_group_size=cavg,
        ncp=checked_ncp(hs, pub_nodes, suppressed, np.full(len(hs), 1.0 / len(hs))) if n else None,
        # an empty snapshot has no frequencies to take the entropy measures' probabilities from
        loss=checked_information_loss(hs, pub_nodes, pub_leaves, counts) if n else None,
        tuple_variance=tv,
    )
