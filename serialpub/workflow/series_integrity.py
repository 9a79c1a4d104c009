"""The publisher's side of the records beside the releases (formats:
:mod:`serialpub.io.series_records`; docs/compliance.md, "Checkpoints and keys"):

- :func:`write_checkpoint`: after each publication, the signed checkpoint (newest release
  number, its manifest's sha256) that consumers keep, so that a rollback or a truncation of
  a later copy is detectable (``serialpub audit --checkpoint``);
- :func:`refresh_checkpoint`: at recovery, the checkpoint rewritten when a crash after the
  state commit left it behind the state;
- :func:`check_key_handover`: before a manifest is signed, a key other than the previous
  release's is refused unless a key rotation record hands it over (the audit pins the key
  of the first signed release and would name the release as forged);
- :func:`rotate_key`: ``serialpub rotate-key``, which writes that record, signed by the
  old key, and switches the workspace's ``signing_key``.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from serialpub.config import CONFIG_NAME, load_config
from serialpub.errors import InputError
from serialpub.io import release_files, signing
from serialpub.io.atomic import own_tmp
from serialpub.io.manifest import Manifest
from serialpub.io.series_records import (
    CHECKPOINT_FILE,
    Checkpoint,
    KeyRotation,
    rotation_name,
    rotation_release,
    signature_path,
)
from serialpub.workflow.dataset_series import DatasetSeries
from state.store import PublishedRelease


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _short(key: str | None) -> str:
    return "none" if key is None else f"{key[:20]}…"


def _write_signed(folder: Path, name: str, text: str, signature: str | None) -> Path:
    """Write ``folder/name`` and, when given, its ``.sig``: each to a hidden temporary file,
    flushed, then renamed over the old one (a reader sees an old or a new file, never a
    half-written one). The signature goes first: a crash between the two renames leaves an
    old record with a new signature, which the audit names and the next write replaces."""
    target = folder / name
    pairs = [(signature_path(target), signature)] if signature is not None else []
    pairs.append((target, text))
    for path, content in pairs:
        tmp = own_tmp(path)
        with tmp.open("w", encoding="utf-8") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    if signature is None:
        signature_path(target).unlink(missing_ok=True)  # a stale signature would not verify
    return target


def write_checkpoint(series: DatasetSeries) -> Path | None:
    """Write ``releases/<dataset>/checkpoint.json`` (+ ``checkpoint.sig`` when the workspace
    signs) naming the newest published release and the sha256 of its manifest as the
    state recorded it. Returns the file, None when nothing is published.

    Raises:
        InputError: the configured signing key cannot be read.
    """
    published = series.store.published(series.dataset)
    if not published:
        return None
    last = published[-1]
    key = series.signing_key
    record = Checkpoint(
        dataset=series.dataset,
        release=last.seq,
        manifest_sha256=_manifest_sha256(series, last.seq, last.manifest_sha256),
        signing_key=None if key is None else signing.public_key_text(key),
        created=_now(),
    )
    text = record.to_json()
    sig = None if key is None else signing.sign(key, text.encode("utf-8"))
    try:
        return _write_signed(series.ws.dataset_dir, CHECKPOINT_FILE, text, sig)
    except OSError as exc:
        # the release is published by now: say so, rather than fail as if it were not
        warnings.warn(
            f"{series.ws.dataset_dir / CHECKPOINT_FILE}: not rewritten ({exc.strerror or exc}); release {last.seq} is "
            "published, and the next publication writes the checkpoint",
            stacklevel=2,
        )
        return None


def refresh_checkpoint(series: DatasetSeries, published: list[PublishedRelease]) -> Path | None:
    """Rewrite ``checkpoint.json`` (:func:`write_checkpoint`) when a crash between the state
    commit and its rewrite left it behind ``published`` (the releases the state records,
    in number order): missing, naming an older release, or its signature left from a
    rewrite that stopped between the two files. Anything else a crash cannot leave (a
    checkpoint naming a later release or another manifest, or unreadable) is left for the
    audit to name. Returns the file when rewritten; a warning says so.

    An account that cannot read the signing key (an approver's) leaves it with a warning
    naming the command that rewrites it; a checkpoint that cannot be written is a warning
    too (:func:`write_checkpoint`), so recovery goes on either way (docs/state.md,
    "Publication and crashes").
    """
    if not published:
        return None
    path = series.ws.dataset_dir / CHECKPOINT_FILE
    newest = published[-1]
    why = _behind(series, path, newest)
    if why is None:
        return None
    try:
        written = write_checkpoint(series)
    except InputError:
        warnings.warn(
            f"{path}: {why}; this account cannot read the signing key to rewrite it: run 'serialpub publish "
            f"--config {series.ws.root} --release {newest.seq}' from the account that holds it",
            stacklevel=2,
        )
        return None
    if written is not None:
        warnings.warn(f"rewrote {path}: {why}", stacklevel=2)
    return written


def _behind(series: DatasetSeries, path: Path, newest: PublishedRelease) -> str | None:
    """Why the checkpoint at ``path`` is one a crash left behind release ``newest``; None
    when it is current or not a crash's doing."""
    interrupted = "a publication was interrupted before it was rewritten"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return f"missing, though release {newest.seq} is published ({interrupted})"
    except OSError:
        return None  # unreadable here: the next publication's write names the cause
    try:
        record = Checkpoint.parse(raw, str(path))
    except InputError:
        return None
    if record.dataset != series.dataset or record.release > newest.seq:
        return None
    if record.release < newest.seq:
        return f"it named release {record.release}, not the newest published, {newest.seq} ({interrupted})"
    if record.manifest_sha256 != _manifest_sha256(series, newest.seq, newest.manifest_sha256):
        return None
    try:
        key = series.signing_key
    except InputError:
        return None  # the signature cannot be made here, so it is not compared
    if record.signing_key != (None if key is None else signing.public_key_text(key)):
        return None  # signed before a key rotation: that key's checkpoint stays valid
    sig = signature_path(path)
    # Ed25519 signatures are deterministic (RFC 8032): the one that verifies is the one made
    expected = None if key is None else signing.sign(key, raw).encode("ascii")
    try:
        actual = sig.read_bytes()
    except OSError:
        actual = None
    if actual != expected:
        return f"its {sig.name} is not the signature of its record (a rewrite of the two was interrupted)"
    return None


def _manifest_sha256(series: DatasetSeries, seq: int, recorded: str | None) -> str:
    """The sha256 of release ``seq``'s manifest as the state recorded it (the file's, for a
    state that recorded none)."""
    folder = series.ws.dataset_dir / release_files.release_name(seq)
    return recorded or release_files.sha256_file(folder / release_files.MANIFEST_FILE)


def _rotation(dataset_dir: Path, seq: int) -> KeyRotation | None:
    path = dataset_dir / rotation_name(seq)
    if not path.is_file():
        return None
    return KeyRotation.parse(path.read_bytes(), str(path))


def check_key_handover(series: DatasetSeries, manifest: Manifest) -> None:
    """Refuse to sign ``manifest`` with a key other than the previous release's unless
    ``key-rotation-NNNN.json`` (NNNN: this release) hands the key over to it, and refuse the
    old key once such a record exists.

    Raises:
        InputError: naming ``serialpub.yaml``'s ``signing_key`` and the fix.
    """
    if manifest.previous_release is not None:
        _check_handover(series, manifest.previous_release, manifest.release, manifest.signing_key)


def check_next_key(series: DatasetSeries) -> None:
    """:func:`check_key_handover` for the next release, before it is drafted (a key the
    publication would refuse is refused before the sign-off, not after).

    Raises:
        InputError: as :func:`check_key_handover`; the key cannot be read.
    """
    published = series.store.published(series.dataset)
    key = series.signing_key
    if published and key is not None:
        _check_handover(series, published[-1].seq, published[-1].seq + 1, signing.public_key_text(key))


def _check_handover(series: DatasetSeries, previous: int, seq: int, key: str | None) -> None:
    if key is None:
        return
    folder = series.ws.dataset_dir / release_files.release_name(previous)
    before = Manifest.read(folder / release_files.MANIFEST_FILE).signing_key
    if before is None:
        return  # the first signed release: the audit pins its key
    record = _rotation(series.ws.dataset_dir, seq)
    config = series.ws.root / CONFIG_NAME
    name = rotation_name(seq)
    if record is None:
        if key != before:
            raise InputError(
                f"{config}: signing_key ({_short(key)}) is not the key of release {previous} ({_short(before)}) and "
                f"no {name} hands it over; configure the old key and run 'serialpub rotate-key --new-key PATH'"
            )
        return
    if record.old_key != before or record.new_key != key:
        raise InputError(
            f"{config}: {name} hands the key over from {_short(record.old_key)} to {_short(record.new_key)}, but "
            f"release {previous} was signed by {_short(before)} and signing_key is {_short(key)}; set signing_key "
            "to the record's new key"
        )


@dataclass(frozen=True)
class Rotation:
    """What :func:`rotate_key` did: the record written, the release it takes effect at, and
    the old and new public keys (``ed25519:<base64>``)."""

    record: Path
    from_release: int
    old_key: str
    new_key: str
    new_public_key_file: Path


def rotate_key(series: DatasetSeries, new_key_path: Path, reason: str) -> Rotation:
    """Hand the publisher's signing key over to ``new_key_path`` (created, with its ``.pub``,
    when missing) from the next release on: write ``key-rotation-NNNN.json`` and its
    signature by the old (configured) key, then set ``signing_key`` in ``serialpub.yaml``.
    Running it again after an interruption finishes the switch.

    Raises:
        InputError: no signing key is configured, nothing is published, the configured key
            did not sign the newest release, the new key is the old one, or a record for
            the next release exists for another key.
    """
    cfg, config = series.ws.config, series.ws.root / CONFIG_NAME
    old = series.signing_key
    if old is None:
        raise InputError(
            f"{config}: signing_key is not set, so there is no key to rotate; set it to the new key "
            "(the first signed release pins it)"
        )
    published = series.store.published(cfg.dataset)
    if not published:
        raise InputError(
            f"{config}: no release of {cfg.dataset!r} is published yet, so no key is pinned; set signing_key to "
            "the new key instead"
        )
    last = published[-1]
    from serialpub.workflow.publishing import check_published_files

    check_published_files(series, [last])
    folder = series.ws.dataset_dir / release_files.release_name(last.seq)
    last_manifest = Manifest.read(folder / release_files.MANIFEST_FILE)
    old_text = signing.public_key_text(old)
    if not new_key_path.exists():
        signing.create_key_pair(new_key_path)
    new_text = signing.public_key_text(signing.load_private_key(new_key_path))
    seq = last.seq + 1
    path = series.ws.dataset_dir / rotation_name(seq)
    existing = _rotation(series.ws.dataset_dir, seq)
    if existing is not None:
        if existing.new_key != new_text or existing.old_key != last_manifest.signing_key:
            raise InputError(
                f"{path}: exists and hands the key over to {_short(existing.new_key)}; a key changes once per "
                f"release: publish release {seq} with that key first"
            )
    else:
        if last_manifest.signing_key != old_text:
            raise InputError(
                f"{config}: signing_key ({_short(old_text)}) did not sign release {last.seq} "
                f"({_short(last_manifest.signing_key)}); configure the key of release {last.seq} to rotate from it"
            )
        if new_text == old_text:
            raise InputError(f"{new_key_path}: is the key signing_key already names; give a new key")
        record = KeyRotation(
            dataset=cfg.dataset,
            from_release=seq,
            after_manifest_sha256=_manifest_sha256(series, last.seq, last.manifest_sha256),
            old_key=old_text,
            new_key=new_text,
            created=_now(),
            reason=reason,
        )
        text = record.to_json()
        _write_signed(series.ws.dataset_dir, path.name, text, signing.sign(old, text.encode("utf-8")))
    _switch_signing_key(config, new_key_path)
    return Rotation(path, seq, existing.old_key if existing else old_text, new_text, new_key_path.with_suffix(".pub"))


_SIGNING_KEY_LINE = re.compile(r"^signing_key:.*$", re.MULTILINE)


def _switch_signing_key(config: Path, new_key_path: Path) -> None:
    """Set the top-level ``signing_key`` of ``config`` to ``new_key_path`` (relative to the
    workspace when inside it), keeping the file's comments; the result is read back."""
    text = config.read_text(encoding="utf-8")
    if len(_SIGNING_KEY_LINE.findall(text)) != 1:
        raise InputError(
            f"{config}: needs exactly one top-level 'signing_key:' line to switch; set signing_key: {new_key_path} "
            "by hand"
        )
    root = config.parent.resolve()
    target = new_key_path.resolve()
    value = str(target.relative_to(root)) if target.is_relative_to(root) else str(target)
    config.write_text(_SIGNING_KEY_LINE.sub(lambda _: f"signing_key: {json.dumps(value)}", text), encoding="utf-8")
    check = load_config(config).signing_key_path
    if check is None or check.resolve() != target:
        config.write_text(text, encoding="utf-8")
        raise InputError(f"{config}: could not switch signing_key to {new_key_path}; set it by hand")


def public_files(dataset_dir: Path, out_dir: Path) -> tuple[list[tuple[Path, Path]], list[tuple[bytes, Path]]]:
    """What the public copy of ``dataset_dir`` holds beside the releases, into ``out_dir``:
    the key rotation records and their signatures (immutable: ``(source, target)`` pairs),
    and the checkpoint with its signature (rewritten after each publication:
    ``(content, target)`` pairs, replacing the copy's)."""
    immutable = [
        (path, out_dir / path.name)
        for path in sorted(dataset_dir.glob("key-rotation-*"))
        if path.is_file() and rotation_release(path.with_suffix(".json").name) is not None
    ]
    current = [
        (path.read_bytes(), out_dir / path.name)
        for path in (dataset_dir / CHECKPOINT_FILE, signature_path(dataset_dir / CHECKPOINT_FILE))
        if path.is_file()
    ]
    return immutable, current
