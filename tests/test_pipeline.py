"""The publication pipeline on real files: ``serialpub.workflow.publisher.Publisher`` on a small
hand-written workspace (register, hierarchies, serialpub.yaml, snapshots), the release
contract of docs/release-contract.md, rejection of bad input without a trace, the command
line (``python -m serialpub.cli``) and crash recovery of ``release_files``.

The workspace is tiny (60 register individuals, three QIs) so every test builds its own in
a few milliseconds; the Adult demo workspace takes several seconds to write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import (
    CONTRACT_KEYS,
    DISEASES,
    QIS,
    SENSITIVE,
    Result,
    cli,
    make_workspace,
    release_listing,
    snapshot,
    state_of,
)

from anonymizer.settings import Strategy
from serialpub.analysis.audit import audit_workspace
from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.io import release_files
from serialpub.io.hierarchies import read_hierarchy
from serialpub.workflow.publisher import Publisher
from state.store import StateStore, open_engine


@pytest.fixture
def ws_root(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


# ---------------------------------------------------------------------------------------
# a series of releases and the release contract


@pytest.mark.slow
def test_three_releases_follow_the_contract_and_pass_the_audit(ws_root: Path) -> None:
    ws = load_config(ws_root)
    publisher = Publisher(ws)
    outcomes = [publisher.publish(snapshot(ws_root, t)) for t in (1, 2, 3)]
    dataset_dir = ws_root / "releases" / "clinic"
    assert release_listing(dataset_dir) == ["release-0001", "release-0002", "release-0003"]
    hierarchies = {q: read_hierarchy(ws_root / "hierarchies" / f"{q}.csv") for q in QIS}
    for t, outcome in zip((1, 2, 3), outcomes, strict=True):
        directory = dataset_dir / f"release-{t:04d}"
        assert outcome.directory == directory and outcome.seq == t and outcome.period == f"{t:04d}"
        assert sorted(p.name for p in directory.iterdir()) == [
            "data.parquet",
            "manifest.json",
            "manifest.sig",
            "report.html",
            "report.json",
            "validation.html",
            "validation.json",
        ]
        data = pd.read_parquet(directory / "data.parquet")
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        raw = pd.read_csv(snapshot(ws_root, t), dtype=str)

        assert list(data.columns) == [*QIS, SENSITIVE]  # no id, nothing derived from it
        assert "id" not in data.columns
        for q in QIS:
            assert data[q].map(hierarchies[q].has_label).all(), f"{q}: label outside its hierarchy"
        assert set(data[SENSITIVE]) <= set(raw[SENSITIVE])
        assert len(data) == len(raw) - manifest["suppressed"]

        assert CONTRACT_KEYS <= set(manifest)
        assert manifest["format_version"] == 2
        assert (manifest["dataset"], manifest["release"], manifest["period"]) == ("clinic", t, f"{t:04d}")
        assert manifest["previous_release"] == (t - 1 if t > 1 else None)
        assert manifest["l"] == 2 and manifest["strategy"] == "constant" and manifest["k_prime"] == 3
        assert manifest["alpha"] is None
        assert manifest["protected_values"] == ["hiv", "cancer"]
        assert manifest["validation"]["success"] is True
        assert manifest["sign_off"]["decision"] == "approved" and manifest["sign_off"]["automatic"] is True
        assert manifest["dilution"] == "register" and manifest["guarantee"] == "global"
        assert manifest["records"] == len(data) == outcome.records
        assert manifest["groups"] == len(data.drop_duplicates(QIS)) == outcome.groups
        assert manifest["suppressed"] == outcome.suppressed <= int(0.05 * len(raw))
        sums = manifest["sha256"]
        assert sums["data.parquet"] == release_files.sha256_file(directory / "data.parquet")
        assert sums["register"] == release_files.sha256_file(ws_root / "register.csv")
        assert set(sums["hierarchies"]) == set(QIS)
        for q in QIS:
            assert sums["hierarchies"][q] == release_files.sha256_file(ws_root / "hierarchies" / f"{q}.csv")

    result = audit_workspace(ws_root)
    assert result.ok, result.findings
    assert result.releases == [1, 2, 3]
    assert result.max_p <= 1 / 2
    assert result.max_p > 0  # the series links someone: the check is not vacuous
    # register dilution: the independent recomputation agrees with the publisher's state
    assert result.max_p == pytest.approx(outcomes[-1].max_breach, abs=1e-12)


def test_history_lists_the_published_releases(published_once: Path) -> None:
    ws = load_config(published_once)
    Publisher(ws).publish(snapshot(published_once, 2))
    rows = StateStore(open_engine(ws.database_url)).published("clinic")
    assert [(r.seq, r.period) for r in rows] == [(1, "0001"), (2, "0002")]
    assert all(r.params.l == 2 and r.params.strategy is Strategy.CONSTANT for r in rows)
    assert Path(rows[1].directory) == published_once / "releases" / "clinic" / "release-0002"
    for r in rows:
        manifest = json.loads((Path(r.directory) / "manifest.json").read_text(encoding="utf-8"))
        assert (manifest["records"], manifest["groups"], manifest["suppressed"]) == (r.records, r.groups, r.suppressed)


@pytest.mark.slow
def test_identical_input_gives_identical_parquet_bytes(tmp_path: Path) -> None:
    roots = [make_workspace(tmp_path / name, seed=5) for name in ("a", "b")]
    for root in roots:
        Publisher(load_config(root)).publish(snapshot(root, 1))
    files = [root / "releases" / "clinic" / "release-0001" / "data.parquet" for root in roots]
    assert files[0].read_bytes() == files[1].read_bytes()


def test_a_draft_is_handed_over_only_with_its_measures_in_the_manifest(
    ws_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the measures run beside staging the state: the manifest is written first without them,
    # and the release goes to its next owner only once the manifest on disk holds them
    owner = "airflow:serialpub_release_clinic/run-1"
    publisher = Publisher(load_config(ws_root))
    seen: list[dict[str, object]] = []
    hand_over = StateStore.hand_over

    def spy(store: StateStore, release_id: int, new_owner: str) -> None:
        [staging] = (ws_root / "releases" / "clinic").glob(".staging-*")
        seen.append(json.loads((staging / "manifest.json").read_text(encoding="utf-8")))
        hand_over(store, release_id, new_owner)

    monkeypatch.setattr(StateStore, "hand_over", spy)
    staged = publisher.draft(snapshot(ws_root, 1), owner=owner)
    rel = publisher.store.open_release("clinic")
    assert rel is not None and rel.owner == owner
    [manifest] = seen
    assert manifest == json.loads((staged.staging / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["utility"]["average_relative_error"] == pytest.approx(staged.outcome.query_error)  # type: ignore[index]
    assert manifest["utility"]["register_weighted_error"] is not None  # type: ignore[index]
    assert manifest["measures"], "the draft's utility measures"
    assert manifest["sha256"]["data.parquet"] == release_files.sha256_file(staged.staging / "data.parquet")  # type: ignore[index]
    publisher.close(staged.seq, "test")

    # the second manifest write fails: the release is not handed over, and this process fails it
    def broken(*args: object, **kwargs: object) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(release_files, "write_manifest", broken)
    with pytest.raises(OSError, match="disk full"):
        publisher.draft(snapshot(ws_root, 1), owner=owner)
    assert len(seen) == 1
    assert publisher.store.open_release("clinic") is None


# ---------------------------------------------------------------------------------------
# bad input: an InputError naming the file and the line or column, and no trace


def test_infeasible_budget_is_an_input_error_without_trace(tmp_path: Path) -> None:
    """Presence known, every record protected, budget 0: nothing can be published."""
    root = make_workspace(tmp_path / "ws", dilution="presence", suppression_budget=0.0, protected_values=DISEASES)
    before = state_of(root)
    with pytest.raises(InputError) as err:
        Publisher(load_config(root)).publish(snapshot(root, 1))
    assert str(snapshot(root, 1)) in str(err.value)
    assert state_of(root) == before == ([], None, [])


# ---------------------------------------------------------------------------------------
# the command line, as a user runs it


def _cli(*args: str | Path, cwd: Path) -> Result:
    return cli(*args, cwd=cwd)


def test_cli_audit_passes_then_fails_after_tampering(published_once: Path) -> None:
    ok = _cli("audit", published_once, cwd=published_once)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "verdict: PASS" in ok.stdout

    # same records, different bytes (another compression): only the checksum gives it away
    data_path = published_once / "releases" / "clinic" / "release-0001" / "data.parquet"
    pd.read_parquet(data_path).to_parquet(data_path, compression="snappy", index=False)
    result = audit_workspace(published_once)
    assert not result.ok
    assert result.violations == 0 and result.overlap_pairs == 0
    assert len(result.findings) == 1 and "does not match the sha256" in result.findings[0]
    assert "release 1" in result.findings[0]

    bad = _cli("audit", published_once, cwd=published_once)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "does not match the sha256" in bad.stdout and "verdict: FAIL" in bad.stdout
    assert "Traceback" not in bad.stderr


# ---------------------------------------------------------------------------------------
# crash safety: release_files.recover


def _fake_release(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "data.parquet").write_bytes(b"PAR1 fake")
    (folder / "manifest.json").write_text("{}\n")


def test_recover_removes_uncommitted_staging(tmp_path: Path) -> None:
    dataset_dir = tmp_path / "releases" / "clinic"
    _fake_release(dataset_dir / "release-0001")
    _fake_release(dataset_dir / ".staging-release-0002-r7")  # release row 7: not committed
    _fake_release(dataset_dir / ".staging-release-0002")  # an attempt without a row id
    with pytest.warns(UserWarning, match="removed"):
        release_files.recover(dataset_dir, committed={3: 1})
    assert release_listing(dataset_dir) == ["release-0001"]


def test_recover_moves_committed_staging_into_place(tmp_path: Path) -> None:
    dataset_dir = tmp_path / "releases" / "clinic"
    _fake_release(dataset_dir / "release-0001")
    _fake_release(dataset_dir / ".staging-release-0002-r5")  # an earlier, failed attempt
    _fake_release(dataset_dir / ".staging-release-0002-r8")  # the committed one
    (dataset_dir / ".staging-release-0002-r8" / "data.parquet").write_bytes(b"PAR1 committed")
    with pytest.warns(UserWarning) as caught:
        release_files.recover(dataset_dir, committed={3: 1, 8: 2})
    messages = sorted(str(w.message).split(" ")[0] for w in caught)
    assert messages == ["completed", "removed"]  # r8 rolled forward, the failed r5 removed
    assert release_listing(dataset_dir) == ["release-0001", "release-0002"]
    assert (dataset_dir / "release-0002" / "data.parquet").read_bytes() == b"PAR1 committed"


def test_recover_leaves_a_live_draft_alone(tmp_path: Path) -> None:
    dataset_dir = tmp_path / "releases" / "clinic"
    _fake_release(dataset_dir / "release-0001")
    _fake_release(dataset_dir / ".staging-release-0002-r9")
    release_files.recover(dataset_dir, committed={3: 1}, in_progress={9})
    assert sorted(p.name for p in dataset_dir.iterdir()) == [".staging-release-0002-r9", "release-0001"]


def test_publish_cleans_up_a_crashed_staging_folder(published_once: Path) -> None:
    """A staging folder left by a crash before the state commit is rolled back by the next
    publication, which then publishes normally."""
    dataset_dir = published_once / "releases" / "clinic"
    _fake_release(dataset_dir / ".staging-release-0002")
    with pytest.warns(UserWarning, match="removed"):
        outcome = Publisher(load_config(published_once)).publish(snapshot(published_once, 2))
    assert outcome.seq == 2
    assert release_listing(dataset_dir) == ["release-0001", "release-0002"]
    assert audit_workspace(published_once).ok
