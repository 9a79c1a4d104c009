"""A temporary file of the writer's own, for files written then renamed into place.

Two processes may write the same shared file at once (two publishers started together
both store the register version, its cache entry or the snapshot verdict). A temporary
name shared by them lets one rename the other's half-written file away, and the other's
rename then fails; a name of its own per process and thread keeps each write whole, and
the last rename wins with the same bytes.
"""

from __future__ import annotations

import os
import secrets
import threading
from pathlib import Path


def own_tmp(target: Path) -> Path:
    """A hidden temporary path beside ``target`` that no other writer uses:
    ``.<name>.<pid>-<thread>-<random>.tmp``."""
    return target.with_name(f".{target.name}.{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}.tmp")
