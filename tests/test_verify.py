"""``serialpub state verify`` (serialpub.analysis.verify): the state rebuilt from the register, the
hierarchies and the published release files must equal the database's, and every kind of
tampering must be reported (docs/design.md section 4; paper 004 §7).

The workspace is the small clinic of tests/test_pipeline.py (60 individuals, three QIs),
so each test publishes its own three releases in well under a second.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from conftest import PublishedWorkspaces
from helpers import make_workspace, snapshot
from sqlalchemy import text
from typer.testing import CliRunner

from serialpub.analysis.verify import UNVERIFIABLE, VerifyReport, verify_state
from serialpub.cli import app
from serialpub.config import load_config
from serialpub.workflow.publisher import Publisher
from state.store import open_engine, table_from_bytes, table_to_bytes


def publish_three(root: Path) -> Path:
    publisher = Publisher(load_config(root))
    for t in (1, 2, 3):
        publisher.publish(snapshot(root, t))
    return root


def release_dir(root: Path, seq: int) -> Path:
    return root / "releases" / "clinic" / f"release-{seq:04d}"


def kinds(report: VerifyReport) -> dict[str, int]:
    return {d.kind: d.count for d in report.differences}


def cli(root: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["state", "verify", "--config", str(root)])
    return result.exit_code, result.output


def _digest(members: bytes, classes: bytes) -> str:
    """The checksum the state store keeps for a statistics row (state.store)."""
    return hashlib.sha256(hashlib.sha256(members).digest() + hashlib.sha256(classes).digest()).hexdigest()


def latest_statistics_row(root: Path) -> Any:
    engine = open_engine(load_config(root).database_url)
    with engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT s.release_id, s.members_data, s.classes_data FROM statistics s "
                "JOIN releases r ON r.id = s.release_id WHERE r.status = 'published' ORDER BY r.seq DESC LIMIT 1"
            )
        ).one()


def rewrite_classes(root: Path, edit: Any, update_checksum: bool) -> pa.Table:
    """Replace the latest statistics' classes table by ``edit(table)`` with SQL, keeping or
    breaking the row's checksum."""
    row = latest_statistics_row(root)
    classes = edit(table_from_bytes(row.classes_data))
    blob = table_to_bytes(classes)
    engine = open_engine(load_config(root).database_url)
    sql = "UPDATE statistics SET classes_data = :c" + (", sha256 = :h" if update_checksum else "")
    with engine.begin() as conn:
        conn.execute(
            text(sql + " WHERE release_id = :r"), {"c": blob, "h": _digest(row.members_data, blob), "r": row.release_id}
        )
    return classes


@pytest.fixture
def published(tmp_path: Path, published_workspaces: PublishedWorkspaces) -> Path:
    return published_workspaces.copy(tmp_path / "ws", releases=3)


# ---------------------------------------------------------------------------------------
# agreement


def test_verify_passes_after_three_releases(published: Path) -> None:
    report = verify_state(load_config(published))
    assert report.ok, report.format()
    assert report.releases_in_state == report.releases_on_disk == [1, 2, 3]
    assert report.individuals == 60 and report.values == ["hiv", "cancer"]
    assert report.pairs_compared == 120
    assert "verdict: PASS" in report.format()
    # not vacuous: the series linked someone, so the comparison looked at real products
    classes = table_from_bytes(latest_statistics_row(published).classes_data)
    assert classes.num_rows > 0 and min(classes.column("survival").to_pylist()) < 1
    code, out = cli(published)
    assert code == 0, out


def test_verify_passes_before_the_first_release(tmp_path: Path) -> None:
    report = verify_state(load_config(make_workspace(tmp_path / "ws")))
    assert report.ok, report.format()
    assert report.releases_in_state == [] and report.releases_on_disk == []


@pytest.fixture
def presence(tmp_path: Path, published_workspaces: PublishedWorkspaces) -> Path:
    """Presence dilution; 300 individuals so every release publishes protected records."""
    root = published_workspaces.copy(tmp_path / "ws", releases=3, n=300, dilution="presence")
    for t in (1, 2, 3):
        assert pd.read_parquet(release_dir(root, t) / "data.parquet")["disease"].isin(["hiv", "cancer"]).any()
    return root


@pytest.mark.slow
def test_verify_presence_mode_reads_the_recorded_snapshots(presence: Path) -> None:
    report = verify_state(load_config(presence))
    assert report.ok, report.format()


def test_presence_mode_without_its_snapshot_cannot_be_verified(presence: Path) -> None:
    root = presence
    snapshot(root, 2).rename(root / "moved.csv")
    report = verify_state(load_config(root))
    assert report.differences == [], report.format()
    assert report.unverifiable.count > 0
    assert not report.ok
    assert "release 2" in report.unverifiable.examples[0]
    text_out = report.format()
    assert UNVERIFIABLE in text_out and "verdict: INCOMPLETE" in text_out
    assert cli(root)[0] == 1


# ---------------------------------------------------------------------------------------
# tampering


def test_statistics_failing_its_checksum_is_reported(published: Path) -> None:
    def halve_first(t: pa.Table) -> pa.Table:
        survival = t.column("survival").to_pylist()
        survival[0] /= 2
        return t.set_column(t.schema.get_field_index("survival"), "survival", pa.array(survival))

    rewrite_classes(published, halve_first, update_checksum=False)
    report = verify_state(load_config(published))
    assert list(kinds(report)) == ["statistics file"]
    assert "fails its checksum" in report.differences[0].examples[0]
    code, out = cli(published)
    assert code == 1  # a finding of verify, not an error of the command
    assert "fails its checksum" in out and "verdict: FAIL" in out


def test_consistent_but_wrong_statistics_are_reported_per_pair(published: Path) -> None:
    row = latest_statistics_row(published)
    members = table_from_bytes(row.members_data).to_pandas()
    changed: dict[str, Any] = {}

    def change_one(t: pa.Table) -> pa.Table:
        survival = t.column("survival").to_pylist()
        linked = t.column("linked").to_pylist()
        changed.update(cls=t.column("class")[0].as_py(), value=t.column("value")[0].as_py(), old=survival[0])
        survival[0] = survival[0] * (1 - 1e-9)  # a tiny change, far above the 1e-12 tolerance
        linked[0] += 1
        t = t.set_column(t.schema.get_field_index("survival"), "survival", pa.array(survival))
        return t.set_column(t.schema.get_field_index("linked"), "linked", pa.array(linked, pa.int32()))

    rewrite_classes(published, change_one, update_checksum=True)
    report = verify_state(load_config(published))
    in_class = int((members["class"] == changed["cls"]).sum())
    assert kinds(report) == {"survival product": in_class, "linked releases": in_class}, report.format()
    example = report.differences[0].examples[0]
    assert repr(changed["value"]) in example and "individual 'p" in example
    assert cli(published)[0] == 1


def test_survival_within_tolerance_is_not_a_difference(published: Path) -> None:
    def nudge(t: pa.Table) -> pa.Table:
        survival = [s * (1 + 1e-15) if s < 1 else s for s in t.column("survival").to_pylist()]
        return t.set_column(t.schema.get_field_index("survival"), "survival", pa.array(survival))

    rewrite_classes(published, nudge, update_checksum=True)
    report = verify_state(load_config(published))
    assert report.ok, report.format()


def test_changed_data_parquet_is_reported(published: Path) -> None:
    path = release_dir(published, 2) / "data.parquet"
    data = pd.read_parquet(path)
    data.loc[0, "disease"] = "cancer" if data.loc[0, "disease"] != "cancer" else "flu"
    data.to_parquet(path, index=False)
    report = verify_state(load_config(published))
    found = kinds(report)
    assert "data.parquet sha256" in found, report.format()
    example = next(d for d in report.differences if d.kind == "data.parquet sha256").examples[0]
    assert "release 2" in example and "does not match its manifest" in example
    assert cli(published)[0] == 1


def test_missing_release_folder_is_reported(published: Path) -> None:
    shutil.rmtree(release_dir(published, 3))
    report = verify_state(load_config(published))
    assert report.releases_in_state == [1, 2, 3] and report.releases_on_disk == [1, 2]
    missing = next(d for d in report.differences if d.kind == "release folder missing")
    assert missing.count == 1 and "release 3" in missing.examples[0]
    assert cli(published)[0] == 1


def test_folder_unknown_to_the_state_is_reported(published: Path) -> None:
    shutil.copytree(release_dir(published, 3), release_dir(published, 4))
    report = verify_state(load_config(published))
    assert "release folder not in the state" in kinds(report), report.format()


def test_changed_manifest_and_group_figures_are_reported(published: Path) -> None:
    manifest = release_dir(published, 1) / "manifest.json"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('"period": "0001"', '"period": "0009"'))
    engine = open_engine(load_config(published).database_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE release_groups SET candidates = candidates + 1 WHERE group_no = 0 AND release_id = "
                "(SELECT id FROM releases WHERE seq = 2)"
            )
        )
    found = kinds(verify_state(load_config(published)))
    assert found.get("manifest sha256") == 1 and found.get("period") == 1
    assert found.get("group figures") == 1
