"""Tamper evidence (docs/release-contract.md "Integrity"): the hostile
insider's edits to a published store, each detected and named by ``serialpub audit``
(with the publisher's public key) and refused by the next publication."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from helpers import cli, read_config, snapshot, state_of, write_config

from serialpub.io import signing
from serialpub.io.release_files import sha256_file

Tamper = Callable[[Path], None]


def _release(root: Path, n: int) -> Path:
    return root / "releases" / "clinic" / f"release-{n:04d}"


def _delete_first(root: Path) -> None:
    import shutil

    shutil.rmtree(_release(root, 1))


def _edit_manifest_field(root: Path) -> None:
    path = _release(root, 2) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["l"] = 3  # a stricter ℓ than the release was made for
    path.write_text(json.dumps(manifest, indent=2) + "\n")


def _edit_report(root: Path) -> None:
    path = _release(root, 1) / "report.html"
    path.write_text(path.read_text().replace("</body>", "<p>approved by the board</p></body>"))


def _forge(n: int) -> Tamper:
    """Drop a record from release ``n``'s data and make its manifest agree (checksum and
    count): every check that reads only the release itself passes."""

    def forge(root: Path) -> None:
        folder = _release(root, n)
        data = pd.read_parquet(folder / "data.parquet")
        data.iloc[1:].to_parquet(folder / "data.parquet", index=False)
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["sha256"]["data.parquet"] = sha256_file(folder / "data.parquet")
        manifest["records"] -= 1
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")

    return forge


CASES: dict[str, tuple[Tamper, list[str]]] = {
    "a deleted release": (_delete_first, ["release(s) 1 missing from the store"]),
    "an edited manifest": (
        _edit_manifest_field,
        ["release 2: the signature of manifest.json does not verify",
         "release 2: manifest.json is not the one release 3's manifest chains to"],
    ),
    "an edited report.html": (_edit_report, ["release 1: report.html does not match the manifest's sha256"]),
    "data and manifest forged together (last release)": (
        _forge(3), ["release 3: the signature of manifest.json does not verify"]
    ),
    "data and manifest forged together (earlier release)": (
        _forge(2),
        ["release 2: the signature of manifest.json does not verify",
         "release 2: manifest.json is not the one release 3's manifest chains to"],
    ),
}  # fmt: skip


@pytest.fixture
def three_releases(tmp_path: Path, published_workspaces: object) -> Path:
    return published_workspaces.copy(tmp_path / "ws", releases=3)  # type: ignore[attr-defined, no-any-return]


def _audit(root: Path, key: Path | None = None) -> tuple[int, str]:
    result = cli("audit", root, "--public-key", key or root / "keys" / "publisher.pub")
    return result.returncode, result.stdout + result.stderr


def test_an_intact_signed_store_passes(three_releases: Path) -> None:
    for n in (1, 2, 3):
        assert (_release(three_releases, n) / signing.SIGNATURE_FILE).is_file()
    code, out = _audit(three_releases)
    assert code == 0 and "findings: none" in out and "verdict: PASS" in out, out


@pytest.mark.parametrize("case", list(CASES))
def test_the_audit_names_each_tampering(three_releases: Path, case: str) -> None:
    tamper, expected = CASES[case]
    tamper(three_releases)
    code, out = _audit(three_releases)
    assert code == 1 and "verdict: FAIL" in out, out
    for line in expected:
        assert line in out, out


def test_another_key_is_named(three_releases: Path, tmp_path: Path) -> None:
    other = signing.create_key_pair(tmp_path / "other.key")
    code, out = _audit(three_releases, other)
    assert code == 1, out
    for n in (1, 2, 3):
        assert f"release {n}: signed by another key" in out


@pytest.mark.parametrize("case", ["an edited report.html", "an edited manifest"])
def test_the_next_release_refuses_a_tampered_store(three_releases: Path, case: str) -> None:
    CASES[case][0](three_releases)
    before = state_of(three_releases)
    for n in (1, 2, 3):  # the periods: the clinic workspace has three snapshots
        assert snapshot(three_releases, n).is_file()
    extra = three_releases / "snapshots" / "snapshot-0004.csv"
    # period 3's records less the last: a byte-identical snapshot is refused as re-sent first
    extra.write_bytes(b"".join(snapshot(three_releases, 3).read_bytes().splitlines(keepends=True)[:-1]))
    result = cli("release", "--config", three_releases, "--snapshot", extra, "--period", "0004")
    assert result.returncode == 2, result.stderr
    assert "restore it from the backup" in result.stderr
    assert state_of(three_releases) == before


# ---------------------------------------------------------------------------------------
# the sign-off records in the state database


def _sql(root: Path, *statements: str) -> None:
    import sqlite3

    with sqlite3.connect(root / "state.sqlite") as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.mark.parametrize("statement", ["UPDATE sign_offs SET approver = 'Mallory'", "DELETE FROM sign_offs"])
def test_sign_offs_refuse_update_and_delete(three_releases: Path, statement: str) -> None:
    import sqlite3

    with pytest.raises(sqlite3.IntegrityError, match="sign_offs is append-only"):
        _sql(three_releases, statement)


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        (
            ["DROP TRIGGER sign_offs_no_update", "UPDATE sign_offs SET approver = 'Mallory' WHERE id = 2"],
            [
                "the sign-off row 'approved' by 'Mallory' has no such entry in the audit log",
                "release 2: the manifest's sign-off (approved by 'automatic approval",
            ],
        ),
        (
            ["DROP TRIGGER sign_offs_no_delete", "DELETE FROM sign_offs WHERE id = 3"],
            ["release 3: the audit log records 'approved'", "release 3: the manifest's sign-off"],
        ),
    ],
    ids=["approver rewritten", "row deleted"],
)
def test_state_verify_finds_a_rewritten_sign_off(
    three_releases: Path, statements: list[str], expected: list[str]
) -> None:
    """Someone who can drop the triggers rewrites the record: the audit log and the signed
    manifests still say what was decided."""
    assert cli("state", "verify", "--config", three_releases).returncode == 0
    _sql(three_releases, *statements)
    result = cli("state", "verify", "--config", three_releases)
    assert result.returncode == 1, result.stdout
    for line in expected:
        assert line in result.stdout.replace("\n", " "), result.stdout


def test_a_stripped_signature_is_named_and_the_publisher_stays_signed(three_releases: Path) -> None:
    """A release after signed ones cannot be unsigned: not by editing the store (the audit
    names it even without --public-key), nor by removing signing_key from the configuration
    (the next release is refused)."""
    folder = _release(three_releases, 3)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["signing_key"] = None
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (folder / signing.SIGNATURE_FILE).unlink()
    result = cli("audit", three_releases)
    assert result.returncode == 1 and "release 3: not signed, although release 2 was" in result.stdout


@pytest.mark.slow
def test_the_next_release_stays_signed(three_releases: Path) -> None:
    config = read_config(three_releases)
    config["signing_key"] = None
    write_config(three_releases, config)
    before = state_of(three_releases)
    extra = three_releases / "snapshots" / "snapshot-0004.csv"
    # period 3's records less the last: a byte-identical snapshot is refused as re-sent first
    extra.write_bytes(b"".join(snapshot(three_releases, 3).read_bytes().splitlines(keepends=True)[:-1]))
    result = cli("release", "--config", three_releases, "--snapshot", extra)
    assert result.returncode == 2 and "signing_key is not set, but release 3 was signed" in result.stderr
    assert state_of(three_releases)[0] == before[0]


def test_keygen_never_overwrites_a_key(tmp_path: Path) -> None:
    assert cli("keygen", "--out", tmp_path / "k.key").returncode == 0
    again = cli("keygen", "--out", tmp_path / "k.key")
    assert again.returncode == 2 and "exists; a signing key is never overwritten" in again.stderr
    same = cli("keygen", "--out", tmp_path / "x.pub")
    assert same.returncode == 2 and "name the private key file" in same.stderr and not (tmp_path / "x.pub").exists()
