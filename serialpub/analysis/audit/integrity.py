"""Tamper evidence of a release store (docs/release-contract.md, "Integrity"): every release
from 1 to the newest present, the hash chain of the manifests, every file a manifest lists
matching its checksum, and each manifest's Ed25519 signature.

What each check detects, for a consumer who holds only the store and the publisher's
public key: a deleted release (a gap in the numbers, or a chain that names a manifest
that is not there; deleting the newest releases leaves neither, so the copy's signed
checkpoint names the newest, and a consumer keeps a checkpoint to detect a rollback that
replaced it too, :mod:`.extension`); an edited manifest (its
signature, and the next manifest's chain); an edited ``report.html``, ``report.json``,
``validation.json`` or ``validation.html`` (the manifest's checksum), or one of them deleted while the others are
there (a public copy without any of this evidence is noted, not failed: it holds figures
computed from the raw snapshot and may stay with the publisher, docs/release-contract.md);
a data file and a manifest forged together consistently (the signature, which only the
publisher's private key can make); a signature stripped from a release after signed ones;
a store signed by another key (``--public-key``), or a release signed by a key other
than the pinned one of the first signed release without a key rotation record (:mod:`.keys`);
a release approved by the account that prepared it although its manifest says the
four-eyes rule was on when it was drafted.

The signature is verified here with ``cryptography`` directly, not with the writer side's
signing module (docs/design.md section 9: the audit shares only the file format).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from serialpub.analysis.audit.extension import Pin, check_extends, read_checkpoint
from serialpub.analysis.audit.keys import KeyPlan, fingerprint, key_plan, parse_fingerprint
from serialpub.analysis.audit.signature import KEY_PREFIX, signature_problem
from serialpub.errors import InputError
from serialpub.io.manifest import Manifest
from serialpub.io.series_records import CHECKPOINT_FILE, rotation_name

SIGNATURE_FILE = "manifest.sig"


@dataclass
class Integrity:
    """What the integrity checks found: defects (the verdict fails) and notes."""

    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # the key the signatures were verified against (:attr:`.keys.KeyPlan.anchor`)
    key: str | None = None


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


def given_key(public_key: Path | None, key_fingerprint: str | None) -> tuple[str | None, str | None]:
    """``--public-key`` and ``--key-fingerprint`` as :func:`check_store` takes them: the key
    the file holds (:func:`read_public_key`) and the fingerprint
    (:func:`.keys.parse_fingerprint`), each None when not given.

    Raises:
        InputError: the file or the fingerprint is unreadable, or both are given and the
            file's key has another fingerprint.
    """
    pinned = None if key_fingerprint is None else parse_fingerprint(key_fingerprint)
    key = None if public_key is None else read_public_key(public_key)
    if key is not None and pinned is not None and fingerprint(key) != pinned:
        raise InputError(
            f"{public_key}: holds the key {fingerprint(key)}, not the {pinned} of --key-fingerprint; give the "
            "publisher's key, or only its fingerprint"
        )
    return key, pinned


def check_store(
    releases: list[tuple[int, Path]],
    public_key: str | None,
    dataset: str | None = None,
    since: tuple[int, str] | None = None,
    checkpoint: Path | None = None,
    pinned: str | None = None,
) -> Integrity:
    """Check the release folders ``releases`` ((number, folder), in number order) of one
    dataset; ``public_key`` (:func:`read_public_key`) requires every manifest to be signed
    by that key (or by a key a rotation record hands over to from it, :mod:`.keys`);
    without it, the first signed release's key is pinned, or the series' key whose
    fingerprint is ``pinned`` (:func:`.keys.parse_fingerprint`). ``since`` (release number,
    manifest sha256) and ``checkpoint`` (a checkpoint file the consumer kept) are pins the
    copy must extend (:mod:`.extension`), as is the copy's own ``checkpoint.json``.

    Raises:
        InputError: ``checkpoint`` is missing or not a checkpoint file.
    """
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
    dataset_dir = releases[0][1].parent if releases else None
    plan = key_plan(dataset_dir, dataset, manifests, texts, public_key, pinned)
    public_key, out.key = plan.given, plan.anchor
    out.findings.extend(plan.findings)
    signed_before: int | None = None
    for n, folder in releases:
        m = manifests[n]
        _check_chain(out, n, m, texts)
        _check_listed_files(out, n, folder, m)
        _check_signature(out, n, folder, m, texts[n], public_key, plan)
        for who in m.sign_off.self_approvals() if m.sign_off is not None else []:
            out.findings.append(
                f"release {n}: approved by {who!r}, who prepared it, although the four-eyes rule was on when it "
                "was drafted"
            )
        if m.signing_key is None and signed_before is not None:
            out.findings.append(f"release {n}: not signed, although release {signed_before} was (signature stripped?)")
        if m.signing_key is not None:
            signed_before = n
    out.notes.extend(plan.notes)
    if manifests and dataset_dir is not None:
        _check_pins(out, dataset_dir, dataset, manifests, texts, plan, since, checkpoint)
    return out


def _check_pins(
    out: Integrity,
    dataset_dir: Path,
    dataset: str | None,
    manifests: dict[int, Manifest],
    texts: dict[int, bytes],
    plan: KeyPlan,
    since: tuple[int, str] | None,
    checkpoint: Path | None,
) -> None:
    """The copy against the releases the consumer saw (:mod:`.extension`)."""
    name = dataset or dataset_dir.name
    pins = []
    if since is not None:
        pins.append(Pin(since[0], since[1], f"--since {since[0]} --manifest-sha256 {since[1][:12]}…"))
    if checkpoint is not None:
        pin = read_checkpoint(checkpoint, name, plan, out.findings, out.notes, given=True)
        pins.extend([pin] if pin else [])
    own = read_checkpoint(dataset_dir / CHECKPOINT_FILE, name, plan, out.findings, out.notes, given=False)
    for pin in pins:
        if check_extends(pin, manifests, texts, out.findings, out.notes):
            out.notes.append(
                f"this copy extends {pin.label}: release {pin.release} is here with that manifest, and every later "
                "release chains to it"
            )
    newest = max(manifests)
    if own is None:
        if not (dataset_dir / CHECKPOINT_FILE).exists():
            out.notes.append(
                f"this copy holds no {CHECKPOINT_FILE} (published before checkpoints, or removed); keep the checkpoint "
                "of each copy you receive, off-site, and give it next time with --checkpoint"
            )
    elif check_extends(own, manifests, texts, out.findings, out.notes) and own.release < newest:
        out.notes.append(
            f"the copy's {CHECKPOINT_FILE} names release {own.release}, not the newest ({newest}): it was not "
            "rewritten after the last publication"
        )


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
    out: Integrity, n: int, folder: Path, m: Manifest, text: bytes, public_key: str | None, plan: KeyPlan
) -> None:
    sig_path = folder / SIGNATURE_FILE
    if m.signing_key is None:
        if public_key is not None:
            out.findings.append(f"release {n}: the manifest is not signed (no signing_key); --public-key needs it")
        elif sig_path.exists():
            out.findings.append(f"release {n}: {SIGNATURE_FILE} exists but the manifest names no signing_key")
        return
    expected = plan.expected.get(n)
    if expected is not None and m.signing_key != expected:
        if plan.describe[n] == "the given public key":
            out.findings.append(f"release {n}: signed by another key ({m.signing_key}), not the given public key")
        else:
            out.findings.append(
                f"release {n}: signed by another key ({m.signing_key}), not {plan.describe[n]}, and no valid "
                f"{rotation_name(n)} hands the key over to it (a release appended by someone else?)"
            )
        return
    problem = signature_problem(m.signing_key, sig_path, text)
    if problem == "missing":
        out.findings.append(f"release {n}: {SIGNATURE_FILE} is missing; the manifest says it is signed")
    elif problem is not None:
        out.findings.append(
            f"release {n}: the signature of manifest.json does not verify (the manifest, or the manifest and "
            "its data together, changed after it was signed)"
        )


def check_link(n: int, folder: Path, previous: bytes | None) -> list[str]:
    """What :func:`check_store` finds in one release folder's chain link and signature,
    without reading the rest of the series: the publisher runs it on its newest release
    before building on it (docs/operating.md, "When the release store and the state
    disagree"). The signature is checked against the key the manifest names.

    Args:
        n: the release number of ``folder``.
        previous: the bytes of release ``n - 1``'s ``manifest.json`` (None for release 1).

    Returns:
        the findings, one line each, worded as ``serialpub audit`` words them (empty: intact).

    Raises:
        InputError: ``manifest.json`` is unreadable or breaks the release contract.
    """
    text = (folder / "manifest.json").read_bytes()
    manifest = Manifest.parse(text, str(folder / "manifest.json"))
    out = Integrity()
    _check_chain(out, n, manifest, {n: text} if previous is None else {n: text, n - 1: previous})
    # the key itself is checked on the publisher's side (serialpub.workflow.series_integrity)
    _check_signature(out, n, folder, manifest, text, None, KeyPlan())
    return out.findings
