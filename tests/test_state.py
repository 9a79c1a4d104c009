"""The state database, on SQLite and PostgreSQL: stale drafts, rejection,
schema revisions, unreachable databases, the append-only audit log and the release status
machine."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest
from conftest import freeze_stats
from helpers import CLINIC_PARAMS, Result, as_login, cli, make_workspace, read_config, snapshot, state_of, write_config
from sqlalchemy import func, inspect, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from serialpub.config import DATABASE_ENV, load_config
from serialpub.io import release_files
from serialpub.workflow.publisher import AUTO_APPROVER, Publisher
from state.engine import head_revision, upgrade
from state.models import TRANSITIONS, AuditLog, Base, Release, SignOff, Statistics
from state.store import StateError, StateStore, open_engine, owner_is_gone, this_process

UNREACHABLE = "postgresql+psycopg://postgres:secret@127.0.0.1:1/test"


def _cli(*args: str | Path, url: str, cwd: Path) -> Result:
    """``serialpub ARGS`` in-process on the state database ``url``."""
    return cli(*args, cwd=cwd, env={"SERIALPUB_DATABASE_URL": url})


def _publish_first(root: Path) -> Publisher:
    publisher = Publisher(load_config(root))
    publisher.publish(snapshot(root, 1))
    return publisher


def _dead_owner() -> str:
    pid = 999999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"pid:{pid}@{socket.gethostname()}"
        except PermissionError:
            pass
        pid += 1


def _one_line_error(proc: Any) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("serialpub: error: "), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


def _release(store: StateStore, seq: int, status: str) -> Release:
    with Session(store.engine) as s:
        rel = s.scalar(select(Release).where(Release.seq == seq, Release.status == status))
        assert rel is not None
        s.expunge(rel)
        return rel


def _count(store: StateStore, query: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _stage(root: Path, seq: int, release_id: int) -> Path:
    folder = root / "releases" / "clinic" / release_files.staging_name(seq, release_id)
    folder.mkdir(parents=True)
    (folder / "data.parquet").write_bytes(b"PAR1 staged")
    (folder / "manifest.json").write_text("{}\n")
    return folder


# ---------------------------------------------------------------------------------------
# drafts left behind


@pytest.mark.slow
def test_stale_draft_is_failed_by_recovery_and_publishing_proceeds(state_ws: Path) -> None:
    publisher = _publish_first(state_ws)
    store = publisher.store
    owner = _dead_owner()
    assert owner_is_gone(owner)
    draft = store.begin_draft("clinic", "0002", CLINIC_PARAMS, owner)
    store.set_staging(draft.id, str(_stage(state_ws, 2, draft.id)))

    with pytest.warns(UserWarning, match="removed"):
        outcome = publisher.publish(snapshot(state_ws, 2))
    assert outcome.seq == 2
    assert [(r.seq, r.period) for r in store.published("clinic")] == [(1, "0001"), (2, "0002")]
    assert _release(store, 2, "failed").id == draft.id
    failed = [e for e in store.audit_log("clinic") if e["action"] == "failed"]
    assert len(failed) == 1 and failed[0]["release"] == 2 and owner in failed[0]["detail"]["reason"]
    listing = sorted(p.name for p in (state_ws / "releases" / "clinic").iterdir())
    assert listing == ["checkpoint.json", "checkpoint.sig", "release-0001", "release-0002"]


@pytest.mark.slow
def test_draft_of_another_host_is_never_presumed_gone(state_ws: Path) -> None:
    publisher = _publish_first(state_ws)
    owner = "pid:999999@another-host.example"
    assert not owner_is_gone(owner)
    draft = publisher.store.begin_draft("clinic", "0002", CLINIC_PARAMS, owner)
    before = state_of(state_ws)
    with pytest.raises(StateError, match="already draft") as err:
        publisher.publish(snapshot(state_ws, 2))
    assert owner in str(err.value) and "serialpub reject --release 2" in str(err.value)
    assert state_of(state_ws) == before
    assert publisher.store.open_release("clinic").id == draft.id  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------
# rejection


@pytest.mark.slow
def test_reject_removes_the_staging_and_records_the_sign_off(state_ws: Path, state_url: str) -> None:
    publisher = _publish_first(state_ws)
    store = publisher.store
    draft = store.begin_draft("clinic", "0002", CLINIC_PARAMS, this_process())
    staging = _stage(state_ws, 2, draft.id)
    store.set_staging(draft.id, str(staging))
    published, stats = state_of(state_ws)[:2]

    config = read_config(state_ws)
    config["sign_off"] |= {"approvers": ["alice"]}
    write_config(state_ws, config)
    with as_login("alice"):
        proc = _cli("reject", "--config", state_ws, "--release", "2", "--comment", "no", url=state_url, cwd=state_ws)
    assert proc.returncode == 0, proc.stderr
    assert "release 2" in proc.stdout and "rejected by alice" in proc.stdout
    assert not staging.exists()
    assert state_of(state_ws) == (published, stats, ["release-0001"])
    assert store.open_release("clinic") is None
    assert _release(store, 2, "rejected").id == draft.id
    with Session(store.engine) as s:
        sign_offs = [(o.release_id, o.approver, o.decision, o.comment) for o in s.scalars(select(SignOff))]
    # release 1 was signed off automatically (the test workspace allows it), release 2 rejected
    assert sign_offs[1:] == [(draft.id, "alice", "rejected", "no")]
    assert sign_offs[0][1:3] == (AUTO_APPROVER, "approved")
    last = store.audit_log("clinic")[-1]
    assert (last["action"], last["release"], last["actor"]) == ("rejected", 2, "alice")
    assert last["detail"] == {"comment": "no"}

    with as_login("alice"):
        again = _cli("reject", "--config", state_ws, "--release", "2", url=state_url, cwd=state_ws)
    assert "has no open release 2 to reject" in _one_line_error(again)
    with pytest.raises(StateError, match="no open release 1"):
        store.reject("clinic", 1, "bob", "published already", None)
    assert state_of(state_ws) == (published, stats, ["release-0001"])
    assert publisher.publish(snapshot(state_ws, 2)).seq == 2  # the rejected draft is out of the way


# ---------------------------------------------------------------------------------------
# schema revisions and reaching the database


def state_of_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "releases").rglob("*"))


def _table_counts(store: StateStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t: int(conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in Base.metadata.tables}


@pytest.mark.slow
def test_database_at_an_older_schema_is_refused_untouched(state_ws: Path, state_url: str) -> None:
    publisher = _publish_first(state_ws)
    with publisher.store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0000'"))
    before = _table_counts(publisher.store), state_of_files(state_ws)

    with pytest.raises(StateError, match="schema revision 0000") as err:
        Publisher(load_config(state_ws))
    assert "serialpub db upgrade" in str(err.value) and f"revision {head_revision()}" in str(err.value)
    for command in (["history"], ["release", "--snapshot", str(snapshot(state_ws, 2))]):
        line = _one_line_error(_cli(*command, "--config", state_ws, url=state_url, cwd=state_ws))
        assert "schema revision 0000" in line and "'serialpub db upgrade'" in line
    assert (_table_counts(publisher.store), state_of_files(state_ws)) == before
    with publisher.store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0000"


def test_tables_without_a_schema_revision_are_refused(state_url: str) -> None:
    engine = open_engine(state_url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE alembic_version"))
    with pytest.raises(StateError, match=r"tables without a schema revision.*serialpub db upgrade"):
        open_engine(state_url)


@pytest.mark.slow
def test_db_upgrade_creates_the_schema_of_an_empty_database(state_ws: Path, state_url: str) -> None:
    proc = _cli("db", "upgrade", "--config", state_ws, url=state_url, cwd=state_ws)
    assert proc.returncode == 0, proc.stderr
    assert f"schema empty -> {head_revision()}" in proc.stdout
    engine = open_engine(state_url)  # at the current revision now
    assert set(Base.metadata.tables) | {"alembic_version"} <= set(inspect(engine).get_table_names())
    assert upgrade(engine) == (head_revision(), head_revision())  # a second upgrade changes nothing
    assert _publish_first(state_ws).store.published("clinic")[0].seq == 1


@pytest.mark.parametrize(
    ("url", "masked_url"),
    [
        (UNREACHABLE, "postgresql+psycopg://postgres:***@127.0.0.1:1/test"),
        # libpq also takes the password (and a client key's) as query parameters
        (
            "postgresql+psycopg://postgres@127.0.0.1:1/test?password=secret&sslpassword=secret2",
            "postgresql+psycopg://postgres@127.0.0.1:1/test?password=***&sslpassword=***",
        ),
    ],
    ids=["in the authority", "as query parameters"],
)
def test_unreachable_database_is_one_line_with_the_password_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, masked_url: str
) -> None:
    root = make_workspace(tmp_path / "ws")
    monkeypatch.setenv(DATABASE_ENV, url)
    with pytest.raises(StateError) as err:
        Publisher(load_config(root))
    assert masked_url in str(err.value) and "secret" not in str(err.value)
    for command in ("history", "release"):
        args = ["--snapshot", str(snapshot(root, 1))] if command == "release" else []
        line = _one_line_error(_cli(command, "--config", root, *args, url=url, cwd=root))
        assert masked_url in line and "secret" not in line, line
    assert not (root / "releases").exists()


# ---------------------------------------------------------------------------------------
# the audit log


def test_audit_log_refuses_update_and_delete(state_url: str) -> None:
    store = StateStore.open(state_url)
    store.begin_draft("clinic", "0001", CLINIC_PARAMS, this_process())
    before = store.audit_log("clinic")
    assert [e["action"] for e in before] == ["draft"]
    for statement in ("UPDATE audit_log SET action = 'published'", "DELETE FROM audit_log"):
        with pytest.raises(DBAPIError, match="append-only"), store.engine.begin() as conn:
            conn.execute(text(statement))
    assert store.audit_log("clinic") == before


@pytest.mark.slow
def test_every_state_change_is_in_the_audit_log(state_ws: Path) -> None:
    store = _publish_first(state_ws).store
    draft = store.begin_draft("clinic", "0002", CLINIC_PARAMS, "pid:1@somewhere")
    store.fail(draft.id, "validation failed", "ci")
    store.begin_draft("clinic", "0002", CLINIC_PARAMS, "pid:2@somewhere")
    store.reject("clinic", 2, "alice", "no", None)
    log = store.audit_log("clinic")
    assert [(e["action"], e["release"]) for e in log] == [
        ("draft", 1),
        ("validated", 1),
        ("approved", 1),
        ("published", 1),
        ("draft", 2),
        ("failed", 2),
        ("draft", 2),
        ("rejected", 2),
    ]
    assert [e["actor"] for e in log[4:]] == ["pid:1@somewhere", "ci", "pid:2@somewhere", "alice"]
    assert log[5]["detail"] == {"reason": "validation failed"}


# ---------------------------------------------------------------------------------------
# the status machine and the database's own guards


@pytest.mark.slow
def test_illegal_transitions_are_refused(state_ws: Path) -> None:
    store = _publish_first(state_ws).store
    first = _release(store, 1, "published")
    stats = store.latest_statistics("clinic")
    assert stats is not None and all(t.num_rows > 0 for t in stats)  # release 1 linked someone
    summary = {"records": 1, "groups": 1, "suppressed": 0, "max_breach": 0.0, "data_sha256": "0" * 64}
    before = state_of(state_ws), len(store.audit_log("clinic"))
    with pytest.raises(StateError, match=f"release row {first.id} is published; only an approved release"):
        store.publish_staged(first.id, "0" * 64, directory="x", actor="test")  # publishing twice
    with pytest.raises(StateError, match="release 1 is published; it cannot become failed"):
        store.fail(first.id, "late", "test")
    # a draft is published only once approved, unless it is an import's
    draft = store.begin_draft("clinic", "0002", CLINIC_PARAMS, this_process())
    store.stage(draft.id, summary, [], stats, "x")
    with pytest.raises(StateError, match=f"release row {draft.id} is draft; only an approved release"):
        store.publish_staged(draft.id, "0" * 64, directory="x", actor="test")
    store.fail(draft.id, "bad", "test")
    with pytest.raises(StateError, match=f"release row {draft.id} is failed; only an approved release"):
        store.publish_staged(draft.id, "0" * 64, directory="x", actor="test")
    imported = store.begin_draft("clinic", "0002", CLINIC_PARAMS.model_copy(update={"imported": True}), this_process())
    with pytest.raises(StateError, match="release 2 has no staged statistics"):
        store.publish_staged(imported.id, "0" * 64, directory="x", actor="test")
    store.fail(imported.id, "bad", "test")
    assert state_of(state_ws) == before[0]
    # the drafts and their failures only
    assert len(store.audit_log("clinic")) == before[1] + 4
    assert _count(store, select(func.count()).select_from(Statistics)) == 1
    assert all(not TRANSITIONS[s] for s in ("published", "rejected", "failed"))


@pytest.mark.slow
def test_one_open_release_and_one_publication_per_sequence_number(state_ws: Path) -> None:
    store = _publish_first(state_ws).store
    with pytest.raises(StateError, match="not later than the last published period"):
        store.begin_draft("clinic", "0001", CLINIC_PARAMS, this_process())
    stats_before = freeze_stats(store.latest_statistics("clinic"))
    store.begin_draft("clinic", "0002", CLINIC_PARAMS, this_process())
    with pytest.raises(StateError, match=r"release 2 .* is already draft.*serialpub reject --release 2"):
        store.begin_draft("clinic", "0003", CLINIC_PARAMS, this_process())
    first = _release(store, 1, "published")
    # the partial unique indexes hold whatever the code does
    for status, seq, period in (("validated", 3, "0003"), ("published", 1, "0009"), ("published", 9, "0001")):
        with pytest.raises(IntegrityError), Session(store.engine) as s, s.begin():
            s.add(
                Release(
                    dataset_id=first.dataset_id,
                    seq=seq,
                    period=period,
                    status=status,
                    owner="test",
                    imported=False,
                    params={},
                    created=first.created,
                    updated=first.created,
                )
            )
    # neither the refused draft nor the refused inserts moved the statistics file
    assert stats_before is not None and freeze_stats(store.latest_statistics("clinic")) == stats_before
    assert _count(store, select(func.count()).select_from(Release)) == 2
    assert _count(store, select(func.count()).where(AuditLog.action == "published")) == 1
