"""Looking snapshot ids up in the register (anonymizer.arrays.IdLookup, through
serialpub.io.inputs.Register.rows_of): the same rows as pandas' hash table, for any ids, and
never a wrong row from a wrong lookup."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import make_workspace, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from anonymizer import arrays
from anonymizer.arrays import IdLookup
from serialpub.errors import InputError
from serialpub.io import inputs
from serialpub.io.inputs import Register

texts = st.text(alphabet="ab01 é-", max_size=4)


def _register(ids: list[str], lookup: IdLookup | None = None) -> Register:
    return Register(pd.Index(ids, dtype=object), np.zeros((len(ids), 1), dtype=np.int64), lookup)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, unique=True, max_size=30), st.lists(texts, max_size=30))
def test_rows_are_pandas_rows(register_ids: list[str], wanted: list[str]) -> None:
    register = _register(register_ids)
    expected = pd.Index(register_ids, dtype=object).get_indexer(pd.Index(wanted, dtype=object))
    found = register.rows_of(pd.Series(wanted, dtype=object))
    assert found.tolist() == expected.tolist() and found.dtype == np.int64
    # the lookup keeps its rows as int32 (half of int64 per register individual), answers int64
    assert register.id_lookup is None or register.id_lookup.rows.dtype == np.int32


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
@given(
    st.lists(texts, unique=True, max_size=30),
    st.lists(texts, max_size=30),
    st.sampled_from([(object, "str"), ("str", "str"), ("str", object)]),
)
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


@settings(max_examples=100, deadline=None)
@given(st.lists(texts, unique=True, max_size=20), st.lists(texts, max_size=20), st.integers(0, 3))
def test_a_find_of_arrow_strings_is_pandas_rows(register_ids: list[str], wanted: list[str], start: int) -> None:
    """Arrow strings are found as pandas finds them, for a column, for a slice of it (other
    offsets into the same buffers) and for the same values in other buffers; asked twice,
    the lookup answers twice the same."""
    lookup = IdLookup.of(pd.Index(register_ids, dtype="str"))
    assert lookup is not None
    ids = pd.Index(register_ids, dtype="str")
    column = pd.Series(wanted, dtype="str")
    expected = ids.get_indexer(pd.Index(wanted, dtype=object))
    for asked in (column, column, column.iloc[start:], pd.Series(list(wanted), dtype="str")):
        found = lookup.find(ids, asked)
        assert found is not None and found.tolist() == expected[len(column) - len(asked) :].tolist()


def test_a_lookup_keeps_nothing_between_calls() -> None:
    """State is explicit: a lookup is its sorted hashes and rows and nothing else (no answer
    kept, nothing keyed by the addresses or identities of its arguments), and the modules
    that look ids up hold no cache of their own; a caller that needs an answer twice keeps it
    (serialpub.workflow.input_checks.SnapshotRead.register_rows)."""
    import dataclasses
    import inspect
    import weakref
    from functools import _lru_cache_wrapper

    from checks import input_suites
    from serialpub.workflow import input_checks

    lookup = IdLookup.of(pd.Index(["a", "b"], dtype="str"))
    assert lookup is not None
    assert [f.name for f in dataclasses.fields(IdLookup)] == ["hashes", "rows"]
    assert not hasattr(lookup, "__dict__") or set(vars(lookup)) == {"hashes", "rows"}
    for module in (arrays, inputs, input_suites, input_checks):
        source = inspect.getsource(module)
        for needle in (r"\.address\b", r"\bid\(", r"\bweakref\b"):
            assert not re.search(needle, source), (module.__name__, needle)
        for name, value in vars(module).items():
            kind = type(value)
            cache = isinstance(value, _lru_cache_wrapper | weakref.WeakKeyDictionary | weakref.WeakValueDictionary)
            mutable = kind in (dict, list, set)
            assert not cache and not (mutable and not name.startswith("__")), (module.__name__, name)


ids_or_blank = st.sampled_from(["p0", "p1", "p2", "p3", "q9", "", " "])


@settings(max_examples=200, deadline=None)
@given(st.lists(ids_or_blank, min_size=1, max_size=12))
def test_repeated_ids_found_by_register_rows_as_by_text(snapshot_ids: list[str]) -> None:
    """A snapshot's repeated ids are found by their register rows when every id has one (the
    register's ids are unique), by the text otherwise: the same line and message either way."""
    register = _register(["p0", "p1", "p2", "p3"])
    df = pd.DataFrame({"id": pd.array(snapshot_ids, dtype="str")})

    def message(rows: np.ndarray | None) -> str | None:
        try:
            inputs._check_ids(df, "id", "s.csv", "snapshot", rows)
        except InputError as exc:
            return str(exc)
        return None

    assert message(register.rows_of(df["id"])) == message(None)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["flu", "cold", "Flu", "é", "b", "a b", "10", "9"]), max_size=30), st.booleans())
def test_snapshot_value_order_sorts_as_the_values(values: list[str], from_column: bool) -> None:
    """A snapshot's sorted value codes: labels[codes] is the values, codes sort as the
    values do (the published table is ordered by them instead of by 1M texts), from the
    table's column or from the values alone."""
    value = np.asarray(values, dtype=str)
    table = pd.DataFrame({"d": pd.array(values, dtype="str")})
    snap = inputs.Snapshot(table, np.arange(len(values)), value, "d" if from_column else None)
    codes, labels = snap.value_order
    assert labels[codes].tolist() == value.tolist()
    assert labels.tolist() == sorted(set(values))
    assert np.array_equal(np.argsort(codes, kind="stable"), np.argsort(value, kind="stable"))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from(["flu", "", "Flu", "é", "ü b", "10", "a" * 12])), max_size=30),
    st.sampled_from(["str", "object", "string[pyarrow]"]),
)
def test_sensitive_texts_per_distinct_value_equal_the_per_record_conversion(
    values: list[str | None], dtype: str
) -> None:
    column = pd.Series(values, dtype=dtype)
    codes, distinct, texts = inputs.as_text(column)
    expected = column.to_numpy(dtype=str)
    assert texts.dtype == expected.dtype and np.array_equal(texts, expected)
    assert len(distinct) == len(pd.unique(column))
    assert distinct.take(codes).equals(pd.Index(column))  # missing values equal missing ones


def test_a_snapshot_is_looked_up_in_the_register_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checking a snapshot looks its ids up in the register once, when it is read: its
    coding and its suite's ids-in-register expectation read those rows; checking it again
    with the same reader looks nothing up."""
    from serialpub.config import load_config
    from serialpub.workflow.publisher import Publisher

    looked_up: list[int] = []
    real = IdLookup.find

    def counted(self: IdLookup, ids: object, wanted: pd.Series) -> object:
        looked_up.append(len(wanted))
        return real(self, ids, wanted)  # type: ignore[arg-type]

    monkeypatch.setattr(IdLookup, "find", counted)
    root = make_workspace(tmp_path / "ws")
    publisher = Publisher(load_config(root))
    checked = publisher.check_inputs(snapshot(root, 1), "0001")
    records = len(checked.snapshot.individual)
    assert looked_up == [records]
    publisher.check_inputs(snapshot(root, 1), "0001")
    assert looked_up == [records]
    publisher.check_inputs(snapshot(root, 2), "0002")
    assert len(looked_up) == 2
