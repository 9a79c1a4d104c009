"""Re-identification and disclosure risk of a generalized release under Malik's model, by
per-QI-group blocks (Malik 2014, paper 002; the decomposition is docs/reports.md D3, [DERIVED]).

**Releases (block decomposition, docs/reports.md D3, [DERIVED]).** A QI-group (equivalence class)
of a generalized release shows one generalized QI vector for all of its records, so an
adversary who knows every individual's exact QIs finds every individual of the group's
region a feasible match for every record of the group, and no other individual: the attack
graph is block diagonal with one complete block per group. We assume, and
:func:`release_disclosure` documents:

1. Groups' candidate sets are disjoint (each register individual's QIs fall in one group's
   region). Group j has r_j published records and n_j ≥ r_j candidates (virtual dilution,
   paper 004); without candidates n_j = r_j, Malik's bijection.
2. With n_j > r_j the bijection is restored by n_j − r_j interchangeable "not released"
   columns; a match to one of them is never a crack (it names no record). Equivalently the
   matchings are the injections of the group's records into its candidates.
3. The adversary has no knowledge of sensitive values beyond the release (the sensitive
   attribute is published ungeneralized, so it separates no candidate from another). The
   block's attack matrix is then the complete 0/1 block, whose flat doubly stochastic
   counterpart is the uniform matrix 1/n_j (§3.3, Theorem 4.1.1).

Under these assumptions the exponential computation collapses: every record's true
individual is matched with probability 1/n_j, so per group ε_j = Ψ_j = 𝓗_j = r_j/n_j exactly
(for n_j = r_j: one expected crack per class, the fixed points of a uniform permutation),
permanents are Π n_j!/(n_j − r_j)! and NMAPE = 0 (§4.4: permanent n!/n^n). No block-size
limit is needed for these closed forms. The exact permanent-based functions of
:mod:`.disclosure` (with their limits) are for attack matrices that are not flat, e.g. an
adversary who knows some individuals' sensitive values, and
:func:`~anonymizer.measures.disclosure.block_psi` applies them block by block.

The report's wording of the figures is :mod:`serialpub.report.wording.disclosure`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ReleaseDisclosure:
    """Disclosure risk of a release under the flat QI-linkage attack (module docstring).

    Attributes:
        records: r_j, published records per QI-group, shape (G,).
        candidates: n_j, candidate individuals per QI-group (n_j ≥ r_j), shape (G,).
        psi: Ψ_j = ε_j = 𝓗_j = r_j/n_j, expected re-identifications (cracks) per group, (G,).
        value_cracks: Σ_s c_{j,s}²/n_j, expected individuals of group j matched to a record
            carrying their own sensitive value, shape (G,) ([DERIVED], see
            :func:`release_disclosure`).
        log_matchings: ln |𝓜(G)| = Σ_j ln(n_j!/(n_j − r_j)!), natural log.
        log_max_matchings: ln(N!/(N − R)!), N = Σ n_j, R = Σ r_j: the full-anonymity graph.
    """

    records: IntArray
    candidates: IntArray
    psi: FloatArray
    value_cracks: FloatArray
    log_matchings: float
    log_max_matchings: float

    @property
    def degree_of_anonymity(self) -> float:
        """d (eq 2.2) generalized to injections; 0 when the full-anonymity graph has 1 matching."""
        return self.log_matchings / self.log_max_matchings if self.log_max_matchings > 0 else 0.0

    @property
    def published(self) -> int:
        """R = Σ r_j, the published records."""
        return int(self.records.sum())

    @property
    def groups_with_records(self) -> int:
        """QI-groups holding at least one published record."""
        return int((self.records > 0).sum())

    @property
    def expected_reidentifications(self) -> float:
        """Ψ = ε = 𝓗 = Σ_j r_j/n_j, the expected cracks of the release, in records (eq 4.2,
        Thm 4.1.1; 𝓗 of eq 4.3 is equal here because the blocks are uniform, NMAPE = 0)."""
        return float(self.psi.sum())

    @property
    def reidentification_rate(self) -> float:
        """Ψ/R, expected cracks per published record, in [0, 1]."""
        return self.expected_reidentifications / self.published

    @property
    def max_reidentification_probability(self) -> float:
        """max_j 1/n_j over non-empty groups: the largest chance that the attacker's matching
        names a record's individual (the edge marginal of §3.2)."""
        return float(1.0 / self.candidates[self.records > 0].min())

    @property
    def expected_value_cracks(self) -> float:
        """Σ_j Σ_s c_js²/n_j, in records ([DERIVED], see :func:`release_disclosure`)."""
        return float(self.value_cracks.sum())

    @property
    def value_crack_rate(self) -> float:
        """Expected sensitive-value cracks per published record, in [0, 1]."""
        return self.expected_value_cracks / self.published


def release_disclosure(
    group: npt.ArrayLike, value: npt.ArrayLike, candidates: npt.ArrayLike | None = None
) -> ReleaseDisclosure:
    """Malik's measures for a generalized release by per-class blocks (paper 002, docs/reports.md D3).

    Model (module docstring): block j is the complete bipartite graph between the n_j
    candidates and the r_j records of QI-group j, its flat matrix is uniform, so
    Ψ_j = ε_j = 𝓗_j = r_j/n_j (each record's true individual is matched with probability
    1/n_j; for n_j = r_j one expected crack per class). d follows eq 2.2 with matchings
    counted as injections of records into candidates, |𝓜(G)| = Π_j n_j!/(n_j − r_j)!, against
    N!/(N − R)! for full anonymity; with n_j = r_j this is exactly Σ log s_j!/log n!.

    ``value_cracks`` is a [DERIVED] attribute-disclosure variant, not in the thesis: a crack
    counted when a published individual is matched to *any* record with their own sensitive
    value. By linearity, under the uniform block it is Σ_s c_{j,s}·(c_{j,s}/n_j), where
    c_{j,s} is the number of group-j records with value s (c_{j,s}/n_j is paper 004's breach
    probability of value s in group j).

    Args:
        group: QI-group code of every published record, int64 in 0..G-1, shape (R,).
        value: sensitive-attribute code of every record, int64 ≥ 0, shape (R,).
        candidates: n_j per group, shape (G,), n_j ≥ r_j and n_j ≥ 1 for non-empty groups;
            None means n_j = r_j (no dilution; G = max(group) + 1).

    Raises:
        ValueError: empty release, shapes differ, negative codes, or n_j < r_j.

    Vectorized: O(R) with bincount and one factorize of (group, value) pairs.
    """
    g = np.asarray(group)
    v = np.asarray(value)
    if g.ndim != 1 or v.shape != g.shape:
        raise ValueError(f"group and value must be 1-d of equal shape, got {g.shape} and {v.shape}")
    if g.size == 0:
        raise ValueError("the release has no records")
    if not (np.issubdtype(g.dtype, np.integer) and np.issubdtype(v.dtype, np.integer)):
        raise ValueError("group and value must be integer codes")
    g = g.astype(np.int64)
    v = v.astype(np.int64)
    if g.min() < 0 or v.min() < 0:
        raise ValueError("group and value codes must be non-negative")
    n_groups = int(g.max()) + 1
    if candidates is not None:
        n = np.asarray(candidates)
        if n.ndim != 1 or not np.issubdtype(n.dtype, np.integer):
            raise ValueError("candidates must be a 1-d integer array, one n_j per group")
        if n.size < n_groups:
            raise ValueError(f"candidates has {n.size} entries but group codes reach {n_groups - 1}")
        n_groups = n.size
        n = n.astype(np.int64)
    r = np.bincount(g, minlength=n_groups).astype(np.int64)
    if candidates is None:
        n = r.copy()
    if (n < r).any():
        j = int(np.flatnonzero(n < r)[0])
        raise ValueError(f"group {j} has {r[j]} records but only {n[j]} candidates; candidates must be ≥ records")
    safe_n = np.maximum(n, 1)
    psi_j = np.where(r > 0, r / safe_n, 0.0)
    # sensitive-value counts c_{j,s} as sparse (group, value) triplets, never a dense G × S matrix
    codes, first = factorize(g * (int(v.max()) + 1) + v)
    c = np.bincount(codes).astype(np.float64)
    value_cracks = np.bincount(g[first], weights=c * c, minlength=n_groups) / safe_n
    lg = np.vectorize(math.lgamma, otypes=[np.float64])
    log_m = float(np.sum(lg(n + 1.0) - lg(n - r + 1.0)))
    big_n, big_r = int(n.sum()), int(r.sum())
    log_max = math.lgamma(big_n + 1) - math.lgamma(big_n - big_r + 1)
    return ReleaseDisclosure(
        records=r,
        candidates=n,
        psi=psi_j.astype(np.float64),
        value_cracks=value_cracks.astype(np.float64),
        log_matchings=log_m,
        log_max_matchings=log_max,
    )
