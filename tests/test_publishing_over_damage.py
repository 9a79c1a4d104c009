"""No publishing over damage (docs/compliance.md, "No release is published over damage"): the
next release verifies every manifest's signature and chain link and the sign-off records first,
and refuses on damage; ``public-copy`` refuses a release whose signature does not verify;
on PostgreSQL the append-only tables refuse TRUNCATE."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import CLINIC_PARAMS, cli, snapshot, state_of
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from serialpub.config import load_config
from serialpub.io import signing
from serialpub.workflow.publisher import Publisher
from state.store import StateError, StateStore, this_process


def _release(root: Path, n: int) -> Path:
    return root / "releases" / "clinic" / f"release-{n:04d}"


def _next_snapshot(root: Path) -> Path:
    """A fourth period's snapshot (the clinic workspace has three)."""
    extra = root / "snapshots" / "snapshot-0004.csv"
    # period 3's records less the last: a byte-identical snapshot would be refused as re-sent
    extra.write_bytes(b"".join(snapshot(root, 3).read_bytes().splitlines(keepends=True)[:-1]))
    return extra


def _delete_signature(root: Path) -> None:
    (_release(root, 3) / signing.SIGNATURE_FILE).unlink()


def _break_signature(root: Path) -> None:
    (_release(root, 3) / signing.SIGNATURE_FILE).write_text("AAAA\n", encoding="ascii")


def _sign_another_manifest(root: Path) -> None:
    """A valid signature, but of release 2's manifest."""
    (_release(root, 3) / signing.SIGNATURE_FILE).write_bytes((_release(root, 2) / signing.SIGNATURE_FILE).read_bytes())


SIGNATURE_DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing": (_delete_signature, "release 3: manifest.sig is missing; the manifest says it is signed"),
    "broken": (_break_signature, "release 3: the signature of manifest.json does not verify"),
    "of another manifest": (_sign_another_manifest, "release 3: the signature of manifest.json does not verify"),
}


@pytest.fixture
def three_releases(tmp_path: Path, published_workspaces: object) -> Path:
    return published_workspaces.copy(tmp_path / "ws", releases=3)  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("case", list(SIGNATURE_DAMAGE))
def test_the_next_release_refuses_a_damaged_signature(three_releases: Path, case: str) -> None:
    """Before: the audit failed the store, yet the next release was published on top of it."""
    damage, finding = SIGNATURE_DAMAGE[case]
    damage(three_releases)
    assert cli("audit", three_releases).returncode == 1
    before = state_of(three_releases)
    result = cli("release", "--config", three_releases, "--snapshot", _next_snapshot(three_releases))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{_release(three_releases, 3)}: {finding}" in line
    assert "restore its manifest.json and manifest.sig from the backup; nothing was published" in line
    assert len(line.replace(str(three_releases), "ws")) <= 300
    assert state_of(three_releases) == before


@pytest.mark.slow
@pytest.mark.parametrize(("older", "case"), [(1, "broken"), (2, "missing"), (1, "of another manifest")])
def test_the_next_release_refuses_a_damaged_signature_on_an_older_release(
    three_releases: Path, older: int, case: str
) -> None:
    """Before: only the newest release's signature was checked, so a broken manifest.sig of
    release 1 or 2 (which the audit and public-copy refuse) was built on."""
    sig = _release(three_releases, older) / signing.SIGNATURE_FILE
    if case == "missing":
        sig.unlink()
    else:
        other = _release(three_releases, 3 if older == 1 else 1) / signing.SIGNATURE_FILE
        sig.write_bytes(b"AAAA\n" if case == "broken" else other.read_bytes())
    assert cli("audit", three_releases).returncode == 1
    before = state_of(three_releases)
    result = cli("release", "--config", three_releases, "--snapshot", _next_snapshot(three_releases))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    finding = SIGNATURE_DAMAGE[case][1].replace("release 3", f"release {older}")
    assert f"{_release(three_releases, older)}: {finding}" in line, line
    assert "restore its manifest.json and manifest.sig from the backup; nothing was published" in line
    assert len(line.replace(str(three_releases), "ws")) <= 300
    assert state_of(three_releases) == before
    assert not (three_releases / "releases" / "clinic" / "release-0004").exists()


@pytest.mark.slow
def test_an_older_signature_damaged_during_the_sign_off_stops_the_publication(three_releases: Path) -> None:
    """The publication checks the chain again: damage after the draft's own check is caught."""
    publisher = Publisher(load_config(three_releases))
    draft = publisher.prepare(_next_snapshot(three_releases), "0004")
    publisher.auto_approve(draft.seq)
    (_release(three_releases, 1) / signing.SIGNATURE_FILE).write_text("AAAA\n", encoding="ascii")
    with pytest.raises(StateError, match=r"release-0001: release 1: the signature of manifest\.json does not verify"):
        publisher.finish(draft.seq)
    assert [r.seq for r in publisher.store.published("clinic")] == [1, 2, 3]
    current = publisher.store.open_release("clinic")
    assert current is not None and current.status == "approved"


def test_a_signature_damaged_during_the_sign_off_stops_the_publication(three_releases: Path) -> None:
    publisher = Publisher(load_config(three_releases))
    draft = publisher.prepare(_next_snapshot(three_releases), "0004")
    publisher.auto_approve(draft.seq)
    _break_signature(three_releases)
    with pytest.raises(StateError, match=r"release 3: the signature of manifest\.json does not verify"):
        publisher.finish(draft.seq)
    assert [r.seq for r in publisher.store.published("clinic")] == [1, 2, 3]
    current = publisher.store.open_release("clinic")
    assert current is not None and current.status == "approved"  # published once the signature is restored


def test_public_copy_refuses_a_signature_that_does_not_verify(three_releases: Path, tmp_path: Path) -> None:
    """Before: the copy shipped the broken signature to the public."""
    (_release(three_releases, 2) / signing.SIGNATURE_FILE).write_text("AAAA\n", encoding="ascii")
    out = tmp_path / "public"
    result = cli("public-copy", "--config", three_releases, "--out", out)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "release 2: the signature of manifest.json does not verify" in line and "nothing was copied" in line
    assert not out.exists()


def test_public_copy_of_an_intact_store(three_releases: Path, tmp_path: Path) -> None:
    result = cli("public-copy", "--config", three_releases, "--out", tmp_path / "public")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "public" / "releases" / "clinic" / "release-0003" / signing.SIGNATURE_FILE).is_file()


def _sql(root: Path, *statements: str) -> None:
    with sqlite3.connect(root / "state.sqlite") as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        (
            ["DROP TRIGGER sign_offs_no_update", "UPDATE sign_offs SET approver = 'Mallory' WHERE id = 2"],
            "release 2: the sign-off row 'approved' by 'Mallory' has no such entry in the audit log",
        ),
        (
            ["DROP TRIGGER sign_offs_no_update", "UPDATE sign_offs SET report_sha256 = NULL WHERE id = 3"],
            "release 3: the manifest's sign-off (approved by 'automatic approval",
        ),
        (["DROP TRIGGER sign_offs_no_delete", "DELETE FROM sign_offs"], "release 1: the audit log records 'approved'"),
    ],
    ids=["approver rewritten", "newest row's report checksum rewritten", "rows deleted"],
)
def test_the_next_release_refuses_rewritten_sign_off_records(
    three_releases: Path, statements: list[str], expected: str
) -> None:
    """Before: 'state verify' failed, yet the next release was published."""
    _sql(three_releases, *statements)
    before = state_of(three_releases)
    result = cli("release", "--config", three_releases, "--snapshot", _next_snapshot(three_releases))
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "sign-off records changed: " + expected in line, line
    assert "restore the state database from its backup (see 'serialpub state verify')" in line
    assert len(line) <= 300
    assert state_of(three_releases) == before


@pytest.fixture
def postgres_store(tmp_path: Path) -> Iterator[StateStore]:
    from conftest import StateDatabases

    dbs = StateDatabases(tmp_path / "db")
    try:
        store = StateStore.open(dbs.new("postgresql"))
        yield store
        store.engine.dispose()
    finally:
        dbs.close()


@pytest.mark.parametrize("statement", ["TRUNCATE sign_offs", "TRUNCATE audit_log", "TRUNCATE releases CASCADE"])
def test_postgresql_refuses_truncate_on_the_append_only_tables(postgres_store: StateStore, statement: str) -> None:
    """Before: TRUNCATE emptied sign_offs and audit_log without dropping a trigger."""
    store = postgres_store
    store.begin_draft("clinic", "0001", CLINIC_PARAMS, this_process())
    store.reject("clinic", 1, "alice", "no", None)
    before = store.audit_log("clinic"), store.sign_offs("clinic", 1)
    assert len(before[0]) == 2 and len(before[1]) == 1
    with pytest.raises(DBAPIError, match="is append-only"), store.engine.begin() as conn:
        conn.execute(text(statement))
    assert (store.audit_log("clinic"), store.sign_offs("clinic", 1)) == before
