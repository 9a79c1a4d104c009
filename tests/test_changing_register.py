"""A register that changes between releases (docs/design.md section 10): newcomers, leavers,
returners and changed QI values; a regrouped hierarchy.

The clinic workspace of tests/helpers.py (60 individuals) publishes four releases while its
register changes before each. The state is checked against a brute-force recomputation
from the published files and each period's register, exact in fractions (paper 004,
Lemma 4: p(o, s) = 1 - Π_j (1 - n_{j,s}/n_j) over the releases whose register holds o in
a group's region); the audit and ``serialpub state verify`` must pass on it.
"""

from __future__ import annotations

import hashlib
import json
import random
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from helpers import DISEASES, cli, make_workspace, snapshot
from hierarchy_oracle import ancestor_matrix
from typer.testing import CliRunner

from anonymizer.hierarchy import Hierarchy
from serialpub.analysis.audit import audit_workspace
from serialpub.analysis.verify import verify_state
from serialpub.cli import app
from serialpub.config import load_config
from serialpub.io.hierarchies import read_hierarchy
from serialpub.io.versions import RegisterVersions, hierarchy_version
from serialpub.workflow.publisher import Publisher
from state.store import StateError, StateStore, open_engine

QIS = ["sex", "zipcode", "age"]


def _write(root: Path, register: pd.DataFrame, t: int, rng: random.Random) -> None:
    """register.csv of period t and a snapshot of it (each individual present with
    probability 0.7), QIs equal to the register's."""
    register.to_csv(root / "register.csv", index=False, lineterminator="\n")
    rows = register[[rng.random() < 0.7 for _ in range(len(register))]].copy()
    rows["disease"] = rng.choices(DISEASES, weights=[5, 5, 5, 5, 1, 1], k=len(rows))
    rows.to_csv(snapshot(root, t), index=False, lineterminator="\n")


def _changes(register: pd.DataFrame, first: pd.DataFrame, t: int, rng: random.Random) -> pd.DataFrame:
    """The register of period t from that of t - 1: joiners, leavers, returners, ageing."""
    reg = register.copy()
    if t == 2:  # ten newcomers
        new = pd.DataFrame(
            {
                "id": [f"n{i:03d}" for i in range(10)],
                "sex": rng.choices("MF", k=10),
                "zipcode": rng.choices(sorted(reg["zipcode"].unique()), k=10),
                "age": ["20"] * 10,
            }
        )
        reg = pd.concat([reg, new], ignore_index=True)
    if t == 3:  # ten leave, ten others age by a year
        reg = reg[~reg["id"].isin([f"p{i:03d}" for i in range(10)])]
        older = reg["id"].isin([f"p{i:03d}" for i in range(10, 20)])
        reg.loc[older, "age"] = (reg.loc[older, "age"].astype(int) + 1).clip(upper=29).astype(str)
    if t == 4:  # five of the leavers come back, with the QIs they had
        reg = pd.concat([reg, first[first["id"].isin([f"p{i:03d}" for i in range(5)])]], ignore_index=True)
    return reg.reset_index(drop=True)


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[pd.DataFrame]]:
    """Four releases published by one Publisher while the register changes before each."""
    root = make_workspace(tmp_path_factory.mktemp("changing") / "ws", n=60, periods=4)
    rng = random.Random(7)
    register = pd.read_csv(root / "register.csv", dtype=str)
    first = register.copy()
    registers = []
    publisher = Publisher(load_config(root))
    for t in range(1, 5):
        if t > 1:
            register = _changes(register, first, t, rng)
        _write(root, register, t, rng)
        registers.append(register)
        publisher.publish(snapshot(root, t))
    return root, registers


def _brute_force(root: Path, registers: list[pd.DataFrame]) -> dict[tuple[str, str], Fraction]:
    """Survival product per (individual, protected value) from the release files and each
    period's register, one group and one individual at a time, in fractions."""
    cfg = load_config(root).config
    hs = {q: read_hierarchy(root / "hierarchies" / f"{q}.csv", q) for q in QIS}
    survival: dict[tuple[str, str], Fraction] = {}
    for j, register in enumerate(registers, start=1):
        folder = root / "releases" / "clinic" / f"release-{j:04d}"
        data = pd.read_parquet(folder / "data.parquet")
        protected = json.loads((folder / "manifest.json").read_text())["protected_values"]
        for labels, group in data.groupby(QIS):
            under = {q: _leaves_under(hs[q], lab) for q, lab in zip(QIS, labels, strict=True)}
            inside = register[[all(r[q] in under[q] for q in QIS) for _, r in register.iterrows()]]
            n_j = max(len(inside), len(group))
            for s in protected:
                n_js = int((group[cfg.sensitive] == s).sum())
                if n_js == 0:
                    continue
                for o in inside["id"]:
                    survival[(o, s)] = survival.get((o, s), Fraction(1)) * (1 - Fraction(n_js, n_j))
    return survival


def _leaves_under(h: Hierarchy, label: str) -> set[str]:
    node = h.node(label)
    return {leaf for i, leaf in enumerate(h.leaves) if ancestor_matrix(h)[i, node]}


def _state(root: Path) -> dict[tuple[str, str], float]:
    ws = load_config(root)
    members, classes = StateStore(open_engine(ws.database_url)).latest_statistics("clinic")
    by_class: dict[int, dict[str, float]] = {}
    for row in classes.to_pylist():
        by_class.setdefault(row["class"], {})[row["value"]] = row["survival"]
    return {(m["individual"], s): v for m in members.to_pylist() for s, v in by_class.get(m["class"], {}).items()}


@pytest.mark.slow
def test_every_release_of_a_changing_register_is_published(series: tuple[Path, list[pd.DataFrame]]) -> None:
    root, registers = series
    shas = []
    for j, register in enumerate(registers, start=1):
        manifest = json.loads((root / "releases" / "clinic" / f"release-{j:04d}" / "manifest.json").read_text())
        shas.append(manifest["sha256"]["register"])
        # the version kept is the register of that period, byte for byte
        text = register.to_csv(index=False, lineterminator="\n").encode()
        assert hashlib.sha256(text).hexdigest() == shas[-1]
        assert RegisterVersions(root).read_bytes(shas[-1]) == text
    assert len(set(shas)) == 4


def test_the_state_follows_individuals_by_id(series: tuple[Path, list[pd.DataFrame]]) -> None:
    """Leavers keep their history, returners find it, newcomers and the aged are counted
    from the register of each release: the state equals the brute force, pair by pair."""
    root, registers = series
    expected = _brute_force(root, registers)
    state = _state(root)
    assert set(state) == {k for k, v in expected.items() if v != 1}
    for key, value in expected.items():
        assert state[key] == pytest.approx(float(value), rel=1e-12, abs=0), key
    # the history of one who left after release 2 (p005..p009 never came back) is kept
    assert any(o == "p007" for o, _ in expected) == any(o == "p007" for o, _ in state)


def test_audit_and_verify_pass_on_a_changing_register(series: tuple[Path, list[pd.DataFrame]]) -> None:
    root, registers = series
    result = audit_workspace(root, snapshots=root / "snapshots")
    assert result.ok, (result.findings, result.max_p)
    assert result.findings == []
    assert result.mechanism_max_p is not None and result.mechanism_max_p <= 0.5
    expected = _brute_force(root, registers)
    assert result.published_count_max_p == pytest.approx(float(1 - min(expected.values())), rel=1e-12)
    report = verify_state(load_config(root))
    assert report.ok, [(d.kind, d.examples) for d in report.differences]
    out = CliRunner().invoke(app, ["audit", str(root), "--snapshots", str(root / "snapshots")])
    assert out.exit_code == 0, out.output
    verified = cli("state", "verify", "--config", root)
    assert verified.returncode == 0 and "verdict: PASS" in verified.stdout, verified.stdout + verified.stderr


def test_an_audit_without_the_kept_version_names_it(series: tuple[Path, list[pd.DataFrame]], tmp_path: Path) -> None:
    import shutil

    root, _ = series
    copy = tmp_path / "ws"
    shutil.copytree(root, copy)
    manifest = json.loads((copy / "releases" / "clinic" / "release-0001" / "manifest.json").read_text())
    (copy / "registers" / f"{manifest['sha256']['register']}.parquet").unlink()
    with pytest.raises(Exception, match=r"release 1 was published with .*registers/.*\.parquet is missing"):
        audit_workspace(copy)


@pytest.mark.slow
def test_a_regrouped_hierarchy_is_versioned(tmp_path: Path) -> None:
    """Moving a zip code to another district between releases: release 2 is published with
    the new hierarchy, the audit reads release 1 with the old one (kept) and passes."""
    root = make_workspace(tmp_path / "ws", n=60, periods=2)
    publisher = Publisher(load_config(root))
    publisher.publish(snapshot(root, 1))
    path = root / "hierarchies" / "zipcode.csv"
    old = path.read_bytes()
    lines = path.read_text().splitlines()
    first, second = lines[0].split(";"), lines[-1].split(";")
    lines[0] = ";".join([first[0], second[1], "*"])  # the first zip joins the last one's district
    path.write_text("\n".join(lines) + "\n")
    publisher.publish(snapshot(root, 2))
    m1, m2 = (
        json.loads((root / "releases" / "clinic" / f"release-{j:04d}" / "manifest.json").read_text()) for j in (1, 2)
    )
    sha_old = m1["sha256"]["hierarchies"]["zipcode"]
    assert sha_old != m2["sha256"]["hierarchies"]["zipcode"]
    assert hierarchy_version(root, "zipcode", sha_old).read_bytes() == old
    result = audit_workspace(root, snapshots=root / "snapshots")
    assert result.ok and result.findings == [], result.findings
    assert verify_state(load_config(root)).ok


def test_leavers_stay_in_the_statistics_file(series: tuple[Path, list[pd.DataFrame]]) -> None:
    root, _ = series
    ws = load_config(root)
    members, _ = StateStore(open_engine(ws.database_url)).latest_statistics("clinic")
    rows = {m["individual"]: m["row"] for m in members.to_pylist()}
    gone = [f"p{i:03d}" for i in range(5, 10)]  # left before release 3, never came back
    assert all(rows[o] == -1 for o in gone)
    assert all(rows[f"p{i:03d}"] >= 0 for i in range(5))  # came back before release 4
    linked = {o for o, _ in _state(root)}
    assert linked & set(gone), "the series should link some leaver before they left"


@pytest.mark.slow
def test_a_protected_value_dropped_from_the_domain_is_refused(tmp_path: Path) -> None:
    """The unsafe change: a value once linked leaves the sensitive domain. The release is
    refused in one line naming the value and the fix; nothing is published."""
    root = make_workspace(tmp_path / "ws", n=60, periods=2, protected_values="all")
    Publisher(load_config(root)).publish(snapshot(root, 1))
    _, classes = StateStore(open_engine(load_config(root).database_url)).latest_statistics("clinic")
    linked = {str(v) for v in classes.column("value").to_pylist()}
    dropped = sorted(linked)[0]
    kept = [d for d in DISEASES if d != dropped]
    (root / "hierarchies" / "disease.csv").write_text("".join(f"{d};*\n" for d in kept))
    text = snapshot(root, 2).read_text().splitlines()
    snapshot(root, 2).write_text("\n".join(line for line in text if not line.endswith("," + dropped)) + "\n")
    proc = cli("release", "--config", root, "--snapshot", snapshot(root, 2), "--period", "0002")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"protected value(s) '{dropped}'" in proc.stderr and "stays protected" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    ws = load_config(root)
    assert [r.seq for r in StateStore(open_engine(ws.database_url)).published("clinic")] == [1]


def test_a_register_replaced_between_draft_and_validation_fails_the_draft(tmp_path: Path) -> None:
    """Validation must judge the release against the register it was drafted with."""
    root = make_workspace(tmp_path / "ws", n=60, periods=1)
    publisher = Publisher(load_config(root))
    staged = publisher.draft(snapshot(root, 1))
    with (root / "register.csv").open("a") as f:
        f.write("late,M,65001,25\n")
    checker = Publisher(load_config(root))  # another step, another process
    with pytest.raises(StateError, match="changed after release 1 was drafted"):
        checker.validate(staged.seq)
    ws = load_config(root)
    assert StateStore(open_engine(ws.database_url)).published("clinic") == []


@pytest.mark.slow
def test_the_same_register_reads_the_ids_only_when_members_left(
    series: tuple[Path, list[pd.DataFrame]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the register the statistics file was written for, its members' ids are not
    read (50M of them at national scale) unless members have left the register since, whose
    ids the next file keeps: the state is the one a full read gives either way."""
    import numpy as np

    from serialpub.io import statistics_file

    root, _ = series
    publisher = Publisher(load_config(root))
    codec = publisher.statistics
    ell = np.full(len(publisher.register.ids), float(load_config(root).config.ell))
    read: list[tuple[str, list[str] | None]] = []
    real_read, real_batches = statistics_file._read, statistics_file._batches
    monkeypatch.setattr(statistics_file, "_read", lambda m, c: read.append(("whole", c)) or real_read(m, c))
    monkeypatch.setattr(statistics_file, "_batches", lambda m, c: read.append(("batches", c)) or real_batches(m, c))
    _, (members_file, classes) = publisher.store.latest_statistics_unless("clinic", None)  # type: ignore[misc]
    lazy, lazy_departed = codec.load((members_file, classes), ell), codec.departed
    # members left: read again whole, for their ids
    assert read == [("batches", ["row", "class", "ell"]), ("whole", None)]
    full, full_departed = codec.load((members_file.read(), classes), ell), codec.departed
    for name in ("class_of", "survival", "linked", "ell"):
        assert np.array_equal(getattr(lazy, name), getattr(full, name)), name
    assert lazy_departed is not None and full_departed is not None
    assert lazy_departed[0].equals(full_departed[0]) and lazy_departed[1].equals(full_departed[1])

    steady = make_workspace(root.parent / "steady", n=60, periods=2)
    first = Publisher(load_config(steady))
    first.publish(snapshot(steady, 1))
    read.clear()
    Publisher(load_config(steady)).publish(snapshot(steady, 2))  # a fresh process reads the file
    assert read == [("batches", ["row", "class", "ell"])]
    # read 7 members at a time, the state is the one a full read gives
    later = Publisher(load_config(steady))
    _, (members_file, classes) = later.store.latest_statistics_unless("clinic", None)  # type: ignore[misc]
    n = len(later.register.ids)
    for everyone in (np.full(n, 3.0), np.arange(n) % 3 + 2.0):
        monkeypatch.setattr(statistics_file, "_BATCH", 7)
        batched = later.statistics.load((members_file, classes), everyone)
        monkeypatch.setattr(statistics_file, "_BATCH", 1 << 22)
        whole = later.statistics.load((members_file.read(), classes), everyone)
        for name in ("class_of", "survival", "linked", "ell"):
            x, y = getattr(batched, name), getattr(whole, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
