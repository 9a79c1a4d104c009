"""Information-theoretic privacy and utility of a sanitization mechanism
(Askari, Safavi-Naini & Barker, CODASPY'12, paper 003).

The mechanism is a noisy channel (paper 003 §3): its input is the original table T, its output
the published table T', its matrix ℙ(T'|T). Privacy is the adversary's error (Bayes risk) when
guessing T from T' with the MAP rule (§4.1 eq 1–7); utility is entropy based (§4.2 eq 8–20);
k-anonymity by full-domain generalization is one such channel (§5).

Corrections of the source (notes seed002_003.md §B.9), implemented here:

- eq 3 as printed maximizes the posterior ℙ(T|T'); the consistent form (eq 2, eq 5, the bounds
  and the Appendix example) is Error_f = 1 − (1/n) Σ_{T'} max_T ℙ(T'|T), column maxima of the
  channel matrix;
- eq 7 lacks the minus sign: H(T|T') = −Σ_{T'} ℙ(T') Σ_T ℙ(T|T') log₂ ℙ(T|T') (base 2, as the
  bound 2^{−H} of eq 6 implies);
- eq 25 (number of k-anonymous tables) ignores the remainder when k does not divide r; the
  corrected count is :func:`kanonymous_table_count` (the printed form is kept as an option).

Size limits. The channel is exponential in the instance: |T| = C(Π|A_i| + r − 1, r) input
tables (eq 21) and a similar number of outputs. :func:`kanonymity_channel` enumerates at most
``MAX_INPUT_TABLES`` inputs and ``MAX_CHANNEL_CELLS`` matrix cells; a real release (r in the
thousands or millions) is far beyond, so :func:`summary` reports the Bayes risk as not computed
and gives the factorized per-cell figures instead, which are exact under the conditions stated
in :func:`factorized_privacy`. The utility measures are per release and O(R·p) (vectorized).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from anonymizer.arrays import factorize, row_keys
from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.base import Measure, not_computed

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Largest number of possible input tables :func:`kanonymity_channel` enumerates.
MAX_INPUT_TABLES = 20_000
#: Largest dense channel matrix (|T| × |T'| cells).
MAX_CHANNEL_CELLS = 4_000_000
#: Tolerance of the row-sum check of float channel matrices.
STOCHASTIC_TOL = 1e-9

SOURCE = "Askari, Safavi-Naini & Barker 2012 (paper 003)"


# ---------------------------------------------------------------------------------------
# channel privacy (§4.1)


def _channel(channel: npt.ArrayLike) -> tuple[npt.NDArray[Any], bool]:
    a = np.asarray(channel)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"the channel must be a non-empty (inputs, outputs) matrix, got shape {a.shape}")
    if a.dtype == object:
        if not all(isinstance(x, (int, Fraction)) for x in a.flat):
            raise ValueError("a channel of dtype object must hold ints or fractions.Fraction only")
        exact = True
        ok = all(sum(row) == 1 for row in a)
    else:
        if not np.issubdtype(a.dtype, np.number):
            raise ValueError(f"the channel must be numeric, got dtype {a.dtype}")
        a = a.astype(np.float64)
        if not np.isfinite(a).all():
            raise ValueError("the channel has non-finite entries")
        exact = False
        ok = bool(np.allclose(a.sum(axis=1), 1.0, rtol=0, atol=STOCHASTIC_TOL))
    if any(x < 0 for x in a.flat):
        raise ValueError("the channel has negative probabilities")
    if not ok:
        raise ValueError("every row ℙ(·|T) of the channel must sum to 1")
    return a, exact


def _prior(prior: npt.ArrayLike | None, n: int, exact: bool) -> npt.NDArray[Any]:
    if prior is None:
        return np.array([Fraction(1, n)] * n, dtype=object) if exact else np.full(n, 1.0 / n)
    p = np.asarray(prior)
    if p.shape != (n,):
        raise ValueError(f"the prior must have one probability per input table, shape ({n},), got {p.shape}")
    if p.dtype == object:
        if not all(isinstance(x, (int, Fraction)) for x in p.flat):
            raise ValueError("a prior of dtype object must hold ints or fractions.Fraction only")
        total_ok = sum(p) == 1
    else:
        p = p.astype(np.float64)
        total_ok = bool(np.isfinite(p).all() and abs(p.sum() - 1.0) <= STOCHASTIC_TOL)
    if any(x < 0 for x in p.flat) or not total_ok:
        raise ValueError("the prior must be non-negative and sum to 1")
    if exact and p.dtype != object:
        raise ValueError("an exact (Fraction) channel needs an exact prior or None")
    return p


def privacy_error(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> Any:
    """The adversary's MAP error of guessing the input table, the privacy of the mechanism
    (paper 003 §4.1 eq 5; eq 3 with the ERRATUM for the uniform prior).

    Error_f = 1 − Σ_{T'} max_T ℙ(T'|T)·ℙ(T); for the uniform prior 1 − (1/n) Σ_{T'} max_T ℙ(T'|T).
    Higher is more private; in [1 − m/n, 1 − 1/n] under the uniform prior (see :func:`error_bounds`).

    Args:
        channel: ℙ(T'|T), shape (n inputs, m outputs), rows sum to 1; float, or an object
            array of Fractions for an exact result.
        prior: ℙ(T), shape (n,), the adversary's background knowledge; None = uniform (no knowledge).

    Returns:
        Fraction for exact input, else float.

    Raises:
        ValueError: malformed channel or prior.
    """
    a, exact = _channel(channel)
    p = _prior(prior, a.shape[0], exact)
    best = (a * p[:, None]).max(axis=0)
    return 1 - sum(best) if exact else float(1.0 - best.sum())


def error_bounds(n_inputs: int, n_outputs: int) -> tuple[float, float]:
    """Bounds on the uniform-prior error (paper 003 §4.1): max(0, 1 − m/n) ≤ Error_f ≤ 1 − 1/n.

    The source states 1 − m/n, which assumes m ≤ n outputs (ERRATUM, notes §B.9 item 4); the
    lower bound is clipped at 0 otherwise.

    Raises:
        ValueError: a count below 1.
    """
    if n_inputs < 1 or n_outputs < 1:
        raise ValueError("the channel needs at least one input and one output")
    return max(0.0, 1.0 - n_outputs / n_inputs), 1.0 - 1.0 / n_inputs


def posterior(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """ℙ(T') and the posterior ℙ(T|T') by Bayes (paper 003 §4.1).

    Returns:
        (p_out (m,), post (n, m)); a column of an output with ℙ(T') = 0 is all zeros.

    Raises:
        ValueError: malformed channel or prior.
    """
    a, exact = _channel(channel)
    p = _prior(prior, a.shape[0], exact)
    joint = np.asarray(a * p[:, None], dtype=np.float64)
    p_out = joint.sum(axis=0)
    post = np.divide(joint, p_out, out=np.zeros_like(joint), where=p_out > 0)
    return p_out, post


def map_decision(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> IntArray:
    """The MAP guess f(T') = argmax_T ℙ(T'|T)ℙ(T) for every output (paper 003 §3.1), shape (m,);
    ties go to the lowest input index. Raises ValueError for a malformed channel or prior."""
    a, exact = _channel(channel)
    p = _prior(prior, a.shape[0], exact)
    return np.asarray(np.argmax(np.asarray(a * p[:, None], dtype=np.float64), axis=0), dtype=np.int64)


def conditional_entropy(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> float:
    """H(T|T') in bits (paper 003 §4.1 eq 7 with the ERRATUM's minus sign).

    Raises:
        ValueError: malformed channel or prior.
    """
    p_out, post = posterior(channel, prior)
    joint = post * p_out
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(joint > 0, joint * np.log2(np.where(post > 0, post, 1.0)), 0.0)
    return float(-terms.sum())


def santhi_vardy_bound(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> float:
    """Upper bound 1 − 2^{−H(T|T')} on the MAP error (paper 003 §4.1 eq 6, Santhi–Vardy).
    Raises ValueError for a malformed channel or prior."""
    return 1.0 - 2.0 ** (-conditional_entropy(channel, prior))


def mutual_information(channel: npt.ArrayLike, prior: npt.ArrayLike | None = None) -> float:
    """I(T;T') = H(T) − H(T|T') in bits ([DERIVED] leakage figure, notes §B.2; not the paper's
    privacy measure). Raises ValueError for a malformed channel or prior."""
    a, exact = _channel(channel)
    p = np.asarray(_prior(prior, a.shape[0], exact), dtype=np.float64)
    nz = p[p > 0]
    return float(-(nz * np.log2(nz)).sum()) - conditional_entropy(channel, prior)


# ---------------------------------------------------------------------------------------
# utility (§4.2)


def _entropy_bits(keys: IntArray) -> float:
    codes, _ = factorize(keys)
    c = np.bincount(codes).astype(np.float64)
    f = c / c.sum()
    return float(-(f * np.log2(f)).sum())


def _table(table: npt.ArrayLike, name: str) -> IntArray:
    t = np.asarray(table)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty (records, attributes) array, got shape {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"{name} must hold integer codes")
    if t.min() < 0:
        raise ValueError(f"{name} codes must be non-negative")
    return t.astype(np.int64)


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


def attribute_utilities(
    table: npt.ArrayLike, domain_sizes: Sequence[int], leaf_counts: LeafCounts = None
) -> FloatArray:
    """U_max(A_i) = H_max(A_i) − H(A_i | all other attributes) per attribute, in bits
    (paper 003 §4.2 eq 13, with eq 8's H_max = log k).

    Entropies are of the table's empirical distribution (frequencies); log base 2 (the source
    leaves it open). H(A_i | rest) = H(all attributes) − H(rest), computed by hashing rows.

    Generalized tables (the source leaves H_max and the domain of a generalized attribute open,
    notes §B.3 (i)). Our reading: H_max is log₂ of the *leaf* domain for original and published
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
            the number of leaves it covers (e.g. ``Hierarchy.leaf_counts()`` for node ids).

    Returns:
        float64 array (p,).

    Raises:
        ValueError: malformed table, wrong number of domain sizes or leaf counts, a size < 1,
            or a code without a leaf count.
    """
    t = _table(table, "table")
    k = np.asarray(domain_sizes, dtype=np.int64)
    if k.shape != (t.shape[1],) or (k < 1).any():
        raise ValueError(f"domain_sizes must give one size ≥ 1 per attribute ({t.shape[1]})")
    counts = _leaf_counts(leaf_counts, t)
    radices = t.max(axis=0) + 1
    h_all = _entropy_bits(row_keys(t, radices.tolist()))
    out = np.empty(t.shape[1], dtype=np.float64)
    for i in range(t.shape[1]):
        rest = np.delete(np.arange(t.shape[1]), i)
        h_rest = _entropy_bits(row_keys(t[:, rest], radices[rest].tolist())) if rest.size else 0.0
        c = counts[i]
        spread = float(np.log2(c[t[:, i]]).mean()) if c is not None else 0.0
        out[i] = math.log2(int(k[i])) - (h_all - h_rest + spread)
    return out


def _attribute_prior(attribute_prior: npt.ArrayLike | None, p: int) -> FloatArray:
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
    return float(np.dot(_attribute_prior(attribute_prior, u.size), u))


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
    t, tp = _table(original, "original"), _table(published, "published")
    if t.shape != tp.shape:
        raise ValueError(f"original and published must have equal shapes, got {t.shape} and {tp.shape}")
    return table_utility(t, domain_sizes, attribute_prior) - table_utility(
        tp, domain_sizes, attribute_prior, published_leaf_counts
    )


def mechanism_utility(
    channel: npt.ArrayLike,
    input_utilities: npt.ArrayLike,
    output_utilities: npt.ArrayLike,
    prior: npt.ArrayLike | None = None,
) -> float:
    """Utility_G = Σ_T ℙ(T) Σ_{T'} Utility_Deg(T, T')·ℙ(T'|T), the expected degradation of the
    mechanism (paper 003 §4.2 eq 16). Lower is better.

    Args:
        channel: ℙ(T'|T), shape (n, m); input_utilities: Utility_T per input, (n,);
        output_utilities: Utility_T' per output, (m,); prior: ℙ(T), (n,), None = uniform.

    Raises:
        ValueError: malformed channel/prior or utilities of the wrong shape.
    """
    a, exact = _channel(channel)
    p = np.asarray(_prior(prior, a.shape[0], exact), dtype=np.float64)
    ui = np.asarray(input_utilities, dtype=np.float64)
    uo = np.asarray(output_utilities, dtype=np.float64)
    if ui.shape != (a.shape[0],) or uo.shape != (a.shape[1],):
        raise ValueError(f"utilities must have shapes ({a.shape[0]},) and ({a.shape[1]},)")
    af = np.asarray(a, dtype=np.float64)
    return float(np.sum(p[:, None] * af * (ui[:, None] - uo[None, :])))


# ---------------------------------------------------------------------------------------
# k-anonymity as a channel (§5)


def _log10_input_tables(domain_sizes: Sequence[int], r: int) -> float:
    """log10 of eq 21's count, without building the (possibly huge) integer."""
    d = math.prod(domain_sizes)
    return (math.lgamma(d + r) - math.lgamma(r + 1) - math.lgamma(d)) / math.log(10)


def input_table_count(domain_sizes: Sequence[int], r: int) -> int:
    """Number of possible input tables of r rows (multisets of rows), paper 003 §5.3 eq 21:
    C(Π|A_i| + r − 1, r). Example §5.3: domains 4·2·3 = 24, r = 5 → 98280.

    Raises:
        ValueError: r < 1 or a domain size < 1.
    """
    if r < 1 or not domain_sizes or any(d < 1 for d in domain_sizes):
        raise ValueError("need r ≥ 1 and at least one domain size, each ≥ 1")
    return math.comb(math.prod(domain_sizes) + r - 1, r)


def output_table_count(level_domain_sizes: Sequence[Sequence[int]], r: int) -> int:
    """Number of full-domain generalized tables before the k-anonymity filter, paper 003 §5.4
    eq 22–24: Σ over the N = Π(|DH_i| + 1) level vectors of C(Π|l_i| + r − 1, r).

    Args:
        level_domain_sizes: per attribute, the domain size at each level (level 0 = leaves);
            an attribute left intact has one level.
        r: rows.

    Raises:
        ValueError: r < 1 or an empty/invalid size list.
    """
    if r < 1 or not level_domain_sizes or any(not ls or min(ls) < 1 for ls in level_domain_sizes):
        raise ValueError("need r ≥ 1 and, per attribute, at least one level size ≥ 1")
    return sum(math.comb(math.prod(v) + r - 1, r) for v in itertools.product(*level_domain_sizes))


def kanonymous_table_count(
    level_domain_sizes: Sequence[Sequence[int]], r: int, k: int, *, as_printed: bool = False
) -> int:
    """Number of k-anonymous full-domain generalized tables (paper 003 §5.4 eq 25), counting a
    QI-group as a distinct row value (every attribute a QI, as eq 25 does).

    Corrected (default): Σ_levels Σ_{g=1}^{⌊r/k⌋} C(D, g)·C(r − g·k + g − 1, g − 1), D = Π|l_i|:
    choose g distinct row values and spread r rows over them with at least k each.
    ``as_printed=True``: the source's Σ_{i=0}^{⌊r/k⌋−1} C(D, ⌊r/k⌋ − i)·C((⌊r/k⌋ − i) + ik − 1, ik),
    which equals the corrected count when k divides r and undercounts otherwise (it ignores the
    remainder r − k⌊r/k⌋; ERRATUM, notes §B.9 item 5).

    Raises:
        ValueError: r < 1, k < 1, k > r, or invalid sizes.
    """
    if k < 1 or k > r:
        raise ValueError(f"need 1 ≤ k ≤ r, got k = {k}, r = {r}")
    output_table_count(level_domain_sizes, r)  # validates
    q = r // k
    total = 0
    for v in itertools.product(*level_domain_sizes):
        d = math.prod(v)
        if as_printed:
            total += sum(math.comb(d, q - i) * math.comb((q - i) + i * k - 1, i * k) for i in range(q))
        else:
            total += sum(math.comb(d, g) * math.comb(r - g * k + g - 1, g - 1) for g in range(1, q + 1))
    return total


@dataclass(frozen=True)
class TableChannel:
    """An enumerated mechanism channel.

    Attributes:
        inputs: every possible input table, as a sorted tuple of r rows (tuples of leaf codes).
        outputs: every output table, as a sorted tuple of r generalized rows (hierarchy node ids
            for QIs, codes for attributes left intact).
        matrix: ℙ(T'|T), shape (len(inputs), len(outputs)), rows sum to 1.
    """

    inputs: list[tuple[tuple[int, ...], ...]]
    outputs: list[tuple[tuple[int, ...], ...]]
    matrix: FloatArray


def kanonymity_channel(
    attributes: Sequence[Hierarchy | int],
    r: int,
    k: int,
    *,
    max_inputs: int = MAX_INPUT_TABLES,
    max_cells: int = MAX_CHANNEL_CELLS,
) -> TableChannel:
    """k-anonymity by global full-domain generalization as a channel (paper 003 §5).

    Inputs: all multisets of r rows over the attributes' leaf domains (eq 21). For an input T
    the feasible outputs are the distinct tables obtained by generalizing every QI to one level
    of its hierarchy (the same level for all rows, no suppression) that are k-anonymous on the
    QIs; ℙ(T'|T) = 1/x over the x feasible outputs (§5.5). Two level vectors giving the same
    table (chain nodes) count once.

    Args:
        attributes: per attribute, a :class:`Hierarchy` (a QI; levels are the columns of
            ``leaf_nodes``) or an int domain size (an attribute left intact, e.g. the sensitive one).
        r: rows per table (observable from T', §5.3); k: the k of k-anonymity, 1 ≤ k ≤ r.
        max_inputs, max_cells: size limits (defaults ``MAX_INPUT_TABLES``, ``MAX_CHANNEL_CELLS``).

    Raises:
        ValueError: no QI, k outside [1, r], or the instance exceeds a size limit (the message
            names the limit and the count).
    """
    qi = [isinstance(a, Hierarchy) for a in attributes]
    if not any(qi):
        raise ValueError("at least one attribute must be a QI (a Hierarchy)")
    if not 1 <= k <= r:
        raise ValueError(f"need 1 ≤ k ≤ r, got k = {k}, r = {r}")
    sizes = [a.n_leaves if isinstance(a, Hierarchy) else int(a) for a in attributes]
    if min(sizes) < 1:
        raise ValueError("every domain size must be ≥ 1")
    if _log10_input_tables(sizes, r) > math.log10(max_inputs) + 1:
        raise ValueError(
            f"≈ 10^{_log10_input_tables(sizes, r):.0f} possible input tables (eq 21) exceed the limit of {max_inputs}"
        )
    n_in = input_table_count(sizes, r)
    if n_in > max_inputs:
        raise ValueError(f"{n_in} possible input tables (eq 21) exceed the limit of {max_inputs}")
    maps: list[list[list[int]]] = [
        [list(map(int, row)) for row in a.leaf_nodes] if isinstance(a, Hierarchy) else [list(range(int(a)))]
        for a in attributes
    ]
    levels = list(itertools.product(*[range(len(m)) for m in maps]))
    qi_idx = [i for i, q in enumerate(qi) if q]
    inputs: list[tuple[tuple[int, ...], ...]] = []
    feasible: list[set[tuple[tuple[int, ...], ...]]] = []
    out_index: dict[tuple[tuple[int, ...], ...], int] = {}
    for table in itertools.combinations_with_replacement(itertools.product(*[range(s) for s in sizes]), r):
        outs = set()
        for lv in levels:
            gen = tuple(sorted(tuple(maps[i][lv[i]][row[i]] for i in range(len(sizes))) for row in table))
            groups = Counter(tuple(row[i] for i in qi_idx) for row in gen)
            if min(groups.values()) >= k:
                outs.add(gen)
        for o in outs:
            out_index.setdefault(o, len(out_index))
        inputs.append(table)
        feasible.append(outs)
    if n_in * len(out_index) > max_cells:
        raise ValueError(f"the channel has {n_in} × {len(out_index)} cells, above the limit of {max_cells}")
    mat = np.zeros((n_in, len(out_index)), dtype=np.float64)
    for t, outs in enumerate(feasible):
        for o in outs:
            mat[t, out_index[o]] = 1.0 / len(outs)
    outputs = sorted(out_index, key=out_index.__getitem__)
    return TableChannel(inputs=inputs, outputs=outputs, matrix=mat)


# ---------------------------------------------------------------------------------------
# factorized per-cell privacy (notes §B.8)


@dataclass(frozen=True)
class FactorizedPrivacy:
    """Per-cell MAP figures of a published table.

    Attributes:
        cells: number of QI cells.
        mean_cell_error: mean over QI cells of 1 − 1/n_cell, n_cell = leaves under the
            published node: the adversary's MAP error per cell.
        log2_preimages: Σ log₂ n_cell = log₂ of the number of (ordered) input tables that the
            fixed generalization maps to T'; the whole-table MAP error is 1 − 2^{−log2_preimages}.
    """

    cells: int
    mean_cell_error: float
    log2_preimages: float

    @property
    def table_error(self) -> float:
        """Whole-table MAP error 1 − Π 1/n_cell (the strong adversary of §3.2)."""
        return -math.expm1(-self.log2_preimages * math.log(2))


def factorized_privacy(published: npt.ArrayLike, hierarchies: Sequence[Hierarchy]) -> FactorizedPrivacy:
    """Per-cell MAP error of a published generalized table ([DERIVED], notes §B.8).

    Exact statement. Suppose (a) the adversary's prior over the original table is uniform over
    ordered tables, i.e. every QI cell is independently uniform over its attribute's leaves,
    (b) the mechanism's output is a function of T through a generalization chosen independently
    of T (e.g. a fixed full-domain level vector or a fixed recoding of each row), so that
    ℙ(T'|T) is the same for every preimage T of T', and (c) rows are aligned (the adversary
    guesses the leaf behind each published cell). Then the posterior over the input tables is
    uniform over the Π n_cell preimages and factorizes over cells; the MAP guess of a cell
    succeeds with probability 1/n_cell and of the whole table with Π 1/n_cell, so eq 5 restricted
    to the observed column gives exactly these figures.

    Otherwise it is an approximation: §5.5's k-anonymity channel chooses the level from the
    data (ℙ(T'|T) = 1/x depends on T, the minimality attack), so preimages are not equally
    likely and these figures can overstate privacy. Sensitive attributes, published intact,
    have n_cell = 1 (error 0) and are not counted.

    Args:
        published: node id per record per QI, shape (R, q).
        hierarchies: the q QI hierarchies, in column order.

    Raises:
        ValueError: shapes disagree or a node id is outside its hierarchy.

    Vectorized: O(R·q).
    """
    t = np.asarray(published)
    if t.ndim != 2 or t.shape[1] != len(hierarchies) or t.shape[0] == 0:
        raise ValueError(f"published must be (R, {len(hierarchies)}) node ids with R ≥ 1, got shape {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        raise ValueError("published must hold integer node ids")
    err = 0.0
    bits = 0.0
    for i, h in enumerate(hierarchies):
        col = t[:, i].astype(np.int64)
        if col.min() < 0 or col.max() >= h.n_nodes:
            raise ValueError(f"QI {h.attribute!r}: node ids must lie in 0..{h.n_nodes - 1}")
        n = h.leaf_counts()[col].astype(np.float64)
        err += float((1.0 - 1.0 / n).sum())
        bits += float(np.log2(n).sum())
    cells = int(t.size)
    return FactorizedPrivacy(cells=cells, mean_cell_error=err / cells, log2_preimages=bits)


# ---------------------------------------------------------------------------------------
# report


def summary(
    original: npt.ArrayLike,
    published: npt.ArrayLike,
    hierarchies: Sequence[Hierarchy],
    value: npt.ArrayLike,
    *,
    n_values: int | None = None,
    k: int | None = None,
    attribute_prior: npt.ArrayLike | None = None,
) -> list[Measure]:
    """Askari et al.'s figures of a release, for the report.

    Args:
        original: leaf code per record per QI of the original snapshot, shape (R, q).
        published: published node id per record per QI (row i published from row i), (R, q).
        hierarchies: the q QI hierarchies in column order.
        value: sensitive-attribute code per record, shape (R,) (published intact).
        n_values: size of the sensitive domain; None = max(value) + 1.
        k: the release's k; the mechanism channel (§5) needs it. None leaves the Bayes risk out.
        attribute_prior: ℙ(A_i) over the q QIs then the sensitive attribute, (q + 1,); None = uniform.

    Returns:
        Measures: the MAP error of the k-anonymity channel under the uniform prior (eq 3/5,
        computed only when the instance has at most ``MAX_INPUT_TABLES`` input tables, else not
        computed with the count), the factorized per-cell MAP error and table uncertainty
        (§B.8 conditions), Utility_T and Utility_T' (eq 14) and the degradation (eq 15).

    Raises:
        ValueError: shapes disagree, codes out of range, or a bad attribute_prior.
    """
    orig = _table(original, "original")
    pub = _table(published, "published")
    v = np.asarray(value)
    if orig.shape != pub.shape or orig.shape[1] != len(hierarchies) or v.shape != (orig.shape[0],):
        raise ValueError(
            f"original and published must be (R, {len(hierarchies)}) and value (R,); got "
            f"{orig.shape}, {pub.shape}, {v.shape}"
        )
    if not np.issubdtype(v.dtype, np.integer) or v.min() < 0:
        raise ValueError("value must hold non-negative integer codes")
    v = v.astype(np.int64)
    s = int(v.max()) + 1 if n_values is None else int(n_values)
    if s <= int(v.max()):
        raise ValueError(f"n_values = {s} but value codes reach {int(v.max())}")
    for i, h in enumerate(hierarchies):
        if orig[:, i].max() >= h.n_leaves:
            raise ValueError(f"QI {h.attribute!r}: original leaf codes must lie in 0..{h.n_leaves - 1}")
    r = orig.shape[0]
    sizes = [h.n_leaves for h in hierarchies] + [s]
    out: list[Measure] = []

    bayes_name, bayes_src = "MAP error of the mechanism (Bayes risk)", f"{SOURCE} §4.1 eq 3/5 (corrected), §5"
    digits = _log10_input_tables(sizes, r)
    if k is None:
        out.append(not_computed(bayes_name, "probability", bayes_src, "k not given: the §5 channel needs it"))
    elif k > r:
        out.append(not_computed(bayes_name, "probability", bayes_src, f"k = {k} exceeds the {r} records"))
    elif digits > math.log10(MAX_INPUT_TABLES) + 1 or input_table_count(sizes, r) > MAX_INPUT_TABLES:
        out.append(
            not_computed(
                bayes_name,
                "probability",
                bayes_src,
                f"the channel has C(Π|A_i| + r − 1, r) ≈ 10^{digits:.0f} possible input tables (eq 21); "
                f"exact computation is limited to {MAX_INPUT_TABLES} input tables",
            )
        )
    else:
        ch = kanonymity_channel([*hierarchies, s], r, k)
        out.append(
            Measure(
                name=bayes_name,
                value=float(privacy_error(ch.matrix)),
                unit="probability",
                source=bayes_src,
                note=f"§5 model mechanism (global full-domain generalization, k = {k}, ℙ(T'|T) = 1/x), not "
                f"necessarily the pipeline's algorithm; uniform prior over {len(ch.inputs)} input tables, "
                f"{len(ch.outputs)} outputs; higher is more private",
            )
        )

    fp = factorized_privacy(pub, hierarchies)
    cond = "exact for a uniform independent cell prior and a data-independent generalization (notes §B.8)"
    out.append(
        Measure(
            name="per-cell MAP error (factorized)",
            value=fp.mean_cell_error,
            unit="probability",
            source=f"{SOURCE} §3.2, §4.1 eq 5, per cell [DERIVED]",
            note=f"mean of 1 − 1/n_cell over {fp.cells} QI cells; {cond}",
        )
    )
    out.append(
        Measure(
            name="table-guess uncertainty (factorized)",
            value=fp.log2_preimages,
            unit="bits",
            source=f"{SOURCE} §3.2 strong adversary, eq 5 [DERIVED]",
            note=f"log₂ of the preimages of T'; whole-table MAP error 1 − 2^−bits = {fp.table_error:.6g}; {cond}",
        )
    )

    t_full = np.column_stack([orig, v])
    tp_full = np.column_stack([pub, v])
    w = _attribute_prior(attribute_prior, len(sizes))
    u_t = table_utility(t_full, sizes, w)
    u_tp = table_utility(tp_full, sizes, w, [h.leaf_counts() for h in hierarchies] + [None])
    dom = (
        "H_max = log₂ of the leaf domain for both tables, a generalized cell read as uniform over its "
        "leaves; entropies of empirical frequencies, bits"
    )
    out += [
        Measure("utility of the original table", u_t, "bits", f"{SOURCE} §4.2 eq 13–14", dom, "utility"),
        Measure("utility of the published table", u_tp, "bits", f"{SOURCE} §4.2 eq 13–14", dom, "utility"),
        Measure(
            "utility degradation",
            u_t - u_tp,
            "bits",
            f"{SOURCE} §4.2 eq 15",
            "Utility_T − Utility_T' (lower is better); " + dom,
            "utility",
        ),
    ]
    return out


__all__ = [
    "MAX_CHANNEL_CELLS",
    "MAX_INPUT_TABLES",
    "FactorizedPrivacy",
    "TableChannel",
    "attribute_utilities",
    "conditional_entropy",
    "error_bounds",
    "factorized_privacy",
    "input_table_count",
    "kanonymity_channel",
    "kanonymous_table_count",
    "map_decision",
    "mechanism_utility",
    "mutual_information",
    "output_table_count",
    "posterior",
    "privacy_error",
    "santhi_vardy_bound",
    "summary",
    "table_utility",
    "utility_degradation",
]
