"""What the state database and the release store hold, read for ``serialpub state verify``.

From the state database (read-only; docs/design.md section 4): the published releases with
the figures and sha256 recorded at publication (:func:`db_releases`) and a release's group
figures (:func:`db_groups`). From the release store: the ``release-NNNN/`` folders and any
staging folder an interrupted publication left (:func:`release_folders`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from state.models import Dataset, Release, ReleaseGroup, ReleaseStatus
from state.store import StateStore


@dataclass(frozen=True)
class DbRelease:
    """A published release as the state database recorded it: its row id, sequence number,
    period, parameters (``params["snapshot"]``: the presence-mode snapshot), the sha256 of
    ``data.parquet`` and of the manifest, and its record and group counts."""

    id: int
    seq: int
    period: str
    params: dict[str, Any]
    data_sha256: str | None
    manifest_sha256: str | None
    records: int | None
    groups: int | None


def db_releases(store: StateStore, dataset: str) -> list[DbRelease]:
    """Published releases with the sums the database recorded (read-only)."""
    with Session(store.engine) as s:
        rows = s.execute(
            select(
                Release.id,
                Release.seq,
                Release.period,
                Release.params,
                Release.data_sha256,
                Release.manifest_sha256,
                Release.records,
                Release.groups,
            )
            .join(Dataset, Dataset.id == Release.dataset_id)
            .where(Dataset.name == dataset, Release.status == ReleaseStatus.PUBLISHED)
            .order_by(Release.seq)
        ).all()
    return [
        DbRelease(r.id, r.seq, r.period, dict(r.params or {}), r.data_sha256, r.manifest_sha256, r.records, r.groups)
        for r in rows
    ]


def db_groups(store: StateStore, release_id: int) -> list[tuple[list[str], int, int, dict[str, int]]]:
    """A release's groups as recorded, in group order: (labels, n_j, records, n_{j,s} by value)."""
    with Session(store.engine) as s:
        rows = s.execute(
            select(ReleaseGroup.labels, ReleaseGroup.candidates, ReleaseGroup.records, ReleaseGroup.counts)
            .where(ReleaseGroup.release_id == release_id)
            .order_by(ReleaseGroup.group_no)
        ).all()
    return [(list(r.labels), int(r.candidates), int(r.records), dict(r.counts)) for r in rows]


def release_folders(dataset_dir: Path) -> tuple[dict[int, Path], list[str]]:
    """The ``release-NNNN/`` folders of the release store by sequence number, and the names
    of the ``.staging-release-*`` folders an interrupted publication left."""
    found: dict[int, Path] = {}
    staging: list[str] = []
    if dataset_dir.is_dir():
        for p in dataset_dir.iterdir():
            name = p.name
            if p.is_dir() and name.startswith("release-") and name[8:].isdigit():
                found[int(name[8:])] = p
            elif p.is_dir() and name.startswith(".staging-release-"):
                staging.append(name)
    return dict(sorted(found.items())), sorted(staging)
