"""Does this copy extend the series a consumer saw before? (docs/release-contract.md,
"Integrity"; the checkpoint format: :mod:`serialpub.io.series_records`.)

A pin is a release number N and the sha256 of its ``manifest.json``, as the consumer saw
them: given on the command line (``--since N --manifest-sha256 H``), read from a checkpoint
they kept (``--checkpoint FILE``, signed by the publisher), or the copy's own
``checkpoint.json``. The copy extends the pin when release N is in it with that manifest,
and every later release chains to it (``previous_release`` and
``previous_manifest_sha256`` link by link). What breaks it:

- the newest release is older than N: the copy was truncated or rolled back;
- release N's manifest is another: the series was rewritten after the consumer saw it
  (a rollback of the store and the state, then a new release N);
- a later release does not chain to it.

A rollback done by someone holding the signing key can re-sign everything, the
checkpoint in the copy included; only a checkpoint kept elsewhere, from before the
rollback, shows it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from serialpub.analysis.audit.keys import KeyPlan
from serialpub.analysis.audit.signature import short, signature_problem
from serialpub.errors import InputError
from serialpub.io.manifest import Manifest
from serialpub.io.series_records import CHECKPOINT_FILE, Checkpoint, signature_path


@dataclass(frozen=True)
class Pin:
    """A release the consumer saw: its number, its manifest's sha256 and where it came
    from (for messages)."""

    release: int
    manifest_sha256: str
    label: str


def read_checkpoint(
    path: Path, dataset: str, keys: KeyPlan, findings: list[str], notes: list[str], given: bool
) -> Pin | None:
    """The pin of the checkpoint at ``path`` (signature ``X.sig`` beside ``X.json``) after
    checking that it is for ``dataset`` and signed by one of the series' keys; None when
    it cannot be used (a finding says why).

    Raises:
        InputError: ``given`` (``--checkpoint``) and the file is missing or not a checkpoint.
    """
    label = f"the checkpoint {path}" if given else f"the copy's {CHECKPOINT_FILE}"
    try:
        raw = path.read_bytes()
        record = Checkpoint.parse(raw, str(path))
    except FileNotFoundError:
        if given:
            raise InputError(f"{path}: not found; --checkpoint names a checkpoint.json you kept") from None
        return None
    except InputError as exc:
        if given:
            raise
        findings.append(f"{exc} (damaged or forged)")
        return None
    if record.dataset != dataset:
        findings.append(f"{label} is for dataset {record.dataset!r}, not {dataset!r}")
        return None
    if record.signing_key is None:
        if keys.sequence:
            findings.append(f"{label} is not signed, but the releases are")
            return None
        notes.append(f"{label} is not signed (the workspace signs nothing); it is checked as given")
    else:
        if record.signing_key not in keys.trusted:
            findings.append(f"{label} is signed by {short(record.signing_key)}, which is not a key of the series")
            return None
        problem = signature_problem(record.signing_key, signature_path(path), raw)
        if problem is not None:
            findings.append(f"{label}: its signature {signature_path(path).name} {problem}")
            return None
    return Pin(record.release, record.manifest_sha256, f"{label} ({record.created})")


def check_extends(
    pin: Pin, manifests: dict[int, Manifest], texts: dict[int, bytes], findings: list[str], notes: list[str]
) -> bool:
    """Whether the copy (``manifests``/``texts``: release number -> parsed manifest / bytes)
    extends ``pin``; the first break is a finding."""
    newest = max(manifests)
    n, expected = pin.release, pin.manifest_sha256.lower()
    if n > newest:
        findings.append(
            f"this copy's newest release is {newest}, older than release {n} of {pin.label}: the series was "
            "truncated or rolled back"
        )
        return False
    if n not in texts:
        findings.append(f"release {n}, named by {pin.label}, is not in this copy")
        return False
    actual = hashlib.sha256(texts[n]).hexdigest()
    if actual != expected:
        findings.append(
            f"release {n}'s manifest.json has sha256 {actual[:12]}…, not {expected[:12]}… as {pin.label} says: "
            "the series was rewritten after that was seen (rolled back and published again?)"
        )
        return False
    for k in range(n + 1, newest + 1):
        m, before = manifests.get(k), texts.get(k - 1)
        if (
            m is None
            or before is None
            or m.previous_release != k - 1
            or m.previous_manifest_sha256 != hashlib.sha256(before).hexdigest()
        ):
            findings.append(f"release {k} does not chain back to release {n} of {pin.label}")
            return False
    return True
