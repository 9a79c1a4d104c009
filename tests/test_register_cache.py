"""The register cache (serialpub.io.register_cache): a fresh process takes the coded register
and the passed register suite of an unchanged register from the cache, never a stale entry."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import CLINIC_PARAMS, make_workspace, snapshot

from anonymizer.arrays import CodedRows
from serialpub.config import DATABASE_ENV, load_config
from serialpub.errors import InputChecksFailed
from serialpub.io import register_cache, verdict_cache, versions
from serialpub.io.inputs import load_register, read_csv
from serialpub.workflow import input_checks
from serialpub.workflow.dataset_inputs import read_dataset_inputs
from serialpub.workflow.publisher import Publisher
from state.params import DraftParams


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    return make_workspace(tmp_path / "ws")


#: the register cache entries the tests' publishers write, each on a thread of its own
#: (register_cache.Writes): a test reads the folder once they are written
WRITES = register_cache.Writes()


def _publisher(root: Path) -> Publisher:
    return Publisher(load_config(root), WRITES)


def _new_process() -> None:
    """What a fresh process would start with: the entries this one writes are written (a
    publisher keeps nothing for another)."""
    WRITES.wait()


def _entries(root: Path) -> list[Path]:
    WRITES.wait()
    return sorted((root / register_cache.CACHE_DIR).glob("register-*.arrow"))


def _suite_sha(root: Path) -> str:
    """The register suite's evidence checksum as a fresh process gets it."""
    _new_process()
    return _publisher(root).register_reader.check().sha256


@pytest.mark.slow
def test_a_cached_register_is_the_parsed_one_with_the_same_verdict(root: Path) -> None:
    first = _publisher(root)
    first.publish(snapshot(root, 1))
    ran = first.register_reader.check().sha256  # the suite ran in this process
    (entry,) = _entries(root)
    _new_process()
    pub = _publisher(root)
    cached = pub.register_reader.cached_entry
    assert cached is not None and cached[2] is not None and cached[2]["success"]
    ws = load_config(root)
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, pub.hierarchies)
    assert list(cached[0]) == list(parsed.ids) and np.array_equal(cached[1].dense(), parsed.keys.dense())
    # the same combinations in the same order, so the same cells
    assert np.array_equal(cached[1].codes, parsed.keys.codes) and np.array_equal(cached[1].table, parsed.keys.table)
    # the codes are a view of the entry's bytes as read, not a copy: a national register's
    # codes are not held twice; and nobody can write through them
    assert cached[1].table.dtype == np.int32 and cached[1].shape == parsed.keys.shape
    assert not cached[1].codes.flags.owndata and not cached[1].codes.flags.writeable
    pub.publish(snapshot(root, 2))
    assert pub.register_reader.check().sha256 == ran  # the same evidence as running the suite
    assert _entries(root) == [entry]


@pytest.mark.slow
def test_a_changed_register_or_hierarchy_is_never_read_from_the_cache(root: Path) -> None:
    _publisher(root).publish(snapshot(root, 1))
    (first,) = _entries(root)
    register = root / "register.csv"
    _, sex, zipcode, age = register.read_text().splitlines()[1].split(",")
    register.write_text(register.read_text() + f"p999,X,{zipcode},{age}\n")  # 'X' is no leaf of sex
    with pytest.raises(InputChecksFailed, match="population register failed its input checks"):
        _publisher(root).publish(snapshot(root, 2))
    assert _entries(root) == [first]  # a failed suite is not cached
    register.write_text(register.read_text().replace("p999,X,", f"p999,{sex},"))
    hierarchy = root / "hierarchies" / "age.csv"
    hierarchy.write_text(hierarchy.read_text().replace("[20, 24]", "[20-24]"))
    _publisher(root).publish(snapshot(root, 2))
    (second,) = _entries(root)
    assert second != first  # a new key; the old entry is gone


def test_an_altered_entry_is_not_used(root: Path) -> None:
    """Codes changed in the entry (a disk error, an edit) do not reach the anonymizer: the
    entry fails its digest and the register is parsed again."""
    _publisher(root).publish(snapshot(root, 1))
    (entry,) = _entries(root)
    key = entry.stem.removeprefix("register-")
    ids, keys, suite, _ = register_cache.load(root, key)  # type: ignore[misc]
    dense = keys.dense().copy()
    dense[0, 0] = (dense[0, 0] + 1) % 2  # individual 1's sex flipped
    altered = CodedRows.of(dense, [int(m) + 2 for m in dense.max(axis=0)])
    digest = entry.with_suffix(".sha256").read_text()
    register_cache.save(root, key, ids, altered, load_config(root).config.quasi_identifiers, suite)
    entry.with_suffix(".sha256").write_text(digest)  # the entry edited, its digest not
    _new_process()
    assert register_cache.load(root, key) is None
    pub = _publisher(root)
    assert pub.register_reader.cached_entry is None
    ws = load_config(root)
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, pub.hierarchies)
    assert np.array_equal(pub.register.keys.dense(), parsed.keys.dense())


def test_an_entry_with_inconsistent_codes_is_not_used(root: Path) -> None:
    """An entry whose digest matches but whose coded rows break their invariants (written by
    a faulty build, say) is not used either: a load checks the codes against the table."""
    _publisher(root).publish(snapshot(root, 1))
    (entry,) = _entries(root)
    key = entry.stem.removeprefix("register-")
    ids, keys, suite, _ = register_cache.load(root, key)  # type: ignore[misc]
    codes = keys.codes.copy()
    codes[[0, 1]] = codes[[1, 0]]  # no longer numbered by first appearance
    broken = CodedRows(codes, keys.table, keys.first, keys.counts)  # past the checks
    register_cache.save(root, key, ids, broken, load_config(root).config.quasi_identifiers, suite)
    _new_process()
    assert register_cache.intact(entry)  # its digest matches
    assert register_cache.load(root, key) is None
    pub = _publisher(root)
    assert pub.register_reader.cached_entry is None and np.array_equal(pub.register.keys.codes, keys.codes)


@pytest.mark.slow
def test_an_entry_rewritten_in_place_after_its_load_changes_nothing(root: Path) -> None:
    """A loaded entry is the bytes checked at its load: rewriting the file in place
    afterwards (a restore from a backup while a release runs, say) changes neither the
    leaf ids a release computes with nor their grouping."""
    from anonymizer.arrays import factorize_rows

    _publisher(root).publish(snapshot(root, 1))
    (entry,) = _entries(root)
    _new_process()
    _, keys, _, _ = register_cache.load(root, entry.stem.removeprefix("register-"))  # type: ignore[misc]
    before = keys.dense().copy()
    radices = [int(before[:, a].max()) + 2 for a in range(before.shape[1])]
    grouping = factorize_rows(keys, radices)[0].copy()
    data = bytearray(entry.read_bytes())
    at = data.find(keys.table[:4].tobytes())  # the first combinations' leaf ids in the file
    assert at >= 0
    with entry.open("r+b") as f:  # in place: the same inode
        f.seek(at)
        f.write((keys.table[:4] + 1).tobytes())
    assert np.array_equal(keys.dense(), before)
    assert np.array_equal(factorize_rows(keys, radices)[0], grouping)
    assert np.array_equal(factorize_rows(before, radices)[0], grouping)


@pytest.mark.slow
def test_an_unreadable_entry_is_read_again_from_the_source(root: Path) -> None:
    _publisher(root).publish(snapshot(root, 1))
    (entry,) = _entries(root)
    ran = _suite_sha(root)
    entry.write_bytes(b"not arrow")
    entry.with_suffix(".sha256").write_text(hashlib.sha256(b"not arrow").hexdigest())  # passes the digest
    _new_process()
    _publisher(root).publish(snapshot(root, 2))
    assert _suite_sha(root) == ran
    _new_process()
    assert register_cache.load(root, entry.stem.removeprefix("register-")) is not None  # written again


# -- the snapshot suite's verdict (serialpub.io.verdict_cache) ---------------------------


def _verdicts(root: Path) -> list[Path]:
    return sorted((root / register_cache.CACHE_DIR).glob("snapshot-*.json"))


def _count_calls(monkeypatch: pytest.MonkeyPatch, name: str, mark: str) -> list[str]:
    """``mark`` appended to the returned list at every call of ``input_checks.<name>``."""
    calls: list[str] = []
    real = getattr(input_checks, name)

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(mark)
        return real(*args, **kwargs)

    monkeypatch.setattr(input_checks, name, counted)
    return calls


def _count_suite_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return _count_calls(monkeypatch, "snapshot_suite", "ran")


def test_a_passed_snapshot_verdict_is_read_by_the_next_process(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _count_suite_runs(monkeypatch)
    first = _publisher(root).check_inputs(snapshot(root, 1), "0001")
    assert runs == ["ran"] and len(_verdicts(root)) == 1
    # a fresh process (an Airflow task's) on the same inputs: the same evidence, no run
    _new_process()
    again = _publisher(root).check_inputs(snapshot(root, 1), "0001")
    assert runs == ["ran"]
    assert [c.sha256 for c in again.suites] == [c.sha256 for c in first.suites]
    assert again.suites[1].result == first.suites[1].result
    # other bytes: checked anew, and the folder keeps the latest verdict only
    _publisher(root).check_inputs(snapshot(root, 2), "0002")
    assert runs == ["ran", "ran"] and len(_verdicts(root)) == 1


def _rows(n: int) -> DraftParams:
    """The params of a published release whose snapshot had ``n`` records."""
    return DraftParams(**CLINIC_PARAMS.record(), snapshot_rows=n)


def test_a_verdict_is_bound_to_the_period_order(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same snapshot bytes checked after another last period or row count: the suite
    runs again (its period and row-count expectations read them)."""
    runs = _count_suite_runs(monkeypatch)
    pub = _publisher(root)
    table = read_csv(snapshot(root, 2), "snapshot")
    sha = versions.sha256_bytes(snapshot(root, 2).read_bytes())
    earlier = [SimpleNamespace(period="0001", params=_rows(len(table)))]
    for published in ([], earlier, earlier, [SimpleNamespace(period="0001", params=_rows(len(table) + 1))]):
        input_checks.check_snapshot(
            pub.ws,
            pub.register_reader,
            table,
            "snapshot-0002.csv",
            "0002",
            published,  # type: ignore[arg-type]
            sha,
        )
    assert runs == ["ran", "ran", "ran"]  # the third check is the second's


def test_an_edited_or_failed_verdict_is_never_read(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _count_suite_runs(monkeypatch)
    _publisher(root).check_inputs(snapshot(root, 1), "0001")
    (entry,) = _verdicts(root)
    entry.write_text(entry.read_text().replace('"success": true', '"success": true ', 1))  # digest now stale
    _new_process()
    _publisher(root).check_inputs(snapshot(root, 1), "0001")
    assert runs == ["ran", "ran"]
    with pytest.raises(ValueError, match="only a passed suite"):
        verdict_cache.save(root, "k", {"success": False})
    bad = root / "snapshots" / "snapshot-0003.csv"
    lines = snapshot(root, 1).read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1], lines[1], *lines[2:]]) + "\n")  # an id twice
    for _ in range(2):  # a failed verdict is made afresh every time
        _new_process()
        with pytest.raises(InputChecksFailed):
            _publisher(root).check_inputs(bad, "0003")
    assert runs == ["ran"] * 4


@pytest.mark.slow
def test_a_reader_checks_its_snapshot_once_and_another_reads_the_verdict(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A register reader checks a snapshot once (validating its draft does not check it again);
    another publisher (an Airflow task's) keeps nothing of the first but reads the suite's
    verdict and the coded register from the workspace."""
    _publisher(root).publish(snapshot(root, 1))
    _new_process()
    runs = _count_suite_runs(monkeypatch)
    coded = _count_calls(monkeypatch, "snapshot_from_table", "coded")
    first, second = _publisher(root), _publisher(root)
    a = first.check_inputs(snapshot(root, 2), "0002")
    assert first.check_inputs(snapshot(root, 2), "0002").snapshot is a.snapshot
    assert runs == ["ran"] and coded == ["coded"]
    b = second.check_inputs(snapshot(root, 2), "0002")
    assert second.register.keys is not first.register.keys and not second.register.keys.codes.flags.writeable
    assert b.snapshot is not a.snapshot and b.sha256 == a.sha256
    assert runs == ["ran"] and coded == ["coded", "coded"]
    # other bytes for the same period: another key, checked anew
    second.check_inputs(snapshot(root, 3), "0002")
    assert runs == ["ran", "ran"] and coded == ["coded", "coded", "coded"]


def test_the_cache_key_binds_every_checks_module_the_suites_import() -> None:
    """A change to any module of ``checks`` the input suites run through re-runs them:
    the key's code list holds all of them (the modules ``checks.input_suites`` imports from
    ``checks``, and their own)."""
    import ast

    from serialpub.workflow.register_reader import suite_code

    keyed = {p.resolve() for p in suite_code()}
    todo, seen = [Path(input_checks.__file__).parents[2] / "checks" / "input_suites.py"], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("checks."):
                todo.append(path.parent / f"{node.module.split('.', 1)[1]}.py")
    assert {p.resolve() for p in seen} <= keyed, sorted(p.name for p in seen)


def test_a_new_register_version_checks_its_ids_once(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Coding a register the suite passed on does not check its ids again (the suite's
    expectations are the same: present, non-blank, unique); without the suite it does, and
    the register is the same either way."""
    from serialpub.io import inputs

    calls: list[str] = []
    check = inputs._check_ids

    def spy(df: object, id_column: str, path: object, what: str, rows: object = None) -> None:
        if what == "register":  # snapshots check their ids as before
            calls.append(str(path))
        check(df, id_column, path, what, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "_check_ids", spy)
    pub = _publisher(root)
    pub.publish(snapshot(root, 1))  # the cache was empty: parsed, checked by the suite, coded
    assert pub.register_reader.check().success
    assert calls == []
    ws = load_config(root)
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, pub.hierarchies)
    assert calls == [str(ws.register_path)]  # no suite there: the ids are checked while coding
    assert list(parsed.ids) == list(pub.register.ids) and np.array_equal(parsed.keys.dense(), pub.register.keys.dense())


def test_an_entry_written_beside_the_release_is_read_once_written(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """save_soon writes on a thread of its own; a load of the same key in this process waits
    for it (never a torn entry), and the digest hashed while writing is the file's."""
    import threading

    release = threading.Event()
    save = register_cache.save

    def slow_save(*args: object, **kwargs: object) -> None:
        assert release.wait(120), "the test never let the write go"
        save(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(register_cache, "save", slow_save)
    pub = _publisher(root)
    ws = load_config(root)
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, pub.hierarchies)
    key = "0" * 64
    writes = register_cache.Writes()
    writing = writes.save_soon(root, key, parsed.ids, parsed.keys, ws.config.quasi_identifiers, None)
    assert not writing.done() and not list((root / register_cache.CACHE_DIR).glob("register-*.arrow"))
    loaded: list[object] = []
    reader = threading.Thread(target=lambda: loaded.append(register_cache.load(root, key, writes)))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive() and loaded == []  # waiting for the write, not reading a missing entry
    release.set()
    reader.join(120)
    entry = loaded[0]
    assert entry is not None and list(entry[0]) == list(parsed.ids)
    assert np.array_equal(entry[1].dense(), parsed.keys.dense())
    path = root / register_cache.CACHE_DIR / f"register-{key}.arrow"
    assert register_cache.intact(path)
    assert path.with_suffix(".sha256").read_text().strip() == hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_entry_of_an_empty_register_or_another_layout_loads_or_is_rebuilt() -> None:
    """The leaf-id column of no individual (no chunk at all) gives empty coded rows; a column
    of another layout is refused with an error the load turns into a rebuild."""
    import pyarrow as pa

    width = 3
    kind = pa.dictionary(pa.int64(), pa.list_(pa.int32(), width))
    empty = register_cache._coded_rows(pa.chunked_array([], type=kind))
    assert empty.shape == (0, width) and empty.table.shape == (0, width)
    with pytest.raises(AttributeError):
        register_cache._coded_rows(pa.chunked_array([pa.array([1, 2], pa.int32())]))


@pytest.mark.parametrize("what", ["snapshot verdict", "register version"])
def test_two_writers_of_one_file_never_rename_each_others_file(
    what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two publishers started together both save the snapshot verdict and store the register
    version: here the second writer runs whole inside the first's first rename, the
    interleaving under which a shared temporary name loses the first writer's file."""
    import os

    register = tmp_path / "register.csv"
    register.write_text("id,a\n1,x\n", encoding="utf-8")
    sha = versions.sha256_bytes(register.read_bytes())

    def write(by: str) -> None:
        if what == "snapshot verdict":
            verdict_cache.save(tmp_path, "k", {"success": True, "by": by})
        else:
            versions.RegisterVersions(tmp_path).keep(register, sha)

    real_replace = os.replace
    interleaved: list[str] = []

    def second_writer_inside(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if not interleaved:
            interleaved.append("second")
            write("second")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", second_writer_inside)
    write("first")
    assert interleaved == ["second"]
    if what == "snapshot verdict":
        assert verdict_cache.load(tmp_path, "k") == {"success": True, "by": "first"}  # the last rename wins, whole
    else:
        assert versions.RegisterVersions(tmp_path).lines(sha) is not None
    assert not [p.name for p in tmp_path.rglob("*.tmp")]


def test_a_reader_and_inputs_of_two_reads_are_refused(root: Path) -> None:
    """The snapshot suite reads the reader's inputs and the coding the step's: two reads of
    changed hierarchy files given together would check one thing and code another."""
    pub = _publisher(root)
    other = read_dataset_inputs(pub.ws)  # equal, but another read
    with pytest.raises(ValueError, match="another read of the dataset's inputs"):
        input_checks.check_inputs(pub.series, other, pub.register_reader, pub.request, snapshot(root, 1), "0001")
    assert pub.store.open_release("clinic") is None


@pytest.mark.slow
def test_a_plans_entry_has_no_verdict_and_the_release_adds_it(root: Path) -> None:
    from serialpub.planning.series import PlanInputs

    ws = load_config(root)
    plan = PlanInputs.read(ws)
    coded = plan.register.register
    plan.register.cache_writes.wait()
    (entry,) = sorted((root / register_cache.CACHE_DIR).glob("register-*.arrow"))
    # the plan never runs the register suite: its entry carries no verdict
    loaded = register_cache.load(root, plan.register.cache_key)
    assert loaded is not None and loaded[2] is None
    parsed = load_register(ws.register_path, "id", ws.config.quasi_identifiers, plan.inputs.hierarchies)
    assert list(loaded[0]) == list(parsed.ids) and np.array_equal(loaded[1].dense(), parsed.keys.dense())
    assert np.array_equal(coded.keys.codes, parsed.keys.codes)
    # a release codes the register from it, runs the suite (no verdict to take), and writes
    # the entry again with the verdict
    pub = _publisher(root)
    pub.publish(snapshot(root, 1))
    assert pub.register_reader.cached_entry is not None and pub.register_reader.cached_entry[2] is None
    ran = pub.register_reader.check()
    assert ran.success
    assert _entries(root) == [entry]
    again = _publisher(root).register_reader.cached_entry
    assert again is not None and again[2] is not None and again[2]["sha256"] == ran.sha256
    # a plan leaves an entry with a verdict as it is
    replan = PlanInputs.read(ws)
    assert replan.register.register.ids.equals(parsed.ids)
    replan.register.cache_writes.wait()
    kept = register_cache.load(root, plan.register.cache_key)
    assert kept is not None and kept[2] is not None
