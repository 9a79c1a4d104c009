"""Utility measures (anonymizer.measures.utility): the thesis's worked examples (paper 000,
§4.2-4.3), hand examples for C_DM, C_AVG and NCP, and brute-force
references (explicit per-record loops over labels and leaf sets) on hypothesis tables."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.hierarchy import Hierarchy
from anonymizer.measures import certainty_penalty as cp
from anonymizer.measures import group_size as gs
from anonymizer.measures import information_loss as il
from anonymizer.measures import utility as u

Rows = list[list[str]]
# hierarchies, their rows, leaves (N, d), nodes (N, d), published mask (N,), sensitive codes (N,)
Case = tuple[list[Hierarchy], list[Rows], np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def hier(name: str, rows: Rows) -> Hierarchy:
    return Hierarchy.from_rows(name, [(i + 1, r) for i, r in enumerate(rows)], f"<{name}>")


def one_cell_release(h: Hierarchy, counts: list[int], leaf: str, node: str) -> il.InformationLoss:
    """A snapshot with ``counts`` records per leaf, all published as they are except one
    record of ``leaf`` published as ``node``: every measure is that one cell's cost."""
    leaves = np.repeat(np.arange(h.n_leaves), counts)[:, None]
    published = leaves.copy()
    r = int(np.flatnonzero(leaves[:, 0] == h.node(leaf))[0])
    published[r, 0] = h.node(node)
    return il.information_loss([h], published, leaves, [np.array(counts)])


# --------------------------------------------------------------------------------------
# Lemma 4.2.3 and its revisit after Lemma 4.2.5, ε = 0.01
# --------------------------------------------------------------------------------------

LEMMA = hier("A", [["a", "x", "*"], ["b", "x", "*"], ["c", "y", "*"], ["d", "y", "*"]])
LEMMA_COUNTS = [97, 1, 1, 1]  # (1 − 3ε, ε, ε, ε) with ε = 0.01 over n = 100 records


def test_entropy_of_the_attribute() -> None:
    t = il.entropy_tables(LEMMA, LEMMA_COUNTS)
    assert t.entropy[LEMMA.root] == pytest.approx(0.241941, abs=5e-7)  # H(X)
    assert t.entropy[LEMMA.node("x")] == pytest.approx(0.082143, abs=5e-7)  # H(X|x)
    assert t.entropy[LEMMA.node("y")] == 1.0
    assert list(t.entropy[: LEMMA.n_leaves]) == [0.0] * 4  # a singleton costs nothing


def test_entropy_measure_is_not_monotone_lemma_4_2_3() -> None:
    to_y = one_cell_release(LEMMA, LEMMA_COUNTS, "d", "y")
    to_root = one_cell_release(LEMMA, LEMMA_COUNTS, "d", "*")
    # d → y is less general than d → *, yet Π_e charges it more: 1 bit against H(X)
    assert to_y.entropy[0] == 1.0
    assert to_root.entropy[0] == pytest.approx(0.241941, abs=5e-7)
    assert to_y.entropy[0] > to_root.entropy[0]
    # the monotone and non-uniform measures order the pair correctly
    assert to_y.monotone_entropy[0] == pytest.approx(0.02, abs=1e-12)
    assert to_root.monotone_entropy[0] == pytest.approx(0.241941, abs=5e-7)
    assert to_y.non_uniform_entropy[0] == pytest.approx(1.0, abs=1e-12)
    assert to_root.non_uniform_entropy[0] == pytest.approx(6.643856, abs=5e-7)  # −log₂ 0.01


def test_non_uniform_entropy_charges_the_rarer_value_more() -> None:
    a = one_cell_release(LEMMA, LEMMA_COUNTS, "a", "x")
    b = one_cell_release(LEMMA, LEMMA_COUNTS, "b", "x")
    # Π_e and Π_me cannot tell a → x from b → x ...
    assert a.entropy[0] == b.entropy[0] == pytest.approx(0.082143, abs=5e-7)
    assert a.monotone_entropy[0] == b.monotone_entropy[0]
    # ... Π_ne can: −log₂(0.97/0.98) and −log₂(0.01/0.98)
    assert a.non_uniform_entropy[0] == pytest.approx(0.014797, abs=5e-7)
    assert b.non_uniform_entropy[0] == pytest.approx(6.614710, abs=5e-7)


# --------------------------------------------------------------------------------------
# §4.2's China / India / Canada / United States example (with the thesis's correction E11)
# --------------------------------------------------------------------------------------

NATION = hier(
    "Nationality",
    [["China", "Asia", "*"], ["India", "Asia", "*"], ["Canada", "Americas", "*"], ["United States", "Americas", "*"]],
)
NATION_COUNTS = [10, 10, 45, 35]


def test_china_canada_example() -> None:
    china = one_cell_release(NATION, NATION_COUNTS, "China", "Asia")
    canada = one_cell_release(NATION, NATION_COUNTS, "Canada", "Americas")
    us = one_cell_release(NATION, NATION_COUNTS, "United States", "Americas")
    # the tree measure cannot tell them apart (both one level of two)
    assert china.tree[0] == canada.tree[0] == Fraction(1, 2)
    assert china.redactions[0] == canada.redactions[0] == 0
    # Π_e charges Asia *more* (E11: the thesis's claim holds for Π_me, not for Π_e)
    assert china.entropy[0] == 1.0
    assert canada.entropy[0] == pytest.approx(0.988699, abs=5e-7)
    assert china.monotone_entropy[0] == pytest.approx(0.2, abs=1e-12)
    assert canada.monotone_entropy[0] == pytest.approx(0.790960, abs=5e-7)
    assert china.non_uniform_entropy[0] == pytest.approx(1.0, abs=1e-12)
    assert canada.non_uniform_entropy[0] == pytest.approx(0.830075, abs=5e-7)
    assert us.non_uniform_entropy[0] == pytest.approx(1.192645, abs=5e-7)


# --------------------------------------------------------------------------------------
# Example 4.3.1: Tables 4.3-1 and 4.3-2
# --------------------------------------------------------------------------------------

GENDER = hier("Gender", [["M", "*"], ["F", "*"]])
NAT2 = hier("Nationality", [["U.S.", "*"], ["Canada", "*"]])
T431 = [
    ("M", "U.S.", 0),
    ("M", "Canada", 1),
    ("F", "U.S.", 0),
    ("F", "Canada", 1),
    ("M", "U.S.", 0),
    ("M", "Canada", 0),
    ("F", "U.S.", 1),
    ("F", "Canada", 1),
]  # 0 = Flu, 1 = Cold
# Table 4.3-2: which attribute each row suppresses (0 = Gender, 1 = Nationality)
T432 = {1: [0, 0, 0, 0, 1, 1, 1, 1], 2: [1, 1, 1, 1, 0, 0, 0, 0]}


def table_43(which: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    hs = [GENDER, NAT2]
    leaves = np.array([[GENDER.node(g), NAT2.node(c)] for g, c, _ in T431])
    nodes = leaves.copy()
    for r, j in enumerate(T432[which]):
        nodes[r, j] = hs[j].root
    return leaves, nodes, np.array([s for _, _, s in T431])


def test_table_4_3_2_earlier_measures_cannot_tell_the_generalizations_apart() -> None:
    hs = [GENDER, NAT2]
    figures = []
    for which in (1, 2):
        leaves, nodes, _ = table_43(which)
        counts = [np.bincount(leaves[:, j], minlength=2) for j in range(2)]
        loss = il.information_loss(hs, nodes, leaves, counts)
        groups = Counter(map(tuple, nodes.tolist()))
        figures.append(
            (
                int(loss.redactions.sum()),
                float(loss.tree.sum()),
                float(loss.entropy.sum()),
                float(loss.monotone_entropy.sum()),
                float(loss.non_uniform_entropy.sum()),
                cp.ncp(hs, nodes),
                gs.discernibility(list(groups.values()), 0),
            )
        )
    # 8 '*' cells, each a full suppression of a fair binary attribute: 1 bit, NCP ½ per record
    assert figures[0] == figures[1] == (8, 8.0, 8.0, 8.0, 8.0, 0.5, 16)


@pytest.mark.parametrize(
    ("attributes", "var_t", "var_1", "var_2"),
    [((0, 1), 2, 4, 0), ((0,), 2, 2, 0), ((1,), 2, 2, 0)],
)
def test_table_4_3_2_tuple_wise_variance(attributes: tuple[int, ...], var_t: int, var_1: int, var_2: int) -> None:
    hs = [GENDER, NAT2]
    leaves, nodes1, s = table_43(1)
    _, nodes2, _ = table_43(2)
    tv1 = il.tuple_wise_variance(hs, leaves, nodes1, s, attributes)
    tv2 = il.tuple_wise_variance(hs, leaves, nodes2, s, attributes)
    assert (tv1.original, tv1.release, tv2.original, tv2.release) == (var_t, var_1, var_t, var_2)
    # derived from Example 4.3.1: Π_tv −2 (Q = QI, the release splits original blocks) or 0, and 2 for (2)
    assert tv1.loss == var_t - var_1
    assert tv2.loss == 2


def test_tuple_wise_variance_equals_the_transport_lp() -> None:
    """EMD with the 0/1 ground distance (Problem 2.4.3 as the standard transportation LP)
    is the total variation the module uses: compare a two-block table with the LP."""
    from scipy.optimize import linprog

    def emd(p: np.ndarray, q: np.ndarray) -> float:
        n = p.size
        a_eq = np.vstack([np.kron(np.eye(n), np.ones(n)), np.kron(np.ones(n), np.eye(n))])
        lp = linprog((1 - np.eye(n)).ravel(), A_eq=a_eq, b_eq=np.concatenate([p, q]), bounds=(0, None))
        assert lp.status == 0
        return float(lp.fun)

    # 20 records, D_T = (0.1, 0.2, 0.3, 0.4); block "in" holds values 0, 0, 1, 2, block "out" the rest
    s = np.array([0, 0, 1, 2] + [1, 1, 1, 2, 2, 2, 2, 2] + [3] * 8)
    leaves = np.array([[0]] * 4 + [[1]] * 16)
    h = hier("Q", [["in", "*"], ["out", "*"]])
    d_t = np.bincount(s) / 20
    expected = 4 * emd(np.bincount(s[:4], minlength=4) / 4, d_t) + 16 * emd(np.bincount(s[4:], minlength=4) / 16, d_t)
    tv = il.tuple_wise_variance([h], leaves, leaves, s)
    assert tv.original == pytest.approx(expected, abs=1e-9)
    assert tv.release == tv.original  # published as collected


# --------------------------------------------------------------------------------------
# Hand examples: C_DM, C_AVG, suppression rate, NCP
# --------------------------------------------------------------------------------------


def test_discernibility_and_average_group_size() -> None:
    # groups of 3, 2 and 5, 2 records suppressed, |D| = 12: 9 + 4 + 25 + 2 · 12
    assert gs.discernibility([3, 2, 5], 2) == 62
    assert gs.discernibility([], 4) == 16  # everything suppressed: |D|²
    assert gs.average_group_size([3, 2, 5]) == pytest.approx(10 / 3, abs=1e-15)
    assert gs.normalized_average_group_size([3, 2, 5], 2) == pytest.approx(5 / 3, abs=1e-15)
    assert gs.suppression_rate(2, 12) == pytest.approx(1 / 6, abs=1e-15)
    assert gs.suppression_rate(0, 0) == 0.0


AGE = hier(
    "Age",
    [["20", "20-30", "*"], ["25", "20-30", "*"], ["30", "20-30", "*"], ["40", "40-60", "*"], ["60", "40-60", "*"]],
)


def test_ncp_hand_example() -> None:
    # numeric: (hi − lo) / (max − min) over the domain 20..60; categorical: |leaves| / 4, 0 for a leaf
    age = cp.node_ncp(AGE)
    labels = ["20", "25", "30", "40", "60", "20-30", "40-60", "*"]
    assert [age[AGE.node(x)] for x in labels] == [0, 0, 0, 0, 0, 0.25, 0.5, 1.0]
    nation = cp.node_ncp(NATION)
    assert [nation[NATION.node(x)] for x in [*NATION.leaves, "Asia", "Americas", "*"]] == [0, 0, 0, 0, 0.5, 0.5, 1.0]
    hs = [AGE, NATION]
    published = np.array(
        [
            [AGE.node("20-30"), NATION.node("Asia")],  # (0.25 + 0.5) / 2 = 0.375
            [AGE.node("40"), NATION.node("Canada")],  # 0
            [AGE.node("40-60"), NATION.node("*")],  # (0.5 + 1) / 2 = 0.75
        ]
    )
    assert cp.ncp(hs, published) == pytest.approx((0.375 + 0 + 0.75) / 3, abs=1e-15)
    # a suppressed record counts 1
    assert cp.ncp(hs, published, suppressed=1) == pytest.approx((0.375 + 0.75 + 1) / 4, abs=1e-15)
    # Xu et al.'s weights: all weight on Age
    assert cp.ncp(hs, published, weights=[1.0, 0.0]) == pytest.approx((0.25 + 0.5) / 3, abs=1e-15)


def test_tree_levels_of_a_chain() -> None:
    # the thesis's balancing chain *→Oceania→New Zealand→New Zealand (§2.1)
    h = hier("N", [["Canada", "North America", "Americas", "*"], ["New Zealand", "New Zealand", "Oceania", "*"]])
    levels = il.tree_levels(h)
    assert levels[h.node("New Zealand")] == 0
    assert levels[h.node("North America")] == 1
    assert levels[h.node("Oceania")] == 2 and levels[h.root] == 3
    assert h.index.size[h.node("Oceania")] == 1 and h.index.size[h.root] == 2
    t = il.entropy_tables(h, [3, 1])
    assert t.count[h.node("Oceania")] == 1 and t.count[h.root] == 4


# --------------------------------------------------------------------------------------
# Bad arguments
# --------------------------------------------------------------------------------------


def test_bad_arguments() -> None:
    hs = [GENDER, NAT2]
    leaves, nodes, s = table_43(1)
    counts = [np.bincount(leaves[:, j], minlength=2) for j in range(2)]
    with pytest.raises(ValueError, match="does not generalize"):
        bad = nodes.copy()
        bad[0, 1] = NAT2.node("Canada")  # row 1 is U.S.
        il.information_loss(hs, bad, leaves, counts)
    with pytest.raises(ValueError, match="columns"):
        il.information_loss(hs, nodes[:, :1], leaves, counts)
    with pytest.raises(ValueError, match="whole snapshot"):
        il.information_loss(hs, nodes, leaves, [c - 1 for c in counts])
    with pytest.raises(ValueError, match="one snapshot"):
        il.information_loss(hs, nodes, leaves, [counts[0], counts[1] + 1])
    with pytest.raises(ValueError, match="outside"):
        cp.ncp(hs, nodes + 5)
    with pytest.raises(ValueError, match="integers"):
        cp.ncp(hs, nodes.astype(float))
    with pytest.raises(ValueError, match="weights"):
        cp.ncp(hs, nodes, weights=[0.5, 0.6])
    with pytest.raises(ValueError, match="at least one record"):
        gs.discernibility([3, 0], 1)
    with pytest.raises(ValueError, match="non-negative"):
        gs.discernibility([3], -1)
    with pytest.raises(ValueError, match="no QI-groups"):
        gs.average_group_size([])
    with pytest.raises(ValueError, match="positive"):
        gs.normalized_average_group_size([2], 0)
    with pytest.raises(ValueError, match="suppressed records out of"):
        gs.suppression_rate(3, 2)
    with pytest.raises(ValueError, match="attributes"):
        il.tuple_wise_variance(hs, leaves, nodes, s, [0, 0])
    with pytest.raises(ValueError, match="records"):
        il.tuple_wise_variance(hs, leaves, nodes, s[:-1])
    with pytest.raises(ValueError, match="codes in"):
        u.snapshot_nodes(hs, [0, 5], nodes[:2])
    with pytest.raises(ValueError, match="at least one"):
        cp.ncp([], nodes)


# --------------------------------------------------------------------------------------
# release figures
# --------------------------------------------------------------------------------------


def _groups_of(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The group of every record (records with equal node rows, numbered by first
    appearance) and every group's node row."""
    keys = [tuple(r) for r in nodes.tolist()]
    group_ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return np.array([group_ids[k] for k in keys]), np.array(list(group_ids))


def test_figures_of_table_4_3_2_with_a_suppressed_record() -> None:
    hs = [GENDER, NAT2]
    leaves, nodes, s = table_43(2)
    group, group_nodes = _groups_of(nodes)
    group[7] = -1  # suppress the last record: its group {6, 8} keeps one record
    f = u.utility_figures(hs, leaves, group, group_nodes, s)
    assert (f.records, f.published, f.suppressed, f.qis, f.groups) == (8, 7, 1, 2, 4)
    assert f.suppression_rate == 1 / 8
    assert f.discernibility == 3 * 4 + 1 + 8
    assert f.average_group_size == 7 / 4
    assert f.normalized_average_group_size == 7 / 4 and (f.k, f.k_given) == (1.0, False)  # k = smallest group
    # the suppressed record is an all-'*' tuple: 1 + 2 extra '*' cells of the 8 already there
    assert f.loss is not None and f.loss.redactions.sum() == 9
    assert f.loss.non_uniform_entropy.sum() == 9.0
    assert f.ncp == pytest.approx((7 * 0.5 + 1) / 8, abs=1e-15)
    # Var_T* : blocks (M,*) {1,2}, (F,*) {3,4}, (*,U.S.) {5,7}, (*,Canada) {6} and (*,*) {8}
    assert f.tuple_variance is not None
    assert f.tuple_variance.loss == pytest.approx(2 - (0.5 + 0.5), abs=1e-15)
    without = u.utility_figures(hs, leaves, group, group_nodes, None, k=2)
    assert without.tuple_variance is None
    assert without.normalized_average_group_size == 7 / 8 and (without.k, without.k_given) == (2.0, True)
    with pytest.raises(ValueError, match="k must be a positive number"):
        u.utility_figures(hs, leaves, group, group_nodes, None, k=0)


def test_figures_refuse_a_group_node_that_does_not_generalize_its_records() -> None:
    """The release's figures check the records against their groups' nodes once, for every
    measure: a node that is not an ancestor of a record's leaf is refused, with or without
    sensitive values."""
    hs = [GENDER, NAT2]
    leaves, nodes, s = table_43(2)
    group, group_nodes = _groups_of(nodes)
    other = np.flatnonzero(group_nodes[:, 0] != group_nodes[group[0], 0])[0]
    group[0] = other  # record 0 moved to a group whose nodes are not its values'
    bad = any(
        all(h.leaf_nodes[lv][leaves[0, j]] != group_nodes[other, j] for lv in range(h.depth)) for j, h in enumerate(hs)
    )
    assert bad
    for sensitive in (s, None):
        with pytest.raises(ValueError, match="does not generalize"):
            u.utility_figures(hs, leaves, group, group_nodes, sensitive)


def test_figures_when_nothing_is_published() -> None:
    hs = [GENDER, NAT2]
    leaves, _, s = table_43(1)
    f = u.utility_figures(hs, leaves, np.full(8, -1), np.zeros((0, 2), dtype=np.int64), s)
    assert f.suppression_rate == 1.0
    assert f.discernibility == 64
    assert f.groups == 0 and f.average_group_size is None and f.normalized_average_group_size is None
    assert f.k is None
    assert f.ncp == 1.0
    assert f.loss is not None and f.loss.redactions.sum() == 16
    # T* is one block, the whole table, with no variance left: Π_tv = Var_T = 2
    assert f.tuple_variance is not None and f.tuple_variance.loss == 2.0


def test_figures_of_an_empty_snapshot() -> None:
    hs = [GENDER, NAT2]
    empty = np.zeros((0, 2), dtype=np.int64)
    f = u.utility_figures(hs, empty, np.zeros(0, dtype=np.int64), empty, np.zeros(0, dtype=np.int64))
    assert (f.records, f.published, f.suppression_rate, f.discernibility) == (0, 0, 0.0, 0)
    assert f.ncp is None and f.loss is None and f.tuple_variance is None and f.average_group_size is None


# --------------------------------------------------------------------------------------
# Brute force on random hierarchies and tables
# --------------------------------------------------------------------------------------


@st.composite
def random_hierarchy(draw: st.DrawFn, name: str) -> tuple[Hierarchy, Rows]:
    n = draw(st.integers(1, 5))
    depth = draw(st.integers(2, 4))
    numeric = draw(st.booleans())
    if numeric:
        leaves = [str(x) for x in draw(st.lists(st.integers(0, 50), min_size=n, max_size=n, unique=True))]
    else:
        leaves = [f"{name}{i}" for i in range(n)]
    chain = draw(st.booleans())  # singleton clusters reuse the leaf's label (the thesis's chains)
    cluster: list[tuple[int, ...]] = [() for _ in range(n)]
    columns: dict[int, list[tuple[int, ...]]] = {}
    for level in range(depth - 2, 0, -1):  # refine the root's single cluster downwards
        sub = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
        cluster = [(*c, x) for c, x in zip(cluster, sub, strict=True)]
        columns[level] = cluster
    names: dict[tuple[int, tuple[int, ...]], str] = {}
    rows: Rows = []
    for i, leaf in enumerate(leaves):
        row = [leaf]
        for level in range(1, depth - 1):
            c = columns[level][i]
            if chain and columns[level].count(c) == 1:
                row.append(leaf)
            else:
                row.append(names.setdefault((level, c), f"{name}g{len(names)}"))
        rows.append([*row, "*"])
    return hier(name, rows), rows


@st.composite
def random_release(draw: st.DrawFn) -> Case:
    d = draw(st.integers(1, 3))
    pairs = [draw(random_hierarchy(f"q{j}")) for j in range(d)]
    hs = [p[0] for p in pairs]
    n = draw(st.integers(1, 12))
    leaves = np.array([[draw(st.integers(0, h.n_leaves - 1)) for h in hs] for _ in range(n)], dtype=np.int64)
    nodes = np.array(
        [[h.leaf_nodes[draw(st.integers(0, h.depth - 1)), leaves[r, j]] for j, h in enumerate(hs)] for r in range(n)],
        dtype=np.int64,
    )
    published = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    sensitive = np.array(draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    return hs, [p[1] for p in pairs], leaves, nodes, published, sensitive


def reference(
    hs: list[Hierarchy],
    rows: list[Rows],
    leaves: np.ndarray,
    nodes: np.ndarray,
    published: np.ndarray,
    sensitive: np.ndarray,
) -> dict[str, float]:
    """Per-record loops over labels and leaf sets read from the rows themselves."""
    n, d = leaves.shape
    out = dict.fromkeys(["ncp", "redactions", "tree", "pi_e", "pi_me", "pi_ne"], 0.0)
    for j, (h, hrows) in enumerate(zip(hs, rows, strict=True)):
        leafset = {lab: {r[0] for r in hrows if lab in r} for r in hrows for lab in r}
        domain = [r[0] for r in hrows]
        count = Counter(h.labels[leaves[r, j]] for r in range(n))
        nums = [float(x) for x in domain] if h.numeric else []
        span = max(nums) - min(nums) if nums else 0.0
        for r in range(n):
            leaf = h.labels[leaves[r, j]]
            label = h.labels[nodes[r, j]] if published[r] else "*"
            b = leafset[label]
            if h.numeric and span > 0:
                vals = [float(x) for x in b]
                out["ncp"] += (max(vals) - min(vals)) / span / d
            else:
                out["ncp"] += (0.0 if len(b) == 1 else len(b) / len(domain)) / d
            out["redactions"] += label == "*"
            row = next(rw for rw in hrows if rw[0] == leaf)
            out["tree"] += row.index(label) / (len(row) - 1)
            mass = sum(count[a] for a in b)
            h_b = -sum(count[a] / mass * math.log2(count[a] / mass) for a in b if count[a])
            out["pi_e"] += h_b
            out["pi_me"] += mass / n * h_b
            out["pi_ne"] += -math.log2(count[leaf] / mass)
    out["ncp"] /= n
    # C_DM: groups are the distinct published node tuples
    groups = Counter(tuple(nodes[r]) for r in range(n) if published[r])
    out["dm"] = sum(g * g for g in groups.values()) + (n - int(published.sum())) * n
    # Π_tv with Fractions: blocks of T by leaves, of T* by published labels (suppressed: all '*')
    glob = Counter(sensitive.tolist())

    def var(keys: list[tuple[object, ...]]) -> Fraction:
        total = Fraction(0)
        for r in range(n):
            block = [sensitive[i] for i in range(n) if keys[i] == keys[r]]
            local = Counter(block)
            total += Fraction(1, 2) * sum(abs(Fraction(local[s], len(block)) - Fraction(glob[s], n)) for s in glob)
        return total

    t_keys = [tuple(leaves[r]) for r in range(n)]
    star_keys = [tuple(hs[j].labels[nodes[r, j]] if published[r] else "*" for j in range(d)) for r in range(n)]
    out["tv"] = float(var(t_keys) - var(star_keys))
    return out


@settings(max_examples=60, deadline=None)
@given(random_release())
def test_brute_force(case: Case) -> None:
    hs, rows, leaves, nodes, published, sensitive = case
    ref = reference(hs, rows, leaves, nodes, published, sensitive)
    keys = [tuple(r) for r in nodes[published].tolist()]
    ids = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    group = np.full(len(nodes), -1)
    group[published] = [ids[k] for k in keys]
    group_nodes = np.array(list(ids), dtype=np.int64).reshape(len(ids), len(hs))
    f = u.utility_figures(hs, leaves, group, group_nodes, sensitive)
    assert f.discernibility == ref["dm"]
    assert f.loss is not None and f.loss.redactions.sum() == ref["redactions"]
    assert f.tuple_variance is not None
    for got, key in [
        (f.ncp, "ncp"),
        (f.loss.tree.sum(), "tree"),
        (f.loss.entropy.sum(), "pi_e"),
        (f.loss.monotone_entropy.sum(), "pi_me"),
        (f.loss.non_uniform_entropy.sum(), "pi_ne"),
        (f.tuple_variance.loss, "tv"),
    ]:
        assert got == pytest.approx(ref[key], rel=1e-9, abs=1e-9), key


@settings(max_examples=40, deadline=None)
@given(random_release(), st.data())
def test_generalizing_one_cell_never_lowers_the_monotone_measures(case: Case, data: st.DataObject) -> None:
    """Lemmas 4.2.5 and 4.2.7 (Π_me, Π_ne), and the tree measure, redactions and NCP."""
    hs, _, leaves, nodes, _, _ = case
    r = data.draw(st.integers(0, len(nodes) - 1))
    j = data.draw(st.integers(0, len(hs) - 1))
    parent = int(hs[j].parent[nodes[r, j]])
    if parent < 0:
        return  # already the root
    up = nodes.copy()
    up[r, j] = parent
    counts = [np.bincount(leaves[:, q], minlength=h.n_leaves) for q, h in enumerate(hs)]
    before = il.information_loss(hs, nodes, leaves, counts)
    after = il.information_loss(hs, up, leaves, counts)
    assert after.monotone_entropy.sum() >= before.monotone_entropy.sum() - 1e-12
    assert after.non_uniform_entropy.sum() >= before.non_uniform_entropy.sum() - 1e-12
    assert after.tree.sum() > before.tree.sum()
    assert after.redactions.sum() >= before.redactions.sum()
    assert cp.ncp(hs, up) >= cp.ncp(hs, nodes) - 1e-12  # a one-child node has its child's NCP


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_check_generalizes_is_the_per_record_rule(data: st.DataObject) -> None:
    """The check on distinct (leaf, node) pairs raises exactly when some record's published
    node is neither its leaf nor an ancestor of it, naming the first such record."""
    from anonymizer.measures._checks import check_generalizes

    hs = [NATION, LEMMA]
    n = data.draw(st.integers(1, 40))
    leaves = np.array([[data.draw(st.integers(0, h.n_leaves - 1)) for h in hs] for _ in range(n)], dtype=np.int64)
    nodes = np.array([[data.draw(st.integers(0, h.n_nodes - 1)) for h in hs] for _ in range(n)], dtype=np.int64)
    bad = [
        (r, j) for r in range(n) for j, h in enumerate(hs)
        if nodes[r, j] not in {int(h.leaf_nodes[d, leaves[r, j]]) for d in range(h.depth)}
    ]  # fmt: skip
    if not bad:
        check_generalizes(hs, nodes, leaves)
        return
    with pytest.raises(ValueError) as raised:
        check_generalizes(hs, nodes, leaves)
    # QI by QI, the first record that breaks the rule on that QI
    j = min(j for _, j in bad)
    r = min(r for r, jj in bad if jj == j)
    assert str(raised.value).startswith(f"record {r}: ") and hs[j].attribute in str(raised.value)
