"""Which key must have signed each release (docs/release-contract.md, "Integrity"; the
record format: :mod:`serialpub.io.series_records`).

Without the publisher's public key the audit pins the key of the first signed release
(trust on first use): every later release must be signed by it, or by a key that a key
rotation record ``key-rotation-NNNN.json`` hands over to from release NNNN on. A record
counts only when its signature (``key-rotation-NNNN.sig``) verifies under the key in
effect before release NNNN, it names that key as the old one, and it names the sha256 of
release NNNN-1's manifest as this copy has it. A release appended under a key of one's
own is then a finding, whatever that key's signature says.

With ``--public-key K``: K must be one of the series' keys (the pinned one or one handed
over to); releases signed before K took over are vouched for by the hash chain of the
first release K signed, so K must have signed one. A K that is none of them makes every
release a finding ("signed by another key").

With ``--key-fingerprint F`` (the publisher's key fingerprint, obtained out of band): the
series' key whose :func:`fingerprint` is F is taken as if given with ``--public-key``; a
series none of whose keys has it (a copy re-signed by someone else, its ``keys/*.pub``
replaced) is a finding. Whatever was given, the audit names the fingerprint of the key it
verified against, so that a reader can compare it with the publisher's.
"""

from __future__ import annotations

import base64
import hashlib
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from serialpub.analysis.audit.signature import KEY_PREFIX, short, signature_problem
from serialpub.errors import InputError, quoted
from serialpub.io.manifest import Manifest
from serialpub.io.series_records import KeyRotation, rotation_release, signature_path

_FINGERPRINT = re.compile(r"^SHA256:[A-Za-z0-9+/]{43}$")


def fingerprint(key: str) -> str:
    """The fingerprint of an Ed25519 public key (``ed25519:<base64 of the 32 raw bytes>``, as
    a manifest names it): ``SHA256:`` and the unpadded base64 of the sha256 of the key in
    OpenSSH's wire format (RFC 8709 section 4), which is what ``ssh-keygen -l`` prints for
    the same key, so a data user can check it with standard tools too
    (docs/data-users.md, "Pinning the publisher's key")."""
    raw = base64.b64decode(key.removeprefix(KEY_PREFIX))
    blob = b"".join(struct.pack(">I", len(part)) + part for part in (b"ssh-ed25519", raw))
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def parse_fingerprint(text: str) -> str:
    """``--key-fingerprint`` as given (``SHA256:`` and 43 base64 characters; the prefix may
    be left out), in the form :func:`fingerprint` writes.

    Raises:
        InputError: anything else (quoted, shortened).
    """
    value = text.strip()
    value = value if value.startswith("SHA256:") else f"SHA256:{value}"
    if not _FINGERPRINT.fullmatch(value):
        raise InputError(
            f"--key-fingerprint {quoted(text)}: give the publisher's key fingerprint, SHA256: and 43 base64 "
            "characters, as 'serialpub keygen' and 'serialpub audit' print it"
        )
    return value


@dataclass
class KeyPlan:
    """The key each release must be signed with and how it was established.

    Attributes:
        expected: release number -> the key (``ed25519:<base64>``) it must be signed with;
            releases before the first signed one are absent.
        describe: release number -> the wording of that key in a finding.
        sequence: the series' keys, oldest first: the pinned key, then each key a valid
            rotation record handed over to (also one taking effect after the newest release).
        given: the key ``--public-key`` named (or the series' key ``--key-fingerprint``
            named), or None.
        findings, notes: as :class:`serialpub.analysis.audit.integrity.Integrity`'s.
    """

    expected: dict[int, str] = field(default_factory=dict)
    describe: dict[int, str] = field(default_factory=dict)
    sequence: list[str] = field(default_factory=list)
    given: str | None = None
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str | None:
        """The key the signatures were verified against: the given one, else the key
        pinned from the first signed release; None when nothing is signed."""
        return self.given if self.given is not None else (self.sequence[0] if self.sequence else None)

    @property
    def trusted(self) -> list[str]:
        """The keys a checkpoint may be signed with: the series' keys, or only the given
        key when it is none of them."""
        if self.given is not None and self.given not in self.sequence:
            return [self.given]
        return self.sequence


def _read_rotations(dataset_dir: Path | None, out: KeyPlan) -> dict[int, tuple[KeyRotation, Path, bytes]]:
    records: dict[int, tuple[KeyRotation, Path, bytes]] = {}
    if dataset_dir is None or not dataset_dir.is_dir():
        return records
    for path in sorted(dataset_dir.glob("key-rotation-*.json")):
        number = rotation_release(path.name)
        if number is None:
            continue
        raw = path.read_bytes()
        try:
            record = KeyRotation.parse(raw, str(path))
        except InputError as exc:
            out.findings.append(f"{exc} (a damaged or forged key rotation record)")
            continue
        if record.from_release != number:
            out.findings.append(f"{path.name}: names from_release {record.from_release}, not {number} as its name says")
            continue
        records[number] = (record, path, raw)
    return records


def key_plan(
    dataset_dir: Path | None,
    dataset: str | None,
    manifests: dict[int, Manifest],
    texts: dict[int, bytes],
    public_key: str | None,
    pinned: str | None = None,
) -> KeyPlan:
    """The key each release of ``manifests`` (number -> parsed manifest; ``texts``: their
    bytes) must be signed with, following the rotation records in ``dataset_dir``;
    ``public_key``: the key ``--public-key`` named, or None (pin the first signed
    release's key); ``pinned``: the fingerprint ``--key-fingerprint`` named
    (:func:`parse_fingerprint`), or None. Findings name each record that does not count
    and why, and a series none of whose keys has the ``pinned`` fingerprint."""
    out = KeyPlan(given=public_key)
    records = _read_rotations(dataset_dir, out)
    signed = [n for n in sorted(manifests) if manifests[n].signing_key is not None]
    if not signed:
        if records:
            out.findings.append(f"{', '.join(r[1].name for r in records.values())}: no release in this copy is signed")
        if pinned is not None:
            out.findings.append(f"no release in this copy is signed, so none is signed by the key {pinned} you pinned")
        return out
    first = signed[0]
    current = manifests[first].signing_key
    assert current is not None
    out.sequence.append(current)
    how = f"the series' key {short(current)} (pinned from release {first})"
    last = max(max(manifests), max(records, default=0))
    for n in range(first, last + 1):
        if n > first and n in records and _hands_over(out, records[n], current, dataset, texts.get(n - 1)):
            record, path, _ = records[n]
            current = record.new_key
            out.sequence.append(current)
            how = f"the series' key {short(current)} (handed over by {path.name})"
            reason = f": {record.reason}" if record.reason else ""
            pending = "" if n in manifests else ", a release not in this copy yet"
            out.notes.append(
                f"release {n}{pending}: the signing key changes from {short(record.old_key)} to "
                f"{short(record.new_key)} ({path.name}, signed by the old key{reason})"
            )
        if n in manifests:
            out.expected[n], out.describe[n] = current, how
    for n in sorted(r for r in records if r <= first):
        out.findings.append(
            f"{records[n][1].name}: hands the key over at release {n}, but the key is pinned from release {first}; "
            "a rotation record takes effect after a signed release"
        )
    if pinned is not None and public_key is None:
        public_key = out.given = next((k for k in out.sequence if fingerprint(k) == pinned), None)
        if public_key is None:
            out.findings.append(
                f"no key of this series has the fingerprint {pinned} you pinned (--key-fingerprint): its releases are "
                f"signed by {', '.join(map(fingerprint, out.sequence))}; this copy was not signed by the publisher"
            )
            return out
    _given_key(out, manifests, public_key, first, "you pinned (--key-fingerprint)" if pinned else "given")
    return out


def _hands_over(
    out: KeyPlan, entry: tuple[KeyRotation, Path, bytes], current: str, dataset: str | None, previous: bytes | None
) -> bool:
    """Whether the record counts: signed by ``current``, which it names as the old key, for
    this dataset and this history. Each reason it does not is a finding."""
    record, path, raw = entry
    n = record.from_release
    problems = []
    if dataset is not None and record.dataset != dataset:
        problems.append(f"it is for dataset {record.dataset!r}, not {dataset!r}")
    if record.old_key != current:
        problems.append(
            f"it hands over from {short(record.old_key)}, but the key before release {n} is {short(current)}"
        )
    elif (why := signature_problem(current, signature_path(path), raw)) is not None:
        problems.append(f"its signature {signature_path(path).name} {why} under the old key")
    if previous is not None and hashlib.sha256(previous).hexdigest() != record.after_manifest_sha256:
        problems.append(f"it follows a release {n - 1} whose manifest is not this copy's")
    if problems:
        out.findings.append(f"{path.name} does not count: {'; '.join(problems)}")
    return not problems


def _given_key(out: KeyPlan, manifests: dict[int, Manifest], public_key: str | None, first: int, how: str) -> None:
    if public_key is None:
        out.notes.append(
            f"without --public-key or --key-fingerprint the key of release {first} ({fingerprint(out.sequence[0])}) "
            "was pinned: every later release must be signed by it or a key a rotation record hands over to; compare "
            "this fingerprint with the publisher's, or give it (--key-fingerprint) to check that the key is theirs"
        )
        return
    if public_key not in out.sequence:
        for n in out.expected:
            out.expected[n], out.describe[n] = public_key, "the given public key"
        return
    out.notes.append(f"signatures verified against the key {how}, {fingerprint(public_key)}")
    mine = [n for n in sorted(out.expected) if out.expected[n] == public_key]
    if not any(manifests[n].signing_key == public_key for n in mine):
        out.findings.append(
            f"the given public key ({short(public_key)}) has signed no release in this copy yet, so it vouches for "
            f"none; audit with the key of release {max(manifests)}"
        )
    elif mine[0] > first:
        out.notes.append(
            f"releases {first}..{mine[0] - 1} were signed by earlier keys; the given key vouches for them through "
            f"the hash chain of release {mine[0]}, the first it signed"
        )
