"""Atomic publication under SIGKILL, on SQLite and PostgreSQL.

For every failpoint of ``serialpub.faults`` a real process running ``serialpub release``
(``python -m serialpub.cli``'s entry point, forked from a server that imported the pipeline
once: tests/forked_cli.py) publishing release 2 of the small workspace kills itself there.
Then:

(a) before any recovery, what is on disk and in the state is exactly what :data:`BEFORE`
    allows for that point: the release is published-and-in-place, or invisible (no final
    folder, not counted), or (after_commit only) committed with its files still staged;
(b) after recovery the release is either published once, in place, with matching
    checksums, or invisible with no trace but a failed draft; no staging folder remains;
    the series then goes on, and its files and statistics equal an uninterrupted run.

The crashes of one engine run two at a time in a module fixture; the checks run per point.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import forked_cli
import pytest
from conftest import ENGINES, PublishedWorkspaces, StateDatabases, cli_env, freeze_stats
from helpers import make_workspace, snapshot
from sqlalchemy import func, select

from serialpub import faults
from serialpub.config import DATABASE_ENV, load_config
from serialpub.io import release_files, signing
from serialpub.io.series_records import CHECKPOINT_FILE, CHECKPOINT_SIGNATURE, Checkpoint
from serialpub.workflow.publisher import Publisher
from state.models import AuditLog, Release, Statistics
from state.store import StateStore, open_engine, owner_is_gone

POINTS = faults.POINTS
#: crashes before the state commit: the release must end up invisible
INVISIBLE = POINTS[: POINTS.index("after_commit")]
STAGED = ["data.parquet", "manifest.json", "report.html", "report.json", "validation.html", "validation.json"]
#: staged once the sign-off is written into the manifest: its signature too (tests sign)
SIGNED = sorted([*STAGED, "manifest.sig"])
#: before recovery, per point: statuses of the release-2 rows, files in its staging
#: folder (None: no folder), whether release-0002 exists
BEFORE: dict[str, tuple[list[str], list[str] | None, bool]] = {
    "after_snapshot": ([], None, False),
    "after_draft": (["draft"], None, False),
    "after_state_load": (["draft"], None, False),
    "after_anonymize": (["draft"], None, False),
    "after_data_written": (["draft"], ["data.parquet"], False),
    "after_manifest_written": (["draft"], ["data.parquet", "manifest.json"], False),
    "after_flush": (["draft"], ["data.parquet", "manifest.json"], False),
    "after_validation": (["validated"], STAGED, False),  # suites passed and stored
    "before_commit": (["approved"], SIGNED, False),  # signed off automatically
    "after_commit": (["published"], SIGNED, False),  # committed, still in staging
    "after_rename": (["published"], None, True),
    "after_publish": (["published"], None, True),
    "during_recovery": (["published"], None, True),  # recovery of an after_commit crash
}


def test_every_failpoint_has_an_expectation() -> None:
    assert len(POINTS) >= 10
    assert set(BEFORE) == set(POINTS)


@dataclass
class Crash:
    point: str
    root: Path
    url: str
    returncodes: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    stderr: str = ""


def _crash(crash: Crash) -> Crash:
    """Run the publication(s) that die at ``crash.point``. during_recovery needs a committed
    release left in staging: first crash at after_commit, then start release 3, whose
    recovery rolls release 2 forward and dies there."""
    runs = [("after_commit", 2), ("during_recovery", 3)] if crash.point == "during_recovery" else [(crash.point, 2)]
    for point, k in runs:
        done = forked_cli.run(
            ["release", "--config", str(crash.root), "--snapshot", str(snapshot(crash.root, k))],
            env=cli_env(crash.url, point),
            cwd=crash.root,
        )
        crash.returncodes.append(done.returncode)
        crash.pids.append(done.pid)
        crash.stderr += done.stderr
    return crash


@pytest.fixture(scope="module", params=ENGINES)
def crashes(
    request: pytest.FixtureRequest,
    state_databases: StateDatabases,
    published_workspaces: PublishedWorkspaces,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Crash]:
    """Per failpoint: a workspace with release 1 published, then killed while publishing 2.
    On SQLite each is a relocated copy of the worker's published workspace (its state file
    inside it), as ``published_once`` is; a PostgreSQL state lives in its own schema, so
    there release 1 is published into each."""
    kind = request.param
    base = tmp_path_factory.mktemp(f"crash-{kind}")
    jobs = []
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(faults.ENV, raising=False)
        for point in POINTS:
            if kind == "sqlite":
                root = published_workspaces.copy(base / point)
                jobs.append(Crash(point, root, f"sqlite:///{root / 'state.sqlite'}"))
                continue
            crash = Crash(point, make_workspace(base / point), state_databases.new(kind))
            mp.setenv(DATABASE_ENV, crash.url)
            publisher = Publisher(load_config(crash.root))
            publisher.publish(snapshot(crash.root, 1))
            publisher.store.engine.dispose()
            jobs.append(crash)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {c.point: c for c in pool.map(_crash, jobs)}


def _rows(store: StateStore, seq: int) -> list[Release]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(Release).where(Release.seq == seq).order_by(Release.id)).all())


def _listing(dataset_dir: Path) -> list[str]:
    """The folder's entries but the signed checkpoint, rewritten after each publication."""
    return sorted(p.name for p in dataset_dir.iterdir() if p.name not in (CHECKPOINT_FILE, CHECKPOINT_SIGNATURE))


def _check_published_release(store: StateStore, dataset_dir: Path, seq: int, data: bytes) -> None:
    """Counted once, in place, its checksums agreeing with the state, its data as expected."""
    rows = [r for r in _rows(store, seq) if r.status == "published"]
    assert len(rows) == 1
    directory = dataset_dir / release_files.release_name(seq)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["release"] == seq
    assert manifest["sha256"]["data.parquet"] == release_files.sha256_file(directory / "data.parquet")
    assert rows[0].data_sha256 == manifest["sha256"]["data.parquet"]
    assert rows[0].manifest_sha256 == release_files.sha256_file(directory / "manifest.json")
    assert rows[0].directory == str(directory)
    assert (directory / "data.parquet").read_bytes() == data


def _check_checkpoint(store: StateStore, root: Path, dataset_dir: Path) -> Checkpoint:
    """The checkpoint names the newest published release with the manifest sha256 the state
    recorded, and its signature verifies with the workspace's key."""
    raw = (dataset_dir / CHECKPOINT_FILE).read_bytes()
    record = Checkpoint.parse(raw, CHECKPOINT_FILE)
    newest = store.published("clinic")[-1]
    assert (record.release, record.manifest_sha256) == (newest.seq, newest.manifest_sha256)
    public = signing.load_private_key(root / "keys" / "publisher.key").public_key()
    public.verify(base64.b64decode((dataset_dir / CHECKPOINT_SIGNATURE).read_bytes()), raw)  # raises if not
    return record


def _count(store: StateStore, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS)
def test_crash_leaves_the_release_published_or_invisible(
    crashes: dict[str, Crash], point: str, reference_series: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    crash = crashes[point]
    assert crash.returncodes and all(rc == -signal.SIGKILL for rc in crash.returncodes), crash.stderr
    monkeypatch.setenv(DATABASE_ENV, crash.url)
    monkeypatch.delenv(faults.ENV, raising=False)
    ws = load_config(crash.root)
    dataset_dir = ws.dataset_dir
    store = StateStore(open_engine(crash.url))
    ref_data, ref_stats = reference_series["data"], reference_series["stats"]

    # (a) what the crash left, before anything recovers
    statuses, staged, in_place = BEFORE[point]
    rows = _rows(store, 2)
    assert [r.status for r in rows] == statuses
    if statuses in (["draft"], ["validated"], ["approved"]):  # open, owned by the killed process, hence stale
        assert rows[0].owner == f"pid:{crash.pids[0]}@{socket.gethostname()}"
        assert owner_is_gone(rows[0].owner)
    attempts = [r for r in rows if r.status in ("draft", "validated", "approved", "published")]
    staging = dataset_dir / (release_files.staging_name(2, attempts[0].id) if attempts else "no-staging")
    assert (_listing(staging) if staging.exists() else None) == staged
    assert (dataset_dir / "release-0002").exists() == in_place
    assert _listing(dataset_dir) == sorted(
        ["release-0001"] + (["release-0002"] if in_place else []) + ([staging.name] if staged else [])
    )
    counted = [r.seq for r in store.published("clinic")] == [1, 2]
    assert [r.seq for r in store.published("clinic")] in ([1], [1, 2])
    # the invariant: in place iff counted, except a commit whose rename has not happened yet
    assert in_place == counted or (point == "after_commit" and counted and staged)
    assert freeze_stats(store.latest_statistics("clinic")) == ref_stats[2 if counted else 1]
    if in_place:
        _check_published_release(store, dataset_dir, 2, ref_data[2])
    if counted and staged:  # the staged files are the ones the commit recorded
        assert rows[0].data_sha256 == release_files.sha256_file(staging / "data.parquet")
        assert rows[0].manifest_sha256 == release_files.sha256_file(staging / "manifest.json")
    assert _rows(store, 3) == []

    # (b) after a restart: recovery settles it one way or the other
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        publisher = Publisher(ws)
        publisher.recover()
    messages = " | ".join(str(w.message) for w in caught)
    assert not list(dataset_dir.glob(".staging-*"))
    assert store.open_release("clinic") is None
    # the checkpoint names the newest counted release, signed, without waiting for the next publication
    _check_checkpoint(store, ws.root, dataset_dir)
    if point in INVISIBLE:
        assert _listing(dataset_dir) == ["release-0001"]
        assert [r.seq for r in store.published("clinic")] == [1]
        assert freeze_stats(store.latest_statistics("clinic")) == ref_stats[1]
        assert [r.status for r in _rows(store, 2)] == ([] if point == "after_snapshot" else ["failed"])
        if staged:
            assert "removed" in messages, messages
    else:
        assert _listing(dataset_dir) == ["release-0001", "release-0002"]
        assert [r.seq for r in store.published("clinic")] == [1, 2]
        _check_published_release(store, dataset_dir, 2, ref_data[2])
        assert freeze_stats(store.latest_statistics("clinic")) == ref_stats[2]
        if point == "after_commit":
            assert "completed the interrupted publication" in messages, messages

    # the series goes on and ends as if nothing had happened
    for k in (2, 3) if point in INVISIBLE else (3,):
        assert publisher.publish(snapshot(crash.root, k)).seq == k
    assert [(r.seq, r.period) for r in store.published("clinic")] == [(1, "0001"), (2, "0002"), (3, "0003")]
    assert _listing(dataset_dir) == ["release-0001", "release-0002", "release-0003"]
    kept = Checkpoint.parse((dataset_dir / CHECKPOINT_FILE).read_bytes(), CHECKPOINT_FILE)
    assert (kept.release, kept.manifest_sha256) == (3, store.published("clinic")[-1].manifest_sha256)
    for k in (1, 2, 3):
        _check_published_release(store, dataset_dir, k, ref_data[k])
    assert freeze_stats(store.latest_statistics("clinic")) == ref_stats[3]
    assert _count(store, select(func.count()).select_from(Statistics)) == 3  # nothing of a failed draft
    for k in (1, 2, 3):
        assert _count(store, select(func.count()).where(AuditLog.action == "published", AuditLog.release_seq == k)) == 1
    failed = _count(store, select(func.count()).where(AuditLog.action == "failed"))
    assert failed == (1 if statuses in (["draft"], ["validated"], ["approved"]) else 0)
    publisher.store.engine.dispose()
    store.engine.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_commit", "after_publish"])
def test_recovery_rewrites_the_checkpoint_a_crash_left_behind(
    published_once: Path, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the checkpoint kept naming release 1 until release 3 was published, so a
    public copy made meanwhile shipped a checkpoint one release behind."""
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    monkeypatch.delenv(faults.ENV, raising=False)
    root = published_once
    env = {k: v for k, v in os.environ.items() if k != DATABASE_ENV}
    done = forked_cli.run(
        ["release", "--config", str(root), "--snapshot", str(snapshot(root, 2))],
        env={**env, faults.ENV: point},
        cwd=root,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    ws = load_config(root)
    store = StateStore(open_engine(ws.database_url))
    assert [r.seq for r in store.published("clinic")] == [1, 2]
    stale = Checkpoint.parse((ws.dataset_dir / CHECKPOINT_FILE).read_bytes(), CHECKPOINT_FILE)
    assert stale.release == 1  # what the crash left
    publisher = Publisher(ws)
    rewrote = r"rewrote .*checkpoint\.json: it named release 1, not the newest published, 2"
    with pytest.warns(UserWarning, match=rewrote):
        publisher.recover()
    _check_checkpoint(store, root, ws.dataset_dir)
    store.engine.dispose()
    publisher.store.engine.dispose()
