"""The permanent of a non-negative square matrix by Ryser's formula, exact or in extended
precision: the count of perfect matchings (0/1 matrices) and the normaliser of the matching
distribution that Malik's disclosure measures (:mod:`.disclosure`) are built on.

Source: Malik 2014 (paper 002) §2.3 eq 2.1 (the permanent of an attack matrix); Ryser's formula
perm(A) = (−1)^n Σ_{S ⊆ cols} (−1)^{|S|} Π_i Σ_{j∈S} a_ij, O(2^n·n), hence the size limits.

Exact rational arithmetic: pass an object array of ``fractions.Fraction`` (or Python ints), or
an integer/bool matrix, and the permanent comes back as an exact ``Fraction``/``int``. Float
matrices are summed in extended precision (``np.longdouble``) and returned as float.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

Number = Any  # int | Fraction | float: exact inputs give exact results

#: Largest order of a float matrix whose permanent is computed (Ryser, O(2^n·n) per call).
PERMANENT_MAX_N = 20
#: Largest order of an exact (integer/Fraction) matrix: pure-Python Ryser, O(2^n·n).
EXACT_MAX_N = 14


# ---------------------------------------------------------------------------------------
# validation


def square_matrix(p: npt.ArrayLike, name: str = "P") -> tuple[npt.NDArray[Any], bool]:
    """``p`` as a square non-negative matrix, and whether it is exact (ints/Fractions).

    Returns:
        (a, exact): an object array of ints/Fractions (integer, bool or object input) or a
        float64 array, same shape (n, n).

    Raises:
        ValueError: not square, not numeric, non-finite or negative entries (``name`` says
            which matrix).
    """
    a = np.asarray(p)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {a.shape}")
    if a.dtype == object:
        if not all(isinstance(x, (int, Fraction)) for x in a.flat):
            raise ValueError(f"{name} of dtype object must hold ints or fractions.Fraction only")
        exact = True
    elif a.dtype == bool or np.issubdtype(a.dtype, np.integer):
        a = np.array([[int(x) for x in row] for row in a.tolist()], dtype=object).reshape(a.shape)
        exact = True
    elif np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
        if not np.isfinite(a).all():
            raise ValueError(f"{name} has non-finite entries")
        exact = False
    else:
        raise ValueError(f"{name} must be numeric, got dtype {a.dtype}")
    if a.size and any(x < 0 for x in a.flat):
        raise ValueError(f"{name} has negative entries; attack matrices are 0/1 or probabilities")
    return a, exact


def check_order(n: int, exact: bool, what: str) -> None:
    """Refuse a matrix of order n above the permanent's limit.

    Raises:
        ValueError: n > :data:`EXACT_MAX_N` for exact input, n > :data:`PERMANENT_MAX_N` for
            float input (Ryser is O(2^n·n)); ``what`` names the computation.
    """
    limit = EXACT_MAX_N if exact else PERMANENT_MAX_N
    if n > limit:
        kind = "exact (integer/Fraction)" if exact else "float"
        raise ValueError(f"{what} of a {kind} matrix is limited to n ≤ {limit} (Ryser is O(2^n·n)); got n = {n}")


# ---------------------------------------------------------------------------------------
# Ryser's formula


def permanent_exact(a: npt.NDArray[Any]) -> Number:
    """perm(A) = (-1)^n Σ_{S ⊆ cols} (-1)^{|S|} Π_i Σ_{j∈S} a_ij, Gray-code order, for an
    object (n, n) array of ints/Fractions: an exact int/Fraction, 1 for n = 0. No size check."""
    n = a.shape[0]
    if n == 0:
        return 1
    cols = [list(a[:, j]) for j in range(n)]
    rowsum: list[Any] = [0] * n
    total: Any = 0
    prev = 0
    for k in range(1, 1 << n):
        g = k ^ (k >> 1)
        j = (g ^ prev).bit_length() - 1
        prev = g
        col = cols[j]
        if g >> j & 1:
            rowsum = [x + y for x, y in zip(rowsum, col, strict=True)]
        else:
            rowsum = [x - y for x, y in zip(rowsum, col, strict=True)]
        prod: Any = 1
        for x in rowsum:
            if not x:
                prod = 0
                break
            prod *= x
        total = total - prod if g.bit_count() & 1 else total + prod
    return -total if n & 1 else total


def _subset_sums(b: npt.NDArray[np.longdouble]) -> npt.NDArray[np.longdouble]:
    """Row sums of every column subset of b (n, c): shape (2^c, n), bit j of the index = column j."""
    sums = np.zeros((1, b.shape[0]), dtype=np.longdouble)
    for j in range(b.shape[1]):
        sums = np.concatenate([sums, sums + b[:, j]])
    return sums


def _popcount_sign(c: int) -> npt.NDArray[np.longdouble]:
    """(-1)^{|S|} for every subset S of c columns, in the order of :func:`_subset_sums`."""
    sign = np.ones(1, dtype=np.longdouble)
    for _ in range(c):
        sign = np.concatenate([sign, -sign])
    return sign


def permanent_float(a: npt.NDArray[np.float64]) -> float:
    """Ryser's formula for a float (n, n) array, summed in ``np.longdouble``; no size check.

    The column subsets are split into two halves: the row sums of a subset are the sum of the
    row sums of its two halves, so each of the 2^(n-h) high subsets costs one (2^h, n) array
    operation instead of a Python loop over all 2^n subsets.
    """
    n = a.shape[0]
    if n == 0:
        return 1.0
    b = a.astype(np.longdouble)
    h = n // 2
    low, high = _subset_sums(b[:, :h]), _subset_sums(b[:, h:])
    sign_low, sign_high = _popcount_sign(h), _popcount_sign(n - h)
    total = np.longdouble(0)
    for s in range(high.shape[0]):
        total += sign_high[s] * np.dot(sign_low, np.prod(low + high[s], axis=1))
    return float(-total if n & 1 else total)


def permanent(p: npt.ArrayLike) -> Number:
    """Permanent of a square matrix (paper 002 §2.3 eq 2.1), by Ryser's formula.

    Args:
        p: non-negative (n, n) matrix: 0/1 (bool or integer) biadjacency matrix of an
            infeasibility attack, a float probability matrix, or an object array of
            ``Fraction``/``int`` for exact arithmetic.

    Returns:
        an ``int`` for integer input (the number of perfect matchings |𝓜(G)| of a 0/1 matrix),
        a ``Fraction`` for Fraction input, a ``float`` for float input. 1 for n = 0.

    Raises:
        ValueError: not square, negative or non-finite entries, or n above the limit:
            ``EXACT_MAX_N`` (14) for exact input, ``PERMANENT_MAX_N`` (20) for float input.

    Float input is summed in ``np.longdouble``; Ryser's alternating sum loses relative accuracy
    when the permanent is tiny compared with the row sums' products (near-singular matrices).
    """
    a, exact = square_matrix(p)
    check_order(a.shape[0], exact, "the permanent")
    return permanent_exact(a) if exact else permanent_float(a)


def minor(a: npt.NDArray[Any], i: int, j: int) -> npt.NDArray[Any]:
    """``a`` without row i and column j, shape (n − 1, n − 1)."""
    return np.delete(np.delete(a, i, axis=0), j, axis=1)


def permanent_of(a: npt.NDArray[Any], exact: bool) -> Number:
    """The permanent of a matrix already checked by :func:`square_matrix` (no size check)."""
    return permanent_exact(a) if exact else permanent_float(a)
