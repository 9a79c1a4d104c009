"""The signed records a dataset's release store holds beside its releases
(docs/release-contract.md, "Integrity"; docs/compliance.md, "Checkpoints and keys"):

- ``checkpoint.json`` (+ ``checkpoint.sig``): the newest published release's number and
  the sha256 of its ``manifest.json``, rewritten after each publication. A consumer keeps
  a copy; ``serialpub audit --checkpoint FILE`` then checks that a later copy of the series
  still extends it (a rollback or a truncation does not).
- ``key-rotation-NNNN.json`` (+ ``key-rotation-NNNN.sig``, signed by the old key): the
  publisher's signing key changes from release NNNN on. ``serialpub audit`` pins the key of
  the first signed release and accepts another key only through such a record.

Each ``.sig`` is one line, the base64 Ed25519 signature (RFC 8032) of the exact bytes of
its ``.json``, as ``manifest.sig`` is of ``manifest.json``. This module holds the file
formats only (no key material), so that the audit reads them without the writer side's
signing module (docs/design.md section 9).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from serialpub.errors import InputError

#: the dataset's newest checkpoint and its signature, in ``releases/<dataset>/``
CHECKPOINT_FILE = "checkpoint.json"
CHECKPOINT_SIGNATURE = "checkpoint.sig"

_ROTATION = re.compile(r"^key-rotation-(\d{4,})\.json$")
_SHA256 = r"^[0-9a-f]{64}$"
#: a public key as records and manifests name it: ``ed25519:`` and the base64 of its 32 raw bytes
KEY_PATTERN = r"^ed25519:[A-Za-z0-9+/]{43}=$"


def rotation_name(from_release: int) -> str:
    """``key-rotation-NNNN.json``: the record of a key change taking effect at ``from_release``."""
    return f"key-rotation-{from_release:04d}.json"


def rotation_release(name: str) -> int | None:
    """The release number a ``key-rotation-NNNN.json`` file name gives, None for another name."""
    m = _ROTATION.match(name)
    return None if m is None else int(m.group(1))


def signature_path(path: Path) -> Path:
    """Where the signature of a record lives: ``X.json`` -> ``X.sig``."""
    return path.with_suffix(".sig")


class _Record(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    @classmethod
    def parse(cls, text: str | bytes, where: str) -> Self:
        """The record in the JSON ``text``.

        Raises:
            InputError: ``where``: not JSON, or the first key that breaks the format.
        """
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            key = ".".join(str(p) for p in err["loc"]) or "the record"
            msg = err["msg"][:120]
            raise InputError(f"{where}: {key}: {msg}; it is not a serialpub {cls.__name__} record") from None

    def to_json(self) -> str:
        """The file's text: two-space indented JSON and a final newline."""
        return self.model_dump_json(indent=2) + "\n"


class Checkpoint(_Record):
    """A dataset's newest published release as the publisher saw it.

    Attributes:
        dataset: the dataset (the folder under ``releases/``).
        release: the newest published release number (>= 1).
        manifest_sha256: hex sha256 of that release's ``manifest.json`` bytes.
        signing_key: the public key that signed ``checkpoint.sig`` (``ed25519:<base64>``),
            null when the workspace signs nothing.
        created: when it was written, UTC, ISO 8601.
    """

    format_version: Literal[1] = 1
    dataset: str
    release: int = Field(ge=1)
    manifest_sha256: str = Field(pattern=_SHA256)
    signing_key: str | None = Field(pattern=KEY_PATTERN)
    created: str


class KeyRotation(_Record):
    """A change of the publisher's signing key, signed by the old key.

    Attributes:
        dataset: the dataset whose releases it concerns.
        from_release: the first release signed with ``new_key`` (>= 2).
        after_manifest_sha256: sha256 of release ``from_release - 1``'s ``manifest.json``
            (the newest release when the key changed): binds the record to that history.
        old_key: the key it hands over from (the key of the releases before).
        new_key: the key of the releases from ``from_release`` on.
        created: when it was written, UTC, ISO 8601.
        reason: why the key changed (free text, recorded).
    """

    format_version: Literal[1] = 1
    dataset: str
    from_release: int = Field(ge=2)
    after_manifest_sha256: str = Field(pattern=_SHA256)
    old_key: str = Field(pattern=KEY_PATTERN)
    new_key: str = Field(pattern=KEY_PATTERN)
    created: str
    reason: str
