"""Tamper evidence of a release store (docs/release-contract.md, "Integrity"): every release
from 1 to the newest present, the hash chain of the manifests, every file a manifest lists
matching its checksum, and each manifest's Ed25519 signature.

What each check detects, for a consumer who holds only the store and the publisher's
public key: a deleted release (a gap in the numbers, or a chain that names a manifest
that is not there; deleting the newest releases leaves neither, so a consumer keeps the
number and manifest sha256 of the newest release they have seen); an edited manifest (its
signature, and the next manifest's chain); an edited ``report.html``, ``report.json``,
``validation.json`` or ``validation.html`` (the manifest's checksum), or one of them deleted while the others are
there (a public copy without any of this evidence is noted, not failed: it holds figures
computed from the raw snapshot and may stay with the publisher, docs/release-contract.md);
a data file and a manifest forged together consistently (the signature, which only the
publisher's private key can make); a signature stripped from a release after signed ones;
a store signed by another key (``--public-key``); a release approved by the account that
prepared it although its manifest says the four-eyes rule was on when it was drafted.

The signature is verified here with ``cryptography`` directly, not with the writer side's
signing module (docs/design.md section 9: the audit shares only the file format).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from serialpub.errors import InputError
from serialpub.io.manifest import Manifest

SIGNATURE_FILE = "manifest.sig"
KEY_PREFIX = "ed25519:"


@dataclass
class Integrity:
    """What the integrity checks found: defects (the verdict fails) and notes."""

    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_public_key(path: Path) -> str:
    """The Ed25519 public key in the PEM file ``path``, as a manifest names it
    (``ed25519:<base64 raw>``).

    Raises:
        InputError: the file is missing or holds no Ed25519 public key.
    """
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except FileNotFoundError:
        raise InputError(f"{path}: public key not found; --public-key names the publisher's .pub file") from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise InputError(f"{path}: not a PEM public key ({exc}); use the publisher's keys/*.pub file") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{path}: the publisher's key is Ed25519; this file holds a {type(key).__name__}")
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def check_store(releases: list[tuple[int, Path]], public_key: str | None) -> Integrity:
    """Check the release folders ``releases`` ((number, folder), in number order) of one
    dataset; ``public_key`` (:func:`read_public_key`) requires every manifest to be signed
    by that key."""
    out = Integrity()
    numbers = [n for n, _ in releases]
    missing = sorted(set(range(1, max(numbers) + 1)) - set(numbers)) if numbers else []
    if missing:
        out.findings.append(
            f"release(s) {', '.join(map(str, missing))} missing from the store: the series runs to release "
            f"{max(numbers)}, and every release stays published"
        )
    texts = {n: (d / "manifest.json").read_bytes() for n, d in releases}
    manifests = {n: Manifest.parse(texts[n], str(d / "manifest.json")) for n, d in releases}
    keys = set()
    signed_before: int | None = None
    for n, folder in releases:
        m = manifests[n]
        _check_chain(out, n, m, texts)
        _check_listed_files(out, n, folder, m)
        keys.add(_check_signature(out, n, folder, m, texts[n], public_key))
        for who in m.sign_off.self_approvals() if m.sign_off is not None else []:
            out.findings.append(
                f"release {n}: approved by {who!r}, who prepared it, although the four-eyes rule was on when it "
                "was drafted"
            )
        if m.signing_key is None and signed_before is not None:
            out.findings.append(f"release {n}: not signed, although release {signed_before} was (signature stripped?)")
        if m.signing_key is not None:
            signed_before = n
    if public_key is None and keys - {None}:
        out.notes.append(
            "signatures were checked against the key each manifest names; give the publisher's public key "
            "(--public-key) to check that it is theirs"
        )
    return out


def _check_chain(out: Integrity, n: int, m: Manifest, texts: dict[int, bytes]) -> None:
    if m.previous_release is None:
        if m.previous_manifest_sha256 is not None:
            out.findings.append(f"release {n}: names a previous manifest but no previous release")
        return
    if m.previous_manifest_sha256 is None:
        if m.format_version >= 2:
            out.findings.append(f"release {n}: its manifest is not chained to release {m.previous_release}'s")
        else:
            out.notes.append(f"release {n}: published before manifests were chained (format_version 1)")
        return
    previous = texts.get(m.previous_release)
    if previous is None:
        out.findings.append(
            f"release {n}: its manifest chains to release {m.previous_release}, which is not in the store"
        )
    elif hashlib.sha256(previous).hexdigest() != m.previous_manifest_sha256:
        out.findings.append(
            f"release {m.previous_release}: manifest.json is not the one release {n}'s manifest chains to "
            f"(edited or replaced after release {n} was published)"
        )


def _check_listed_files(out: Integrity, n: int, folder: Path, m: Manifest) -> None:
    listed = m.evidence_checksums()
    absent = [name for name in listed if not (folder / name).is_file()]
    if absent and len(absent) == len(listed):
        # a public copy: the evidence holds figures computed from the raw snapshot and stays
        # with the publisher; the manifest binds it by checksums that a nonce makes hiding
        out.notes.append(
            f"release {n}: the evidence ({', '.join(absent)}) is not in this copy; the publisher keeps it, "
            "and the manifest's sha256 commit to it"
        )
        return
    for name, expected in listed.items():
        path = folder / name
        if not path.is_file():
            out.findings.append(
                f"release {n}: {name} is missing; the manifest lists it and the rest of the evidence is here"
            )
            continue
        with path.open("rb") as f:
            actual = hashlib.file_digest(f, "sha256").hexdigest()
        if actual != expected:
            out.findings.append(f"release {n}: {name} does not match the manifest's sha256 (edited after publication)")


def _check_signature(
    out: Integrity, n: int, folder: Path, m: Manifest, text: bytes, public_key: str | None
) -> str | None:
    sig_path = folder / SIGNATURE_FILE
    if m.signing_key is None:
        if public_key is not None:
            out.findings.append(f"release {n}: the manifest is not signed (no signing_key); --public-key needs it")
        elif sig_path.exists():
            out.findings.append(f"release {n}: {SIGNATURE_FILE} exists but the manifest names no signing_key")
        return None
    if public_key is not None and m.signing_key != public_key:
        out.findings.append(f"release {n}: signed by another key ({m.signing_key}), not the given public key")
        return m.signing_key
    try:
        raw_key = base64.b64decode(m.signing_key.removeprefix(KEY_PREFIX), validate=True)
        key = Ed25519PublicKey.from_public_bytes(raw_key)
        signature = base64.b64decode(sig_path.read_text(encoding="ascii").strip(), validate=True)
        key.verify(signature, text)
    except FileNotFoundError:
        out.findings.append(f"release {n}: {SIGNATURE_FILE} is missing; the manifest says it is signed")
    except (InvalidSignature, ValueError, binascii.Error, UnicodeDecodeError):
        out.findings.append(
            f"release {n}: the signature of manifest.json does not verify (the manifest, or the manifest and "
            "its data together, changed after it was signed)"
        )
    return m.signing_key
