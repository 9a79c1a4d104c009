"""Xiao & Tao's personalized breach probability (paper 001): worked examples and a brute-force
enumeration of possible reconstructions (Defs 9-10, Eq. 3).

Oracles: the paper's Examples 1-4 and the full breach table of Figures 3 and 1c (derived from
Theorems 1-2 with S_ext counted on Figure 1b). Figure 2 (the Disease taxonomy) is an image
missing from the text; the fixture below uses only the facts the text states (12 leaves;
respiratory-system-problem = 6 leaves split 3/3, one half being respiratory-infection = {flu,
pneumonia, bronchitis}; stomach-disease = {gastric-ulcer, dyspepsia, gastritis} under
digestive-system-problem). The names "resp-other-*" and "digest-other-*" are placeholders, not
the paper's.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import privacy
from anonymizer.hierarchy import Hierarchy
from anonymizer.measures import personalized as pz

# --------------------------------------------------------------------------------------------
# fixtures


def _disease() -> Hierarchy:
    rows: list[list[str]] = []
    for leaf in ("flu", "pneumonia", "bronchitis"):
        rows.append([leaf, "respiratory-infection", "respiratory-system-problem", "*"])
    for i in (1, 2, 3):
        rows.append([f"resp-other-leaf-{i}", "resp-other", "respiratory-system-problem", "*"])
    for leaf in ("gastric-ulcer", "dyspepsia", "gastritis"):
        rows.append([leaf, "stomach-disease", "digestive-system-problem", "*"])
    for i in (1, 2, 3):
        rows.append([f"digest-other-leaf-{i}", "digest-other", "digestive-system-problem", "*"])
    return Hierarchy.from_rows("Disease", [(i + 1, r) for i, r in enumerate(rows)], "Figure 2 (partial)")


DISEASE = _disease()


def _ids(labels: Sequence[str | None]) -> np.ndarray:
    return np.array([-1 if x is None else DISEASE.node(x) for x in labels], dtype=np.int64)


# Figure 1b: the voter registration list (external database), (name, age, sex, zipcode)
REGISTER = [
    ("Andy", 5, "M", 12000),
    ("Bill", 9, "M", 14000),
    ("Ken", 6, "M", 18000),
    ("Nash", 8, "M", 19000),
    ("Mike", 7, "M", 17000),
    ("Joe", 12, "M", 22000),
    ("Sam", 19, "M", 24000),
    ("Linda", 21, "F", 58000),
    ("Jane", 26, "F", 36000),
    ("Sarah", 28, "F", 37000),
    ("Mary", 56, "F", 33000),
]
NAMES = ["Andy", "Bill", "Ken", "Nash", "Joe", "Sam", "Linda", "Jane", "Sarah", "Mary"]
# Figure 1a: guarding nodes (∅ = None)
GN_1A = [
    "stomach-disease",
    "dyspepsia",
    "respiratory-infection",
    "bronchitis",
    "pneumonia",
    "pneumonia",
    None,
    "gastritis",
    "respiratory-infection",
    "flu",
]
SA_1A = ["gastric-ulcer", "dyspepsia", "pneumonia", "bronchitis", "pneumonia", "pneumonia", "flu", "gastritis"]
SA_1A += ["pneumonia", "flu"]

# Figure 3: QI regions of its 5 QI-groups (age, sex, zipcode ranges), group of each row, SA values
FIG3_REGIONS = [((1, 10), "M", (10001, 20000)), ((11, 20), "M", (20001, 25000)), ((21, 21), "F", (58000, 58000))]
FIG3_REGIONS += [((26, 30), "F", (35001, 40000)), ((56, 56), "F", (33000, 33000))]
FIG3_GROUP = np.array([0, 0, 0, 0, 1, 1, 2, 3, 3, 4])
FIG3_SA = ["gastric-ulcer", "dyspepsia", "respiratory-infection", "respiratory-infection", "respiratory-infection"]
FIG3_SA += ["respiratory-infection", "flu", "gastritis", "pneumonia", "respiratory-infection"]

# Figure 1c: the 2-anonymous table
FIG1C_REGIONS = [((1, 10), "M", (10001, 15000)), ((1, 10), "M", (15001, 20000)), ((11, 20), "M", (20001, 25000))]
FIG1C_REGIONS += [((21, 60), "F", (30000, 60000))]
FIG1C_GROUP = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3, 3])


def _s_ext(regions: list[tuple[tuple[int, int], str, tuple[int, int]]]) -> np.ndarray:
    """|S_ext| of every group (Def 8): register people whose QI values the group's region covers."""
    return np.array(
        [
            sum(a[0] <= age <= a[1] and sex == s and z[0] <= zip_ <= z[1] for _, age, sex, zip_ in REGISTER)
            for a, s, z in regions
        ]
    )


def _approx(fractions: Sequence[Fraction | int]) -> object:
    return pytest.approx([float(f) for f in fractions], rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------------------------
# brute force: enumerate every possible reconstruction of one QI-group (Defs 9 and 10)


def _leaves(h: Hierarchy, node: int) -> set[int]:
    return {leaf for leaf in range(h.n_leaves) if node in h.leaf_nodes[:, leaf]}


def _enumerate_group(
    h: Hierarchy, published: Sequence[int], guards: Sequence[int], n: int, primary: bool
) -> tuple[list[int], int]:
    """(n_breach per record, n_recon) of one group with m = len(published) tuples and an
    external database of n individuals; the target o_tar is individual 0 (all are symmetric).

    A reconstruction picks owners o_1..o_m (distinct in the Primary Case, Def 9; any multiset in
    the Non-primary Case, Def 10) and a leaf v_j under every published value; it breaches record
    r when some j has o_j = o_tar and v_j in L(r's guarding node).
    """
    m = len(published)
    owner_lists = itertools.permutations(range(n), m) if primary else itertools.product(range(n), repeat=m)
    owners = list(owner_lists)
    values = list(itertools.product(*[sorted(_leaves(h, v)) for v in published]))
    guard_leaves = [_leaves(h, g) if g >= 0 else set() for g in guards]
    breach = [0] * m
    for o in owners:
        for v in values:
            for r, protected in enumerate(guard_leaves):
                if any(o[j] == 0 and v[j] in protected for j in range(m)):
                    breach[r] += 1
    return breach, len(owners) * len(values)


def _brute_force(
    h: Hierarchy, group: np.ndarray, value: np.ndarray, guarding: np.ndarray, n: np.ndarray, primary: bool
) -> list[Fraction]:
    out = [Fraction(0)] * group.size
    for j in range(n.size):
        rows = np.flatnonzero(group == j)
        if rows.size == 0:
            continue
        breach, recon = _enumerate_group(h, value[rows].tolist(), guarding[rows].tolist(), int(n[j]), primary)
        for r, k in zip(rows.tolist(), breach, strict=True):
            out[r] = Fraction(k, recon)
    return out


# --------------------------------------------------------------------------------------------
# Examples 1-4 (paper §2.3.1, §2.3.2, §3.2)


def test_s_ext_from_figure_1b() -> None:
    # Example 1/3: Andy, Bill, Ken, Nash, Mike -> n = 5; Joe and Sam -> n = 2; Mary alone -> n = 1
    assert _s_ext(FIG3_REGIONS).tolist() == [5, 2, 1, 2, 1]
    assert _s_ext(FIG1C_REGIONS).tolist() == [2, 3, 2, 4]


def test_examples_1_and_2_reconstruction_counts() -> None:
    group_rows = [0, 1, 2, 3]
    published = _ids(FIG3_SA)[group_rows].tolist()
    guards = _ids(GN_1A)[group_rows].tolist()
    breach, recon = _enumerate_group(DISEASE, published, guards, 5, primary=True)
    assert (breach[2], recon) == (432, 1080)  # Example 1: Ken, 432/1080 = 2/5
    breach, recon = _enumerate_group(DISEASE, published, guards, 5, primary=False)
    assert (breach[2], recon) == (2025, 5625)  # Example 2: 2025/5625 = 9/25


def test_examples_3_and_4_theorems() -> None:
    value, gn, n = _ids(FIG3_SA), _ids(GN_1A), _s_ext(FIG3_REGIONS)
    p1 = pz.personalized_breach(FIG3_GROUP, value, gn, n, DISEASE, primary=True)
    p2 = pz.personalized_breach(FIG3_GROUP, value, gn, n, DISEASE, primary=False)
    # Example 3: Ken b/n = 2/5; Joe b·c/n = 2·(1/3)/2 = 1/3. Example 4: 9/25 and 11/36.
    assert [p1[2], p1[4]] == _approx([Fraction(2, 5), Fraction(1, 3)])
    assert [p2[2], p2[4]] == _approx([Fraction(9, 25), Fraction(11, 36)])
    b, c = pz.breach_terms(FIG3_GROUP, value, gn, DISEASE)
    assert (b[2], c[2]) == (2, 1.0)
    assert (b[4], c[4]) == (2, pytest.approx(1 / 3, rel=1e-15))
    assert b[0] == 2  # §3.1: tuple 1 (GN = stomach-disease) overlaps tuples 1 and 2
    assert (b[6], c[6]) == (0, 0.0)  # Linda, GN = ∅


# --------------------------------------------------------------------------------------------
# the full breach table of Figures 3 and 1c (derived with the paper's Theorems 1 and 2)

FIG3_TABLE = {  # row: (prim n=ext, nonprim n=ext, prim n=m, nonprim n=#distinct)
    "prim_ext": ["2/5", "1/5", "2/5", "2/15", "1/3", "1/3", "0", "1/2", "1/2", "1/3"],
    "nonprim_ext": ["9/25", "1/5", "9/25", "29/225", "11/36", "11/36", "0", "1/2", "1/2", "1/3"],
    "prim_m": ["1/2", "1/4", "1/2", "1/6", "1/3", "1/3", "0", "1/2", "1/2", "1/3"],
    "nonprim_distinct": ["7/16", "1/4", "7/16", "23/144", "11/36", "11/36", "0", "1/2", "1/2", "1/3"],
}


def test_figure_3_breach_table() -> None:
    value, gn, n_ext = _ids(FIG3_SA), _ids(GN_1A), _s_ext(FIG3_REGIONS)
    n_m = pz.lower_bound_n(FIG3_GROUP, 5, primary=True)
    n_distinct = pz.lower_bound_n(FIG3_GROUP, 5, primary=False, individual=np.array(NAMES))
    assert n_m.tolist() == n_distinct.tolist() == [4, 2, 1, 2, 1]
    cases = {
        "prim_ext": (n_ext, True),
        "nonprim_ext": (n_ext, False),
        "prim_m": (n_m, True),
        "nonprim_distinct": (n_distinct, False),
    }
    for key, (n, primary) in cases.items():
        expected = [Fraction(x) for x in FIG3_TABLE[key]]
        got = pz.personalized_breach(FIG3_GROUP, value, gn, n, DISEASE, primary=primary)
        assert got.tolist() == _approx(expected), key
        # the same figures from the definition, by enumerating every reconstruction
        assert _brute_force(DISEASE, FIG3_GROUP, value, gn, n, primary) == expected, key
    # §2.3.2: "no tuple ... breached with probability above 50%"
    assert pz.personalized_breach(FIG3_GROUP, value, gn, n_ext, DISEASE, primary=True).max() == 0.5


def test_figure_1c_k_anonymity_semantics() -> None:
    value = _ids(SA_1A)
    gn = pz.guarding_nodes(value, DISEASE, 0)  # GN := SA (k-anonymity as a special case, §3.3)
    n_ext = _s_ext(FIG1C_REGIONS)
    prim = pz.personalized_breach(FIG1C_GROUP, value, gn, n_ext, DISEASE, primary=True)
    nonprim = pz.personalized_breach(FIG1C_GROUP, value, gn, n_ext, DISEASE, primary=False)
    f = Fraction
    assert prim.tolist() == _approx([f(1, 2)] * 2 + [f(1, 3)] * 2 + [1, 1] + [f(1, 2), f(1, 4), f(1, 4), f(1, 2)])
    assert nonprim.tolist() == _approx(
        [f(1, 2)] * 2 + [f(1, 3)] * 2 + [f(3, 4)] * 2 + [f(7, 16), f(1, 4), f(1, 4), f(7, 16)]
    )
    # rows 3-4 with the publication-time bound n = m = 2 give 1/2 each
    n_m = pz.lower_bound_n(FIG1C_GROUP, 4, primary=True)
    assert pz.personalized_breach(FIG1C_GROUP, value, gn, n_m, DISEASE, primary=True)[2:4].tolist() == [0.5, 0.5]


# --------------------------------------------------------------------------------------------
# brute force on random small tables (hypothesis)


def _small() -> Hierarchy:
    # * -> A -> {a1, a2}; * -> B -> {B1 -> {b1, b2}, b3}; * -> c1 (chains repeat the label)
    rows = [
        ["a1", "A", "A", "*"],
        ["a2", "A", "A", "*"],
        ["b1", "B1", "B", "*"],
        ["b2", "B1", "B", "*"],
        ["b3", "b3", "B", "*"],
        ["c1", "c1", "c1", "*"],
    ]
    return Hierarchy.from_rows("S", [(i + 1, r) for i, r in enumerate(rows)], "test")


SMALL = _small()
SMALL_PATHS = [
    [int(x) for x in dict.fromkeys(SMALL.leaf_nodes[:, leaf].tolist())] for leaf in range(SMALL.n_leaves)
]  # leaf -> its distinct ancestors-or-self, bottom up


@st.composite
def small_tables(draw: st.DrawFn, primary: bool, leaf_level: bool) -> tuple[np.ndarray, ...]:
    n_groups = draw(st.integers(1, 3))
    sizes = [draw(st.integers(0, 3)) for _ in range(n_groups)]
    group = np.repeat(np.arange(n_groups), sizes)
    order = draw(st.permutations(range(group.size)))
    group = group[list(order)]
    value, guarding = [], []
    for _ in range(group.size):
        path = SMALL_PATHS[draw(st.integers(0, SMALL.n_leaves - 1))]  # the record's true leaf, upwards
        value.append(path[0] if leaf_level else draw(st.sampled_from(path)))
        guarding.append(draw(st.sampled_from([-1, *path])))
    n = [draw(st.integers(max(size, 1) if primary else 1, 4)) for size in sizes]
    arrays = (group, np.array(value), np.array(guarding), np.array(n))
    return tuple(np.asarray(a, dtype=np.int64) for a in arrays)


@pytest.mark.parametrize("primary", [True, False])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_matches_enumeration_of_reconstructions(primary: bool, data: st.DataObject) -> None:
    group, value, guarding, n = data.draw(small_tables(primary, leaf_level=False))
    got = pz.personalized_breach(group, value, guarding, n, SMALL, primary=primary)
    assert got.tolist() == _approx(_brute_force(SMALL, group, value, guarding, n, primary))


@settings(max_examples=60, deadline=None)
@given(table=small_tables(primary=True, leaf_level=True))
def test_relation_to_paper_004_single_release(table: tuple[np.ndarray, ...]) -> None:
    """Guarding node = leaf, leaf-level values, n = candidates: the Primary Case is exactly paper 004's
    n_{j,s}/n_j (Lemma 4, one release); the Non-primary Case is 1 - (1 - 1/n_j)^{n_{j,s}}, at most that,
    equal only when n_{j,s} <= 1."""
    group, value, _, n = table
    gn = pz.guarding_nodes(value, SMALL, 0)
    n_s = np.array([np.count_nonzero((group == group[i]) & (value == value[i])) for i in range(group.size)])
    p004 = privacy.breach_probabilities(np.arange(group.size), n[group], n_s, group.size)
    prim = pz.personalized_breach(group, value, gn, n, SMALL, primary=True)
    nonprim = pz.personalized_breach(group, value, gn, n, SMALL, primary=False)
    assert prim.tolist() == pytest.approx(p004.tolist(), rel=1e-12, abs=1e-15)
    assert nonprim.tolist() == _approx(
        [1 - (1 - Fraction(1, int(k))) ** int(b) for k, b in zip(n[group], n_s, strict=True)]
    )
    assert np.all(nonprim <= prim + 1e-15)
    assert np.all((np.abs(nonprim - prim) < 1e-15) == (n_s <= 1))


# --------------------------------------------------------------------------------------------
# helpers, summary and bad arguments


def test_guarding_nodes_levels() -> None:
    leaves = _ids(["pneumonia", "gastritis"])
    assert pz.guarding_nodes(leaves, DISEASE, 0).tolist() == leaves.tolist()
    assert pz.guarding_nodes(leaves, DISEASE, 1).tolist() == _ids(["respiratory-infection", "stomach-disease"]).tolist()
    assert (
        pz.guarding_nodes(leaves, DISEASE, 2).tolist()
        == _ids(["respiratory-system-problem", "digestive-system-problem"]).tolist()
    )
    root = DISEASE.root
    assert pz.guarding_nodes(leaves, DISEASE, 3).tolist() == [root, root]
    assert pz.guarding_nodes(leaves, DISEASE, 50).tolist() == [root, root]
    # chains: b3's parent is B (the repeated label is one node); c1 sits directly under the root
    small = pz.guarding_nodes(np.array([SMALL.node("b3"), SMALL.node("c1")]), SMALL, 1)
    assert small.tolist() == [SMALL.node("B"), SMALL.root]
    with pytest.raises(ValueError, match="levels_up"):
        pz.guarding_nodes(leaves, DISEASE, -1)
    with pytest.raises(ValueError, match="leaf ids"):
        pz.guarding_nodes(_ids(["stomach-disease"]), DISEASE, 0)


def test_lower_bound_n_counts_distinct_individuals() -> None:
    group = np.array([0, 0, 0, 1, 1, 2])
    assert pz.lower_bound_n(group, 4, primary=True).tolist() == [3, 2, 1, 0]
    owners = np.array([7, 7, 8, 7, 7, 9])  # one person owns both records of group 1 (Non-primary)
    assert pz.lower_bound_n(group, 4, primary=False, individual=owners).tolist() == [2, 1, 1, 0]
    with pytest.raises(ValueError, match="individual"):
        pz.lower_bound_n(group, 4, primary=False)
    # §3.3: all tuples of the group owned by o_tar and n = 1 -> P = 1 whatever the group size
    value = np.full(2, SMALL.node("a1"))
    p = pz.personalized_breach(group[3:5] - 1, value, value, np.array([1]), SMALL, primary=False)
    assert p.tolist() == [1.0, 1.0]


def _figures(
    group: np.ndarray,
    value: np.ndarray,
    gn: np.ndarray,
    n: np.ndarray,
    hierarchy: Hierarchy | None,
    *,
    primary: bool,
    p_breach: float,
) -> pz.BreachSummary:
    """Xiao & Tao's figures of a release, as the report computes them."""
    p = pz.personalized_breach(group, value, gn, n, hierarchy, primary=primary)
    return pz.summarize(p, gn, p_breach)


def test_summary_figure_3() -> None:
    value, gn, n = _ids(FIG3_SA), _ids(GN_1A), _s_ext(FIG3_REGIONS)
    s = _figures(np.asarray(FIG3_GROUP), value, gn, n, DISEASE, primary=True, p_breach=0.4)
    assert (s.records, s.guarded, s.p_breach) == (10, 9, 0.4)  # Linda asks for no protection
    assert s.max_p == 0.5
    # above 0.4: Jane and Sarah (1/2); Andy and Ken sit exactly at 2/5 and are not counted
    assert s.above == 2
    expected_mean = sum(Fraction(x) for x in FIG3_TABLE["prim_ext"]) / 10
    assert s.mean_p == pytest.approx(float(expected_mean), rel=1e-12)
    s = _figures(np.asarray(FIG3_GROUP), value, gn, n, DISEASE, primary=False, p_breach=0.25)
    assert s.max_p == 0.5
    assert s.above == 7  # all but Bill (1/5), Nash (29/225) and Linda (0)


def test_summary_empty_release_and_flat_domain() -> None:
    empty = np.zeros(0, dtype=np.int64)
    s = _figures(empty, empty, empty, np.array([3]), None, primary=True, p_breach=0.5)
    assert (s.records, s.guarded, s.max_p, s.mean_p, s.above) == (0, 0, 0.0, 0.0, 0)
    # no hierarchy: values are leaf codes, guarding = value or -1
    group, value = np.array([0, 0, 0, 1]), np.array([2, 2, 0, 1])
    p = pz.personalized_breach(group, value, np.array([2, -1, 0, 1]), np.array([4, 1]), None, primary=True)
    assert p.tolist() == [0.5, 0.0, 0.25, 1.0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"group": [0, 2]}, "group codes"),
        ({"group": [0.0, 1.0]}, "integer codes"),
        ({"value": [0]}, "one entry per record"),
        ({"value": [0, 99]}, "node ids"),
        ({"guarding": [-2, 0]}, "guarding nodes"),
        ({"guarding": _ids(["gastric-ulcer", None])}, "neither an ancestor"),  # pneumonia guarded by ulcer
        ({"group": [0, 0], "n": [1]}, "n >= group size"),
        ({"n": [0, 1]}, "n >= 1"),
        ({"n": [2.5, 1]}, "whole numbers"),
        ({"n": [[2, 1]]}, "one-dimensional"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "group": [0, 1],
        "value": _ids(["pneumonia", "gastric-ulcer"]),
        "guarding": _ids(["pneumonia", None]),
        "n": [2, 1],
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        pz.personalized_breach(
            np.asarray(args["group"]),
            np.asarray(args["value"]),
            np.asarray(args["guarding"]),
            np.asarray(args["n"]),
            DISEASE,
            primary=True,
        )


def test_bad_p_breach() -> None:
    with pytest.raises(ValueError, match="p_breach"):
        pz.summarize(np.array([0.5]), np.array([0]), p_breach=1.5)
    with pytest.raises(ValueError, match="one entry per record"):
        pz.summarize(np.array([0.5, 0.1]), np.array([0]), p_breach=0.5)
