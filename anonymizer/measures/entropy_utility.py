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
from anonymizer.measures.published import IdArray, PublishedNodes

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


def int_table(table: npt.ArrayLike, name: str) -> IdArray:
    """``table`` as an integer array of shape (R records, p attributes), R, p ≥ 1, in its own
    integer type (int64 for uint64): a table as long as the release is read, not copied.

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
    return t if t.dtype.kind == "i" or t.dtype.itemsize < 8 else t.astype(np.int64)


LeafCounts = Sequence[npt.ArrayLike | None] | None


def _leaf_counts(leaf_counts: LeafCounts, codes: Sequence[IdArray]) -> list[FloatArray | None]:
    """The leaf counts checked against ``codes``, per attribute the codes that occur (every
    record's, or every row's of a grouped table)."""
    if leaf_counts is None:
        return [None] * len(codes)
    if len(leaf_counts) != len(codes):
        raise ValueError(f"leaf_counts must give one entry (array or None) per attribute ({len(codes)})")
    out: list[FloatArray | None] = []
    for i, lc in enumerate(leaf_counts):
        if lc is None:
            out.append(None)
            continue
        c = np.asarray(lc, dtype=np.float64)
        if c.ndim != 1 or c.size <= int(codes[i].max()) or (c[codes[i]] < 1).any():
            raise ValueError(f"leaf_counts[{i}] must map every code of attribute {i} to a leaf count ≥ 1")
        out.append(c)
    return out


def _rest_keys(
    head: PublishedNodes, tail: Sequence[IdArray], radices: IntArray
) -> tuple[IntArray, Callable[[int], IntArray]]:
    """A key per record of the table ``head``'s columns then ``tail``'s, equal iff the rows
    are, and a function giving, for attribute i, a key per record that is equal iff the rows
    agree on every attribute but i.

    While the radices' product stays below 2**62, the rows' mixed-radix number
    (:func:`anonymizer.arrays.row_keys`) minus attribute i's digit: one multiply-subtract
    per attribute instead of copying and re-encoding p − 1 columns, which was most of a
    table's cost. ``head``'s part of the number is taken once per row of its table and spread
    to the records (the same integers). Beyond 2**62, the other columns re-encoded.
    """
    a = head.table.shape[1]
    p = a + len(tail)
    # exact integers: row_keys re-ranks (and the digits no longer add up) from 2**62 on
    if math.prod(int(r) for r in radices) >= 2**62:
        rows = np.column_stack([head.column(j) for j in range(a)] + list(tail))
        full = row_keys(rows, radices.tolist())

        def encoded(i: int) -> IntArray:
            rest = np.delete(np.arange(p), i)
            return row_keys(rows[:, rest], radices[rest].tolist())

        return full, encoded
    mult = np.ones(p, dtype=np.int64)
    for j in range(p - 2, -1, -1):
        mult[j] = mult[j + 1] * radices[j + 1]
    per_row = np.zeros(head.table.shape[0], dtype=np.int64)
    for j in range(a):
        per_row += head.table[:, j] * mult[j]
    rest_part: IntArray | None = None
    for i, col in enumerate(tail):
        term = col * mult[a + i]
        rest_part = term if rest_part is None else rest_part + term

    def spread(per: IntArray) -> IntArray:
        keys = per if head.group is None else per[head.group]
        return keys if rest_part is None else keys + rest_part

    full = spread(per_row)

    def rest_keys(i: int) -> IntArray:
        if i < a:
            return spread(per_row - head.table[:, i] * mult[i])
        return full - tail[i - a] * mult[i]

    return full, rest_keys


def attribute_utilities(
    table: npt.ArrayLike | PublishedNodes,
    domain_sizes: Sequence[int],
    leaf_counts: LeafCounts = None,
    tail: Sequence[npt.ArrayLike] = (),
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
        table: integer codes, shape (R records, p attributes); or the first attributes' codes
            held per QI-group (:class:`~anonymizer.measures.published.PublishedNodes`, e.g. a
            release's published nodes) and the rest in ``tail``.
        domain_sizes: k_i per attribute (H_max = log₂ k_i), each ≥ 1: the leaf domain sizes.
        leaf_counts: per attribute None (codes are leaves) or an array mapping each code to
            the number of leaves it covers (e.g. ``Hierarchy.index.size`` for node ids).
        tail: further attributes after ``table``'s, each the codes of the R records, shape (R,)
            (e.g. the sensitive attribute, without stacking a copy of the table).

    Returns:
        float64 array (p,).

    Raises:
        ValueError: malformed table or tail, wrong number of domain sizes or leaf counts, a
            size < 1, or a code without a leaf count.
    """
    head = table if isinstance(table, PublishedNodes) else PublishedNodes.per_record(int_table(table, "table"))
    if isinstance(table, PublishedNodes):
        int_table(table.table, "table")
        if table.group is not None and table.group.size == 0:
            raise ValueError("table must be a non-empty (records, attributes) array, got shape (0, ...)")
    r = head.shape[0]
    if any(np.shape(c) != (r,) for c in tail):
        raise ValueError(f"every tail column must hold the table's {r} records, shape ({r},)")
    ends = [int_table(np.asarray(c)[:, None], f"tail[{i}]")[:, 0] for i, c in enumerate(tail)]
    p = head.table.shape[1] + len(ends)
    k = np.asarray(domain_sizes, dtype=np.int64)
    if k.shape != (p,) or (k < 1).any():
        raise ValueError(f"domain_sizes must give one size ≥ 1 per attribute ({p})")
    present = head.present()
    codes = [present[:, j] for j in range(present.shape[1])] + ends
    counts = _leaf_counts(leaf_counts, codes)
    radices = np.array([int(c.max()) + 1 for c in codes], dtype=np.int64)
    # every entropy is of one int64 key per record, counted by sorting: grouping the records
    # into distinct rows first and hashing those (600,000 of 1M) per attribute cost 7x more
    full, rest_keys = _rest_keys(head, ends, radices)
    h_all = _key_entropy(full)
    out = np.empty(p, dtype=np.float64)
    for i in range(p):
        h_rest = _key_entropy(rest_keys(i)) if p > 1 else 0.0
        c = counts[i]
        spread = 0.0
        if c is not None:  # the mean over records of log₂ n(node), by node: codes absent weigh 0
            per_code = (
                head.node_counts(i, c.size)
                if i < head.table.shape[1]
                else np.bincount(ends[i - head.table.shape[1]], minlength=c.size)
            ).astype(np.float64)
            present_code = per_code > 0
            spread = float(per_code[present_code] @ np.log2(c[present_code])) / r
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
    table: npt.ArrayLike | PublishedNodes,
    domain_sizes: Sequence[int],
    attribute_prior: npt.ArrayLike | None = None,
    leaf_counts: LeafCounts = None,
    tail: Sequence[npt.ArrayLike] = (),
) -> float:
    """Utility_T = Σ_i ℙ(A_i)·U_max(A_i) in bits (paper 003 §4.2 eq 14).

    Args:
        table, domain_sizes, leaf_counts, tail: as :func:`attribute_utilities`.
        attribute_prior: ℙ(A_i), the publisher's belief that an application targets A_i,
            shape (p,); None = uniform.

    Raises:
        ValueError: as :func:`attribute_utilities`, or a bad attribute_prior.
    """
    u = attribute_utilities(table, domain_sizes, leaf_counts, tail)
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
