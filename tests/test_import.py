"""``serialpub import-release`` (serialpub.workflow.importing): releases published with another tool
enter the state exactly as if serialpub had published them (paper 004 §7; docs/design.md sections 1 and 4),
and bad input is refused without a trace.

The equivalence test uses the Adult demo series (45,222 register individuals, 20
snapshots): workspace C publishes releases 1-20 with serialpub; a fresh workspace B with
the same register, hierarchies and configuration imports C's release-0001..0010 data
files (C plays the "other tool": publication is deterministic, see
tests/test_pipeline.py::test_identical_input_gives_identical_parquet_bytes) and then
publishes snapshots 11-20 itself. The other tests use the small clinic workspace.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import PublishedWorkspaces
from helpers import cli, make_workspace
from sqlalchemy import text
from typer.testing import CliRunner

from serialpub import demo
from serialpub.analysis.audit import audit_workspace
from serialpub.analysis.verify import verify_state
from serialpub.cli import app
from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.io.release_files import sha256_file
from serialpub.workflow.importing import import_release
from serialpub.workflow.publisher import Publisher
from state.store import StateStore, open_engine, table_from_bytes

REPO = Path(__file__).resolve().parent.parent


def fresh_copy(source: Path, target: Path) -> Path:
    """Same register, hierarchies, snapshots and configuration; no release, no state."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("releases", "state.sqlite*"))
    return target


def data_file(root: Path, seq: int) -> Path:
    ws = load_config(root)
    return ws.dataset_dir / f"release-{seq:04d}" / "data.parquet"


def statistics_pairs(root: Path, seq: int | None = None) -> pd.DataFrame:
    """Every linked (individual, value) pair of the statistics file after release ``seq``
    (default: the latest) with its survival product and linked count."""
    ws = load_config(root)
    with open_engine(ws.database_url).connect() as conn:
        row = conn.execute(
            text(
                "SELECT s.members_data, s.classes_data FROM statistics s JOIN releases r ON r.id = s.release_id "
                "WHERE r.status = 'published' AND (:seq IS NULL OR r.seq = :seq) ORDER BY r.seq DESC LIMIT 1"
            ),
            {"seq": seq},
        ).one()
    members = table_from_bytes(row.members_data).to_pandas()[["individual", "class"]]
    classes = table_from_bytes(row.classes_data).to_pandas()
    classes["value"] = classes["value"].astype(str)
    pairs = members.merge(classes, on="class")[["individual", "value", "survival", "linked"]]
    return pairs.sort_values(["individual", "value"]).reset_index(drop=True)


def assert_same_statistics(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert len(a) == len(b) > 0
    assert (a["individual"].to_numpy() == b["individual"].to_numpy()).all()
    assert (a["value"].to_numpy() == b["value"].to_numpy()).all()
    assert (a["linked"].to_numpy() == b["linked"].to_numpy()).all()
    np.testing.assert_allclose(a["survival"].to_numpy(), b["survival"].to_numpy(), rtol=1e-12, atol=0)


def state_of(root: Path) -> tuple[Any, ...]:
    """Everything an import could change: release rows, audit log, statistics, release store."""
    ws = load_config(root)
    store = StateStore(open_engine(ws.database_url))
    with store.engine.connect() as conn:
        releases = conn.execute(text("SELECT seq, period, status FROM releases ORDER BY id")).all()
        log = conn.execute(text("SELECT count(*) FROM audit_log")).scalar()
    stats = store.latest_statistics(ws.config.dataset)
    frozen = None if stats is None else (stats[0].to_pylist(), stats[1].to_pylist())
    listing = sorted(p.name for p in ws.dataset_dir.iterdir()) if ws.dataset_dir.exists() else []
    return [tuple(r) for r in releases], log, frozen, listing


# ---------------------------------------------------------------------------------------
# equivalence with publishing in serialpub


@pytest.mark.slow
def test_importing_ten_releases_then_publishing_ten_equals_publishing_twenty(tmp_path: Path) -> None:
    c_root = tmp_path / "C"
    ws_c = demo.create_workspace(c_root, rounds=20)
    b_root = fresh_copy(c_root, tmp_path / "B")
    publisher = Publisher(ws_c)
    for snap in demo.snapshots(ws_c):
        publisher.publish(snap)

    ws_b = load_config(b_root)
    for seq in range(1, 11):
        outcome = import_release(ws_b, data_file(c_root, seq), f"{seq:04d}", 2, "all", "register")
        assert outcome.seq == seq and not outcome.exceeds_bound
        c_manifest = json.loads((data_file(c_root, seq).parent / "manifest.json").read_text(encoding="utf-8"))
        assert outcome.max_breach == pytest.approx(c_manifest["max_breach_probability"], rel=1e-12)
    assert_same_statistics(statistics_pairs(b_root), statistics_pairs(c_root, seq=10))

    publisher_b = Publisher(ws_b)
    for snap in demo.snapshots(ws_b)[10:]:
        publisher_b.publish(snap)
    for seq in range(11, 21):
        assert data_file(b_root, seq).read_bytes() == data_file(c_root, seq).read_bytes(), seq
    assert_same_statistics(statistics_pairs(b_root), statistics_pairs(c_root))

    rows = StateStore(open_engine(ws_b.database_url)).published("adult")
    assert [r.imported for r in rows] == [True] * 10 + [False] * 10
    manifest = json.loads((data_file(b_root, 3).parent / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["imported"] is True and manifest["source_sha256"] == sha256_file(data_file(c_root, 3))
    assert manifest["release"] == 3 and manifest["previous_release"] == 2 and manifest["dilution"] == "register"
    assert manifest["sha256"]["data.parquet"] == sha256_file(data_file(b_root, 3))
    assert verify_state(ws_b).ok
    audit = audit_workspace(b_root)
    assert audit.ok and audit.max_p == pytest.approx(audit_workspace(c_root).max_p, abs=1e-12)


@pytest.fixture
def clinic(tmp_path: Path, published_workspaces: PublishedWorkspaces) -> tuple[Path, Path]:
    """(A, B): A has published 3 releases; B is a fresh copy to import them into."""
    a_root = published_workspaces.copy(tmp_path / "A", releases=3)
    return a_root, fresh_copy(a_root, tmp_path / "B")


@pytest.mark.slow
def test_import_from_csv_and_parquet_gives_the_publishers_state(clinic: tuple[Path, Path]) -> None:
    a_root, b_root = clinic
    ws = load_config(b_root)
    csv_path = b_root / "other-tool-0001.csv"
    pd.read_parquet(data_file(a_root, 1)).to_csv(csv_path, index=False)
    outcome = import_release(ws, csv_path, "0001", 2, ["hiv", "cancer"], "register")
    assert outcome.directory == data_file(b_root, 1).parent
    for seq in (2, 3):
        import_release(ws, data_file(a_root, seq), f"{seq:04d}", 2, "hiv,cancer".split(","), "register")
    assert_same_statistics(statistics_pairs(b_root), statistics_pairs(a_root))
    for seq in (1, 2, 3):
        assert data_file(b_root, seq).read_bytes() == data_file(a_root, seq).read_bytes()
        assert pd.read_parquet(data_file(b_root, seq)).dtypes.map(str).isin(["str", "object"]).all()
    assert verify_state(ws).ok
    # the series continues with serialpub
    (b_root / "snapshots" / "snapshot-0004.csv").write_text(
        (b_root / "snapshots" / "snapshot-0003.csv").read_text(encoding="utf-8")
    )
    assert Publisher(ws).publish(b_root / "snapshots" / "snapshot-0004.csv").seq == 4


@pytest.mark.slow
def test_presence_import_needs_and_uses_the_snapshot(tmp_path: Path) -> None:
    a_root = make_workspace(tmp_path / "A", n=300, dilution="presence")
    b_root = fresh_copy(a_root, tmp_path / "B")
    publisher = Publisher(load_config(a_root))
    for t in (1, 2, 3):
        publisher.publish(a_root / "snapshots" / f"snapshot-{t:04d}.csv")
    ws = load_config(b_root)
    before = state_of(b_root)
    with pytest.raises(InputError, match="--snapshot"):
        import_release(ws, data_file(a_root, 1), "0001", 2, ["hiv", "cancer"], "presence")
    assert state_of(b_root) == before
    for t in (1, 2, 3):
        snap = b_root / "snapshots" / f"snapshot-{t:04d}.csv"
        outcome = import_release(ws, data_file(a_root, t), f"{t:04d}", 2, ["hiv", "cancer"], "presence", snap)
        manifest = json.loads((outcome.directory / "manifest.json").read_text(encoding="utf-8"))
        assert outcome.suppressed == manifest["suppressed"] == len(pd.read_csv(snap)) - outcome.records
    assert_same_statistics(statistics_pairs(b_root), statistics_pairs(a_root))
    assert verify_state(ws).ok


# ---------------------------------------------------------------------------------------
# bad input: InputError, nothing changed


@pytest.fixture
def imported_once(clinic: tuple[Path, Path]) -> tuple[Path, Path]:
    a_root, b_root = clinic
    import_release(load_config(b_root), data_file(a_root, 1), "0001", 2, ["hiv", "cancer"], "register")
    return a_root, b_root


def _release_2(a_root: Path) -> pd.DataFrame:
    return pd.read_parquet(data_file(a_root, 2))


def _csv(b_root: Path, frame: pd.DataFrame) -> Path:
    path = b_root / "bad.csv"
    frame.to_csv(path, index=False)
    return path


def test_value_that_is_no_hierarchy_node_is_refused(imported_once: tuple[Path, Path]) -> None:
    a_root, b_root = imported_once
    before = state_of(b_root)
    frame = _release_2(a_root)
    frame.loc[4, "age"] = "[20, 29]"  # the hierarchy has [20, 24] and [25, 29], no [20, 29]
    bad = _csv(b_root, frame)
    with pytest.raises(InputError) as err:
        import_release(load_config(b_root), bad, "0002", 2, ["hiv", "cancer"], "register")
    message = str(err.value)
    for part in (str(bad), "line 6", "column 'age'", "'[20, 29]'"):
        assert part in message, message
    parquet = b_root / "bad.parquet"
    frame.to_parquet(parquet, index=False)
    with pytest.raises(InputError, match=r"row 5, column 'age'"):
        import_release(load_config(b_root), parquet, "0002", 2, ["hiv", "cancer"], "register")
    assert state_of(b_root) == before


def test_overlapping_regions_are_refused(imported_once: tuple[Path, Path]) -> None:
    _, b_root = imported_once
    before = state_of(b_root)
    rows = [
        {"sex": "M", "zipcode": "6500*", "age": "*", "disease": "flu"},
        {"sex": "M", "zipcode": "6500*", "age": "*", "disease": "cold"},
        {"sex": "M", "zipcode": "65001", "age": "[20, 24]", "disease": "hiv"},
        {"sex": "F", "zipcode": "*", "age": "*", "disease": "flu"},
    ]
    bad = _csv(b_root, pd.DataFrame(rows))
    with pytest.raises(InputError) as err:
        import_release(load_config(b_root), bad, "0002", 2, ["hiv", "cancer"], "register")
    message = str(err.value)
    assert "overlap" in message
    assert "(sex=M, zipcode=6500*, age=*)" in message and "(sex=M, zipcode=65001, age=[20, 24])" in message
    assert state_of(b_root) == before


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("sensitive value outside its domain", ["line 2", "column 'disease'", "'ebola'"]),
        ("identifier column", ["unexpected column", "'id'"]),
        ("missing column", ["missing column", "'age'"]),
        ("more records than candidates", ["holds", "register individuals", "(sex=M, zipcode=65001, age=20)"]),
        ("period not later", ["'0000'", "not later than the last published period"]),
        ("period already published", ["'0001'", "already published"]),
        ("value the configuration does not protect", ["'flu'", "protected_values"]),
        ("empty cell", ["line 3", "column 'sex'", "empty"]),
    ],
)
def test_bad_input_is_refused_without_trace(imported_once: tuple[Path, Path], case: str, expected: list[str]) -> None:
    a_root, b_root = imported_once
    before = state_of(b_root)
    frame = _release_2(a_root)
    period, protected = "0002", ["hiv", "cancer"]
    if case == "sensitive value outside its domain":
        frame.loc[0, "disease"] = "ebola"
    elif case == "identifier column":
        frame.insert(0, "id", [f"p{i:03d}" for i in range(len(frame))])
    elif case == "missing column":
        frame = frame.drop(columns=["age"])
    elif case == "more records than candidates":
        frame = pd.DataFrame([{"sex": "M", "zipcode": "65001", "age": "20", "disease": "flu"}] * 60)
    elif case == "period not later":
        period = "0000"
    elif case == "period already published":
        period = "0001"
    elif case == "value the configuration does not protect":
        protected = ["hiv", "flu"]
    elif case == "empty cell":
        frame.loc[1, "sex"] = ""
    with pytest.raises(InputError) as err:
        import_release(load_config(b_root), _csv(b_root, frame), period, 2, protected, "register")
    for part in expected:
        assert part in str(err.value), str(err.value)
    assert state_of(b_root) == before


# ---------------------------------------------------------------------------------------
# command line


def test_command_line_import_and_its_errors(clinic: tuple[Path, Path]) -> None:
    a_root, b_root = clinic
    args = [
        "import-release",
        "--config",
        str(b_root),
        "--l",
        "2",
        "--protected",
        "hiv,cancer",
        "--dilution",
        "register",
        "--k-prime",
        "3",
    ]
    result = CliRunner().invoke(app, [*args, "--data", str(data_file(a_root, 1)), "--period", "0001"])
    assert result.exit_code == 0, result.output
    assert "release 1" in result.output and "published" in result.output
    manifest = json.loads((data_file(b_root, 1).parent / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["strategy"], manifest["k_prime"], manifest["alpha"]) == ("constant", 3, None)
    before = state_of(b_root)
    proc = cli(*args[:-4], "--dilution", "presence", "--data", data_file(a_root, 2), "--period", "0002", cwd=REPO)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("serialpub: error:") and "--snapshot" in lines[0]
    assert state_of(b_root) == before
