"""One workspace's release series as every step reads it (docs/design.md section 6): its
configuration, its state store, the staging folders of its open release and the
publisher's signing key. Approving, publishing, closing a release and checking the
series read only this: never the register.
"""

from __future__ import annotations

import shutil
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from serialpub.config import Workspace
from serialpub.io import release_files, signing
from state.store import OpenRelease, StateError, StateStore, open_engine, this_process

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


class DatasetSeries:
    """The release series of ``ws``'s dataset: its configuration (``ws``) and its state
    (``store``, opened on the configured database when made)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.store = StateStore(open_engine(ws.database_url))

    @property
    def dataset(self) -> str:
        """The dataset's name (``dataset`` in the configuration)."""
        return self.ws.config.dataset

    @cached_property
    def signing_key(self) -> Ed25519PrivateKey | None:
        """The publisher's private key (``signing_key`` in the configuration), or None.

        Raises:
            InputError: the key file is missing or not an Ed25519 PEM private key.
        """
        path = self.ws.signing_key_path
        return None if path is None else signing.load_private_key(path)

    def open_release(self, seq: int) -> OpenRelease:
        """The dataset's open release, which must be ``seq``.

        Raises:
            StateError: no release is open, or another one is.
        """
        current = self.store.open_release(self.dataset)
        if current is None or current.seq != seq:
            what = f"release {current.seq} is open" if current else "no release is open"
            raise StateError(f"dataset {self.dataset!r} has no open release {seq} ({what})")
        return current

    def staging_dir(self, rel: OpenRelease) -> Path:
        """The staging folder of an open release."""
        return self.ws.dataset_dir / release_files.staging_name(rel.seq, rel.id)

    def remove_staging(self, rel: OpenRelease) -> None:
        shutil.rmtree(self.staging_dir(rel), ignore_errors=True)

    def abandon(self, draft: OpenRelease, exc: BaseException) -> None:
        """Close a draft that did not complete, unless its publication was committed (then the
        staging folder is the release and recovery moves it into place)."""
        current = self.store.open_release(self.dataset)
        if current is None or current.id != draft.id:
            return  # committed, or closed by someone else: nothing of ours to undo
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.store.fail(draft.id, reason, this_process())
        self.remove_staging(draft)
