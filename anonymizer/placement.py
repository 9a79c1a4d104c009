"""The ``history`` split rule: cuts placed where the published history shows an association.

Among the splits the admission test allows (:mod:`anonymizer.topdown`; the test is not
changed), the ``widest`` rule takes the QI with the widest node, blind to where the
protected values concentrate. The ``history`` rule takes the split whose parts differ most
in their *estimated* rates of the protected values, an estimate read from public data only
(docs/threat-model.md, "The partition as evidence"): the statistics file before the release,
which is a function of the earlier releases' published counts and the register
(:func:`anonymizer.release.advance_history`), never the current snapshot.

**The estimate.** After releases r = 1..t-1 an individual i holds, per protected value s,
the survival product P_s(i) = Π_r (1 - c_s(G_r(i)) / n(G_r(i))), G_r(i) the group whose
candidate i was. Its *hazard* h_s(i) = -ln P_s(i) = Σ_r -ln(1 - c_s(G_r)/n(G_r)) is, to
first order, Σ_r c_s(G_r)/n(G_r): each earlier release's published count of s spread
uniformly over its group's register individuals and summed over the releases, the
register-joint spread of :mod:`anonymizer.joint` (whose ratios are at most 1/ℓ <= 1/2 here,
where -ln(1 - x) stays within 1.39 x). A cell's estimate is the sum of its individuals'
hazards, so a part's is the sum of its cells'.

**The criterion.** For a region R split into parts P with n_P candidates and estimates
e_{P,s}, the likelihood-ratio (G) statistic of the parts' rates against the region's,

    gain(R) = Σ_P Σ_s e_{P,s} · ln(e_{P,s} / (n_P · e_{R,s} / n_R)),

which is Σ_P n_P · KL(rate_P || rate_R) for Poisson rates: 0 when every part has the
region's rates, larger the more the split separates them. It is homogeneous in the estimates,
so the number of earlier releases does not change which split wins. Before the first release
every hazard is 0 and so is every gain: the rule is then ``widest`` exactly, as it is
wherever the gains tie (below :data:`TIE` of the region's estimate: rounding, not evidence).

No loop over cells or parts: a bincount per protected value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: gains within this fraction of the region's total estimate count as ties (0)
TIE = 1e-9


def cell_estimates(
    cell: IntArray, members: IntArray, history_class: IntArray, survival: FloatArray, n_cells: int
) -> FloatArray:
    """Per cell and protected value, the summed hazard of its individuals, shape (n_cells, V).

    Args:
        cell, members, history_class: the distinct (cell, history class) pairs and how many
            individuals each holds, shape (M,) each (:func:`anonymizer.release.anonymize_history`
            counts them for the requirements).
        survival: the statistics file's survival product per (history class, value), shape
            (K, V), in (0, 1].
        n_cells: the number of cells.
    """
    with np.errstate(divide="ignore"):
        hazard = -np.log(survival)  # 0 before any release; a survival is at least 1 - 1/ℓ > 0
    hazard = np.where(np.isfinite(hazard), hazard, 0.0)
    weight = members.astype(np.float64)
    out = np.zeros((n_cells, survival.shape[1]))
    for v in range(survival.shape[1]):  # V columns, each one pass over the pairs
        out[:, v] = np.bincount(cell, weights=weight * hazard[history_class, v], minlength=n_cells)
    return out


def split_gain(part_estimate: FloatArray, part_n: IntArray, part_region: IntArray, n_regions: int) -> FloatArray:
    """The G statistic of every region's split (module docstring), shape (n_regions,);
    0 for a region without parts, without estimate or whose gain is a tie (:data:`TIE`).

    Args:
        part_estimate: summed hazards per part and value, shape (P, V).
        part_n: candidates of every part, shape (P,), > 0.
        part_region: the region of every part, shape (P,).
    """
    v = part_estimate.shape[1]
    region_n = np.bincount(part_region, weights=part_n, minlength=n_regions)
    region_est = np.stack(
        [np.bincount(part_region, weights=part_estimate[:, s], minlength=n_regions) for s in range(v)], axis=1
    ).reshape(n_regions, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = region_est / region_n[:, None]
        expected = part_n[:, None] * rate[part_region]
        term = np.where(part_estimate > 0, part_estimate * np.log(part_estimate / expected), 0.0)
    gain = np.bincount(part_region, weights=term.sum(axis=1), minlength=n_regions)
    return np.where(gain > TIE * region_est.sum(axis=1), gain, 0.0)
