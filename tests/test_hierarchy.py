"""anonymizer.hierarchy and serialpub.io.hierarchies.read_hierarchy (ARX CSV hierarchies)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonymizer.hierarchy import Hierarchy, HierarchyError
from serialpub.datasets import adult
from serialpub.errors import InputError
from serialpub.io.hierarchies import check_domain, read_hierarchies, read_hierarchy

ATTRIBUTES = [*adult.QUASI_IDENTIFIERS, adult.SENSITIVE]


def _write(tmp_path: Path, text: str | bytes, name: str = "attr.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _check_structure(h: Hierarchy) -> None:
    """Invariants every valid hierarchy satisfies, derived from parent alone (its index's leaf
    counts and ancestor matrix against a walk up the parents)."""
    counts = h.index.size
    anc = h.index.ancestor_matrix()
    assert h.labels[h.root] == "*"
    assert h.parent[h.root] == -1
    assert np.count_nonzero(h.parent == -1) == 1
    assert counts[h.root] == h.n_leaves
    assert anc.shape == (h.n_leaves, h.n_nodes)
    # leaf ids are leaf indices, leaves first
    assert h.leaf_nodes[0].tolist() == list(range(h.n_leaves))
    assert all(h.node(leaf) == i for i, leaf in enumerate(h.leaves))
    for leaf in range(h.n_leaves):
        # walk the parent chain from the leaf to the root
        chain = []
        node = leaf
        while node != -1:
            chain.append(node)
            assert len(chain) <= h.n_nodes, "cycle in parent"
            node = int(h.parent[node])
        assert chain[-1] == h.root
        assert set(np.flatnonzero(anc[leaf]).tolist()) == set(chain)
        # the row's columns are that chain, in order (a label may repeat on consecutive columns)
        row = [int(x) for x in h.leaf_nodes[:, leaf]]
        assert list(dict.fromkeys(row)) == chain
    # leaf counts agree with the ancestor matrix, and every node covers at least one leaf
    assert counts.tolist() == anc.sum(axis=0).tolist()
    assert np.all(counts >= 1)
    # a parent covers at least the leaves of each child
    for node in range(h.n_nodes):
        if h.parent[node] >= 0:
            assert counts[h.parent[node]] >= counts[node]
            assert np.all(anc[:, h.parent[node]] >= anc[:, node])


# ---------------------------------------------------------------------------------------
# bundled Adult hierarchies


@pytest.fixture(scope="module")
def adult_hierarchies() -> dict[str, Hierarchy]:
    return read_hierarchies(adult.hierarchy_dir(), ATTRIBUTES)


@pytest.mark.parametrize("attribute", ATTRIBUTES)
def test_bundled_hierarchy_covers_adult(
    attribute: str, adult_hierarchies: dict[str, Hierarchy], adult_table: pd.DataFrame
) -> None:
    h = adult_hierarchies[attribute]
    assert h.attribute == attribute
    values = adult_table[attribute]
    check_domain(h, values, str(adult.hierarchy_dir() / f"{attribute}.csv"))  # raises if a value is missing
    codes = h.leaf_codes(values)
    assert codes.shape == (len(values),)
    assert [h.leaves[c] for c in codes[:50]] == values.iloc[:50].tolist()
    _check_structure(h)
    assert h.depth >= 2
    # the file has one row per leaf
    lines = [ln for ln in (adult.hierarchy_dir() / f"{attribute}.csv").read_text("utf-8").splitlines() if ln.strip()]
    assert h.n_leaves == len(lines)


def test_bundled_age_is_numeric_others_are_not(adult_hierarchies: dict[str, Hierarchy]) -> None:
    assert adult_hierarchies["age"].numeric
    nums = adult_hierarchies["age"].leaf_numbers()
    assert nums.min() == 17 and nums.max() == 90
    for a in ("education", "sex", "occupation", "native-country"):
        assert not adult_hierarchies[a].numeric
        with pytest.raises(ValueError):
            adult_hierarchies[a].leaf_numbers()


# ---------------------------------------------------------------------------------------
# a small valid hierarchy, by hand


def test_small_hierarchy_by_hand(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "a;A;AB;*\n"
        "\n"  # blank lines are ignored
        "b; B ;AB;*\n"  # cells are stripped
        "c;C;C;*\r\n"  # a chain (C twice) and a CRLF line end
        "d;A;AB;*\n"
        "e;e;AB;*\n",  # a leaf kept on the first level
        "letters.csv",
    )
    h = read_hierarchy(path)
    assert h.attribute == "letters"
    assert h.leaves == ("a", "b", "c", "d", "e")
    assert h.depth == 4
    assert not h.numeric
    lc = dict(zip(h.labels, h.index.size.tolist(), strict=True))
    assert lc == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "A": 2, "AB": 4, "*": 5, "B": 1, "C": 1}
    assert h.labels[h.parent[h.node("a")]] == "A"
    assert h.labels[h.parent[h.node("A")]] == "AB"
    assert h.labels[h.parent[h.node("C")]] == "*"
    assert h.labels[h.parent[h.node("c")]] == "C"
    assert h.labels[h.parent[h.node("e")]] == "AB"
    assert h.has_label("AB") and not h.has_label("Z")
    with pytest.raises(KeyError, match="zz"):
        h.leaf_codes(["a", "zz"])
    with pytest.raises(KeyError):
        h.leaf_codes(["AB"])  # an inner node is not a leaf
    _check_structure(h)
    assert read_hierarchy(path, "other").attribute == "other"


def test_two_column_hierarchy(tmp_path: Path) -> None:
    h = read_hierarchy(_write(tmp_path, "10;*\n20;*\n30.5;*\n"))
    assert h.numeric
    assert h.leaf_numbers().tolist() == [10.0, 20.0, 30.5]
    assert h.index.size[h.root] == 3
    _check_structure(h)


# ---------------------------------------------------------------------------------------
# malformed files: InputError naming the file and the line


def _expect_error(path: Path, line: int | None, *fragments: str) -> str:
    with pytest.raises(InputError) as info:
        read_hierarchy(path)
    msg = str(info.value)
    assert str(path) in msg
    if line is not None:
        assert re.search(rf"\bline {line}\b", msg), msg
    for frag in fragments:
        assert frag in msg, msg
    assert "\n" not in msg
    return msg


def test_empty_file(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, ""), None, "empty")
    _expect_error(_write(tmp_path, "\n  \n\n", "blank.csv"), None, "empty")


def test_rows_of_unequal_depth(tmp_path: Path) -> None:
    path = _write(tmp_path, "a;A;*\nb;B;*\n\nc;*\nd;D;*\n")
    _expect_error(path, 4, "columns")


def test_empty_cell(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, "a;A;*\nb;;*\n"), 2, "empty cell")
    _expect_error(_write(tmp_path, "a;A;*\nb;B;*;\n", "trailing.csv"), 2)


def test_last_column_not_root(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, "a;A;*\nb;B;all\n"), 2, "'all'", "*")
    _expect_error(_write(tmp_path, "a\nb\n", "single.csv"), 1)


def test_only_root_column(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, "*\n"), 1)


def test_duplicate_leaf(tmp_path: Path) -> None:
    msg = _expect_error(_write(tmp_path, "a;A;*\nb;A;*\nc;C;*\nb;C;*\n"), 4, "'b'")
    assert "line 2" in msg  # where it first appeared


def test_label_with_two_parents(tmp_path: Path) -> None:
    # A's leaves {a, b} are not one subtree: A sits below P for a and below Q for b
    _expect_error(_write(tmp_path, "a;A;P;*\nc;C;P;*\nb;A;Q;*\n"), 3, "'A'")


def test_label_reused_at_two_levels_with_different_parents(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, "a;X;Y;*\nb;Y;X;*\n"), 2)


def test_label_for_different_leaf_sets_in_different_columns(tmp_path: Path) -> None:
    # X stands for {a} in column 2 but for {a, b} in column 3; parents agree ('*')
    path = _write(tmp_path, "a;X;X;*\nb;Y;X;*\n")
    msg = _expect_error(path, None, "'X'")
    assert re.search(r"\bline [12]\b", msg), msg


def test_leaf_label_used_as_inner_node(tmp_path: Path) -> None:
    _expect_error(_write(tmp_path, "a;G;*\nb;a;*\n"), 2, "'a'")


def test_value_missing_from_leaves(tmp_path: Path) -> None:
    path = _write(tmp_path, "Male;*\nFemale;*\n", "sex.csv")
    h = read_hierarchy(path)
    check_domain(h, ["Male", "Female", "Male"], str(path))  # fine
    with pytest.raises(InputError) as info:
        check_domain(h, ["Male", "Other", "Female"], str(path))
    msg = str(info.value)
    assert "'Other'" in msg and str(path) in msg and "sex" in msg
    # an inner label is not a leaf either
    h2 = read_hierarchy(_write(tmp_path, "a;A;*\nb;A;*\n", "ab.csv"))
    with pytest.raises(InputError, match="'A'"):
        check_domain(h2, ["a", "A"], "ab.csv")
    # the pure layer raises HierarchyError (a ValueError) with the same message
    with pytest.raises(HierarchyError, match="'Other'"):
        h.check_domain(["Other"], "src")


def test_non_utf8_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "caf\xe9;*\nthe;*\n".encode("latin-1"))
    _expect_error(path, None, "UTF-8")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_hierarchy(tmp_path / "nope.csv")
    assert str(tmp_path / "nope.csv") in str(info.value)


def test_read_hierarchies_names_the_missing_attribute(tmp_path: Path) -> None:
    _write(tmp_path, "a;*\n", "x.csv")
    got = read_hierarchies(tmp_path, ["x"])
    assert got["x"].leaves == ("a",)
    with pytest.raises(InputError, match=re.escape(str(tmp_path / "y.csv"))):
        read_hierarchies(tmp_path, ["x", "y"])
