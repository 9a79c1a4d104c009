"""The counting primitives of anonymizer.arrays shared by the measures and the inputs:
sorted_counts as numpy's unique with counts, first_positions as a scan for each first."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer.arrays import factorize, first_positions, sorted_counts


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


def test_only_arrays_nothing_can_change_are_frozen() -> None:
    """frozen() lets factorize_rows keep a grouping: an array is frozen when it and every
    array it views are read-only and the last owns its memory or was declared frozen; a
    read-only view of a writeable array, or of foreign memory not declared, is not."""
    import pyarrow as pa

    from anonymizer.arrays import declare_frozen, frozen

    owned = np.arange(6)
    assert not frozen(owned)
    view = owned[1:]
    view.flags.writeable = False
    assert not frozen(view)  # its base can still be written
    owned.flags.writeable = False
    assert frozen(view) and frozen(owned)
    foreign = pa.array(np.arange(6, dtype=np.int32)).to_numpy()
    assert not foreign.flags.writeable and not frozen(foreign)
    declare_frozen(foreign)
    assert frozen(foreign) and frozen(foreign.reshape(2, 3)[:, 1])
    other = pa.array(np.arange(6, dtype=np.int32)).to_numpy()
    assert not frozen(other)  # declared arrays are named one by one
    try:
        declare_frozen(np.arange(3))
    except ValueError:
        pass
    else:
        raise AssertionError("a writeable array was declared frozen")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=24, max_size=80)  # few distinct values: blocks to the end
    | st.lists(st.integers(-3, 9), max_size=60) | st.lists(st.integers(0, 2**40), max_size=40),
    st.integers(1, 5), st.sampled_from([np.int64, np.int32, np.uint16]),
)  # fmt: skip
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
        codes, first = factorize(arr)
        assert first_positions(codes, len(first)).tolist() == first.tolist()
        if arr.size >= 24 and len(uniques) <= 3:
            assert arrays._factorize_blocks(arr) is not None  # this case did not give up
    assert codes.dtype == np.int64 and first.dtype == np.int64
    assert codes.tolist() == want.tolist()
    assert first.tolist() == [want.tolist().index(c) for c in range(len(uniques))]
