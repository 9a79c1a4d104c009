"""A release's QI-groups as sparse (group, value, count) triplets, shared by the diversity,
closeness and categorical measures.

Source: Hsu 2008, *Database Anonymization and Protections of Sensitive Attributes* (paper 000),
§3.4 Defs 3.4.1–3.4.2.

Input. A release is given per record: ``group`` (QI-group / equivalence class code 0..G-1) and
``value`` (code 0..S-1 of the sensitive attribute, never generalized, Hsu Def 2.3.4). Everything
is computed from sparse (group, value, count) triplets (:func:`group_counts`): at most one row
per distinct pair, sorted by group then value, so S ≈ 2,000 diagnosis codes and G ≈ 50,000
groups never build a G × S matrix. All per-group work is bincount / sorting / reduceat.

The ranked-mass helpers (:func:`ranked`, :func:`tail_mass`, :func:`ratio_or_inf`) serve the
"r_1 against r_ℓ + … + r_m" tests of recursive (c,ℓ)-diversity (:mod:`.diversity`) and of
(c,ℓ)-density control (:mod:`.categorical`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class GroupCounts:
    """Sensitive-value counts of a release's QI-groups, as sparse triplets.

    Attributes:
        n_groups: G, the number of QI-groups (codes 0..G-1, all non-empty).
        n_values: S, the size of the sensitive attribute's domain (codes 0..S-1).
        size: records per group, shape (G,).
        group: group of every triplet, shape (u,), sorted ascending.
        value: sensitive value of every triplet, shape (u,), ascending within a group.
        count: records of the group holding the value, shape (u,), ≥ 1.
        total: records per sensitive value over the whole release, shape (S,).
    """

    n_groups: int
    n_values: int
    size: IntArray
    group: IntArray
    value: IntArray
    count: IntArray
    total: IntArray

    @property
    def n_records(self) -> int:
        return int(self.size.sum())


def int_codes(name: str, a: npt.ArrayLike) -> IntArray:
    """``a`` as a 1-d int64 array of codes.

    Raises:
        ValueError: not 1-d, or a non-empty array of non-integers (``name`` says which argument).
    """
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer codes, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def group_counts(group: npt.ArrayLike, value: npt.ArrayLike, n_values: int) -> GroupCounts:
    """Count the sensitive values of every QI-group.

    Args:
        group: QI-group code of every record, shape (R,), integers 0..G-1; every code in
            0..max must occur (G = max + 1).
        value: sensitive value code of every record, shape (R,), integers 0..n_values-1.
        n_values: S ≥ 1, the size of the sensitive domain.

    Returns:
        :class:`GroupCounts`, O(R) time (hash grouping) plus a sort of the distinct pairs.

    Raises:
        ValueError: shapes differ or are not 1-d, no records, non-integer codes, a code out of
            range, or a group code in 0..G-1 without records.

    Source: Hsu 2008 (paper 000) §3.4 Defs 3.4.1–3.4.2 (global and local sensitive distributions
    are these counts divided by |T| and by the group size).
    """
    g = int_codes("group", group)
    v = int_codes("value", value)
    if g.shape != v.shape:
        raise ValueError(f"group and value must have equal shape, got {g.shape} and {v.shape}")
    if g.size == 0:
        raise ValueError("the release has no records")
    if not isinstance(n_values, (int, np.integer)) or n_values < 1:
        raise ValueError(f"n_values must be a positive integer, got {n_values!r}")
    s = int(n_values)
    if g.min() < 0:
        raise ValueError(f"group codes must be non-negative, got {int(g.min())}")
    if v.min() < 0 or v.max() >= s:
        raise ValueError(f"value codes must lie in 0..{s - 1}, got {int(v.min())}..{int(v.max())}")
    n_groups = int(g.max()) + 1
    size = np.bincount(g, minlength=n_groups).astype(np.int64)
    empty = np.flatnonzero(size == 0)
    if empty.size:
        raise ValueError(
            f"{empty.size} group code(s) in 0..{n_groups - 1} have no records (first: {int(empty[0])}); "
            "group codes must be dense"
        )
    if n_groups * s >= 2**62:
        raise ValueError(f"too many groups × values to encode: {n_groups} × {s}")
    key = g * s + v
    codes, first = factorize(key)
    count = np.bincount(codes).astype(np.int64)
    ukey = key[first]
    order = np.argsort(ukey, kind="stable")
    ukey, count = ukey[order], count[order]
    total = np.bincount(v, minlength=s).astype(np.int64)
    return GroupCounts(n_groups, s, size, ukey // s, ukey % s, count, total)


def global_distribution(gc: GroupCounts) -> FloatArray:
    """D_T: the fraction of the release's records holding each sensitive value, shape (S,).

    Source: Hsu 2008 (paper 000) §3.4 Def 3.4.1.
    """
    return gc.total / gc.total.sum()


def local_distribution(gc: GroupCounts) -> FloatArray:
    """D_q per triplet: p(q, s) = n(q, s) / |q-block|, shape (u,), aligned with ``gc.group`` and
    ``gc.value`` (values a group does not hold have p = 0 and no triplet).

    Source: Hsu 2008 (paper 000) §3.4 Def 3.4.2 (and p(q, s) of Def 3.3.2).
    """
    return gc.count / gc.size[gc.group]


# ---------------------------------------------------------------------------------------------
# Per-group masses ranked descending (recursive (c,ℓ) tests)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    """Per-group masses sorted descending.

    Attributes:
        group: group of every entry, sorted ascending, shape (u,).
        mass: the entry's mass (a count), descending within a group, shape (u,).
        rank: 0 for a group's largest mass, 1 for the next, ..., shape (u,).
        top: largest mass per group, 0 for groups without entries, shape (G,).
    """

    group: IntArray
    mass: FloatArray
    rank: IntArray
    top: FloatArray


def ranked(group: IntArray, mass: npt.NDArray[np.float64] | IntArray, n_groups: int) -> Ranked:
    """Sort the entries (group, mass) by group, then mass descending; shapes (u,), G = n_groups."""
    order = np.lexsort((-np.asarray(mass, dtype=np.float64), group))
    g = group[order]
    m = np.asarray(mass, dtype=np.float64)[order]
    first = np.r_[True, g[1:] != g[:-1]] if g.size else np.zeros(0, dtype=bool)
    start_idx = np.flatnonzero(first)
    run_len = np.diff(np.r_[start_idx, g.size])
    rank = np.arange(g.size, dtype=np.int64) - np.repeat(start_idx, run_len)
    top = np.zeros(n_groups, dtype=np.float64)
    top[g[start_idx]] = m[start_idx]
    return Ranked(g, m, rank, top)


def tail_mass(d: Ranked, ell: int, n_groups: int) -> FloatArray:
    """Σ of the masses of rank ≥ ℓ−1 (r_ℓ + … + r_m) per group, shape (G,)."""
    keep = d.rank >= ell - 1
    return np.bincount(d.group[keep], weights=d.mass[keep], minlength=n_groups).astype(np.float64)


def check_c_ell(c: float | None, ell: int | None) -> None:
    """Check the (c,ℓ) parameters; None skips one.

    Raises:
        ValueError: c not a positive finite number, or ℓ not an integer ≥ 1 (Hsu 2008 §3.3
            Def 3.3.3 defines (c,ℓ) for c > 0 and ℓ ≥ 1).
    """
    if c is not None and not (isinstance(c, (int, float, np.floating, np.integer)) and c > 0 and math.isfinite(c)):
        raise ValueError(f"c must be a positive finite number, got {c!r}")
    if ell is not None and (not isinstance(ell, (int, np.integer)) or isinstance(ell, bool) or ell < 1):
        raise ValueError(f"ℓ must be an integer ≥ 1, got {ell!r}")


def ratio_or_inf(top: FloatArray, tail: FloatArray) -> FloatArray:
    """top / tail elementwise, same shape, with 0/0 = 0 (nothing to protect) and x/0 = inf
    (no c suffices)."""
    out = np.zeros_like(top)
    pos = tail > 0
    out[pos] = top[pos] / tail[pos]
    out[(~pos) & (top > 0)] = np.inf
    return out
