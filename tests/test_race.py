"""One release of a dataset is prepared at a time, on SQLite and PostgreSQL:
real processes publishing while a draft is open or at the same moment, and recovery by one
process while another is publishing (interleavings forced in-process)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env, freeze_stats, run_cli
from helpers import CLINIC_PARAMS, release_listing, snapshot, state_of
from sqlalchemy import func, select

from serialpub.config import load_config
from serialpub.workflow import publishing
from serialpub.workflow.publisher import Publisher
from state.models import AuditLog, Release, Statistics
from state.store import StateStore, open_engine, this_process

#: every test here races real processes
pytestmark = pytest.mark.slow

#: ``python BARRIER GO ARGS``: imports serialpub, reports ready, waits for the file GO,
#: then runs ``serialpub ARGS`` (so two processes start publishing at the same moment)
BARRIER = """\
import os, sys, time
from pathlib import Path
import serialpub.cli, serialpub.workflow.publisher
go = Path(sys.argv[1])
Path(f"{go}.ready-{os.getpid()}").touch()
deadline = time.monotonic() + 300
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.001)
sys.argv = ["serialpub", *sys.argv[2:]]
serialpub.cli.main()
"""


def _published_once(root: Path) -> Publisher:
    publisher = Publisher(load_config(root))
    publisher.publish(snapshot(root, 1))
    return publisher


def _count(store: StateStore, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _one_line_error(proc: subprocess.CompletedProcess[str] | tuple[int, str]) -> str:
    rc, stderr = (proc.returncode, proc.stderr) if isinstance(proc, subprocess.CompletedProcess) else proc
    assert rc == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("serialpub: error: "), stderr
    return lines[0]


def test_publishing_while_a_draft_is_open_fails_and_moves_nothing(state_ws: Path, state_url: str) -> None:
    _published_once(state_ws)
    store = StateStore(open_engine(state_url))
    draft = store.begin_draft("clinic", "0002", CLINIC_PARAMS, this_process())  # a live owner
    before = state_of(state_ws), len(store.audit_log("clinic"))

    proc = run_cli("release", "--config", state_ws, "--snapshot", snapshot(state_ws, 2), url=state_url, cwd=state_ws)
    line = _one_line_error(proc)
    for part in ("release 2", "'0002'", "already draft", this_process(), "serialpub reject --release 2"):
        assert part in line, line
    assert (state_of(state_ws), len(store.audit_log("clinic"))) == before
    still = store.open_release("clinic")
    assert still is not None and (still.id, still.status) == (draft.id, "draft")


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2], ids=["first-release-empty-database", "next-release"])
def test_two_processes_publishing_the_same_period_count_it_once(
    state_ws: Path, state_url: str, tmp_path: Path, reference_series: dict[str, Any], k: int
) -> None:
    """Started at the same moment (after their imports); for k = 1 both also find an empty
    database and create its schema."""
    if k == 2:
        _published_once(state_ws)
    script = tmp_path / "barrier.py"
    script.write_text(BARRIER, encoding="utf-8")
    go = tmp_path / "go"
    args = ["release", "--config", str(state_ws), "--snapshot", str(snapshot(state_ws, k))]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(go), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=state_ws,
            env=cli_env(state_url),
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + 300
    while len(list(tmp_path.glob("go.ready-*"))) < 2:
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "barrier not reached"
        time.sleep(0.01)
    go.touch()
    results = [(p.returncode, err) for p in procs for _, err in [p.communicate(timeout=600)]]

    assert sorted(rc for rc, _ in results) == [0, 2], results
    loser = _one_line_error(next(r for r in results if r[0] == 2))
    # drafts overlapped (the usual case), or the loser opened its draft (begin_draft's check)
    # or even started (the publisher's check) after the winner had committed
    busy = f"release {k} (period '{k:04d}') is already" in loser and f"serialpub reject --release {k}" in loser
    late = f"period '{k:04d}' is not later than the last published period '{k:04d}'" in loser
    later = f"period '{k:04d}' of dataset 'clinic' is already published" in loser
    assert busy or late or later, loser

    store = StateStore(open_engine(state_url))
    assert [(r.seq, r.period) for r in store.published("clinic")] == [(i, f"{i:04d}") for i in range(1, k + 1)]
    assert _count(store, select(func.count()).where(Release.period == f"{k:04d}")) == 1  # no draft of the loser
    assert _count(store, select(func.count()).select_from(Statistics)) == k
    assert _count(store, select(func.count()).where(AuditLog.action == "published", AuditLog.release_seq == k)) == 1
    assert store.open_release("clinic") is None
    assert freeze_stats(store.latest_statistics("clinic")) == reference_series["stats"][k]
    dataset_dir = state_ws / "releases" / "clinic"
    assert release_listing(dataset_dir) == [f"release-{i:04d}" for i in range(1, k + 1)]
    assert (dataset_dir / f"release-{k:04d}" / "data.parquet").read_bytes() == reference_series["data"][k]


# ---------------------------------------------------------------------------------------
# a second process recovering while the first publishes (the interleaving is forced)


def test_recovery_between_commit_and_rename_of_another_process(
    state_ws: Path, monkeypatch: pytest.MonkeyPatch, reference_series: dict[str, Any]
) -> None:
    """B's recovery rolls A's committed release forward just before A renames it: A's
    publication still succeeds and the release is in place once."""
    _published_once(state_ws)
    other = Publisher(load_config(state_ws))

    def hook(name: str) -> None:
        if name == "after_commit":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                other.recover()

    monkeypatch.setattr(publishing, "checkpoint", hook)
    outcome = Publisher(load_config(state_ws)).publish(snapshot(state_ws, 2))
    assert outcome.seq == 2
    dataset_dir = state_ws / "releases" / "clinic"
    assert release_listing(dataset_dir) == ["release-0001", "release-0002"]
    assert (dataset_dir / "release-0002" / "data.parquet").read_bytes() == reference_series["data"][2]


def test_recovery_does_not_remove_the_staging_of_a_draft_opened_meanwhile(
    state_ws: Path, monkeypatch: pytest.MonkeyPatch, reference_series: dict[str, Any]
) -> None:
    """B's recovery reads the state (no open release), then A opens its draft and stages its
    files before B looks at the folder: B must leave A's staging alone, and A's release must
    end up published and in place."""
    _published_once(state_ws)
    ws = load_config(state_ws)
    a, b = Publisher(ws), Publisher(ws)
    staged, go_on = threading.Event(), threading.Event()

    def hook(name: str) -> None:  # A (the only other thread) waits before its commit
        if name == "before_commit" and threading.current_thread() is not threading.main_thread():
            staged.set()
            assert go_on.wait(60)

    monkeypatch.setattr(publishing, "checkpoint", hook)
    outcome: list[Any] = []
    a_thread = threading.Thread(target=lambda: outcome.append(a.publish(snapshot(state_ws, 2))))
    original = b.store.open_release

    def open_release_then_let_a_stage(dataset: str) -> Any:
        current = original(dataset)
        a_thread.start()
        assert staged.wait(60)
        return current

    monkeypatch.setattr(b.store, "open_release", open_release_then_let_a_stage)
    dataset_dir = state_ws / "releases" / "clinic"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.recover()
        assert [p.name for p in dataset_dir.glob(".staging-release-0002-r*/manifest.json")]
    finally:
        go_on.set()
        a_thread.join(60)
    assert outcome and outcome[0].seq == 2
    assert release_listing(dataset_dir) == ["release-0001", "release-0002"]
    assert (dataset_dir / "release-0002" / "data.parquet").read_bytes() == reference_series["data"][2]
