"""The counting primitives of anonymizer.arrays shared by the measures and the inputs:
sorted_counts as numpy's unique with counts, first_positions as a scan for each first,
and CodedRows as the matrix it codes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.arrays import CodedRows, factorize, first_positions, sorted_counts


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62) | st.integers(0, 5), max_size=40))
def test_sorted_counts_are_unique_with_counts(keys: list[int]) -> None:
    values, counts = sorted_counts(np.asarray(keys, dtype=np.int64))
    want_values, want_counts = np.unique(np.asarray(keys, dtype=np.int64), return_counts=True)
    assert values.tolist() == want_values.tolist() and counts.tolist() == want_counts.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=40))
def test_first_positions_are_each_codes_first(values: list[int]) -> None:
    codes, first = factorize(np.asarray(values, dtype=np.int64))
    assert first.tolist() == [codes.tolist().index(c) for c in range(len(first))]
    assert first_positions(codes, len(first)).tolist() == first.tolist()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 3), st.integers(0, 40), st.integers(-1, 200))
def test_coded_rows_index_as_their_matrix_and_count_its_columns(seed: int, d: int, n: int, pick: int) -> None:
    """Indexing coded rows gives what indexing the (n, d) matrix gives, and their column
    counts are the matrix's per-column bincounts."""
    rng = np.random.default_rng(seed)
    radices = [int(r) for r in rng.integers(1, 4, size=d)]
    mat = np.stack([rng.integers(0, r, size=n) for r in radices], axis=1).astype(np.int32)
    coded = CodedRows.of_columns(iter(mat.T.copy()), n, radices)
    rows = rng.integers(0, max(n, 1), size=5) if n else np.zeros(0, dtype=np.int64)
    assert np.array_equal(coded[rows], mat[rows]) and np.array_equal(coded[1:4], mat[1:4])
    for a in range(d):
        assert np.array_equal(coded[rows, a], mat[rows, a])
        counts = coded.column_counts(a, radices[a] + 1)
        assert np.array_equal(counts, np.bincount(mat[:, a], minlength=radices[a] + 1))
    if 0 <= pick < n:
        assert coded[pick].tolist() == mat[pick].tolist() and int(coded[pick, d - 1]) == int(mat[pick, d - 1])
    assert not coded.codes.flags.writeable and not coded.table.flags.writeable


def test_coded_rows_from_storage_are_checked() -> None:
    """:meth:`CodedRows.checked` refuses codes that could place a row in a wrong cell or
    number cells otherwise than their matrix would: each mutation below is one it catches."""
    table = np.array([[0, 1], [1, 0], [1, 1]], dtype=np.int32)
    good = np.array([0, 1, 0, 2, 1])
    assert CodedRows.checked(good, table).first.tolist() == [0, 1, 3]
    for codes, tab, message in [
        (np.array([0, 1, 0, 3, 1]), table, "outside"),
        (np.array([0, 1, 0, -1, 1]), table, "outside"),
        (np.array([0, 1, 0, 1, 1]), table, "does not occur"),
        (np.array([1, 0, 0, 2, 1]), table, "first appearance"),
        (good, np.array([[0, 1], [1, 0], [0, 1]], dtype=np.int32), "equal"),
        (good, np.array([[0, 1], [1, 0], [1, -1]], dtype=np.int32), r"outside \[0, 2\*\*31\)"),
        (good.astype(float), table, "integer"),
    ]:
        with pytest.raises(ValueError, match=message):
            CodedRows.checked(codes, tab)
    with pytest.raises(ValueError, match=r"outside \[0, 3\)"):
        CodedRows.of_columns(iter([np.array([0, 3])]), 2, [3])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=24, max_size=80)  # few distinct values: blocks to the end
    | st.lists(st.integers(-3, 9), max_size=60)
    | st.lists(st.integers(0, 2**40), max_size=40),
    st.integers(1, 5),
    st.sampled_from([np.int64, np.int32, np.uint16]),
)
def test_factorize_by_blocks_is_factorize_in_one_piece(values: list[int], block: int, dtype: type) -> None:
    """Blocks of 1-5 values (the register's are 4M): the same codes, numbered by first
    appearance, and the same first positions as pandas' factorize of the whole, whether
    the blocks run to the end or give up on too many distinct values."""
    import pytest

    import anonymizer.arrays as arrays

    arr = np.abs(np.asarray(values, dtype=np.int64)) % 2**16 if dtype is np.uint16 else np.asarray(values)
    arr = arr.astype(dtype)
    want, uniques = pd.factorize(arr)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrays, "_BLOCK", block)
        mp.setattr(arrays, "_SMALL", -1)  # not the numpy sort of short arrays
        codes, first = factorize(arr)
        assert first_positions(codes, len(first)).tolist() == first.tolist()
        if arr.size >= 24 and len(uniques) <= 3:
            assert arrays._factorize_blocks(arr) is not None  # this case did not give up
    assert codes.dtype == np.int64 and first.dtype == np.int64
    assert codes.tolist() == want.tolist()
    assert first.tolist() == [want.tolist().index(c) for c in range(len(uniques))]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 3), max_size=80) | st.lists(st.integers(-(2**40), 2**40), max_size=60),
    st.sampled_from([np.int64, np.int32, np.uint64]),
)
def test_factorize_of_a_short_integer_array_is_pandas_factorize(values: list[int], dtype: type) -> None:
    """Short integer arrays are factorized by a numpy sort (a short query imports no
    pandas): the same codes, numbered by first appearance, and first positions as pandas'."""
    import anonymizer.arrays as arrays

    arr = np.asarray(values, dtype=np.int64)
    arr = (arr % 2**31 if dtype is np.int32 else np.abs(arr) if dtype is np.uint64 else arr).astype(dtype)
    assert arr.size <= arrays._SMALL  # the numpy path is the one tested
    want, uniques = pd.factorize(arr)
    codes, first = factorize(arr)
    assert codes.dtype == np.int64 and first.dtype == np.int64
    assert codes.tolist() == want.tolist()
    assert first.tolist() == [want.tolist().index(c) for c in range(len(uniques))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-5, 2**40), max_size=60) | st.lists(st.integers(0, 3), max_size=60), st.integers(1, 7))
def test_distinct_counts_by_blocks_are_unique_with_counts(values: list[int], block: int) -> None:
    """Keys counted a block of 1-7 at a time (4M in a release) give numpy's sorted unique
    values with their counts, and every key is asked for exactly once."""
    import anonymizer.arrays as arrays
    from anonymizer.arrays import distinct_counts

    keys = np.asarray(values, dtype=np.int64)
    asked: list[tuple[int, int]] = []

    def keys_of(start: int, stop: int) -> np.ndarray:
        asked.append((start, stop))
        return keys[start:stop]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arrays, "_BLOCK", block)
        distinct, counts = distinct_counts(keys.size, keys_of)
    want, want_counts = np.unique(keys, return_counts=True)
    assert distinct.tolist() == want.tolist() and counts.tolist() == want_counts.tolist()
    assert distinct.dtype == np.int64 and counts.dtype == np.int64
    assert sum(stop - start for start, stop in asked) == keys.size
    assert all(stop - start <= block for start, stop in asked)


def test_coded_rows_are_never_an_array_by_accident() -> None:
    """Coded rows refuse what would build their (n, d) matrix silently (np.asarray, a
    sequence of rows) or index it otherwise than numpy would (several columns at once), and
    their grouping is refused for radices their leaf ids do not fit."""
    from anonymizer.arrays import factorize_rows

    coded = CodedRows.of(np.array([[0, 1], [1, 0], [0, 1]]), [2, 2])
    with pytest.raises(TypeError, match="not converted implicitly"):
        np.asarray(coded)
    with pytest.raises(TypeError):
        list(coded)
    with pytest.raises(TypeError, match="one column index"):
        coded[:, [0, 1]]
    assert coded[:, 1].tolist() == [1, 0, 1] and coded[[2, 0], 0:1].tolist() == [[0], [0]]
    assert factorize_rows(coded, [2, 2])[0].tolist() == [0, 1, 0]
    for radices in ([2], [2, 1], [2, 2, 2]):
        with pytest.raises(ValueError, match="past the radices"):
            factorize_rows(coded, radices)
    with pytest.raises(ValueError, match=r"outside \[0, 2\*\*31\)"):
        CodedRows.checked(np.array([0, 1]), np.array([[2**32], [0]], dtype=np.int64))
