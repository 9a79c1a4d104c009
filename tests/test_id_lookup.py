"""Looking snapshot ids up in the register (anonymizer.arrays.IdLookup, through
serialpub.io.inputs.Register.rows_of): the same rows as pandas' hash table, for any ids, and
never a wrong row from a wrong lookup."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import arrays
from anonymizer.arrays import IdLookup
from serialpub.io.inputs import Register

texts = st.text(alphabet="ab01 é-", max_size=4)


def _register(ids: list[str], lookup: IdLookup | None = None) -> Register:
    return Register(pd.Index(ids, dtype=object), np.zeros((len(ids), 1), dtype=np.int64), lookup)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, unique=True, max_size=30), st.lists(texts, max_size=30))
def test_rows_are_pandas_rows(register_ids: list[str], wanted: list[str]) -> None:
    register = _register(register_ids)
    expected = pd.Index(register_ids, dtype=object).get_indexer(pd.Index(wanted, dtype=object))
    assert register.rows_of(pd.Series(wanted, dtype=object)).tolist() == expected.tolist()


def test_colliding_or_non_text_ids_are_looked_up_by_pandas(monkeypatch: pytest.MonkeyPatch) -> None:
    numbers = Register(pd.Index([1, 2, "3"], dtype=object), np.zeros((3, 1), dtype=np.int64))
    assert numbers.rows_of(pd.Series(["1", 2, 3, "3"], dtype=object)).tolist() == [-1, 1, -1, 2]  # as pandas
    assert _register(["a", "b"]).rows_of(pd.Series([3.5, "b"], dtype=object)).tolist() == [-1, 1]
    assert IdLookup.of(pd.Index([1, "1"], dtype=object)) is None  # the same text: colliding hashes
    monkeypatch.setattr(arrays, "id_hashes", lambda ids: np.zeros(len(ids), dtype=np.uint64))
    assert IdLookup.of(pd.Index(["a", "b"], dtype=object)) is None  # every hash the same
    assert _register(["a", "b", "c"]).rows_of(pd.Series(["c", "x", "a"])).tolist() == [2, -1, 0]


@pytest.mark.parametrize("dtype", [object, "str"])  # "str": Arrow strings, as read_csv and the cache give them
def test_a_wrong_lookup_never_gives_a_wrong_row(dtype: object) -> None:
    """The cache keeps the lookup; one with its rows scrambled (an edit) can only make an id
    look absent, which the caller refuses with a message, never another individual's row."""
    ids = [f"p{i}" for i in range(50)]
    good = IdLookup.of(pd.Index(ids, dtype=dtype))
    assert good is not None
    scrambled = IdLookup(good.hashes, np.roll(good.rows, 1))
    register = Register(pd.Index(ids, dtype=dtype), np.zeros((50, 1), dtype=np.int64), scrambled)
    rows = register.rows_of(pd.Series(ids, dtype=dtype))
    assert ((rows == -1) | (rows == np.arange(50))).all() and (rows == -1).any()


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, unique=True, max_size=30), st.lists(texts, max_size=30),
       st.sampled_from([(object, "str"), ("str", "str"), ("str", object)]))  # fmt: skip
def test_arrow_strings_find_pandas_rows(
    register_ids: list[str], wanted: list[str], dtypes: tuple[object, object]
) -> None:
    # Arrow strings on both sides are compared in Arrow, mixed sides as objects: the same rows
    register = Register(pd.Index(register_ids, dtype=dtypes[0]), np.zeros((len(register_ids), 1), dtype=np.int64))
    expected = pd.Index(register_ids, dtype=object).get_indexer(pd.Index(wanted, dtype=object))
    assert register.rows_of(pd.Series(wanted, dtype=dtypes[1])).tolist() == expected.tolist()
    found = register.id_lookup
    assert found is not None
    assert found.find(register.ids, pd.Index(wanted, dtype=dtypes[1])).tolist() == expected.tolist()  # type: ignore[union-attr]
    assert found.find(register.ids, np.asarray(wanted, dtype=object)).tolist() == expected.tolist()  # type: ignore[union-attr]


@settings(max_examples=50, deadline=None)
@given(st.lists(texts | st.integers(-5, 5), max_size=40), st.integers(1, 7))
def test_ids_are_hashed_the_same_a_chunk_at_a_time(ids: list[object], chunk: int) -> None:
    whole = arrays.id_hashes(np.asarray(ids, dtype=object))
    original = arrays._HASH_CHUNK
    try:
        arrays._HASH_CHUNK = chunk
        for given_ids in (pd.Index(ids, dtype=object), np.asarray(ids, dtype=object), pd.Series(ids, dtype=object)):
            chunked = arrays.id_hashes(given_ids)
            assert chunked is not None and whole is not None
            assert chunked.tolist() == whole.tolist()
    finally:
        arrays._HASH_CHUNK = original
    text = [str(i) for i in ids]
    arrow = arrays.id_hashes(pd.Index(text, dtype="str"))  # Arrow strings, as read_csv gives them
    assert arrow is not None and arrow.tolist() == arrays.id_hashes(np.asarray(text, dtype=object)).tolist()  # type: ignore[union-attr]
