"""Breach probabilities and group-size-ratio targets of serial publishing.

Every function works on numpy arrays over many (individual, protected value) pairs at once
and contains no Python loop over pairs, except :func:`exceeds_threshold`, which settles in
exact rational arithmetic the few pairs whose floating-point value lies too close to 1/ℓ
to decide.

Source: Wong, Fu, Liu, Wang, Xu, "Preserving Individual Privacy in Serial Data
Publishing" (``papers/004_*``), Lemma 4, Theorem 1, Corollary 2, Theorem 2, Lemma 5,
Section 6.1 (constant ratio) and Section 6.2 (geometric); docs/design.md section 2.

Notation. For an individual o and a protected value s, release j links o to s when o is
a candidate of a group with ``n_j`` candidates of which ``n_{j,s}`` published records
carry s (``0 < n_{j,s} <= n_j``). The *survival product* is
``P = Π_j (1 - n_{j,s}/n_j)`` over the linked releases; the breach probability is
``p = 1 - P`` (Lemma 4). Releases in which o's group holds no s leave p unchanged
(Lemma 5), so they are simply not rows of the history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.settings import Strategy

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Absolute distance from 1/ℓ within which a floating-point breach probability is not
#: trusted and the pair is decided with exact fractions. The float error of a product of
#: k factors is below k·2^-52 relative, so 1e-9 is safe for any realistic history.
UNDECIDED_BAND = 1e-9

#: Relative margin kept above Theorem 1's floor ñ(k) (see :func:`safe_floor`). A ratio
#: exactly at ñ(k) reaches p = 1/ℓ and makes every later linked release a breach
#: (Theorem 2), so the anonymizer stays strictly above it.
TARGET_SAFETY = 1e-12

#: Bound on the relative rounding error of a survival product (a product of up to a few
#: thousand float factors, each within 2^-53), used to size the floor's margin.
PRODUCT_ROUNDING = 1e-12


def _as_float(a: Any) -> FloatArray:
    return np.asarray(a, dtype=np.float64)


def _check_ell(ell: FloatArray) -> None:
    if np.any(~np.isfinite(ell)) or np.any(ell < 1):
        raise ValueError("ℓ must be a finite number >= 1 (1/ℓ is the breach threshold)")


def _check_counts(n: npt.ArrayLike, n_s: npt.ArrayLike) -> tuple[IntArray, IntArray]:
    n_arr = np.asarray(n, dtype=np.int64)
    ns_arr = np.asarray(n_s, dtype=np.int64)
    if n_arr.shape != ns_arr.shape:
        raise ValueError(f"n and n_s must have the same shape, got {n_arr.shape} and {ns_arr.shape}")
    if np.any(n_arr <= 0):
        raise ValueError("every group must have at least one candidate (n_j > 0)")
    if np.any(ns_arr < 0) or np.any(ns_arr > n_arr):
        raise ValueError("n_{j,s} must lie in [0, n_j]: a group cannot hold more records than candidates")
    return n_arr, ns_arr


def release_factor(n: IntArray, n_s: IntArray, *, complement: bool = False) -> FloatArray:
    """Lemma 4's update in floating point: the factor ``1 - n_s/n`` by which one release
    that links a pair multiplies the pair's survival product P, elementwise, float64 of
    the broadcast shape. The one float form of the update: the anonymizer's new history
    (:func:`anonymizer.release.advance_history`), validation's breach table
    (:mod:`checks.breach`), :func:`survival_factor` and the audit all take it from here.
    Unchecked (the callers check their counts); the exact decision near 1/ℓ is
    :func:`exact_breach`'s, in rationals.

    Evaluated as ``(n - n_s) / n``. The anonymizer's history is evaluated as ``1 - n_s / n``
    (``complement``), as in every statistics file written so far: the two forms differ in
    the last bit for many (n, n_s), and validation's breach table reads the history, so
    making the history use the first form moves the published report's breach figures in
    their last digit. Until a release may change those, ``complement`` keeps the bytes.

    Args:
        n: candidates of the group, integers > 0.
        n_s: records of the group carrying the protected value, integers in [0, n].
        complement: evaluate as ``1 - n_s / n`` (the anonymizer's history).
    """
    if complement:
        return np.asarray(1.0 - n_s / n, dtype=np.float64)
    return np.asarray((n - n_s) / n, dtype=np.float64)


#: ρ of a release: one whole number for every protected value, or one per protected value
#: (in the order of the protected values)
PropensityRatio = int | tuple[int, ...]


def propensity_ratios(propensity_ratio: PropensityRatio | IntArray, n_values: int | None = None) -> IntArray:
    """ρ as int64: a tuple (one per protected value) as a (V,) vector, a number repeated
    ``n_values`` times (shape () when ``n_values`` is None); an int64 array is checked and
    returned as it is (ρ per element, for callers holding one value per pair).

    Raises:
        ValueError: a ρ that is not a whole number >= 1, or a tuple of another length
            than ``n_values``.
    """
    if isinstance(propensity_ratio, np.ndarray):
        if propensity_ratio.dtype != np.int64 or not np.all(propensity_ratio >= 1):
            raise ValueError("propensity_ratio must be whole numbers >= 1")
        return propensity_ratio
    items = propensity_ratio if isinstance(propensity_ratio, tuple) else (propensity_ratio,)
    if not items or any(type(r) is not int or r < 1 for r in items):
        raise ValueError(f"propensity_ratio must be whole numbers >= 1, got {propensity_ratio!r}")
    if not isinstance(propensity_ratio, tuple):
        return np.full(() if n_values is None else n_values, propensity_ratio, dtype=np.int64)
    if n_values is not None and len(items) != n_values:
        raise ValueError(f"propensity_ratio has {len(items)} values for {n_values} protected values")
    return np.array(items, dtype=np.int64)


def ratio_by_value(setting: int | Mapping[str, int], values: Sequence[str]) -> PropensityRatio:
    """ρ as the charge takes it from its written form: a number as it is, a mapping from
    protected value to ρ as one ρ per value of ``values`` (in their order), 1 for a value it
    does not list.

    Raises:
        ValueError: a key that is no value of ``values`` (the message names it and them), or
            a ρ that is not a whole number >= 1.
    """
    if not isinstance(setting, Mapping):
        propensity_ratios(setting)
        return setting
    unknown = sorted(set(setting) - set(values))
    if unknown:
        raise ValueError(f"propensity_ratio names {unknown}, which are not protected values ({', '.join(values)})")
    rho = tuple(setting.get(v, 1) for v in values)
    propensity_ratios(rho)
    return rho


def is_uniform_charge(propensity_ratio: PropensityRatio) -> bool:
    """ρ = 1 for every protected value: paper 004's uniform charge."""
    return bool(np.all(propensity_ratios(propensity_ratio) == 1))


def charged_counts(n_j: npt.ArrayLike, n_s: npt.ArrayLike, propensity_ratio: PropensityRatio | IntArray) -> IntArray:
    """The records a release is charged for: ``min(n_j, ρ_s·n_{j,s})`` elementwise, int64 of
    the broadcast shape; ``n_{j,s}`` itself when every ρ_s = 1. A per-value ρ (a tuple,
    :data:`PropensityRatio`) is broadcast along the last axis of ``n_s``, the protected
    values; an int64 array of ρ is broadcast against ``n_s`` as it is.

    Under ρ_s the factor of a linked release is ``1 - ρ_s·n_{j,s}/n_j`` (capped at a certain
    link), the largest share ``n_{j,s}·π(o)/Σ_{o'} π(o')`` any propensity π for s with
    ``max π <= ρ_s · mean π`` over the group's n_j candidates gives one of them
    (docs/threat-model.md, "The propensity ratio"). Whole ρ keeps every factor a ratio of
    integers, so the exact decisions (:func:`exact_breach`) stay exact.

    Raises:
        ValueError: ρ not whole numbers >= 1 (:func:`propensity_ratios`).
    """
    rho = propensity_ratios(propensity_ratio)
    n_s_arr = np.asarray(n_s, dtype=np.int64)
    if np.all(rho == 1):
        return n_s_arr
    return np.minimum(np.asarray(n_j, dtype=np.int64), n_s_arr * rho)


def breach_after_release(survival: FloatArray, n: IntArray, n_s: IntArray) -> FloatArray:
    """Breach probability after one more linked release, ``1 - P·(1 - n_s/n)``
    (:func:`release_factor`), unchecked, elementwise."""
    return np.asarray(1.0 - survival * release_factor(n, n_s), dtype=np.float64)


def survival_factor(n: npt.ArrayLike, n_s: npt.ArrayLike) -> FloatArray:
    """Factor ``1 - n_s/n`` of one release (Lemma 4; :func:`release_factor`, checked).

    Args:
        n: candidates of the group, shape (m,), integers > 0.
        n_s: records of the group carrying the protected value (or value set), shape (m,),
            integers in [0, n].

    Returns:
        float64 array of shape (m,), in [0, 1].

    Raises:
        ValueError: on counts outside their range.
    """
    n_arr, ns_arr = _check_counts(n, n_s)
    return release_factor(n_arr, ns_arr)


def survival_products(pair_index: npt.ArrayLike, n: npt.ArrayLike, n_s: npt.ArrayLike, n_pairs: int) -> FloatArray:
    """Survival product ``P = Π_j (1 - n_{j,s}/n_j)`` per pair, from a long-format history.

    Args:
        pair_index: shape (m,), which pair (0 <= index < n_pairs) each history row belongs to;
            one row per release in which the pair was linked.
        n, n_s: shape (m,), the group figures of that release.
        n_pairs: number of pairs; pairs without rows get P = 1.

    Returns:
        float64 array of shape (n_pairs,).

    Source: paper 004, Lemma 4 (closed form of p(o, s, k)).
    """
    idx = np.asarray(pair_index, dtype=np.int64)
    factors = survival_factor(n, n_s)
    if idx.shape != factors.shape:
        raise ValueError("pair_index must have the same shape as n and n_s")
    if idx.size and (idx.min() < 0 or idx.max() >= n_pairs):
        raise ValueError(f"pair_index must lie in [0, {n_pairs})")
    out = np.ones(n_pairs, dtype=np.float64)
    if idx.size:
        order = np.argsort(idx, kind="stable")
        sorted_idx = idx[order]
        starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
        out[sorted_idx[starts]] = np.multiply.reduceat(factors[order], starts)
    return out


def breach_probabilities(pair_index: npt.ArrayLike, n: npt.ArrayLike, n_s: npt.ArrayLike, n_pairs: int) -> FloatArray:
    """Breach probability ``p(o, s, k) = 1 - P`` per pair (paper 004, Lemma 4).

    Same arguments as :func:`survival_products`; returns float64 of shape (n_pairs,).
    """
    return 1.0 - survival_products(pair_index, n, n_s, n_pairs)


def breach_after(survival: npt.ArrayLike, n: npt.ArrayLike, n_s: npt.ArrayLike) -> FloatArray:
    """Breach probability after one more release: ``1 - P·(1 - n_s/n)``.

    Args:
        survival: P before the release, shape (m,).
        n, n_s: the figures of the pair's group in the new release, shape (m,). ``n_s = 0``
            (group without the value) leaves p unchanged (Lemma 5).
    """
    n_arr, ns_arr = _check_counts(n, n_s)
    return breach_after_release(_as_float(survival), n_arr, ns_arr)


def min_ratio(survival: npt.ArrayLike, ell: npt.ArrayLike) -> FloatArray:
    """Minimum safe group-size ratio ``ñ(k) = ℓP / (ℓP - (ℓ-1))`` (Theorem 1).

    ``P`` is the survival product over releases 1..k-1; with no history (P = 1) this gives
    ñ(1) = ℓ, the paper's definition for k = 1. Where ``ℓP - (ℓ-1) <= 0`` no ratio is
    safe: the result is ``inf``, meaning o's group must hold no s at all (Lemma 5) or o's
    record carrying s must be suppressed.

    Args:
        survival: P per pair, shape (m,), in [0, 1].
        ell: ℓ, scalar or shape (m,) (personal thresholds), >= 1.

    Returns:
        float64 array of shape (m,), each >= 1 or ``inf``.

    Raises:
        ValueError: for P outside [0, 1] or ℓ < 1.
    """
    p = _as_float(survival)
    ell_a = _as_float(ell)
    _check_ell(ell_a)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("survival products must lie in [0, 1]")
    lp = ell_a * p
    denom = lp - (ell_a - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(denom > 0, lp / np.where(denom > 0, denom, 1.0), np.inf)
    return np.asarray(out, dtype=np.float64)


def safe_floor(survival: npt.ArrayLike, ell: npt.ArrayLike) -> FloatArray:
    """Theorem 1's floor ñ(k), raised by a margin that covers its floating-point error.

    ``ñ = ℓP / (ℓP - (ℓ-1))`` suffers cancellation when ℓP is close to ℓ-1: an error of
    ``PRODUCT_ROUNDING · ℓP`` in ℓP becomes a relative error of about
    ``PRODUCT_ROUNDING · ℓP / (ℓP - (ℓ-1))`` in ñ. The floor is multiplied by
    ``1 + TARGET_SAFETY + 2 · that bound``, so a ratio that meets it in floating point
    exceeds the true ñ(k): rounding can only enlarge groups.

    Returns:
        float64 array, ``inf`` where no ratio is safe (as :func:`min_ratio`).
    """
    p = _as_float(survival)
    ell_a = _as_float(ell)
    floor = min_ratio(p, ell_a)
    lp = ell_a * p
    denom = lp - (ell_a - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(denom > 0, 2.0 * PRODUCT_ROUNDING * lp / np.where(denom > 0, denom, 1.0), np.inf)
    return np.asarray(floor * (1.0 + TARGET_SAFETY + rel), dtype=np.float64)


def constant_ratio_target(ell: float, k_prime: int) -> float:
    """Constant-ratio target ``ñ_c = 1 / (1 - (1 - 1/ℓ)^(1/k'))`` (Section 6.1, Theorem 4).

    A ratio of at least ñ_c in each of at most k' linked releases keeps p <= 1/ℓ.
    Computed as ``-1/expm1(log1p(-1/ℓ)/k')`` to avoid cancellation for large k'.

    Raises:
        ValueError: for ℓ < 1 or k' < 1.
    """
    if not (ell >= 1 and np.isfinite(ell)):
        raise ValueError("ℓ must be a finite number >= 1")
    if int(k_prime) != k_prime or k_prime < 1:
        raise ValueError("k' must be a whole number >= 1")
    if ell == 1:
        return 1.0
    return float(-1.0 / np.expm1(np.log1p(-1.0 / ell) / k_prime))


def constant_ratio_targets(linked_count: npt.ArrayLike, ell: npt.ArrayLike, k_prime: int) -> FloatArray:
    """Per-pair constant-ratio target: ñ_c while fewer than k' releases linked the pair,
    ``inf`` ("never again") afterwards (Section 6.1).

    Args:
        linked_count: releases that linked the pair so far, shape (m,), integers >= 0.
        ell: ℓ, scalar or shape (m,).
        k_prime: k', the bound on linked releases, >= 1.
    """
    counts = np.asarray(linked_count, dtype=np.int64)
    ell_a = np.broadcast_to(_as_float(ell), counts.shape)
    _check_ell(ell_a)
    if int(k_prime) != k_prime or k_prime < 1:
        raise ValueError("k' must be a whole number >= 1")
    uniq, inv = np.unique(ell_a, return_inverse=True)
    base = np.array([constant_ratio_target(float(v), k_prime) for v in uniq])[inv.reshape(-1)]
    return np.where(counts < k_prime, base.reshape(counts.shape), np.inf)


def renewed_targets(survival: npt.ArrayLike, ell: npt.ArrayLike, k_prime: int) -> FloatArray:
    """Constant-ratio target for a pair past its k' linked releases: what is left of its
    budget spread evenly over k' more, ``1 / (1 - ((1 - 1/ℓ)/P)^(1/k'))`` (docs/design.md,
    "After k' linked releases"). This is :func:`constant_ratio_target` with the bound
    ``1 - 1/ℓ`` on the survival product replaced by the share ``(1 - 1/ℓ)/P`` still
    allowed; a pair linked at ratios above ñ_c keeps some, one linked at exactly ñ_c k'
    times keeps none (``inf``: never again, as without renewal).

    Args:
        survival: P per pair, shape (m,), in [0, 1].
        ell: ℓ, scalar or shape (m,).
        k_prime: k', >= 1.

    Returns:
        float64 array of shape (m,), each > 1 or ``inf`` where ``P <= 1 - 1/ℓ``.
    """
    p = _as_float(survival)
    ell_a = np.broadcast_to(_as_float(ell), p.shape)
    _check_ell(ell_a)
    if int(k_prime) != k_prime or k_prime < 1:
        raise ValueError("k' must be a whole number >= 1")
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (np.log1p(-1.0 / ell_a) - np.log(p)) / k_prime  # log of the per-release survival share
        t = np.where(x < 0, -1.0 / np.expm1(np.minimum(x, 0.0)), np.inf)
    return np.asarray(t, dtype=np.float64)


def geometric_targets(survival: npt.ArrayLike, ell: npt.ArrayLike, alpha: float) -> FloatArray:
    """Geometric target ``α · ñ(k)`` (Section 6.2); α must exceed 1 (Theorem 2).

    Raises:
        ValueError: for α <= 1.
    """
    if not (alpha > 1 and np.isfinite(alpha)):
        raise ValueError("α must be a finite number > 1 (α = 1 makes every later release infeasible, Theorem 2)")
    return alpha * min_ratio(survival, ell)


def strategy_targets(
    survival: npt.ArrayLike,
    linked_count: npt.ArrayLike,
    ell: npt.ArrayLike,
    strategy: str,
    k_prime: int | None = None,
    alpha: float | None = None,
    renew: bool = False,
) -> FloatArray:
    """Target ratio per pair under a strategy, never below Theorem 1's floor ñ(k).

    The constant-ratio target alone is safe only if every earlier linked release met it;
    taking ``max(target, ñ(k))`` keeps the guarantee when the history came from elsewhere
    (imported releases, a changed k'). Under a compliant history the floor never binds.
    The floor is :func:`safe_floor` (strictly above ñ(k), rounding included), so a ratio
    that meets the returned target in floating point keeps p < 1/ℓ; the strategy targets
    themselves are policy values and are compared as they are.

    Args:
        survival, linked_count: state of each pair, shape (m,).
        ell: ℓ, scalar or shape (m,).
        strategy: ``"constant"`` (needs ``k_prime``) or ``"geometric"`` (needs ``alpha``).
        renew: constant strategy only: a pair past k' linked releases gets
            :func:`renewed_targets` instead of ``inf`` (paper 004's rule is ``False``).
    """
    floor = safe_floor(survival, ell)
    if strategy == Strategy.CONSTANT:
        if k_prime is None:
            raise ValueError("the constant-ratio strategy needs k'")
        targets = constant_ratio_targets(linked_count, ell, k_prime)
        if renew:
            past = np.asarray(linked_count) >= k_prime
            targets = np.where(past, renewed_targets(survival, ell, k_prime), targets)
        return np.maximum(targets, floor)
    if strategy == Strategy.GEOMETRIC:
        if alpha is None:
            raise ValueError("the geometric strategy needs α")
        return np.maximum(geometric_targets(survival, ell, alpha), floor)
    raise ValueError(f"unknown strategy {strategy!r}; use 'constant' or 'geometric'")


def group_requirement(
    group_index: npt.ArrayLike, targets: npt.ArrayLike, n_groups: int, base: float | npt.ArrayLike = 1.0
) -> FloatArray:
    """Requirement per group: the maximum target over the group's candidates (docs/design.md section 2).

    Args:
        group_index: group of each candidate pair, shape (m,), in [0, n_groups).
        targets: target of each pair, shape (m,).
        n_groups: number of groups.
        base: target of candidates without history (ñ(1)·α or ñ_c), the requirement of a
            group none of whose candidates has history; scalar or shape (n_groups,).

    Returns:
        float64 array of shape (n_groups,).
    """
    idx = np.asarray(group_index, dtype=np.int64)
    t = _as_float(targets)
    out = np.array(np.broadcast_to(_as_float(base), (n_groups,)), dtype=np.float64)
    if idx.size:
        np.maximum.at(out, idx, t)
    return out


def meets_requirement(n: npt.ArrayLike, n_s: npt.ArrayLike, requirement: npt.ArrayLike) -> BoolArray:
    """Whether ``n / n_s >= requirement``, compared as ``n >= requirement · n_s``.

    A group holding no record of the value (``n_s = 0``) meets any requirement (Lemma 5).
    A ratio equal to the requirement meets it (ℓ-diversity's n_s/n <= 1/ℓ); the margin
    against Theorem 1's floor is already inside the requirement (:func:`safe_floor`).
    """
    n_arr, ns_arr = _check_counts(n, n_s)
    req = _as_float(requirement)
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.isfinite(req) & (n_arr >= req * ns_arr)
    return np.asarray((ns_arr == 0) | ok, dtype=bool)


def value_set_counts(
    group_index: npt.ArrayLike, value_code: npt.ArrayLike, membership: npt.ArrayLike, n_groups: int
) -> IntArray:
    """Records per (group, protected set): ``n_{j,S}`` counts records whose value is in S.

    Protecting a set of values (a subtree of a sensitive-value taxonomy, Xiao & Tao's
    guarding node, ``papers/001_*`` §2) uses the same formulas with n_{j,s} replaced by
    the count of the set; a single value is the set {s}.

    Args:
        group_index: group of each published record, shape (r,).
        value_code: integer code of each record's sensitive value, shape (r,).
        membership: boolean matrix (n_values, n_sets), True where a value belongs to a set.
        n_groups: number of groups.

    Returns:
        int64 matrix (n_groups, n_sets).

    Raises:
        ValueError: for a group index or value code out of range.
    """
    g = np.asarray(group_index, dtype=np.int64)
    v = np.asarray(value_code, dtype=np.int64)
    mem = np.asarray(membership, dtype=np.int64)
    n_values = mem.shape[0]
    if g.shape != v.shape:
        raise ValueError("group_index and value_code must have the same shape")
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise ValueError(f"group_index must lie in [0, {n_groups})")
    if v.size and (v.min() < 0 or v.max() >= n_values):
        # an out-of-range code would be silently counted in another group's bin
        raise ValueError(f"value_code must lie in [0, {n_values}) (the rows of membership)")
    per_value = np.bincount(g * n_values + v, minlength=n_groups * n_values).reshape(n_groups, n_values)
    return per_value @ mem


def exceeds_threshold(
    pair_index: npt.ArrayLike,
    n: npt.ArrayLike,
    n_s: npt.ArrayLike,
    n_pairs: int,
    ell: Any,
) -> BoolArray:
    """Exact verdict ``p(o, s, k) > 1/ℓ`` per pair, from the raw history.

    Decided in floating point wherever p is farther than :data:`UNDECIDED_BAND` from 1/ℓ,
    and in exact rational arithmetic (``fractions.Fraction`` over the integer products of
    Lemma 4) for the pairs inside the band, so rounding never turns a violation into a
    pass. ``ell`` may be a scalar or one value per pair; it is read as the exact rational
    of its float or int value.

    Returns:
        bool array of shape (n_pairs,): True where the pair breaches.
    """
    idx = np.asarray(pair_index, dtype=np.int64)
    n_arr, ns_arr = _check_counts(n, n_s)
    ell_a = np.broadcast_to(_as_float(ell), (n_pairs,))
    _check_ell(ell_a)
    p = breach_probabilities(idx, n_arr, ns_arr, n_pairs)
    bound = 1.0 / ell_a
    verdict = p > bound
    undecided = np.flatnonzero(np.abs(p - bound) <= UNDECIDED_BAND)
    if undecided.size:
        rows = np.flatnonzero(np.isin(idx, undecided))
        hist: dict[int, list[tuple[int, int]]] = {int(i): [] for i in undecided}
        for r in rows:  # only the handful of borderline pairs reach this loop
            hist[int(idx[r])].append((int(n_arr[r]), int(ns_arr[r])))
        for pair, figures in hist.items():
            verdict[pair] = exact_breach(figures) > 1 / Fraction(float(ell_a[pair]))
    return np.asarray(verdict, dtype=bool)


def exact_breach(figures: list[tuple[int, int]]) -> Fraction:
    """Exact ``p = (Π n_j - Π (n_j - n_{j,s})) / Π n_j`` (Lemma 4) for one pair.

    Args:
        figures: ``(n_j, n_{j,s})`` of every release that linked the pair.
    """
    num, den = 1, 1
    for n_j, ns_j in figures:
        num *= n_j - ns_j
        den *= n_j
    return 1 - Fraction(num, den)


def geometric_sequence(ell: float, alpha: float, releases: int) -> tuple[FloatArray, FloatArray]:
    """Targets α·ñ(k) of the geometric strategy for k = 1..releases, worst case (Figure 5).

    The worst case links o to s in every release with a ratio exactly at the target, so
    ``P_k = Π_{j<k} (1 - 1/target_j)``.

    Returns:
        (targets, breach probability after each release), both of shape (releases,).
    """
    if int(releases) != releases or releases < 1:
        raise ValueError("releases must be a whole number >= 1")
    targets = np.empty(releases)
    breach = np.empty(releases)
    survival = 1.0
    for k in range(releases):  # a handful of releases, each depending on the one before
        targets[k] = float(geometric_targets(np.array([survival]), ell, alpha)[0])
        survival *= 1.0 - 1.0 / targets[k] if np.isfinite(targets[k]) else 1.0
        breach[k] = 1.0 - survival
    return targets, breach
