"""Verifying one Ed25519 signature as the publisher writes them (a ``.sig`` file holding
one base64 line, of the exact bytes of a ``.json`` file), with ``cryptography`` directly,
not with the writer side's signing module (docs/design.md section 9: the audit shares
only the file format)."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

KEY_PREFIX = "ed25519:"


def signature_problem(key: str, sig_path: Path, data: bytes) -> str | None:
    """Why ``sig_path`` is not ``key``'s signature of ``data``: ``"missing"``, ``"does not
    verify"``; None when it verifies. ``key``: ``ed25519:<base64 of the 32 raw bytes>``."""
    try:
        raw_key = base64.b64decode(key.removeprefix(KEY_PREFIX), validate=True)
        public = Ed25519PublicKey.from_public_bytes(raw_key)
        signature = base64.b64decode(sig_path.read_text(encoding="ascii").strip(), validate=True)
        public.verify(signature, data)
    except FileNotFoundError:
        return "missing"
    except (InvalidSignature, ValueError, binascii.Error, UnicodeDecodeError):
        return "does not verify"
    return None


def short(key: str | None) -> str:
    """A public key shortened for a message (its first 20 characters)."""
    return "none" if key is None else f"{key[:20]}…"
