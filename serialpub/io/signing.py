"""The publisher's Ed25519 key: creating a key pair, loading the private key, signing a
manifest (docs/release-contract.md, "Integrity"; docs/compliance.md).

A published release's ``manifest.sig`` holds the base64 Ed25519 signature of the exact
bytes of its ``manifest.json``; the manifest names the public key (``signing_key``,
``ed25519:<base64 of the 32 raw bytes>``) and the sha256 of the previous release's
manifest (``previous_manifest_sha256``), so every manifest signs the whole chain before
it. A consumer checks them with the publisher's public key alone
(``serialpub audit --public-key``), without trusting the release store.

The cryptography is the ``cryptography`` package's (RFC 8032 Ed25519); keys are PEM files,
the private one PKCS#8 and unencrypted (protect it with the file's permissions), the
public one SubjectPublicKeyInfo.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from serialpub.errors import InputError

#: the detached signature of ``manifest.json`` in a release folder
SIGNATURE_FILE = "manifest.sig"
#: prefix of a public key as a manifest names it
KEY_PREFIX = "ed25519:"


def create_key_pair(private_path: Path) -> Path:
    """Write a new Ed25519 key pair: the private key to ``private_path`` (mode 0600) and the
    public key beside it with the suffix ``.pub``. Returns the public key's path.

    Raises:
        InputError: ``private_path`` exists (a key is never overwritten).
    """
    public_path = private_path.with_suffix(".pub")
    if public_path == private_path:
        raise InputError(
            f"{private_path}: name the private key file, e.g. keys/publisher.key (the public key gets .pub)"
        )
    for path in (private_path, public_path):
        if path.exists():
            raise InputError(f"{path}: exists; a signing key is never overwritten, choose another --out")
    key = Ed25519PrivateKey.generate()
    private_path.parent.mkdir(parents=True, exist_ok=True)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private_pem)
    public_path.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return public_path


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file ``path``.

    Raises:
        InputError: the file is missing, not a PEM private key, encrypted, or not Ed25519.
    """
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except PermissionError:
        raise InputError(
            f"{path}: this account cannot read the signing key; publish from the account that holds it "
            "(docs/compliance.md)"
        ) from None
    except FileNotFoundError:
        raise InputError(
            f"{path}: signing key not found; create one with 'serialpub keygen --out {path}' "
            "or remove signing_key from serialpub.yaml"
        ) from None
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise InputError(
            f"{path}: not an unencrypted PEM private key ({exc}); create one with 'serialpub keygen'"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path}: the signing key must be Ed25519, not {type(key).__name__}; use 'serialpub keygen'")
    return key


def public_key_text(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The public key as a manifest names it: ``ed25519:<base64 of the 32 raw bytes>``."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return KEY_PREFIX + base64.b64encode(raw).decode("ascii")


def sign(key: Ed25519PrivateKey, data: bytes) -> str:
    """The base64 Ed25519 signature of ``data``, as ``manifest.sig`` holds it (one line)."""
    return base64.b64encode(key.sign(data)).decode("ascii") + "\n"
