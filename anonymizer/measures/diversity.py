"""k-anonymity and ℓ-diversity (distinct, entropy, recursive) of a release's QI-groups.

Source: Hsu 2008, *Database Anonymization and Protections of Sensitive Attributes* (paper 000),
§3.2–3.3 and its worked examples, after
Sweeney (k-anonymity) and Machanavajjhala et al. (ℓ-diversity). Corrections to the thesis applied:
E5 (recursive diversity's strict "<" vs Table 3.5-1's "≤": a ``strict`` flag) and E6 ((c,1)-diversity
is the always-satisfied base case).

Input: the sparse counts of :func:`anonymizer.measures.qi_groups.group_counts`. Every function
returns numbers (per group, or :class:`DiversityFigures` for the whole release); the report's
wording of them is :mod:`serialpub.report.wording.diversity`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.measures.qi_groups import (
    BoolArray,
    FloatArray,
    GroupCounts,
    IntArray,
    check_c_ell,
    int_codes,
    local_distribution,
    ranked,
    ratio_or_inf,
    tail_mass,
)


def k_anonymity(gc: GroupCounts) -> int:
    """The largest k for which the release is k-anonymous: the smallest QI-group, in records.

    Source: Hsu 2008 (paper 000) §3.2 Def 3.2.1 (every q-block has at least k tuples).
    """
    return int(gc.size.min())


def distinct_values(gc: GroupCounts) -> IntArray:
    """Distinct sensitive values per group, shape (G,); a group is distinct ℓ-diverse iff ≥ ℓ.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.1.
    """
    return np.bincount(gc.group, minlength=gc.n_groups).astype(np.int64)


def entropy_bits(gc: GroupCounts) -> FloatArray:
    """Entropy of every group's sensitive distribution, in bits (log base 2), shape (G,).

    A group is entropy ℓ-diverse iff H ≥ log2 ℓ, i.e. ℓ ≤ 2^H (the base cancels).

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.2, −Σ_s p(q,s) log p(q,s) ≥ log ℓ.
    """
    p = local_distribution(gc)
    # −p log p per triplet; p = 1 gives exactly 0, so homogeneous groups get H = 0 exactly
    # (+ 0.0 turns the −0.0 of a homogeneous group into 0.0)
    h = np.bincount(gc.group, weights=-p * np.log2(p), minlength=gc.n_groups).astype(np.float64)
    return h + 0.0


def recursive_ratio(gc: GroupCounts, ell: int) -> FloatArray:
    """The smallest c of recursive (c,ℓ)-diversity per group: r_1 / (r_ℓ + … + r_m), shape (G,).

    r_1 ≥ r_2 ≥ … ≥ r_m are the group's value counts sorted descending. The group satisfies the
    strict Def 3.3.3 (r_1 < c·Σ) iff c > ratio, and the "≤" reading (Errata E5) iff c ≥ ratio.
    ``inf`` when the group has fewer than ℓ distinct values; 0 for ℓ = 1 (Errata E6: (c,1) is
    always satisfied).

    Raises:
        ValueError: ℓ not an integer ≥ 1.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.3 (after Machanavajjhala et al.).
    """
    check_c_ell(None, ell)
    if ell == 1:
        return np.zeros(gc.n_groups, dtype=np.float64)
    d = ranked(gc.group, gc.count, gc.n_groups)
    return ratio_or_inf(d.top, tail_mass(d, ell, gc.n_groups))


def recursive_diverse(gc: GroupCounts, c: float, ell: int, *, strict: bool = True) -> BoolArray:
    """Whether every group satisfies recursive (c,ℓ)-diversity, shape (G,).

    Args:
        gc: the release's counts.
        c: c > 0.
        ell: ℓ ≥ 1 (ℓ = 1 is always satisfied, Errata E6).
        strict: True for Def 3.3.3's r_1 < c·(r_ℓ + … + r_m); False for r_1 ≤ c·(…), the reading
            Table 3.5-1 needs for block (iii) (Errata E5).

    Raises:
        ValueError: c ≤ 0 or ℓ not an integer ≥ 1.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.3.
    """
    check_c_ell(c, ell)
    if ell == 1:
        return np.ones(gc.n_groups, dtype=bool)
    d = ranked(gc.group, gc.count, gc.n_groups)
    rhs = c * tail_mass(d, ell, gc.n_groups)
    return np.asarray(d.top < rhs if strict else d.top <= rhs)


def recursive_max_ell(gc: GroupCounts, c: float, *, strict: bool = True) -> IntArray:
    """The largest ℓ for which each group is recursive (c,ℓ)-diverse, shape (G,), ≥ 1.

    The tail r_ℓ + … + r_m shrinks as ℓ grows, so the groups satisfying (c,ℓ) for ℓ ≥ 2 are
    exactly ℓ = 2..L; L = 1 means only the base case (Errata E6).

    Raises:
        ValueError: c ≤ 0.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.3 (``strict`` as in :func:`recursive_diverse`).
    """
    check_c_ell(c, None)
    d = ranked(gc.group, gc.count, gc.n_groups)
    # tail from rank i on = group size − counts of ranks < i
    before = np.cumsum(d.mass) - d.mass
    start_cum = np.zeros(gc.n_groups)
    first = d.rank == 0
    start_cum[d.group[first]] = before[first]
    tail = gc.size[d.group] - (before - start_cum[d.group])
    r1 = d.top[d.group]
    ok = (r1 < c * tail) if strict else (r1 <= c * tail)
    ok &= d.rank >= 1
    return 1 + np.bincount(d.group[ok], minlength=gc.n_groups).astype(np.int64)


def release_entropy_bits(gc: GroupCounts) -> float:
    """Entropy of the whole release's sensitive distribution D_T, in bits (log base 2).

    The feasibility bound of entropy ℓ-diversity: no partition of the release into groups has
    every group's entropy above it (entropy is concave), so entropy ℓ ≤ 2^this.

    Source: Hsu 2008 (paper 000) §3.3 Def 3.3.2 applied to the release as one group.
    """
    p = gc.total[gc.total > 0] / gc.total.sum()
    return float(-(p * np.log2(p)).sum())


# ---------------------------------------------------------------------------------------------
# Release figures
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiversityFigures:
    """Table-level k-anonymity and ℓ-diversity figures of a release.

    Attributes:
        n_groups: G, the number of QI-groups.
        n_records: R, the published records.
        k: the smallest QI-group, in records: the release is k-anonymous for k ≤ this.
        min_candidates: the smallest n_j, in individuals (register candidates of a group, or
            its records under presence dilution); None when no candidate counts were given.
        min_distinct: the fewest distinct sensitive values in a group (distinct ℓ).
        homogeneous_groups: groups with fewer than 2 distinct values.
        min_entropy_bits: H_min, the smallest group entropy, in bits.
        release_entropy_bits: the entropy of the whole release, in bits (the feasibility bound).
        c: c of the recursive (c,ℓ) figures, as given.
        ell: ℓ of the recursive (c,ℓ) figures.
        strict: Def 3.3.3's "<" (True) or the "≤" reading (False, Errata E5).
        recursive_c: the smallest c of recursive (c,ℓ)-diversity at ``ell``: the max over groups
            of :func:`recursive_ratio`, ``inf`` when some group has fewer than ℓ values.
        recursive_failing: groups that fail recursive (c,ℓ)-diversity at ``c`` and ``ell``.
        recursive_max_ell: the largest ℓ at ``c`` that every group satisfies (min over groups of
            :func:`recursive_max_ell`), ≥ 1.
    """

    n_groups: int
    n_records: int
    k: int
    min_candidates: int | None
    min_distinct: int
    homogeneous_groups: int
    min_entropy_bits: float
    release_entropy_bits: float
    c: float
    ell: int
    strict: bool
    recursive_c: float
    recursive_failing: int
    recursive_max_ell: int

    @property
    def entropy_ell(self) -> float:
        """The largest ℓ of entropy ℓ-diversity, 2^H_min (the log base cancels)."""
        return float(2.0**self.min_entropy_bits)


def diversity_figures(
    gc: GroupCounts,
    *,
    candidates: npt.ArrayLike | None = None,
    c: float = 3.0,
    ell: int = 2,
    strict: bool = True,
) -> DiversityFigures:
    """k-anonymity (over records and over candidates) and ℓ-diversity figures of a release.

    Args:
        gc: the release's counts (:func:`~anonymizer.measures.qi_groups.group_counts`).
        candidates: n_j ≥ records, register individuals per group, shape (G,): k-anonymity over
            candidates (paper 004's virtual dilution). None: not computed.
        c: c of recursive (c,ℓ)-diversity, > 0.
        ell: ℓ of recursive (c,ℓ)-diversity, integer ≥ 1.
        strict: Def 3.3.3's strict "<" (True) or the "≤" reading of Table 3.5-1 (False, E5).

    Raises:
        ValueError: c ≤ 0, ℓ not an integer ≥ 1, or candidates not of shape (G,) or below a
            group's size.

    Source: Hsu 2008 (paper 000) §3.2 Def 3.2.1, §3.3 Defs 3.3.1–3.3.3.
    """
    check_c_ell(c, ell)
    min_candidates = None
    if candidates is not None:
        n = int_codes("candidates", candidates)
        if n.shape != (gc.n_groups,):
            raise ValueError(f"candidates must have shape ({gc.n_groups},), one per group, got {n.shape}")
        if (n < gc.size).any():
            bad = int(np.flatnonzero(n < gc.size)[0])
            raise ValueError(f"candidates must be ≥ the group size; group {bad} has {n[bad]} < {gc.size[bad]}")
        min_candidates = int(n.min())
    dv = distinct_values(gc)
    ok = recursive_diverse(gc, c, ell, strict=strict)
    return DiversityFigures(
        n_groups=gc.n_groups,
        n_records=gc.n_records,
        k=k_anonymity(gc),
        min_candidates=min_candidates,
        min_distinct=int(dv.min()),
        homogeneous_groups=int((dv < 2).sum()),
        min_entropy_bits=float(entropy_bits(gc).min()),
        release_entropy_bits=release_entropy_bits(gc),
        c=c,
        ell=ell,
        strict=strict,
        recursive_c=float(recursive_ratio(gc, ell).max()),
        recursive_failing=int((~ok).sum()),
        recursive_max_ell=int(recursive_max_ell(gc, c, strict=strict).min()),
    )
