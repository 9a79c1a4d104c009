"""The state database: datasets, published releases, their groups and the statistics file.

The statistics file (paper 004, section 7) is kept per release as an immutable snapshot:
after release k, one compressed Parquet blob holds every (individual, protected value)
pair linked so far with its survival product Π(1 - n_{j,s}/n_j) and its count of linked
releases. Writing one blob per release makes the state advance and the release record
commit in one transaction, costs one row instead of one per pair, and keeps every earlier
state for verification. ``release_groups`` keeps the raw per-release figures (region
labels, n_j and n_{j,s}) from which anyone can recompute the products.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import (
    JSON,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    create_engine,
    event,
    select,
)
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class Base(DeclarativeBase):
    pass


class Dataset(Base):
    __tablename__ = "datasets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Release(Base):
    __tablename__ = "releases"
    __table_args__ = (UniqueConstraint("dataset_id", "seq"), UniqueConstraint("dataset_id", "period"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"))
    seq: Mapped[int] = mapped_column(Integer)
    period: Mapped[str] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(20))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    records: Mapped[int] = mapped_column(Integer)
    groups: Mapped[int] = mapped_column(Integer)
    suppressed: Mapped[int] = mapped_column(Integer)
    max_breach: Mapped[float] = mapped_column(Float)
    data_sha256: Mapped[str] = mapped_column(String(64))
    manifest_sha256: Mapped[str] = mapped_column(String(64))
    directory: Mapped[str] = mapped_column(String(500))
    staging: Mapped[str] = mapped_column(String(500))
    published_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ReleaseGroup(Base):
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


@dataclass(frozen=True)
class PublishedRelease:
    seq: int
    period: str
    params: dict[str, Any]
    records: int
    groups: int
    suppressed: int
    max_breach: float
    directory: str
    staging: str
    published_at: datetime


class StateError(Exception):
    """The state database cannot be used as it is (unreachable, inconsistent)."""


def open_engine(url: str) -> Engine:
    """Engine for the state database; creates the tables if missing.

    Raises:
        StateError: the database is unreachable (the message masks the password).
    """
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.close()

    try:
        Base.metadata.create_all(engine)
    except OperationalError as exc:
        masked = engine.url.render_as_string(hide_password=True)
        raise StateError(f"cannot open the state database {masked}: {exc.orig}") from None
    return engine


def table_to_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def table_from_bytes(blob: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(blob))


def _digest(members: bytes, classes: bytes) -> str:
    return hashlib.sha256(hashlib.sha256(members).digest() + hashlib.sha256(classes).digest()).hexdigest()


class StateStore:
    """Reads and advances the state of one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def _dataset(self, session: Session, name: str, create: bool) -> Dataset | None:
        ds = session.scalar(select(Dataset).where(Dataset.name == name))
        if ds is None and create:
            ds = Dataset(name=name, created=datetime.now(UTC))
            session.add(ds)
            session.flush()
        return ds

    def published(self, dataset: str) -> list[PublishedRelease]:
        """Published releases of a dataset, oldest first."""
        with Session(self.engine) as s:
            ds = self._dataset(s, dataset, create=False)
            if ds is None:
                return []
            rows = s.scalars(
                select(Release).where(Release.dataset_id == ds.id, Release.status == "published").order_by(Release.seq)
            ).all()
            return [
                PublishedRelease(
                    r.seq,
                    r.period,
                    r.params,
                    r.records,
                    r.groups,
                    r.suppressed,
                    r.max_breach,
                    r.directory,
                    r.staging,
                    r.published_at,
                )
                for r in rows
            ]

    def latest_statistics(self, dataset: str) -> tuple[pa.Table, pa.Table] | None:
        """The statistics file (members, classes) after the newest published release, or
        None before the first."""
        with Session(self.engine) as s:
            ds = self._dataset(s, dataset, create=False)
            if ds is None:
                return None
            row = s.execute(
                select(Statistics.members_data, Statistics.classes_data, Statistics.sha256)
                .join(Release, Release.id == Statistics.release_id)
                .where(Release.dataset_id == ds.id, Release.status == "published")
                .order_by(Release.seq.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            if _digest(row.members_data, row.classes_data) != row.sha256:
                raise StateError(f"the statistics file of dataset {dataset!r} fails its checksum")
            return table_from_bytes(row.members_data), table_from_bytes(row.classes_data)

    def record_published(
        self,
        dataset: str,
        seq: int,
        period: str,
        params: dict[str, Any],
        summary: dict[str, Any],
        groups: list[dict[str, Any]],
        stats: tuple[pa.Table, pa.Table],
        directory: str,
        staging: str,
    ) -> None:
        """Record a release as published together with the statistics after it, in one
        transaction. Raises StateError if release ``seq`` is not the next one."""
        members, classes = table_to_bytes(stats[0]), table_to_bytes(stats[1])
        with Session(self.engine) as s, s.begin():
            ds = self._dataset(s, dataset, create=True)
            assert ds is not None
            last = s.scalar(
                select(Release.seq)
                .where(Release.dataset_id == ds.id, Release.status == "published")
                .order_by(Release.seq.desc())
                .limit(1)
                .with_for_update()
            )
            if (last or 0) + 1 != seq:
                raise StateError(
                    f"dataset {dataset!r}: release {seq} cannot be published, the last published is {last or 0}"
                )
            rel = Release(
                dataset_id=ds.id,
                seq=seq,
                period=period,
                status="published",
                params=params,
                records=summary["records"],
                groups=summary["groups"],
                suppressed=summary["suppressed"],
                max_breach=summary["max_breach"],
                data_sha256=summary["data_sha256"],
                manifest_sha256=summary["manifest_sha256"],
                directory=directory,
                staging=staging,
                published_at=datetime.now(UTC),
            )
            s.add(rel)
            s.flush()
            s.add_all(ReleaseGroup(release_id=rel.id, group_no=i, **g) for i, g in enumerate(groups))
            s.add(
                Statistics(
                    release_id=rel.id,
                    individuals=stats[0].num_rows,
                    classes=stats[1].num_rows,
                    sha256=_digest(members, classes),
                    members_data=members,
                    classes_data=classes,
                )
            )
