"""Disclosure risk after infeasibility and probabilistic attacks (Malik 2014, paper 002).

Malik's model (paper 002 §2.2, §3.1–3.2): n recorded entries R (individuals) and n
transformed entries T (published records) are in a secret one-to-one correspondence M_0.
An attacker either removes infeasible edges of K_{n,n} (a 0/1 biadjacency matrix A_G,
rows = individuals, columns = records) or weights all edges with a doubly stochastic
matrix P. A *crack* is an edge of a matching that is also in M_0. The measures:

- the permanent (eq 2.1), computed exactly with Ryser's formula (:mod:`.permanent`, with its
  size limits);
- the degree of anonymity d (Edman et al., eq 2.2);
- the expected cracks ε over the matchings of the attack graph (eq 2.3 / 4.1);
- the unified metric Ψ (eq 4.2): the expected cracks under the distribution that P induces on
  matchings, 𝒲(d) = w(d)/permanent(P); ε(G) = Ψ(A_G) (Theorem 4.1.1);
- the O(n) heuristic 𝓗 (eq 4.3): Σ_i P[i, m_i], the expected cracks over all n^n functions
  R → T (Theorem 4.3.1), which approximates Ψ;
- NMAPE (eq 4.5), the accuracy of 𝓗 against Ψ over every choice of M_0.

Ψ is computed through the posterior edge marginals (a [DERIVED] identity, docs/reports.md D1):
Ψ = Σ_i P[i, m_i]·permanent(P without row i, column m_i)/permanent(P),
that is n + 1 permanents instead of n! diagonals.

Exact rational arithmetic: pass an object array of ``fractions.Fraction`` (or Python ints),
or an integer/bool matrix, and the permanent, ε and Ψ come back as exact ``Fraction``/``int``.
Float matrices are computed in extended precision (``np.longdouble``) and returned as float.

A generalized release is a block-diagonal attack graph whose blocks have closed forms; its
figures are :mod:`.reidentification`'s, and :func:`block_psi` applies the general functions
here block by block to attack matrices that are not flat.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.measures.permanent import (
    Number,
    check_order,
    minor,
    permanent_exact,
    permanent_of,
    square_matrix,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Largest order for functions that enumerate all n! matchings (diagonal weights, NMAPE).
ENUMERATION_MAX_N = 8
#: Largest order for the crack histogram of eq 2.3 (2^n sub-permanents).
HISTOGRAM_MAX_N = 8
#: Tolerance of the doubly-stochastic check of float matrices.
STOCHASTIC_TOL = 1e-9


# ---------------------------------------------------------------------------------------
# validation


def _perm_vector(m0: npt.ArrayLike, n: int, name: str = "m0") -> IntArray:
    m = np.asarray(m0)
    if m.shape != (n,) or not (m.dtype == object or np.issubdtype(m.dtype, np.integer)):
        raise ValueError(f"{name} must be {n} integer column indices (the record of each individual)")
    m = m.astype(np.int64)
    if n and (np.sort(m) != np.arange(n)).any():
        raise ValueError(f"{name} must be a permutation of 0..{n - 1} (a one-to-one matching), got {m.tolist()}")
    return m


def _is_doubly_stochastic(a: npt.NDArray[Any], exact: bool) -> bool:
    n = a.shape[0]
    if exact:
        return all(sum(a[i, :]) == 1 for i in range(n)) and all(sum(a[:, j]) == 1 for j in range(n))
    return bool(
        np.allclose(a.sum(axis=1), 1.0, rtol=0, atol=STOCHASTIC_TOL)
        and np.allclose(a.sum(axis=0), 1.0, rtol=0, atol=STOCHASTIC_TOL)
    )


def _div(x: Number, y: Number, exact: bool) -> Number:
    return Fraction(x) / Fraction(y) if exact else float(x) / float(y)


# ---------------------------------------------------------------------------------------
# d, ε, Ψ, 𝓗


def degree_of_anonymity(a: npt.ArrayLike) -> float:
    """Edman–Sivrikaya–Yener degree of anonymity d(G) (paper 002 §2.5 eq 2.2).

    d = log|𝓜(G)| / log(n!) with |𝓜(G)| = permanent(A_G); d = 0 for n = 1. 1 is full anonymity
    (K_{n,n}), 0 is none (a single matching). Higher is safer.

    Args:
        a: 0/1 biadjacency matrix (n, n) of the attack graph G (rows individuals, columns records).

    Raises:
        ValueError: not a 0/1 square matrix, n = 0, the graph has no perfect matching, or n > 14.
    """
    m, _ = square_matrix(a, "A_G")
    n = m.shape[0]
    if n == 0:
        raise ValueError("A_G is empty; d needs n ≥ 1")
    if any(x not in (0, 1) for x in m.flat):
        raise ValueError("A_G must be a 0/1 biadjacency matrix")
    m = m.astype(object)
    check_order(n, True, "d")
    if n == 1:
        return 0.0
    count = permanent_exact(m)
    if count == 0:
        raise ValueError("the attack graph has no perfect matching; it cannot contain M_0")
    return math.log(count) / math.lgamma(n + 1)


def match_marginals(p: npt.ArrayLike) -> npt.NDArray[Any]:
    """Posterior edge probabilities of the matching distribution P induces (paper 002 §3.2).

    ``q[i, j]`` = Σ of 𝒲(d) over the diagonals d containing cell (i, j)
    = P[i, j]·permanent(P without row i, column j)/permanent(P) ([DERIVED], docs/reports.md D1).
    Each row and column of q sums to 1. Ψ_μ(P) = Σ_i q[i, μ(i)] for every M_0 = μ.

    Args:
        p: non-negative (n, n) matrix (0/1, float or Fraction), see :func:`~anonymizer.measures.permanent.permanent`.

    Returns:
        (n, n) float array, or object array of Fractions for exact input.

    Raises:
        ValueError: as :func:`~anonymizer.measures.permanent.permanent`, or permanent(P) = 0 (no
            diagonal has positive weight).
        Costs n² + 1 permanents of order n − 1.
    """
    a, exact = square_matrix(p)
    n = a.shape[0]
    check_order(n, exact, "the match marginals")
    total = permanent_of(a, exact)
    if total == 0:
        raise ValueError("permanent(P) = 0: no matching has positive weight, Ψ is undefined")
    q = np.empty((n, n), dtype=object if exact else np.float64)
    for i in range(n):
        for j in range(n):
            q[i, j] = _div(a[i, j] * permanent_of(minor(a, i, j), exact), total, exact) if a[i, j] else 0
    return q


def psi(p: npt.ArrayLike, m0: npt.ArrayLike) -> Number:
    """Malik's unified disclosure metric Ψ(P) (paper 002 §4.1 eq 4.2).

    Ψ(P) = Σ_d 𝒲(d)·C(m(d)): the expected number of cracks (edges shared with M_0) of a
    matching drawn from the distribution P induces, 𝒲(d) = w(d)/permanent(P). For a 0/1 A_G it
    is the expected cracks ε(G) (Theorem 4.1.1). Lower is safer; range [0, n].

    Args:
        p: non-negative (n, n) attack matrix, rows individuals (recorded entries), columns
            records (transformed entries); 0/1, float or Fraction (exact result).
        m0: M_0 as the record (column) of each individual, a permutation of 0..n-1, shape (n,).

    Returns:
        Ψ as Fraction (exact input) or float.

    Raises:
        ValueError: bad shapes, m0 not a permutation, permanent(P) = 0, or n above the
            permanent's limit. Costs n + 1 permanents.
    """
    a, exact = square_matrix(p)
    n = a.shape[0]
    m = _perm_vector(m0, n)
    check_order(n, exact, "Ψ")
    total = permanent_of(a, exact)
    if total == 0:
        raise ValueError("permanent(P) = 0: no matching has positive weight, Ψ is undefined")
    acc: Any = 0
    for i in range(n):
        if a[i, m[i]]:
            acc += a[i, m[i]] * permanent_of(minor(a, i, int(m[i])), exact)
    return _div(acc, total, exact)


def heuristic(p: npt.ArrayLike, m0: npt.ArrayLike) -> Number:
    """Malik's O(n) heuristic 𝓗(P) = Σ_i P[i, m_i] (paper 002 §4.3 eq 4.3).

    The expected cracks over all n^n functions R → T weighted by their slice weights
    (Theorem 4.3.1); an estimate of Ψ. Defined for doubly stochastic P (§3.1).

    Args:
        p: doubly stochastic (n, n) matrix (float or Fraction).
        m0: M_0 as the record (column) of each individual, a permutation, shape (n,).

    Raises:
        ValueError: bad shapes, m0 not a permutation, or P not doubly stochastic (float
            tolerance ``STOCHASTIC_TOL``), e.g. the thesis's Fig 3.4(b) Q as printed, whose
            Tuberculosis row and y column sum to 1.03 (erratum, docs/reports.md D2).
    """
    a, exact = square_matrix(p)
    m = _perm_vector(m0, a.shape[0])
    if not _is_doubly_stochastic(a, exact):
        raise ValueError("𝓗 needs a doubly stochastic P (every row and column sums to 1)")
    vals = [a[i, m[i]] for i in range(a.shape[0])]
    return sum(vals, Fraction(0)) if exact else float(np.sum(vals))


def expected_cracks(a: npt.ArrayLike, m0: npt.ArrayLike) -> Fraction:
    """Lakshmanan–Ng–Ramesh expected cracks ε(G) (paper 002 §2.5 eq 2.3, §4.1 eq 4.1).

    The mean crack count C(M) over the matchings M of the attack graph G, computed as Ψ(A_G)
    (Theorem 4.1.1). Lower is safer.

    Args:
        a: 0/1 biadjacency matrix (n, n), rows individuals, columns records.
        m0: M_0 as the record of each individual, a permutation; it must be a matching of G
            (the source assumes the attacker's infeasibility analysis is correct, §2.3).

    Returns:
        ε as an exact Fraction (e.g. 28/18 = 14/9 for the §2.4 example).

    Raises:
        ValueError: not 0/1, m0 not a permutation or not contained in G, or n > 14.
    """
    m, _ = square_matrix(a, "A_G")
    if any(x not in (0, 1) for x in m.flat):
        raise ValueError("A_G must be a 0/1 biadjacency matrix")
    m = m.astype(object)
    mu = _perm_vector(m0, m.shape[0])
    if any(m[i, mu[i]] == 0 for i in range(m.shape[0])):
        raise ValueError("M_0 is not contained in the attack graph G (A_G[i, m0[i]] = 0 for some i)")
    return Fraction(psi(m, mu))


def crack_histogram(a: npt.ArrayLike, m0: npt.ArrayLike) -> IntArray:
    """Number of matchings of G with exactly c cracks, c = 0..n (paper 002 §2.5, eq 2.3).

    Built as the source does: for every set S of c individuals, the matchings whose cracks are
    exactly S are counted by permanent(A_{G(S)}), G(S) = G without S, their M_0 records and
    every other M_0 edge. The entry c = n − 1 is always 0.

    Args:
        a: 0/1 biadjacency matrix (n, n); m0: M_0 as a permutation, shape (n,).

    Returns:
        int64 array (n + 1,); it sums to permanent(A_G), and Σ c·h[c]/Σ h = ε.

    Raises:
        ValueError: not 0/1, m0 not a permutation, or n > ``HISTOGRAM_MAX_N`` (8).
    """
    m, _ = square_matrix(a, "A_G")
    if any(x not in (0, 1) for x in m.flat):
        raise ValueError("A_G must be a 0/1 biadjacency matrix")
    n = m.shape[0]
    mu = _perm_vector(m0, n)
    if n > HISTOGRAM_MAX_N:
        raise ValueError(f"the crack histogram enumerates 2^n row sets; limited to n ≤ {HISTOGRAM_MAX_N}, got {n}")
    hist = np.zeros(n + 1, dtype=np.int64)
    for c in range(n + 1):
        for s in itertools.combinations(range(n), c):
            if any(m[i, mu[i]] == 0 for i in s):
                continue
            rest = [i for i in range(n) if i not in s]
            cols = [j for j in range(n) if j not in {int(mu[i]) for i in s}]
            sub = m[np.ix_(rest, cols)].astype(object)
            for r, i in enumerate(rest):  # remove the other cracked edges
                sub[r, cols.index(int(mu[i]))] = 0
            hist[c] += int(permanent_exact(sub))
    return hist


def _permutations(n: int) -> IntArray:
    if n > ENUMERATION_MAX_N:
        raise ValueError(f"enumerating all n! matchings is limited to n ≤ {ENUMERATION_MAX_N}, got n = {n}")
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64).reshape(-1, n)


def diagonal_weights(p: npt.ArrayLike) -> tuple[IntArray, npt.NDArray[Any]]:
    """Every diagonal (matching) of P with its normalized weight 𝒲(d) = w(d)/permanent(P)
    (paper 002 §3.2, Prop 3.2.2: the weights sum to 1).

    Args:
        p: non-negative (n, n) matrix, n ≤ ``ENUMERATION_MAX_N`` (8).

    Returns:
        (perms, weights): perms (n!, n) int64, row d gives the column of each row i;
        weights (n!,) float64, or object Fractions for exact input.

    Raises:
        ValueError: bad matrix, n > 8, or permanent(P) = 0.
    """
    a, exact = square_matrix(p)
    perms = _permutations(a.shape[0])
    rows = np.arange(a.shape[0])
    w = [math.prod(a[rows, d].tolist()) for d in perms]
    total = sum(w)
    if total == 0:
        raise ValueError("permanent(P) = 0: no diagonal has positive weight")
    if exact:
        return perms, np.array([Fraction(x) / Fraction(total) for x in w], dtype=object)
    return perms, np.asarray(w, dtype=np.float64) / float(total)


def psi_heuristic_curves(p: npt.ArrayLike) -> tuple[IntArray, FloatArray, FloatArray]:
    """Ψ_μ(P) and 𝓗_μ(P) for every choice μ of M_0 (paper 002 §4.4, Fig 4.1).

    Args:
        p: doubly stochastic (n, n) matrix, n ≤ ``ENUMERATION_MAX_N`` (8).

    Returns:
        (perms (n!, n), psi (n!,), h (n!,)) as float64. Σ psi = Σ h = n! (Theorem 4.4.2).

    Raises:
        ValueError: not doubly stochastic, n > 8, or permanent(P) = 0.
    """
    a, exact = square_matrix(p)
    if not _is_doubly_stochastic(a, exact):
        raise ValueError("𝓗 needs a doubly stochastic P (every row and column sums to 1)")
    perms = _permutations(a.shape[0])
    q = np.asarray(match_marginals(a), dtype=np.float64)
    af = np.asarray(a, dtype=np.float64)
    rows = np.arange(a.shape[0])
    return perms, q[rows, perms].sum(axis=1), af[rows, perms].sum(axis=1)


def nmape(p: npt.ArrayLike) -> float:
    """Normalized mean absolute percentage error of 𝓗 against Ψ (paper 002 §4.4 eq 4.5).

    NMAPE(P) = (1/n!)·Σ_μ |𝓗_μ(P) − Ψ_μ(P)|/n × 100 over all n! choices μ of M_0.

    Args:
        p: doubly stochastic (n, n) matrix, n ≤ ``ENUMERATION_MAX_N`` (8).

    Returns:
        percent in [0, 100]; 0 for the uniform matrix and for permutation matrices (§4.4).

    Raises:
        ValueError: as :func:`psi_heuristic_curves`.
    """
    perms, ps, hs = psi_heuristic_curves(p)
    n = perms.shape[1]
    return float(np.abs(hs - ps).sum() / (perms.shape[0] * n) * 100.0)


def block_psi(blocks: Sequence[npt.ArrayLike], m0s: Sequence[npt.ArrayLike]) -> Number:
    """Ψ of a block-diagonal attack matrix as the sum of its blocks' Ψ (docs/reports.md D3, [DERIVED]).

    The permanent of a block-diagonal matrix factorizes over the blocks and a diagonal with
    positive weight stays inside them, so the induced matching distribution is a product and
    the expected cracks add up. This is the per-equivalence-class decomposition of a
    generalized release; each block must be within the permanent's limit.

    Args:
        blocks: the (s_b, s_b) attack matrix of every block (e.g. one per QI-group).
        m0s: M_0 inside each block, a permutation of 0..s_b-1.

    Raises:
        ValueError: unequal numbers of blocks and matchings, or any block failing :func:`psi`.
    """
    if len(blocks) != len(m0s):
        raise ValueError(f"{len(blocks)} blocks but {len(m0s)} matchings")
    total: Any = 0
    for b, m in zip(blocks, m0s, strict=True):
        total = total + psi(b, m)
    return total
