"""Tables of the state database (SQLAlchemy 2). The schema itself is created and evolved
by the Alembic migrations in ``state/migrations``; these models must match them.

A release row moves through :data:`TRANSITIONS`; only a ``published`` release counts in
the statistics file. At most one release per dataset is open (draft, validated or
approved) and a sequence number is published once, both enforced by partial unique
indexes, so two racing processes cannot both proceed whatever the code does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, LargeBinary, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class ReleaseStatus(StrEnum):
    """Where a release row stands (:data:`TRANSITIONS`); stored as its value."""

    DRAFT = "draft"
    VALIDATED = "validated"
    APPROVED = "approved"
    PUBLISHED = "published"
    REJECTED = "rejected"
    FAILED = "failed"


OPEN_STATUSES = (ReleaseStatus.DRAFT, ReleaseStatus.VALIDATED, ReleaseStatus.APPROVED)
FINAL_STATUSES = (ReleaseStatus.PUBLISHED, ReleaseStatus.REJECTED, ReleaseStatus.FAILED)
#: allowed status changes; validated and approved are the validation and sign-off steps
TRANSITIONS: Mapping[str, tuple[ReleaseStatus, ...]] = MappingProxyType(
    {
        ReleaseStatus.DRAFT: (
            ReleaseStatus.VALIDATED,
            ReleaseStatus.PUBLISHED,
            ReleaseStatus.REJECTED,
            ReleaseStatus.FAILED,
        ),
        ReleaseStatus.VALIDATED: (
            ReleaseStatus.APPROVED,
            ReleaseStatus.PUBLISHED,
            ReleaseStatus.REJECTED,
            ReleaseStatus.FAILED,
        ),
        ReleaseStatus.APPROVED: (ReleaseStatus.PUBLISHED, ReleaseStatus.REJECTED, ReleaseStatus.FAILED),
        ReleaseStatus.PUBLISHED: (),
        ReleaseStatus.REJECTED: (),
        ReleaseStatus.FAILED: (),
    }
)


class Base(DeclarativeBase):
    pass


class Dataset(Base):
    __tablename__ = "datasets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Release(Base):
    __tablename__ = "releases"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"))
    seq: Mapped[int] = mapped_column(Integer)
    period: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20))
    owner: Mapped[str] = mapped_column(String(200))
    imported: Mapped[bool] = mapped_column(Boolean, default=False)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    records: Mapped[int | None] = mapped_column(Integer)
    groups: Mapped[int | None] = mapped_column(Integer)
    suppressed: Mapped[int | None] = mapped_column(Integer)
    max_breach: Mapped[float | None] = mapped_column(Float)
    data_sha256: Mapped[str | None] = mapped_column(String(64))
    manifest_sha256: Mapped[str | None] = mapped_column(String(64))
    directory: Mapped[str | None] = mapped_column(String(1000))
    staging: Mapped[str | None] = mapped_column(String(1000))
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ReleaseGroup(Base):
    """Per published group: region labels (one per QI), n_j and n_{j,s} per protected value."""

    __tablename__ = "release_groups"
    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"), primary_key=True)
    group_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    labels: Mapped[list[str]] = mapped_column(JSON)
    candidates: Mapped[int] = mapped_column(Integer)
    records: Mapped[int] = mapped_column(Integer)
    counts: Mapped[dict[str, int]] = mapped_column(JSON)


class Statistics(Base):
    """The statistics file after a release, as two Parquet blobs: ``members`` (individual,
    register row, history class, ℓ) and ``classes`` (class, protected value, survival
    product, linked releases; pairs never linked are left out)."""

    __tablename__ = "statistics"
    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"), primary_key=True)
    individuals: Mapped[int] = mapped_column(Integer)
    classes: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    members_data: Mapped[bytes] = mapped_column(LargeBinary)
    classes_data: Mapped[bytes] = mapped_column(LargeBinary)


class SignOff(Base):
    __tablename__ = "sign_offs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"))
    approver: Mapped[str] = mapped_column(String(200))
    decision: Mapped[str] = mapped_column(String(20))
    comment: Mapped[str] = mapped_column(Text)
    report_sha256: Mapped[str | None] = mapped_column(String(64))
    decided_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ValidationResult(Base):
    __tablename__ = "validation_results"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    release_id: Mapped[int] = mapped_column(ForeignKey("releases.id"))
    suite: Mapped[str] = mapped_column(String(200))
    success: Mapped[bool] = mapped_column(Boolean)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    sha256: Mapped[str] = mapped_column(String(64))
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AuditLog(Base):
    """Append-only record of every state change (triggers refuse UPDATE and DELETE)."""

    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    dataset: Mapped[str] = mapped_column(String(200))
    release_seq: Mapped[int | None] = mapped_column(Integer)
    actor: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(50))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)
