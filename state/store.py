"""Reading and advancing the state: releases through their status machine, the
statistics file, sign-offs and the audit log.

The statistics file (paper 004, section 7) is kept per release as an immutable snapshot:
after release k, two compressed Parquet blobs hold the history class of every individual
and the survival product Π(1 - n_{j,s}/n_j) and linked-release count of every class and
protected value (see ``anonymizer.release.History``). One row per release instead of one
per pair is the bulk path on both engines: publishing 5,000,000 individuals writes one
blob, inside the same transaction that marks the release published. ``release_groups``
keeps the raw figures (region labels, n_j, n_{j,s}) from which anyone can recompute the
products.

Every change is one transaction that also appends to ``audit_log``.
"""

from __future__ import annotations

import hashlib
import io
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from state.engine import StateError, open_engine
from state.models import (
    OPEN_STATUSES,
    TRANSITIONS,
    AuditLog,
    Dataset,
    Release,
    ReleaseGroup,
    ReleaseStatus,
    SignOff,
    Statistics,
    ValidationResult,
)
from state.params import DraftParams

__all__ = [
    "OpenRelease", "PublishedRelease", "ReleaseStatus", "StateError", "StateStore", "open_engine", "this_process",
]  # fmt: skip


def this_process() -> str:
    """Owner tag of drafts made by this process: ``pid:<pid>@<host>``."""
    return f"pid:{os.getpid()}@{socket.gethostname()}"


def owner_is_gone(owner: str) -> bool:
    """True when ``owner`` is a process of this host that no longer runs (its draft is
    stale). Owners on other hosts or not of the ``pid:`` form are never presumed gone."""
    if not owner.startswith("pid:") or "@" not in owner:
        return False
    pid_text, host = owner[4:].split("@", 1)
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


#: the statistics file's columns that repeat a few values (a history class, an ℓ, a protected
#: value): Parquet dictionary-encodes them. The others are one distinct value per row (an
#: individual's id, its register row), where trying a dictionary first only costs time,
#: and the plain encoding is smaller too (docs/benchmarks.md).
DICTIONARY_COLUMNS = ("class", "ell", "value")


def table_to_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(
        table, buf, compression="zstd", use_dictionary=[c for c in DICTIONARY_COLUMNS if c in table.column_names]
    )
    return buf.getvalue()


def table_from_bytes(blob: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(blob))


def parquet_from_bytes(blob: bytes) -> pq.ParquetFile:
    """The Parquet file ``blob``, its columns read on demand."""
    return pq.ParquetFile(io.BytesIO(blob))


def _digest(members: bytes, classes: bytes) -> str:
    return hashlib.sha256(hashlib.sha256(members).digest() + hashlib.sha256(classes).digest()).hexdigest()


@dataclass(frozen=True)
class PublishedRelease:
    id: int  # the release row
    seq: int
    period: str
    params: DraftParams
    records: int
    groups: int
    suppressed: int
    max_breach: float
    directory: str
    staging: str
    published_at: datetime
    imported: bool
    data_sha256: str | None
    manifest_sha256: str | None


@dataclass(frozen=True)
class OpenRelease:
    """A release being prepared (draft, validated or approved)."""

    id: int
    seq: int
    period: str
    status: ReleaseStatus
    owner: str
    staging: str | None
    created: datetime
    params: DraftParams
    #: sha256 of the staged data.parquet, recorded when the draft was staged
    data_sha256: str | None = None


class StateStore:
    """The state of one database; every method is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str) -> StateStore:
        return cls(open_engine(url))

    # -- reading --------------------------------------------------------------------------
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
                select(Release)
                .where(Release.dataset_id == ds.id, Release.status == ReleaseStatus.PUBLISHED)
                .order_by(Release.seq)
            ).all()
            return [
                PublishedRelease(
                    r.id,
                    r.seq,
                    r.period,
                    DraftParams.read(r.params),
                    r.records or 0,
                    r.groups or 0,
                    r.suppressed or 0,
                    r.max_breach or 0.0,
                    r.directory or "",
                    r.staging or "",
                    r.published_at or r.updated,
                    r.imported,
                    r.data_sha256,
                    r.manifest_sha256,
                )
                for r in rows
            ]

    def open_release(self, dataset: str) -> OpenRelease | None:
        """The release of a dataset now being prepared, if any."""
        with Session(self.engine) as s:
            ds = self._dataset(s, dataset, create=False)
            if ds is None:
                return None
            r = s.scalar(select(Release).where(Release.dataset_id == ds.id, Release.status.in_(OPEN_STATUSES)))
            if r is None:
                return None
            return OpenRelease(
                r.id,
                r.seq,
                r.period,
                ReleaseStatus(r.status),
                r.owner,
                r.staging,
                r.created,
                DraftParams.read(r.params),
                r.data_sha256,
            )

    def latest_statistics(self, dataset: str) -> tuple[pa.Table, pa.Table] | None:
        """The statistics file (members, classes) after the newest published release, or
        None before the first."""
        stats = self.latest_statistics_unless(dataset, None)[1]
        return None if stats is None else (stats[0].read(), stats[1])

    def latest_statistics_unless(
        self, dataset: str, known: str | None
    ) -> tuple[str | None, tuple[pq.ParquetFile, pa.Table] | None]:
        """The sha256 of the statistics file after the newest published release and the file
        itself, read in one transaction: the members as a Parquet file whose columns are
        read on demand (a caller that does not need the ids of a 50M-person register does
        not decode them), the classes as a table; the file is not read (None) when its
        sha256 is ``known``. ``(None, None)`` before the first release.

        Raises:
            StateError: the file fails its checksum.
        """
        with Session(self.engine) as s:
            ds = self._dataset(s, dataset, create=False)
            if ds is None:
                return None, None
            newest = (
                select(Statistics.release_id, Statistics.sha256)
                .join(Release, Release.id == Statistics.release_id)
                .where(Release.dataset_id == ds.id, Release.status == ReleaseStatus.PUBLISHED)
                .order_by(Release.seq.desc())
                .limit(1)
            )
            head = s.execute(newest).first()
            if head is None or head.sha256 == known:
                return (None if head is None else head.sha256), None
            row = s.execute(
                select(Statistics.members_data, Statistics.classes_data).where(Statistics.release_id == head.release_id)
            ).one()
            if _digest(row.members_data, row.classes_data) != head.sha256:
                raise StateError(f"the statistics file of dataset {dataset!r} fails its checksum")
            return head.sha256, (parquet_from_bytes(row.members_data), table_from_bytes(row.classes_data))

    def audit_log(self, dataset: str) -> list[dict[str, Any]]:
        with Session(self.engine) as s:
            rows = s.scalars(select(AuditLog).where(AuditLog.dataset == dataset).order_by(AuditLog.id)).all()
            return [
                {"at": r.at, "release": r.release_seq, "actor": r.actor, "action": r.action, "detail": r.detail}
                for r in rows
            ]

    # -- changing -------------------------------------------------------------------------
    def _log(self, s: Session, dataset: str, seq: int | None, actor: str, action: str, **detail: Any) -> None:
        s.add(
            AuditLog(at=datetime.now(UTC), dataset=dataset, release_seq=seq, actor=actor, action=action, detail=detail)
        )

    def begin_draft(self, dataset: str, period: str, params: DraftParams, owner: str) -> OpenRelease:
        """Open release k = last published + 1 as a draft.

        Raises:
            StateError: another release of the dataset is open (its owner, status and
                age are named), or the period is already published or not later than the
                last one.
        """
        now = datetime.now(UTC)
        try:
            with Session(self.engine) as s, s.begin():
                ds = self._dataset(s, dataset, create=True)
                assert ds is not None
                # serialize drafts of one dataset (SQLite: the BEGIN IMMEDIATE lock does it)
                s.execute(select(Dataset.id).where(Dataset.id == ds.id).with_for_update())
                current = s.scalar(
                    select(Release).where(Release.dataset_id == ds.id, Release.status.in_(OPEN_STATUSES))
                )
                if current is not None:
                    raise StateError(_busy_message(dataset, current))
                last = s.scalar(
                    select(Release)
                    .where(Release.dataset_id == ds.id, Release.status == ReleaseStatus.PUBLISHED)
                    .order_by(Release.seq.desc())
                    .limit(1)
                )
                if last is not None and period <= last.period:
                    raise StateError(
                        f"dataset {dataset!r}: period {period!r} is not later than the last published period "
                        f"{last.period!r}"
                    )
                seq = (last.seq if last else 0) + 1
                rel = Release(
                    dataset_id=ds.id,
                    seq=seq,
                    period=period,
                    status=ReleaseStatus.DRAFT,
                    owner=owner,
                    imported=False,
                    params=params.record(),
                    created=now,
                    updated=now,
                )
                s.add(rel)
                s.flush()
                # who prepared it and under which four-eyes rule, in the append-only log too:
                # a prepared_by rewritten in the row no longer agrees with it
                self._log(
                    s,
                    dataset,
                    seq,
                    owner,
                    "draft",
                    period=period,
                    prepared_by=params.prepared_by,
                    four_eyes=params.four_eyes,
                )
                return OpenRelease(rel.id, seq, period, ReleaseStatus.DRAFT, owner, None, now, params)
        except IntegrityError:
            # the partial unique index caught a race the lock did not (it should not happen)
            current_open = self.open_release(dataset)
            raise StateError(
                _busy_message(dataset, current_open) if current_open else f"dataset {dataset!r}: concurrent change"
            ) from None

    def bind_staged_manifest(self, release_id: int, fields: dict[str, str]) -> None:
        """Record, in the open release's ``params.staged_manifest``, the sha256 of each
        field of the manifest serialpub just staged for it, so that publication can name a
        field edited afterwards (:mod:`serialpub.workflow.manifest_binding`).

        Raises:
            StateError: the release is not open.
        """
        with Session(self.engine) as s, s.begin():
            rel = self._open_row(s, release_id, "its staged manifest cannot be recorded")
            rel.params = {**(rel.params or {}), "staged_manifest": fields}
            rel.updated = datetime.now(UTC)

    def set_staging(self, release_id: int, staging: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(Release).where(Release.id == release_id).values(staging=staging, updated=datetime.now(UTC))
            )

    def _transition(self, s: Session, release_id: int, to: ReleaseStatus) -> Release:
        rel = s.get(Release, release_id, with_for_update=True)
        if rel is None:
            raise StateError(f"no release with id {release_id}")
        if to not in TRANSITIONS[rel.status]:
            raise StateError(f"release {rel.seq} is {rel.status}; it cannot become {to}")
        rel.status = to
        rel.updated = datetime.now(UTC)
        return rel

    def stage(
        self,
        release_id: int,
        summary: dict[str, Any],
        groups: list[dict[str, Any]],
        stats: tuple[pa.Table, pa.Table],
        staging: str,
    ) -> None:
        """Store what publishing an open release will count, without counting it: its
        figures, groups and the statistics file after it. ``latest_statistics`` and every
        reader of published releases ignore them until :meth:`publish_staged`; a release
        that ends rejected or failed has them removed.

        Args:
            summary: ``records``, ``groups``, ``suppressed``, ``max_breach``, ``data_sha256``.
            staging: the staging folder of its files.

        The drafting process still owns the release; :meth:`hand_over` gives it to its next
        owner once the draft is complete.
        """
        with Session(self.engine) as s, s.begin():
            rel = self._open_row(s, release_id, "it cannot be staged")
            self._drop_staged(s, rel.id)  # staging again replaces what an earlier attempt stored
            _store_figures(s, rel, summary, groups, stats)
            rel.staging = staging
            rel.updated = datetime.now(UTC)

    def hand_over(self, release_id: int, owner: str) -> None:
        """Give the open release a new owner (e.g. ``airflow:<dag>/<run>``) once its draft is
        complete, so that the drafting process may end without recovery failing it.

        Raises:
            StateError: the release is not open.
        """
        with Session(self.engine) as s, s.begin():
            rel = self._open_row(s, release_id, "it cannot be handed over")
            rel.owner = owner
            rel.updated = datetime.now(UTC)

    def publish_staged(self, release_id: int, manifest_sha256: str, directory: str, actor: str) -> None:
        """Mark a release published, counting what :meth:`stage` stored (step 2 of
        serialpub.io.release_files' publication order): an approved release, or the draft of
        an import (its ``params`` say ``imported``), which another tool published already
        and which therefore has no validation or sign-off of its own.

        Raises:
            StateError: the release is neither approved nor an import's draft, or nothing
                was staged for it.
        """
        with Session(self.engine) as s, s.begin():
            rel = s.get(Release, release_id, with_for_update=True)
            imported = rel is not None and DraftParams.read(rel.params).imported
            ready = ReleaseStatus.DRAFT if imported else ReleaseStatus.APPROVED
            if rel is None or rel.status != ready:
                status = "missing" if rel is None else rel.status
                raise StateError(
                    f"release row {release_id} is {status}; only an approved release, or the draft of an import, "
                    "is published"
                )
            if s.get(Statistics, rel.id) is None:
                raise StateError(f"release {rel.seq} has no staged statistics; prepare it again")
            self._transition(s, release_id, ReleaseStatus.PUBLISHED)
            dataset = s.get(Dataset, rel.dataset_id)
            assert dataset is not None
            rel.manifest_sha256 = manifest_sha256
            rel.imported = imported
            rel.directory = directory
            rel.published_at = rel.updated
            self._log(
                s,
                dataset.name,
                rel.seq,
                actor,
                "imported" if imported else "published",
                records=rel.records,
                groups=rel.groups,
                data_sha256=rel.data_sha256,
            )

    def approve(
        self, dataset: str, seq: int, approver: str, comment: str, report_sha256: str | None, required: int = 1
    ) -> SignOffRecord:
        """Record an approving sign-off of the validated release ``seq``. It becomes
        ``approved`` with the ``required``-th distinct approver (``sign_off.required_approvals``)
        and stays ``validated`` before. Approving an already approved release again with the
        same approver and comment (a retried command) returns its sign-off; any other
        approval of it is refused, so a new comment is never dropped unsaid (docs/commands.md).

        Raises:
            StateError: ``seq`` is not the dataset's open release, or not validated yet, or
                ``approver`` has already approved this attempt at it, or it is approved
                already and this approval is not a retry of the last.
        """
        with Session(self.engine) as s, s.begin():
            rel = self._open(s, dataset, seq, "approve")
            earlier = s.scalars(
                select(SignOff).where(SignOff.release_id == rel.id, SignOff.decision == "approved").order_by(SignOff.id)
            ).all()
            if rel.status == ReleaseStatus.APPROVED:
                assert earlier
                if (earlier[-1].approver, earlier[-1].comment) != (approver, comment):
                    raise StateError(approved_already(dataset, seq, earlier[-1].approver))
                return _sign_off_record(earlier[-1])
            if rel.status != ReleaseStatus.VALIDATED:
                raise StateError(
                    f"release {seq} of {dataset!r} is {rel.status}; only a validated release can be approved"
                )
            if any(r.approver == approver for r in earlier):
                raise StateError(
                    f"{approver} has already approved release {seq} of {dataset!r}; it needs {required} different "
                    f"approvers (sign_off.required_approvals), {len(earlier)} so far"
                )
            if len(earlier) + 1 >= required:
                self._transition(s, rel.id, ReleaseStatus.APPROVED)
            row = SignOff(
                release_id=rel.id,
                approver=approver,
                decision="approved",
                comment=comment,
                report_sha256=report_sha256,
                decided_at=datetime.now(UTC),
            )
            s.add(row)
            self._log(
                s,
                dataset,
                seq,
                approver,
                "approved",
                comment=comment,
                report_sha256=report_sha256,
                approval=len(earlier) + 1,
                required=required,
            )
            s.flush()
            return _sign_off_record(row)

    def approvals(self, release_id: int) -> list[SignOffRecord]:
        """The approving sign-offs of one attempt at a release (its row id), oldest first."""
        with Session(self.engine) as s:
            rows = s.scalars(
                select(SignOff)
                .where(SignOff.release_id == release_id, SignOff.decision == "approved")
                .order_by(SignOff.id)
            ).all()
            return [_sign_off_record(r) for r in rows]

    def sign_offs(self, dataset: str, seq: int) -> list[SignOffRecord]:
        """Every sign-off decision recorded for attempts at release ``seq``, oldest first."""
        with Session(self.engine) as s:
            rows = s.scalars(
                select(SignOff)
                .join(Release, Release.id == SignOff.release_id)
                .join(Dataset, Dataset.id == Release.dataset_id)
                .where(Dataset.name == dataset, Release.seq == seq)
                .order_by(SignOff.id)
            ).all()
            return [_sign_off_record(r) for r in rows]

    def sign_offs_by_release(self, dataset: str) -> dict[int, list[SignOffRecord]]:
        """Every sign-off decision recorded for the dataset, by release number, each list
        oldest first: :meth:`sign_offs` of every release, in one query."""
        with Session(self.engine) as s:
            rows = s.execute(
                select(Release.seq, SignOff)
                .join(Release, Release.id == SignOff.release_id)
                .join(Dataset, Dataset.id == Release.dataset_id)
                .where(Dataset.name == dataset)
                .order_by(SignOff.id)
            ).all()
            found: dict[int, list[SignOffRecord]] = {}
            for seq, row in rows:
                found.setdefault(seq, []).append(_sign_off_record(row))
            return found

    def _open(self, s: Session, dataset: str, seq: int, verb: str) -> Release:
        ds = self._dataset(s, dataset, create=False)
        rel = (
            None
            if ds is None
            else s.scalar(
                select(Release)
                .where(Release.dataset_id == ds.id, Release.seq == seq, Release.status.in_(OPEN_STATUSES))
                .with_for_update()
            )
        )
        if rel is None:
            raise StateError(f"dataset {dataset!r} has no open release {seq} to {verb}")
        return rel

    def _open_row(self, s: Session, release_id: int, refusal: str) -> Release:
        """The open release row ``release_id``, locked for update.

        Raises:
            StateError: the release is not open (``refusal`` says what cannot be done).
        """
        rel = s.get(Release, release_id, with_for_update=True)
        if rel is None or rel.status not in OPEN_STATUSES:
            raise StateError(f"release row {release_id} is not open; {refusal}")
        return rel

    def _drop_staged(self, s: Session, release_id: int) -> None:
        """Remove what :meth:`stage` stored for a release that will never count."""
        s.execute(delete(ReleaseGroup).where(ReleaseGroup.release_id == release_id))
        s.execute(delete(Statistics).where(Statistics.release_id == release_id))

    def record_validation(
        self, release_id: int, results: list[tuple[str, bool, dict[str, Any], str]], actor: str
    ) -> bool:
        """Store the validation results of an open release and move it to ``validated``
        (all suites passed) or ``failed``, in one transaction.

        Args:
            results: (suite, success, full result as JSON-compatible data, sha256) per suite.

        Returns:
            whether every suite passed.
        """
        passed = all(ok for _, ok, _, _ in results)
        now = datetime.now(UTC)
        with Session(self.engine) as s, s.begin():
            rel = self._transition(s, release_id, ReleaseStatus.VALIDATED if passed else ReleaseStatus.FAILED)
            if not passed:
                self._drop_staged(s, rel.id)
            dataset = s.get(Dataset, rel.dataset_id)
            assert dataset is not None
            s.add_all(
                ValidationResult(release_id=rel.id, suite=name, success=ok, result=result, sha256=sha, created=now)
                for name, ok, result, sha in results
            )
            self._log(
                s,
                dataset.name,
                rel.seq,
                actor,
                "validated" if passed else "failed",
                suites={name: ok for name, ok, _, _ in results},
            )
        return passed

    def validation_results(self, dataset: str, seq: int) -> list[dict[str, Any]]:
        """The stored validation results of release attempt(s) ``seq``, newest attempt last."""
        with Session(self.engine) as s:
            rows = s.execute(
                select(ValidationResult, Release.status)
                .join(Release, Release.id == ValidationResult.release_id)
                .join(Dataset, Dataset.id == Release.dataset_id)
                .where(Dataset.name == dataset, Release.seq == seq)
                .order_by(ValidationResult.id)
            ).all()
            return [
                {"suite": v.suite, "success": v.success, "sha256": v.sha256, "release_status": status}
                for v, status in rows
            ]

    def fail(self, release_id: int, reason: str, actor: str) -> None:
        """Close an open release as failed (nothing of it counts)."""
        with Session(self.engine) as s, s.begin():
            rel = self._transition(s, release_id, ReleaseStatus.FAILED)
            self._drop_staged(s, rel.id)
            dataset = s.get(Dataset, rel.dataset_id)
            assert dataset is not None
            self._log(s, dataset.name, rel.seq, actor, "failed", reason=reason[:2000])

    def reject(self, dataset: str, seq: int, approver: str, comment: str, report_sha256: str | None) -> OpenRelease:
        """Record a rejecting sign-off and close the open release ``seq``.

        Raises:
            StateError: release ``seq`` is not the open release of the dataset.
        """
        with Session(self.engine) as s, s.begin():
            rel = self._open(s, dataset, seq, "reject")
            self._transition(s, rel.id, ReleaseStatus.REJECTED)
            self._drop_staged(s, rel.id)
            now = datetime.now(UTC)
            s.add(
                SignOff(
                    release_id=rel.id,
                    approver=approver,
                    decision="rejected",
                    comment=comment,
                    report_sha256=report_sha256,
                    decided_at=now,
                )
            )
            self._log(s, dataset, seq, approver, "rejected", comment=comment)
            return OpenRelease(
                rel.id,
                rel.seq,
                rel.period,
                ReleaseStatus.REJECTED,
                rel.owner,
                rel.staging,
                rel.created,
                DraftParams.read(rel.params),
            )


def _store_figures(
    s: Session, rel: Release, summary: dict[str, Any], groups: list[dict[str, Any]], stats: tuple[pa.Table, pa.Table]
) -> None:
    """A release's figures, groups and the statistics file after it (:meth:`StateStore.stage`)."""
    members, classes = table_to_bytes(stats[0]), table_to_bytes(stats[1])
    rel.records, rel.groups = summary["records"], summary["groups"]
    rel.suppressed, rel.max_breach = summary["suppressed"], summary["max_breach"]
    rel.data_sha256 = summary["data_sha256"]
    if groups:  # one executemany, not an ORM object per group (a release has thousands)
        s.execute(insert(ReleaseGroup), [{"release_id": rel.id, "group_no": i, **g} for i, g in enumerate(groups)])
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


@dataclass(frozen=True)
class SignOffRecord:
    """One recorded sign-off decision (table ``sign_offs``)."""

    approver: str
    decision: str  # approved | rejected
    comment: str
    report_sha256: str | None
    decided_at: datetime


def _sign_off_record(row: SignOff) -> SignOffRecord:
    return SignOffRecord(row.approver, row.decision, row.comment, row.report_sha256, row.decided_at)


def _busy_message(dataset: str, current: Release | OpenRelease) -> str:
    return (
        f"dataset {dataset!r}: release {current.seq} (period {current.period!r}) is already {current.status}, "
        f"opened by {current.owner} at {current.created:%Y-%m-%d %H:%M:%S} UTC; one release is prepared at a "
        f"time: wait for it, or end it with 'serialpub reject --release {current.seq}'"
    )


def approved_already(dataset: str, seq: int, approver: str) -> str:
    """The refusal of a further approval of an approved release: approving decides nothing
    more, and its comment would not be recorded anywhere."""
    return (
        f"release {seq} of {dataset!r} is approved already (by {approver}); this approval and its comment were "
        f"not recorded. Publish it: serialpub publish --release {seq}; or, to decide again, reject it "
        f"(serialpub reject --release {seq} --comment WHY) and prepare it again"
    )
