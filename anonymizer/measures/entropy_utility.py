"""Entropy-based utility of a table and its degradation by a release (Askari, Safavi-Naini &
Barker, CODASPY'12, paper 003 §4.2 eq 8–15).

U_max(A_i) = H_max(A_i) − H(A_i | the other attributes) per attribute, in bits; the table's
utility is their mean under the publisher's belief ℙ(A_i) (eq 14), and the degradation of a
release is Utility_T − Utility_T' (eq 15). How a generalized cell is read (the source leaves it
open) is in :func:`attribute_utilities`. Everything is per release and vectorized: every
entropy counts the records per key by sorting one int64 key per record (numpy's sort of 1M
keys takes about a tenth of a hash table's grouping), p + 1 sorts per table.
The mechanism's expected degradation (eq 16) is
:func:`anonymizer.measures.channel.mechanism_utility`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import row_keys, sorted_counts
from anonymizer.measures.channel import STOCHASTIC_TOL

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _entropy_of(counts: FloatArray) -> float:
    """Entropy in bits of the frequencies ``counts / counts.sum()`` (every count > 0)."""
    f = counts / counts.sum()
    return float(-(f * np.log2(f)).sum())


def _key_entropy(keys: IntArray) -> float:
    """Entropy in bits of the frequencies of the distinct values of ``keys`` (shape (R,), R ≥ 1):
    the lengths of the runs of equal keys once sorted."""
    return _entropy_of(sorted_counts(keys)[1].astype(np.float64))


def int_table(table: npt.ArrayLike, name: str) -> IntArray:
    """``table`` as an int64 array of shape (R records, p attributes), R, p ≥ 1.

    Raises:
        ValueError: not a non-empty 2-d array of non-negative integer codes (``name`` says which).
    """
    t = np.asarray(table)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (records, attributes) array, got shape {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"{name} must hold integer codes")
    if t.min() < 0:
        raise ValueError(f"{name} codes must be non-negative")
    return t.astype(np.int64, copy=False)  # no copy of int64 codes (the table is as long as the release)


LeafCounts = Sequence[npt.ArrayLike | None] | None


def _leaf_counts(leaf_counts: LeafCounts, t: IntArray) -> list[FloatArray | None]:
    if leaf_counts is None:
        return [None] * t.shape[1]
    if len(leaf_counts) != t.shape[1]:
        raise ValueError(f"leaf_counts must give one entry (array or None) per attribute ({t.shape[1]})")
    out: list[FloatArray | None] = []
    for i, lc in enumerate(leaf_counts):
        if lc is None:
            out.append(None)
            continue
        c = np.asarray(lc, dtype=np.float64)
        if c.ndim != 1 or c.size <= int(t[:, i].max()) or (c[t[:, i]] < 1).any():
            raise ValueError(f"leaf_counts[{i}] must map every code of attribute {i} to a leaf count ≥ 1")
        out.append(c)
    return out


def _rest_keys(rows: IntArray, radices: IntArray) -> tuple[IntArray, Callable[[int], IntArray]]:
    """A key per row of ``rows`` (n, p), equal iff the rows are, and a function giving, for
    attribute i, a key per row that is equal iff the rows agree on every attribute but i.

    While the radices' product stays below 2**62, the rows' mixed-radix number
    (:func:`anonymizer.arrays.row_keys`) minus attribute i's digit: one multiply-subtract
    per attribute instead of copying and re-encoding p − 1 columns, which was most of a
    table's cost. Beyond that, the other columns re-encoded.
    """
    p = rows.shape[1]
    full = row_keys(rows, radices.tolist())
    # exact integers: row_keys re-ranks (and the digits no longer add up) from 2**62 on
    if math.prod(int(r) for r in radices) < 2**62:
        mult = np.ones(p, dtype=np.int64)
        for j in range(p - 2, -1, -1):
            mult[j] = mult[j + 1] * radices[j + 1]
        return full, lambda i: full - rows[:, i] * mult[i]

    def encoded(i: int) -> IntArray:
        rest = np.delete(np.arange(p), i)
        return row_keys(rows[:, rest], radices[rest].tolist())

    return full, encoded


def attribute_utilities(
    table: npt.ArrayLike, domain_sizes: Sequence[int], leaf_counts: LeafCounts = None
) -> FloatArray:
    """U_max(A_i) = H_max(A_i) − H(A_i | all other attributes) per attribute, in bits
    (paper 003 §4.2 eq 13, with eq 8's H_max = log k).

    Entropies are of the table's empirical distribution (frequencies); log base 2 (the source
    leaves it open). H(A_i | rest) = H(all attributes) − H(rest), computed by hashing rows.

    Generalized tables (the source leaves H_max and the domain of a generalized attribute open,
    docs/reports.md D5). Our reading: H_max is log₂ of the *leaf* domain for original and published
    tables alike, and a generalized cell is read as uniform over the n leaves below its node
    (maximum entropy), the other attributes as shown. Then
    H'(A_i | rest) = H(node_i | rest) + mean over records of log₂ n(node_i), exactly. This reading
    only adds uncertainty, so under global recoding (every published value a function of the
    original value of its attribute, e.g. full-domain generalization, where the published rest is
    a coarsening of the original rest) Utility_T ≥ Utility_T' (degradation ≥ 0). Under local
    recoding (levels varying by record) a row can become distinguishable and the degradation can
    be negative. Without the spreading a column generalized to '*' would have zero conditional
    entropy and the *highest* utility.

    Args:
        table: integer codes, shape (R records, p attributes).
        domain_sizes: k_i per attribute (H_max = log₂ k_i), each ≥ 1: the leaf domain sizes.
        leaf_counts: per attribute None (codes are leaves) or an array mapping each code to
            the number of leaves it covers (e.g. ``Hierarchy.index.size`` for node ids).

    Returns:
        float64 array (p,).

    Raises:
        ValueError: malformed table, wrong number of domain sizes or leaf counts, a size < 1,
            or a code without a leaf count.
    """
    t = int_table(table, "table")
    k = np.asarray(domain_sizes, dtype=np.int64)
    if k.shape != (t.shape[1],) or (k < 1).any():
        raise ValueError(f"domain_sizes must give one size ≥ 1 per attribute ({t.shape[1]})")
    counts = _leaf_counts(leaf_counts, t)
    radices = t.max(axis=0) + 1
    r = t.shape[0]
    # every entropy is of one int64 key per record, counted by sorting: grouping the records
    # into distinct rows first and hashing those (600,000 of 1M) per attribute cost 7x more
    full, rest_keys = _rest_keys(t, radices)
    h_all = _key_entropy(full)
    out = np.empty(t.shape[1], dtype=np.float64)
    for i in range(t.shape[1]):
        h_rest = _key_entropy(rest_keys(i)) if t.shape[1] > 1 else 0.0
        c = counts[i]
        spread = 0.0
        if c is not None:  # the mean over records of log₂ n(node), by node: codes absent weigh 0
            per_code = np.bincount(t[:, i], minlength=c.size).astype(np.float64)
            present = per_code > 0
            spread = float(per_code[present] @ np.log2(c[present])) / r
        out[i] = math.log2(int(k[i])) - (h_all - h_rest + spread)
    return out


def attribute_weights(attribute_prior: npt.ArrayLike | None, p: int) -> FloatArray:
    """ℙ(A_i) of eq 14, shape (p,): ``attribute_prior`` checked, or uniform 1/p for None.

    Raises:
        ValueError: not p non-negative probabilities summing to 1 (within ``STOCHASTIC_TOL``).
    """
    if attribute_prior is None:
        return np.full(p, 1.0 / p)
    w = np.asarray(attribute_prior, dtype=np.float64)
    if w.shape != (p,) or (w < 0).any() or abs(w.sum() - 1.0) > STOCHASTIC_TOL:
        raise ValueError(f"attribute_prior must be {p} non-negative probabilities summing to 1")
    return w


def table_utility(
    table: npt.ArrayLike,
    domain_sizes: Sequence[int],
    attribute_prior: npt.ArrayLike | None = None,
    leaf_counts: LeafCounts = None,
) -> float:
    """Utility_T = Σ_i ℙ(A_i)·U_max(A_i) in bits (paper 003 §4.2 eq 14).

    Args:
        table, domain_sizes, leaf_counts: as :func:`attribute_utilities`.
        attribute_prior: ℙ(A_i), the publisher's belief that an application targets A_i,
            shape (p,); None = uniform.

    Raises:
        ValueError: as :func:`attribute_utilities`, or a bad attribute_prior.
    """
    u = attribute_utilities(table, domain_sizes, leaf_counts)
    return float(np.dot(attribute_weights(attribute_prior, u.size), u))


def utility_degradation(
    original: npt.ArrayLike,
    published: npt.ArrayLike,
    domain_sizes: Sequence[int],
    attribute_prior: npt.ArrayLike | None = None,
    published_leaf_counts: LeafCounts = None,
) -> float:
    """Utility_Deg(T, T') = Utility_T − Utility_T' in bits (paper 003 §4.2 eq 15).

    With the leaf-domain H_max for both tables (our reading, :func:`attribute_utilities`) this is
    Σ_i ℙ(A_i)·(H'_T'(A_i | rest) − H_T(A_i | rest)), ≥ 0 under global recoding. Lower is better.

    Args:
        original: T as leaf codes, shape (R, p); published: T' as generalized codes (e.g.
            hierarchy node ids), same shape, row i of T' published from row i of T.
        domain_sizes, attribute_prior: as :func:`table_utility`.
        published_leaf_counts: leaf counts of the published codes per attribute (None entries
            for attributes published intact), see :func:`attribute_utilities`.

    Raises:
        ValueError: shapes differ, or as :func:`table_utility`.
    """
    t, tp = int_table(original, "original"), int_table(published, "published")
    if t.shape != tp.shape:
        raise ValueError(f"original and published must have equal shapes, got {t.shape} and {tp.shape}")
    return table_utility(t, domain_sizes, attribute_prior) - table_utility(
        tp, domain_sizes, attribute_prior, published_leaf_counts
    )


__all__ = [
    "LeafCounts",
    "attribute_utilities",
    "attribute_weights",
    "int_table",
    "table_utility",
    "utility_degradation",
]
