"""Disclosure risk after infeasibility and probabilistic attacks (Malik 2014, paper 002).

Malik's model (paper 002 §2.2, §3.1–3.2): n recorded entries R (individuals) and n
transformed entries T (published records) are in a secret one-to-one correspondence M_0.
An attacker either removes infeasible edges of K_{n,n} (a 0/1 biadjacency matrix A_G,
rows = individuals, columns = records) or weights all edges with a doubly stochastic
matrix P. A *crack* is an edge of a matching that is also in M_0. The measures:

- the permanent (eq 2.1), computed exactly with Ryser's formula (size limits below);
- the degree of anonymity d (Edman et al., eq 2.2);
- the expected cracks ε over the matchings of the attack graph (eq 2.3 / 4.1);
- the unified metric Ψ (eq 4.2): the expected cracks under the distribution that P induces on
  matchings, 𝒲(d) = w(d)/permanent(P); ε(G) = Ψ(A_G) (Theorem 4.1.1);
- the O(n) heuristic 𝓗 (eq 4.3): Σ_i P[i, m_i], the expected cracks over all n^n functions
  R → T (Theorem 4.3.1), which approximates Ψ;
- NMAPE (eq 4.5), the accuracy of 𝓗 against Ψ over every choice of M_0.

Ψ is computed through the posterior edge marginals (a [DERIVED] identity, notes §A.3
PSI_BY_MARGINALS): Ψ = Σ_i P[i, m_i]·permanent(P without row i, column m_i)/permanent(P),
that is n + 1 permanents instead of n! diagonals.

Exact rational arithmetic: pass an object array of ``fractions.Fraction`` (or Python ints),
or an integer/bool matrix, and the permanent, ε and Ψ come back as exact ``Fraction``/``int``.
Float matrices are computed in extended precision (``np.longdouble``) and returned as float.

**Releases (block decomposition, notes §A.6, [DERIVED]).** A QI-group (equivalence class)
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
limit is needed for these closed forms; the exact permanent-based functions below (with
their limits) are for attack matrices that are not flat, e.g. an adversary who knows some
individuals' sensitive values, and :func:`block_psi` applies them block by block.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize
from anonymizer.measures.base import Measure

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Number = Any  # int | Fraction | float: exact inputs give exact results

#: Largest order of a float matrix whose permanent is computed (Ryser, O(2^n·n) per call).
PERMANENT_MAX_N = 20
#: Largest order of an exact (integer/Fraction) matrix: pure-Python Ryser, O(2^n·n).
EXACT_MAX_N = 14
#: Largest order for functions that enumerate all n! matchings (diagonal weights, NMAPE).
ENUMERATION_MAX_N = 8
#: Largest order for the crack histogram of eq 2.3 (2^n sub-permanents).
HISTOGRAM_MAX_N = 8
#: Tolerance of the doubly-stochastic check of float matrices.
STOCHASTIC_TOL = 1e-9

SOURCE = "Malik 2014 (paper 002)"


# ---------------------------------------------------------------------------------------
# validation


def _matrix(p: npt.ArrayLike, name: str = "P") -> tuple[npt.NDArray[Any], bool]:
    """A square non-negative matrix and whether it is exact (ints/Fractions)."""
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


def _perm_vector(m0: npt.ArrayLike, n: int, name: str = "m0") -> IntArray:
    m = np.asarray(m0)
    if m.shape != (n,) or not (m.dtype == object or np.issubdtype(m.dtype, np.integer)):
        raise ValueError(f"{name} must be {n} integer column indices (the record of each individual)")
    m = m.astype(np.int64)
    if n and (np.sort(m) != np.arange(n)).any():
        raise ValueError(f"{name} must be a permutation of 0..{n - 1} (a one-to-one matching), got {m.tolist()}")
    return m


def _check_limit(n: int, exact: bool, what: str) -> None:
    limit = EXACT_MAX_N if exact else PERMANENT_MAX_N
    if n > limit:
        kind = "exact (integer/Fraction)" if exact else "float"
        raise ValueError(f"{what} of a {kind} matrix is limited to n ≤ {limit} (Ryser is O(2^n·n)); got n = {n}")


def _is_doubly_stochastic(a: npt.NDArray[Any], exact: bool) -> bool:
    n = a.shape[0]
    if exact:
        return all(sum(a[i, :]) == 1 for i in range(n)) and all(sum(a[:, j]) == 1 for j in range(n))
    return bool(
        np.allclose(a.sum(axis=1), 1.0, rtol=0, atol=STOCHASTIC_TOL)
        and np.allclose(a.sum(axis=0), 1.0, rtol=0, atol=STOCHASTIC_TOL)
    )


# ---------------------------------------------------------------------------------------
# permanent (eq 2.1) by Ryser's formula


def _ryser_exact(a: npt.NDArray[Any]) -> Number:
    """perm(A) = (-1)^n Σ_{S ⊆ cols} (-1)^{|S|} Π_i Σ_{j∈S} a_ij, Gray-code order (exact)."""
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


def _ryser_float(a: npt.NDArray[np.float64]) -> float:
    """Ryser's formula with the column subsets split into two halves: the row sums of a subset
    are the sum of the row sums of its two halves, so each of the 2^(n-h) high subsets costs one
    (2^h, n) array operation instead of a Python loop over all 2^n subsets."""
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
    a, exact = _matrix(p)
    _check_limit(a.shape[0], exact, "the permanent")
    return _ryser_exact(a) if exact else _ryser_float(a)


def _minor(a: npt.NDArray[Any], i: int, j: int) -> npt.NDArray[Any]:
    return np.delete(np.delete(a, i, axis=0), j, axis=1)


def _perm(a: npt.NDArray[Any], exact: bool) -> Number:
    return _ryser_exact(a) if exact else _ryser_float(a)


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
    m, _ = _matrix(a, "A_G")
    n = m.shape[0]
    if n == 0:
        raise ValueError("A_G is empty; d needs n ≥ 1")
    if any(x not in (0, 1) for x in m.flat):
        raise ValueError("A_G must be a 0/1 biadjacency matrix")
    m = m.astype(object)
    _check_limit(n, True, "d")
    if n == 1:
        return 0.0
    count = _ryser_exact(m)
    if count == 0:
        raise ValueError("the attack graph has no perfect matching; it cannot contain M_0")
    return math.log(count) / math.lgamma(n + 1)


def match_marginals(p: npt.ArrayLike) -> npt.NDArray[Any]:
    """Posterior edge probabilities of the matching distribution P induces (paper 002 §3.2).

    ``q[i, j]`` = Σ of 𝒲(d) over the diagonals d containing cell (i, j)
    = P[i, j]·permanent(P without row i, column j)/permanent(P) ([DERIVED], notes §A.3).
    Each row and column of q sums to 1. Ψ_μ(P) = Σ_i q[i, μ(i)] for every M_0 = μ.

    Args:
        p: non-negative (n, n) matrix (0/1, float or Fraction), see :func:`permanent`.

    Returns:
        (n, n) float array, or object array of Fractions for exact input.

    Raises:
        ValueError: as :func:`permanent`, or permanent(P) = 0 (no diagonal has positive weight).
        Costs n² + 1 permanents of order n − 1.
    """
    a, exact = _matrix(p)
    n = a.shape[0]
    _check_limit(n, exact, "the match marginals")
    total = _perm(a, exact)
    if total == 0:
        raise ValueError("permanent(P) = 0: no matching has positive weight, Ψ is undefined")
    q = np.empty((n, n), dtype=object if exact else np.float64)
    for i in range(n):
        for j in range(n):
            q[i, j] = _div(a[i, j] * _perm(_minor(a, i, j), exact), total, exact) if a[i, j] else 0
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
    a, exact = _matrix(p)
    n = a.shape[0]
    m = _perm_vector(m0, n)
    _check_limit(n, exact, "Ψ")
    total = _perm(a, exact)
    if total == 0:
        raise ValueError("permanent(P) = 0: no matching has positive weight, Ψ is undefined")
    acc: Any = 0
    for i in range(n):
        if a[i, m[i]]:
            acc += a[i, m[i]] * _perm(_minor(a, i, int(m[i])), exact)
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
            Tuberculosis row and y column sum to 1.03 (erratum, notes §A.4.5).
    """
    a, exact = _matrix(p)
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
    m, _ = _matrix(a, "A_G")
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
    m, _ = _matrix(a, "A_G")
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
            hist[c] += int(_ryser_exact(sub))
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
    a, exact = _matrix(p)
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
    a, exact = _matrix(p)
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
    """Ψ of a block-diagonal attack matrix as the sum of its blocks' Ψ (notes §A.6, [DERIVED]).

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


# ---------------------------------------------------------------------------------------
# releases


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


def release_disclosure(
    group: npt.ArrayLike, value: npt.ArrayLike, candidates: npt.ArrayLike | None = None
) -> ReleaseDisclosure:
    """Malik's measures for a generalized release by per-class blocks (paper 002, notes §A.6).

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


def summary(group: npt.ArrayLike, value: npt.ArrayLike, candidates: npt.ArrayLike | None = None) -> list[Measure]:
    """Malik's disclosure-risk figures of a release, for the report.

    Args: as :func:`release_disclosure` (per-record ``group`` and sensitive ``value`` codes,
    shape (R,); optional ``candidates`` n_j per group for virtual dilution).

    Returns:
        Measures: expected re-identifications Ψ (= ε = 𝓗 under the flat block model), the
        re-identification rate Ψ/R, the heuristic 𝓗, the largest per-record re-identification
        probability max_j 1/n_j, the degree of anonymity d, and the [DERIVED] expected
        sensitive-value cracks and their rate. Every figure is exact (closed form) at any
        release size, so nothing is left not computed; the assumptions are in the notes.

    Raises:
        ValueError: as :func:`release_disclosure`.
    """
    rd = release_disclosure(group, value, candidates)
    total_r = int(rd.records.sum())
    psi_total = float(rd.psi.sum())
    nonempty = rd.records > 0
    model = (
        "flat QI-linkage attack: each QI-group is a complete block between its records and its "
        + (
            "n_j candidates (virtual dilution; matches to non-released candidates are no cracks)"
            if candidates is not None
            else "records (n_j = r_j, Malik's bijection)"
        )
        + "; attacker knows exact QIs, no sensitive values"
    )
    out = [
        Measure(
            name="expected re-identifications Ψ",
            value=psi_total,
            unit="records",
            source=f"{SOURCE} §4.1 eq 4.2, Thm 4.1.1 (Ψ = ε); per-class blocks, notes §A.6",
            note=f"Σ_j r_j/n_j over {int(nonempty.sum())} QI-groups; lower is safer; {model}",
        ),
        Measure(
            name="re-identification rate Ψ/R",
            value=psi_total / total_r,
            unit="fraction",
            source=f"{SOURCE} §4.1 eq 4.2",
            note=f"expected cracks per published record (R = {total_r}); ≈ 1/mean class size without dilution",
        ),
        Measure(
            name="heuristic 𝓗",
            value=psi_total,
            unit="records",
            source=f"{SOURCE} §4.3 eq 4.3",
            note="Σ_i P[i, m_i] with P[i, m_i] = 1/n_j; equals Ψ here (uniform blocks: NMAPE = 0, §4.4)",
        ),
        Measure(
            name="max per-record re-identification probability",
            value=float(1.0 / rd.candidates[nonempty].min()),
            unit="probability",
            source=f"{SOURCE} §3.2 (edge marginal of the induced matching distribution)",
            note="1/min_j n_j over non-empty QI-groups: chance the attacker's matching names a record's individual",
        ),
        Measure(
            name="degree of anonymity d",
            value=rd.degree_of_anonymity,
            unit="fraction",
            source=f"{SOURCE} §2.5 eq 2.2 (Edman et al.)",
            note="log|𝓜(G)|/log|𝓜(K)|, matchings = injections of records into candidates; higher is safer",
        ),
        Measure(
            name="expected sensitive-value cracks",
            value=float(rd.value_cracks.sum()),
            unit="records",
            source=f"{SOURCE} §4.1 eq 4.2 with the crack relation widened to equal sensitive values [DERIVED]",
            note="Σ_j Σ_s c_js²/n_j: individuals matched to a record carrying their own sensitive value",
        ),
        Measure(
            name="sensitive-value crack rate",
            value=float(rd.value_cracks.sum()) / total_r,
            unit="fraction",
            source=f"{SOURCE} §4.1 eq 4.2 [DERIVED]",
            note="expected sensitive-value cracks per published record",
        ),
    ]
    return out


__all__ = [
    "ENUMERATION_MAX_N",
    "EXACT_MAX_N",
    "HISTOGRAM_MAX_N",
    "PERMANENT_MAX_N",
    "ReleaseDisclosure",
    "block_psi",
    "crack_histogram",
    "degree_of_anonymity",
    "diagonal_weights",
    "expected_cracks",
    "heuristic",
    "match_marginals",
    "nmape",
    "permanent",
    "psi",
    "psi_heuristic_curves",
    "release_disclosure",
    "summary",
]
