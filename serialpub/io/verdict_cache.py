"""Passed snapshot-suite verdicts, cached per snapshot version
(docs/configuration.md, "Inputs: files and databases").

An Airflow run of a release checks its snapshot in three tasks, each a fresh process
(validating the inputs, drafting, validating the draft), and the snapshot suite is the
costliest check of a large snapshot (docs/benchmarks.md). The suite's result is a function of its inputs only (the
evidence drops every run-dependent field, :mod:`checks.gx`), so after it passed once the
later tasks read it from ``cache/snapshot-<key>.json``.

The key is the sha256 of everything the verdict depends on: the register cache's key
(register, id column, QIs, hierarchies, suite code, Great Expectations version;
:mod:`serialpub.io.register_cache`), the snapshot's sha256, the columns and the sensitive
domain it was checked against, and the period order (the period, the last published one,
the previous row count and the bounds). A failed suite is not cached: its messages are
made afresh. Like the register cache's, an entry carries the sha256 of its bytes in
``snapshot-<key>.sha256`` and is not read when they differ; the folder holds the latest
entry only, and deleting it only costs time.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from serialpub.io.atomic import own_tmp
from serialpub.io.register_cache import CACHE_DIR, commit, intact

_PREFIX = "snapshot-"


def verdict_key(**parts: Any) -> str:
    """The sha256 of ``parts`` (JSON-serializable: keys, digests, labels, numbers)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def load(workspace_root: Path, key: str) -> dict[str, Any] | None:
    """The passed suite's record of entry ``key`` (the fields of ``checks.gx.SuiteResult``),
    or None when there is no intact entry."""
    path = workspace_root / CACHE_DIR / f"{_PREFIX}{key}.json"
    try:
        if not intact(path):
            return None
        record: dict[str, Any] = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return record if record.get("success") is True else None


def save(workspace_root: Path, key: str, record: dict[str, Any]) -> None:
    """Write entry ``key`` for a passed suite's ``record`` (atomically, the digest last);
    older entries are removed."""
    if record.get("success") is not True:
        raise ValueError("only a passed suite's verdict is cached")
    folder = workspace_root / CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_PREFIX}{key}.json"
    tmp = own_tmp(path)
    tmp.write_bytes(json.dumps(record, sort_keys=True).encode())
    commit(tmp, path)
    for stale in folder.glob(f"{_PREFIX}*"):
        if stale.stem != path.stem:
            stale.unlink(missing_ok=True)
