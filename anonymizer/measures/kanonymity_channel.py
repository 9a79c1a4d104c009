"""k-anonymity by full-domain generalization as a channel, and the channel figures of a release
(Askari, Safavi-Naini & Barker, CODASPY'12, paper 003 §5).

Correction of the source (docs/reports.md D8): eq 25 (number of k-anonymous tables) ignores the
remainder when k does not divide r; the corrected count is :func:`kanonymous_table_count` (the
printed form is kept as an option).

Size limits. The channel is exponential in the instance: |T| = C(Π|A_i| + r − 1, r) input
tables (eq 21) and a similar number of outputs. :func:`kanonymity_channel` enumerates at most
``MAX_INPUT_TABLES`` inputs and ``MAX_CHANNEL_CELLS`` matrix cells; a real release (r in the
thousands or millions) is far beyond, so :func:`channel_figures` leaves the Bayes risk out and
gives the factorized per-cell figures instead, which are exact under the conditions stated in
:func:`factorized_privacy`. The report's wording of the figures is
:mod:`serialpub.report.wording.channel`'s.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures.channel import privacy_error
from anonymizer.measures.entropy_utility import attribute_weights, int_table, table_utility
from anonymizer.measures.published import PublishedNodes

FloatArray = npt.NDArray[np.float64]

#: Largest number of possible input tables :func:`kanonymity_channel` enumerates.
MAX_INPUT_TABLES = 20_000
#: Largest dense channel matrix (|T| × |T'| cells).
MAX_CHANNEL_CELLS = 4_000_000


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
    remainder r − k⌊r/k⌋; ERRATUM, docs/reports.md D8).

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
# factorized per-cell privacy (docs/reports.md D6)


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


def factorized_privacy(
    published: npt.ArrayLike | PublishedNodes, hierarchies: Sequence[Hierarchy]
) -> FactorizedPrivacy:
    """Per-cell MAP error of a published generalized table ([DERIVED], docs/reports.md D6).

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
        published: node id per record per QI, shape (R, q), as an array or held per QI-group
            (:class:`~anonymizer.measures.published.PublishedNodes`).
        hierarchies: the q QI hierarchies, in column order.

    Raises:
        ValueError: shapes disagree or a node id is outside its hierarchy.

    Vectorized: O(R·q).
    """
    nodes = _published(published, len(hierarchies))
    present = nodes.present()
    err = 0.0
    bits = 0.0
    for i, h in enumerate(hierarchies):
        col = present[:, i]
        if col.min() < 0 or col.max() >= h.n_nodes:
            raise ValueError(f"QI {h.attribute!r}: node ids must lie in 0..{h.n_nodes - 1}")
        # each record's terms, looked up per row of the nodes' table: the same floats, summed
        # over the records in their order
        n = h.index.size[nodes.table[:, i]].astype(np.float64)
        miss, log_n = 1.0 - 1.0 / n, np.log2(n)
        if nodes.group is not None:
            miss, log_n = miss[nodes.group], log_n[nodes.group]
        err += float(miss.sum())
        bits += float(log_n.sum())
    rows, q = nodes.shape
    cells = rows * q
    return FactorizedPrivacy(cells=cells, mean_cell_error=err / cells, log2_preimages=bits)


def _published(published: npt.ArrayLike | PublishedNodes, q: int) -> PublishedNodes:
    """``published`` (R, q) node ids checked for shape and type, per record or per group.

    Raises:
        ValueError: not R ≥ 1 records of q integer node ids, or group codes outside the table.
    """
    if isinstance(published, PublishedNodes):
        t, rows = np.asarray(published.table), published.shape[0]
        group = published.group
        if group is not None and group.size and (int(group.min()) < -t.shape[0] or int(group.max()) >= t.shape[0]):
            raise ValueError(f"published group codes must lie in [-{t.shape[0]}, {t.shape[0]})")
    else:
        t = np.asarray(published)
        rows = t.shape[0] if t.ndim == 2 else 0
    if t.ndim != 2 or t.shape[1] != q or rows == 0:
        raise ValueError(f"published must be (R, {q}) node ids with R ≥ 1, got shape {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        raise ValueError("published must hold integer node ids")
    return published if isinstance(published, PublishedNodes) else PublishedNodes.per_record(t)


# ---------------------------------------------------------------------------------------
# release figures


@dataclass(frozen=True)
class ChannelFigures:
    """Askari et al.'s figures of a release.

    Attributes:
        records: r, the records of the release (rows of T and T').
        k: the release's k as given (None: not given, the §5 channel needs it).
        log10_input_tables: log10 of eq 21's count C(Π|A_i| + r − 1, r) of possible input
            tables over the QIs and the sensitive attribute.
        bayes_risk: the MAP error of the §5 k-anonymity channel under the uniform prior
            (eq 3/5 corrected), a probability; None when k is None, k > r, or the channel has
            more than ``MAX_INPUT_TABLES`` input tables.
        input_tables: |T| of the enumerated channel; None when it was not enumerated.
        output_tables: |T'| of the enumerated channel; None when it was not enumerated.
        factorized: the per-cell MAP figures (docs/reports.md D6) of the published QIs.
        utility_original: Utility_T (eq 14), bits.
        utility_published: Utility_T' (eq 14), bits, a generalized cell read as uniform over
            its leaves (:func:`~anonymizer.measures.entropy_utility.attribute_utilities`).
    """

    records: int
    k: int | None
    log10_input_tables: float
    bayes_risk: float | None
    input_tables: int | None
    output_tables: int | None
    factorized: FactorizedPrivacy
    utility_original: float
    utility_published: float

    @property
    def utility_degradation(self) -> float:
        """Utility_T − Utility_T' (eq 15), bits; lower is better."""
        return self.utility_original - self.utility_published


def channel_figures(
    original: npt.ArrayLike,
    published: npt.ArrayLike | PublishedNodes,
    hierarchies: Sequence[Hierarchy],
    value: npt.ArrayLike,
    *,
    n_values: int | None = None,
    k: int | None = None,
    attribute_prior: npt.ArrayLike | None = None,
) -> ChannelFigures:
    """Askari et al.'s privacy and utility figures of a release.

    Args:
        original: leaf code per record per QI of the original snapshot, shape (R, q).
        published: published node id per record per QI (row i published from row i), (R, q),
            as an array or held per QI-group
            (:class:`~anonymizer.measures.published.PublishedNodes`: no (R, q) copy).
        hierarchies: the q QI hierarchies in column order.
        value: sensitive-attribute code per record, shape (R,) (published intact).
        n_values: size of the sensitive domain; None = max(value) + 1.
        k: the release's k; the mechanism channel (§5) needs it. None leaves the Bayes risk out.
        attribute_prior: ℙ(A_i) over the q QIs then the sensitive attribute, (q + 1,); None = uniform.

    Returns:
        :class:`ChannelFigures`: the MAP error of the k-anonymity channel under the uniform
        prior (eq 3/5, only when the instance has at most ``MAX_INPUT_TABLES`` input tables),
        the factorized per-cell MAP error and table uncertainty (docs/reports.md D6 conditions), Utility_T and
        Utility_T' (eq 14) and the degradation (eq 15).

    Raises:
        ValueError: shapes disagree, codes out of range, or a bad attribute_prior.
    """
    orig = int_table(original, "original")
    if isinstance(published, PublishedNodes):
        int_table(published.table, "published")
        pub = _published(published, published.shape[1])
    else:
        pub = PublishedNodes.per_record(int_table(published, "published"))
    v = np.asarray(value)
    if orig.shape != pub.shape or orig.shape[1] != len(hierarchies) or v.shape != (orig.shape[0],):
        raise ValueError(
            f"original and published must be (R, {len(hierarchies)}) and value (R,); got "
            f"{orig.shape}, {pub.shape}, {v.shape}"
        )
    if not np.issubdtype(v.dtype, np.integer) or v.min() < 0:
        raise ValueError("value must hold non-negative integer codes")
    v = v.astype(np.int64, copy=False)
    s = int(v.max()) + 1 if n_values is None else int(n_values)
    if s <= int(v.max()):
        raise ValueError(f"n_values = {s} but value codes reach {int(v.max())}")
    for i, h in enumerate(hierarchies):
        if orig[:, i].max() >= h.n_leaves:
            raise ValueError(f"QI {h.attribute!r}: original leaf codes must lie in 0..{h.n_leaves - 1}")
    r = orig.shape[0]
    sizes = [h.n_leaves for h in hierarchies] + [s]
    digits = _log10_input_tables(sizes, r)
    bayes: float | None = None
    n_in: int | None = None
    n_out: int | None = None
    # the enumeration is only tried when eq 21's count is within the limit: a real release is
    # far beyond it, and counting exactly first would build a huge integer for nothing
    if (
        k is not None
        and k <= r
        and not (digits > math.log10(MAX_INPUT_TABLES) + 1 or input_table_count(sizes, r) > MAX_INPUT_TABLES)
    ):
        ch = kanonymity_channel([*hierarchies, s], r, k)
        bayes, n_in, n_out = float(privacy_error(ch.matrix)), len(ch.inputs), len(ch.outputs)
    w = attribute_weights(attribute_prior, len(sizes))
    # the sensitive column beside the QIs' without stacking an (R, q + 1) copy of either table
    utility_original = table_utility(PublishedNodes.per_record(orig), sizes, w, tail=[v])
    leaf_counts = [h.index.size for h in hierarchies] + [None]
    utility_published = table_utility(pub, sizes, w, leaf_counts, tail=[v])
    return ChannelFigures(
        records=r,
        k=k,
        log10_input_tables=digits,
        bayes_risk=bayes,
        input_tables=n_in,
        output_tables=n_out,
        factorized=factorized_privacy(pub, hierarchies),
        utility_original=utility_original,
        utility_published=utility_published,
    )


__all__ = [
    "MAX_CHANNEL_CELLS",
    "MAX_INPUT_TABLES",
    "ChannelFigures",
    "FactorizedPrivacy",
    "TableChannel",
    "channel_figures",
    "factorized_privacy",
    "input_table_count",
    "kanonymity_channel",
    "kanonymous_table_count",
    "output_table_count",
]
