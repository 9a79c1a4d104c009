"""Anonymizing ahead of the snapshot suite (serialpub.workflow.anonymizing): a draft takes the
result computed beside the suite only when it was computed for exactly that draft, releases
are the same bytes either way, and a snapshot that fails its checks is reported without
waiting for the work beside the suite."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import make_workspace, snapshot, state_of

from anonymizer import overlap
from serialpub.config import load_config
from serialpub.errors import InputChecksFailed
from serialpub.workflow import anonymizing, drafting
from serialpub.workflow.input_checks import check_inputs
from serialpub.workflow.publisher import Publisher
from state.store import OpenRelease


def _series(root: Path) -> list[bytes]:
    publisher = Publisher(load_config(root))
    for t in (1, 2, 3):
        publisher.publish(snapshot(root, t))
    return [(root / "releases" / "clinic" / f"release-{t:04d}" / "data.parquet").read_bytes() for t in (1, 2, 3)]


@pytest.mark.slow
def test_releases_are_the_same_with_and_without_anonymizing_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool] = []
    tables: list[bool] = []
    take = anonymizing.take

    def spy(*args: object) -> anonymizing.Anonymized | None:
        done = take(*args)  # type: ignore[arg-type]
        taken.append(done is not None)
        tables.append(done is not None and done.table is not None)
        return done

    monkeypatch.setattr(drafting, "take", spy)
    ahead = _series(make_workspace(tmp_path / "ahead", seed=3))
    assert taken == [True, True, True]  # every draft took the result computed beside its suite
    assert tables == [True, True, True]  # and its release table, built on the same thread

    monkeypatch.setattr(anonymizing, "ahead", lambda *args: None)  # every draft computes its own
    taken.clear()
    plain = _series(make_workspace(tmp_path / "plain", seed=3))
    assert taken == [False, False, False]
    assert ahead == plain
    assert state_of(tmp_path / "ahead")[1] == state_of(tmp_path / "plain")[1]  # the statistics after release 3


@pytest.mark.slow
def test_a_result_for_another_draft_is_not_taken(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    publisher = Publisher(load_config(root))
    publisher.publish(snapshot(root, 1))
    [first] = publisher.store.published("clinic")
    series, inputs, register = publisher.series, publisher.inputs, publisher.register_reader
    checked = check_inputs(series, inputs, register, publisher.request, snapshot(root, 2), "0002")
    done = anonymizing.ahead(series, inputs, register, checked.snapshot, threading.Event())
    assert done is not None and (done.seq, done.basis) == (2, first.id)

    def opened(seq: int) -> OpenRelease:
        return OpenRelease(0, seq, "0002", "draft", "test", None, first.published_at, first.params)  # type: ignore[arg-type]

    assert anonymizing.take(series, done, opened(2)) is done
    assert anonymizing.take(series, done, opened(3)) is None  # another release number
    # the newest published release is another one than the state read: not taken
    publisher.publish(snapshot(root, 2))
    assert anonymizing.take(series, done, opened(2)) is None
    assert anonymizing.take(series, None, opened(2)) is None
    stopped = threading.Event()
    stopped.set()  # the snapshot failed its checks: nothing is computed
    assert anonymizing.ahead(series, inputs, register, checked.snapshot, stopped) is None


def test_a_failing_snapshot_is_reported_without_waiting_for_the_work_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The draft runs the work ahead beside the snapshot suite (drafting.draft); a suite that
    fails is reported at once, and the work ahead is told to stop."""
    monkeypatch.delenv(overlap.SEQUENTIAL_ENV, raising=False)
    root = make_workspace(tmp_path / "ws")
    bad = root / "snapshots" / "snapshot-0001.csv"
    bad.write_text(bad.read_text(encoding="utf-8").replace(",M,", ",X,", 1), encoding="utf-8")
    publisher = Publisher(load_config(root))
    go_on = threading.Event()
    stopped = threading.Event()
    finished = threading.Event()

    def beside(*args: object) -> None:
        stop = args[-1]
        assert isinstance(stop, threading.Event)
        go_on.wait(timeout=60)  # held until the test has seen the failure (or a minute passed)
        if stop.is_set():
            stopped.set()
        finished.set()

    # the coding would fail on the bad value too: it is left out, so that the work ahead runs
    monkeypatch.setattr(drafting, "code_snapshot", lambda *args: object())
    monkeypatch.setattr(drafting, "_ahead", beside)
    before = state_of(root)
    with pytest.raises(InputChecksFailed, match="snapshot"):
        publisher.draft(bad, "0001")
    assert not finished.is_set()  # the failure did not wait for the work beside the suite
    go_on.set()
    assert finished.wait(timeout=60) and stopped.is_set()  # which was told the checks failed
    assert state_of(root) == before


@pytest.mark.slow
def test_the_state_is_read_once_per_statistics_file_and_cannot_be_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A draft and its validation in one process load the same statistics file: it is read
    and decoded once, found again by its sha256; a newly published release's file is read;
    the History's arrays are read-only."""
    import numpy as np

    from serialpub.io import statistics_file

    root = make_workspace(tmp_path / "ws")
    publisher = Publisher(load_config(root))
    decoded: list[int] = []
    load = statistics_file.StatisticsFile.load

    def spy(self: statistics_file.StatisticsFile, stats: object, ell: object) -> object:
        decoded.append(0 if stats is None else 1)
        return load(self, stats, ell)  # type: ignore[arg-type]

    monkeypatch.setattr(statistics_file.StatisticsFile, "load", spy)
    publisher.publish(snapshot(root, 1))
    assert decoded == [0]  # before the first release: the empty state, once for draft and validation
    ell = np.full(len(publisher.register.ids), float(publisher.ws.config.ell))
    first = publisher.statistics.load_latest(publisher.store, "clinic", ell)
    assert decoded == [0, 1]  # release 1's file, read once
    assert publisher.statistics.load_latest(publisher.store, "clinic", ell) is first
    assert decoded == [0, 1]
    with pytest.raises(ValueError, match="read-only"):
        first.survival[0, 0] = 0.5
    publisher.publish(snapshot(root, 2))
    assert decoded == [0, 1]  # release 2's draft and validation took release 1's file as loaded
    second = publisher.statistics.load_latest(publisher.store, "clinic", ell)
    assert decoded == [0, 1, 1] and second is not first  # release 2's file
    assert publisher.statistics.load_latest(publisher.store, "clinic", ell + 1) is not second
    assert decoded == [0, 1, 1, 1]  # another ℓ: loaded again
