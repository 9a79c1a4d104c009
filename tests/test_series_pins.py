"""Rollback, truncation and a key of one's own (docs/release-contract.md "Integrity";
docs/compliance.md "Checkpoints and keys"): the signed checkpoint a consumer keeps, the
audit's pins (``--since``/``--manifest-sha256``, ``--checkpoint``), the key pinned from
the first signed release and its rotation records."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import warnings
from pathlib import Path

import pytest
from helpers import cli, read_config, snapshot, state_of, write_config

from serialpub.io import signing
from serialpub.io.series_records import CHECKPOINT_FILE, CHECKPOINT_SIGNATURE, Checkpoint


def _store(root: Path) -> Path:
    return root / "releases" / "clinic"


def _manifest_sha(root: Path, n: int) -> str:
    return hashlib.sha256((_store(root) / f"release-{n:04d}" / "manifest.json").read_bytes()).hexdigest()


def _audit(root: Path, *args: str | Path) -> tuple[int, str]:
    result = cli("audit", root, *args)
    return result.returncode, " ".join((result.stdout + result.stderr).split())


def _next_snapshot(root: Path, n: int) -> Path:
    """A snapshot for period ``n`` (> 3): period 3's without its first record, so that it is
    not a byte copy of a published one."""
    lines = snapshot(root, 3).read_text().splitlines(keepends=True)
    path = root / "snapshots" / f"snapshot-{n:04d}.csv"
    path.write_text("".join([lines[0], *lines[1 + n - 3 :]]))
    return path


def _publish(root: Path, n: int) -> None:
    result = cli("release", "--config", root, "--snapshot", _next_snapshot(root, n), "--period", f"{n:04d}")
    assert result.returncode == 0, result.stdout + result.stderr


def _copy_database(source: Path, target: Path) -> None:
    """A SQLite backup of ``source`` over ``target`` (as 'sqlite3 .backup' makes one)."""
    import sqlite3

    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


@pytest.fixture
def three_releases(tmp_path: Path, published_workspaces: object) -> Path:
    return published_workspaces.copy(tmp_path / "ws", releases=3)  # type: ignore[attr-defined, no-any-return]


# ---------------------------------------------------------------------------------------
# checkpoints and pins


@pytest.mark.slow
def test_each_publication_writes_a_signed_checkpoint(three_releases: Path) -> None:
    store = _store(three_releases)
    record = Checkpoint.parse((store / CHECKPOINT_FILE).read_bytes(), "checkpoint")
    key = signing.load_private_key(three_releases / "keys" / "publisher.key")
    assert record.dataset == "clinic" and record.release == 3
    assert record.manifest_sha256 == _manifest_sha(three_releases, 3)
    assert record.signing_key == signing.public_key_text(key)
    code, out = _audit(three_releases, "--public-key", three_releases / "keys" / "publisher.pub")
    assert code == 0 and "verdict: PASS" in out, out


def _recover(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The recovery every publishing command starts with, in this process: its warnings."""
    from serialpub.config import DATABASE_ENV, load_config
    from serialpub.workflow.publisher import Publisher

    monkeypatch.delenv(DATABASE_ENV, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        publisher = Publisher(load_config(root))
        publisher.recover()
        publisher.store.engine.dispose()
    return [str(w.message) for w in caught]


def _verifies(root: Path) -> bool:
    """checkpoint.sig is the workspace key's signature of checkpoint.json."""
    from cryptography.exceptions import InvalidSignature

    key = signing.load_private_key(root / "keys" / "publisher.key")
    try:
        key.public_key().verify(
            base64.b64decode((_store(root) / CHECKPOINT_SIGNATURE).read_bytes()),
            (_store(root) / CHECKPOINT_FILE).read_bytes(),
        )
    except InvalidSignature:
        return False
    return True


def test_recovery_finishes_a_checkpoint_rewrite_cut_between_its_two_files(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite writes the signature first: a crash before the record's rename leaves the
    old record beside the new signature. Before: it stayed so until the next publication."""
    path = _store(published_once) / CHECKPOINT_FILE
    record = Checkpoint.parse(path.read_bytes(), "checkpoint")
    newer = record.model_copy(update={"created": "2999-01-01T00:00:00+00:00"}).to_json().encode()
    key = signing.load_private_key(published_once / "keys" / "publisher.key")
    (_store(published_once) / CHECKPOINT_SIGNATURE).write_text(signing.sign(key, newer), encoding="ascii")
    assert not _verifies(published_once)
    messages = _recover(published_once, monkeypatch)
    assert _verifies(published_once)
    rewritten = Checkpoint.parse(path.read_bytes(), "checkpoint")
    assert (rewritten.release, rewritten.manifest_sha256) == (1, _manifest_sha(published_once, 1))
    assert any("rewrote" in m and "checkpoint.sig is not the signature of its record" in m for m in messages), messages


def test_recovery_writes_a_missing_checkpoint_or_names_who_can(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first publication killed after its commit leaves no checkpoint at all. An
    account without the signing key (an approver's) is told who rewrites it, and goes on."""
    for name in (CHECKPOINT_FILE, CHECKPOINT_SIGNATURE):
        (_store(published_once) / name).unlink()
    key = published_once / "keys" / "publisher.key"
    key.rename(key.with_suffix(".away"))
    (warning,) = _recover(published_once, monkeypatch)
    assert "checkpoint.json: missing, though release 1 is published" in warning, warning
    assert f"run 'serialpub publish --config {published_once} --release 1' from the account that holds" in warning
    assert not (_store(published_once) / CHECKPOINT_FILE).exists()
    key.with_suffix(".away").rename(key)
    (warning,) = _recover(published_once, monkeypatch)
    assert "rewrote" in warning and "missing, though release 1 is published" in warning
    assert _verifies(published_once)
    assert Checkpoint.parse((_store(published_once) / CHECKPOINT_FILE).read_bytes(), "checkpoint").release == 1


def test_recovery_leaves_a_current_checkpoint_and_one_no_crash_leaves(
    published_once: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only what a crash leaves is rewritten: a current checkpoint stays byte for byte, and
    one naming a later release (the trace of a rollback) stays for the audit to name."""
    files = [_store(published_once) / name for name in (CHECKPOINT_FILE, CHECKPOINT_SIGNATURE)]
    before = [p.read_bytes() for p in files]
    assert _recover(published_once, monkeypatch) == []
    assert [p.read_bytes() for p in files] == before
    record = Checkpoint.parse(before[0], "checkpoint").model_copy(update={"release": 5})
    text = record.to_json().encode()
    key = signing.load_private_key(published_once / "keys" / "publisher.key")
    files[0].write_bytes(text)
    files[1].write_text(signing.sign(key, text), encoding="ascii")
    assert _recover(published_once, monkeypatch) == []
    assert files[0].read_bytes() == text


def test_deleting_the_newest_release_fails_the_audit(three_releases: Path) -> None:
    """The old trigger: release 3 removed; no gap, no broken chain, and the audit passed.
    The copy's signed checkpoint still names release 3."""
    shutil.rmtree(_store(three_releases) / "release-0003")
    code, out = _audit(three_releases, "--public-key", three_releases / "keys" / "publisher.pub")
    assert code == 1 and "verdict: FAIL" in out, out
    assert "this copy's newest release is 2, older than release 3 of the copy's checkpoint.json" in out


@pytest.mark.slow
def test_a_rollback_and_a_new_release_3_fail_a_kept_checkpoint(tmp_path: Path, published_workspaces: object) -> None:
    """The old trigger: store and state database rolled back to a backup taken after
    release 2; the audit and state verify passed, and publishing again gave a second,
    validly signed release 3. A consumer who kept the checkpoint of the first release 3
    (or its number and manifest sha256) now sees both."""
    root = published_workspaces.copy(tmp_path / "ws", releases=2)  # type: ignore[attr-defined]
    backup = tmp_path / "backup"
    shutil.copytree(root / "releases", backup / "releases")
    _copy_database(root / "state.sqlite", backup / "state.sqlite")
    assert cli("release", "--config", root, "--snapshot", snapshot(root, 3)).returncode == 0
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in (CHECKPOINT_FILE, CHECKPOINT_SIGNATURE):
        shutil.copyfile(_store(root) / name, kept / name)
    first_3 = _manifest_sha(root, 3)

    shutil.rmtree(root / "releases")  # the rollback: store and database together
    shutil.copytree(backup / "releases", root / "releases")
    _copy_database(backup / "state.sqlite", root / "state.sqlite")
    assert cli("state", "verify", "--config", root).returncode == 0  # what the state cannot see
    assert _audit(root)[0] == 0  # nor the copy alone: its own checkpoint was rolled back too
    code, out = _audit(root, "--checkpoint", kept / CHECKPOINT_FILE)
    assert code == 1 and "this copy's newest release is 2, older than release 3 of the checkpoint" in out, out
    code, out = _audit(root, "--since", "3", "--manifest-sha256", first_3)
    assert code == 1 and "older than release 3 of --since 3" in out, out

    assert cli("release", "--config", root, "--snapshot", snapshot(root, 3)).returncode == 0
    assert _manifest_sha(root, 3) != first_3  # two validly signed manifests of release 3
    code, out = _audit(root, "--checkpoint", kept / CHECKPOINT_FILE)
    assert code == 1 and f"release 3's manifest.json has sha256 {_manifest_sha(root, 3)[:12]}" in out, out
    assert "the series was rewritten after that was seen" in out
    code, out = _audit(root, "--since", "3", "--manifest-sha256", first_3.upper())
    assert code == 1 and "the series was rewritten" in out, out
    # what was not rolled back still holds: release 2 is extended
    code, out = _audit(root, "--since", "2", "--manifest-sha256", _manifest_sha(root, 2))
    assert code == 0 and "this copy extends --since 2" in out, out


def test_the_public_copy_ships_the_checkpoint_and_the_audit_checks_its_signature(
    three_releases: Path, tmp_path: Path
) -> None:
    out = tmp_path / "public"
    assert cli("public-copy", "--config", three_releases, "--out", out, "--with-register").returncode == 0
    copied = _store(out) / CHECKPOINT_FILE
    assert copied.read_bytes() == (_store(three_releases) / CHECKPOINT_FILE).read_bytes()
    kept = tmp_path / "kept.json"
    shutil.copyfile(copied, kept)
    shutil.copyfile(copied.with_suffix(".sig"), kept.with_suffix(".sig"))
    code, text = _audit(out, "--checkpoint", kept)
    assert code == 0 and "this copy extends the checkpoint" in text, text
    # a checkpoint edited to name an older release (to let a truncation pass) no longer verifies
    record = json.loads(kept.read_text())
    record["release"], record["manifest_sha256"] = 2, _manifest_sha(out, 2)
    kept.write_text(json.dumps(record, indent=2) + "\n")
    code, text = _audit(out, "--checkpoint", kept)
    assert code == 1 and f"the checkpoint {kept}: its signature kept.sig does not verify" in text, text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--since", "2"], "--since and --manifest-sha256 go together"),
        (["--since", "2", "--manifest-sha256", "abc"], "give a release number >= 1 and the 64 hex digits"),
        (["--checkpoint", "nowhere.json"], "nowhere.json: not found; --checkpoint names"),
    ],
)
def test_bad_pins_are_refused_in_one_line(three_releases: Path, args: list[str], expected: str) -> None:
    result = cli("audit", three_releases, *args)
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------
# the pinned key and its rotation


def _resign(root: Path, n: int, key_path: Path) -> None:
    """Release ``n`` re-signed by the key at ``key_path``, as a forger who appended it would
    sign it; the copy's checkpoint (signed by the publisher) removed with it."""
    key = signing.load_private_key(key_path)
    folder = _store(root) / f"release-{n:04d}"
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["signing_key"] = signing.public_key_text(key)
    text = json.dumps(manifest, indent=2) + "\n"
    (folder / "manifest.json").write_text(text)
    (folder / "manifest.sig").write_text(signing.sign(key, text.encode()))
    for name in (CHECKPOINT_FILE, CHECKPOINT_SIGNATURE):
        (_store(root) / name).unlink()


def _forged_rotation(root: Path, forger: Path) -> None:
    """A rotation record to the forger's key, signed by the forger (not the old key)."""
    from serialpub.io.series_records import KeyRotation

    old = signing.load_private_key(root / "keys" / "publisher.key")
    new = signing.load_private_key(forger)
    text = KeyRotation(
        dataset="clinic",
        from_release=3,
        after_manifest_sha256=_manifest_sha(root, 2),
        old_key=signing.public_key_text(old),
        new_key=signing.public_key_text(new),
        created="2026-11-28T00:00:00+00:00",
        reason="",
    ).to_json()
    (_store(root) / "key-rotation-0003.json").write_text(text)
    (_store(root) / "key-rotation-0003.sig").write_text(signing.sign(new, text.encode()))


@pytest.mark.parametrize("with_record", [False, True], ids=["no record", "record signed by the forger"])
def test_a_release_under_another_key_fails_the_audit_without_the_public_key(
    three_releases: Path, tmp_path: Path, with_record: bool
) -> None:
    """The old trigger: the newest release signed by a key of the forger's own; without
    --public-key the audit checked each signature against the key its manifest names, and
    passed. Now the key of release 1 is pinned."""
    forger = tmp_path / "forger.key"
    signing.create_key_pair(forger)
    _resign(three_releases, 3, forger)
    if with_record:
        _forged_rotation(three_releases, forger)
    code, out = _audit(three_releases)
    assert code == 1 and "verdict: FAIL" in out, out
    assert "release 3: signed by another key" in out and "(pinned from release 1)" in out, out
    assert "no valid key-rotation-0003.json hands the key over to it" in out
    if with_record:
        assert "key-rotation-0003.json does not count: its signature key-rotation-0003.sig does not verify" in out


@pytest.mark.slow
def test_a_rotated_key_passes_and_is_reported(three_releases: Path, tmp_path: Path) -> None:
    """`serialpub rotate-key`: the record, signed by the old key, hands the key over from
    release 4 on; the audit reports it and passes with either key; without the record's
    signature release 4 is named."""
    old_pub = three_releases / "keys" / "publisher.pub"
    new_key = three_releases / "keys" / "publisher-2.key"
    result = cli("rotate-key", "--config", three_releases, "--new-key", new_key, "--reason", "yearly rotation")
    assert result.returncode == 0, result.stdout + result.stderr
    assert read_config(three_releases)["signing_key"] == "keys/publisher-2.key"
    assert (_store(three_releases) / "key-rotation-0004.json").is_file()
    _publish(three_releases, 4)
    new_text = signing.public_key_text(signing.load_private_key(new_key))
    assert json.loads((_store(three_releases) / "release-0004" / "manifest.json").read_text())["signing_key"] == (
        new_text
    )
    for args in ([], ["--public-key", old_pub], ["--public-key", new_key.with_suffix(".pub")]):
        code, out = _audit(three_releases, *args)
        assert code == 0 and "verdict: PASS" in out, (args, out)
        assert "release 4: the signing key changes from" in out and "yearly rotation" in out
    copy = tmp_path / "public"
    assert cli("public-copy", "--config", three_releases, "--out", copy, "--with-register").returncode == 0
    assert (_store(copy) / "key-rotation-0004.json").is_file() and (_store(copy) / "key-rotation-0004.sig").is_file()
    code, out = _audit(copy)
    assert code == 0 and "release 4: the signing key changes from" in out, out
    (_store(three_releases) / "key-rotation-0004.sig").unlink()
    code, out = _audit(three_releases)
    assert code == 1 and "key-rotation-0004.json does not count: its signature key-rotation-0004.sig missing" in out
    assert "release 4: signed by another key" in out


def test_the_publisher_refuses_a_new_key_without_a_rotation_record(three_releases: Path) -> None:
    signing.create_key_pair(three_releases / "keys" / "other.key")
    config = read_config(three_releases)
    config["signing_key"] = "keys/other.key"
    write_config(three_releases, config)
    before = state_of(three_releases)
    result = cli("release", "--config", three_releases, "--snapshot", _next_snapshot(three_releases, 4))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not the key of release 3" in result.stderr and "serialpub rotate-key" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert state_of(three_releases)[0] == before[0]
