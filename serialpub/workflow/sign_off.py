"""The sign-off gate (docs/design.md section 6; docs/sign-off.md): approving a validated
release, rejecting or closing an open one. Publishing the approved release is
:func:`serialpub.workflow.publishing.finish`.
"""

from __future__ import annotations

import shutil

from serialpub.config import Workspace
from serialpub.errors import InputError, quoted
from serialpub.io import release_files
from serialpub.report.render import HTML_FILE as REPORT_FILE
from serialpub.workflow import identity, manifest_binding
from serialpub.workflow.dataset_series import DatasetSeries
from state.store import (
    OpenRelease,
    ReleaseStatus,
    SignOffRecord,
    StateError,
    StateStore,
    open_engine,
    this_process,
)

#: the approver recorded for an automatic sign-off (``sign_off.auto_approve``)
AUTO_APPROVER = "automatic approval (sign_off.auto_approve)"


def approve(
    series: DatasetSeries,
    seq: int,
    approver: str,
    comment: str,
    report_sha256: str | None = None,
    automatic: bool = False,
) -> SignOffRecord:
    """Record an approving sign-off of the validated release ``seq``. ``report_sha256``:
    the report page the approver saw (default: the staged one's).

    Raises:
        InputError: ``automatic`` without ``sign_off.auto_approve`` in the configuration,
            an empty approver name, a person using the automatic approver's name, or one
            not allowed to approve (:func:`serialpub.workflow.identity.authorize`).
        StateError: ``seq`` is not the dataset's validated (or approved) release.
    """
    cfg = series.ws.config
    if automatic and not cfg.sign_off.auto_approve:
        raise InputError(f"{series.ws.root / 'serialpub.yaml'}: automatic approval needs sign_off.auto_approve")
    if not approver.strip():
        raise InputError("the approver's name is empty; sign-offs are recorded with who decided")
    if automatic != (approver == AUTO_APPROVER):
        # the manifest tells automatic approvals by this name, so a person cannot take it
        raise InputError(f"the approver's name {quoted(approver)} is reserved for automatic approvals")
    if not automatic:
        # the preparer and the four-eyes rule as recorded at drafting (checked against the
        # audit log), not as the configuration says now
        try:
            preparer, four_eyes = manifest_binding.preparation(series, series.open_release(seq))
        except StateError as exc:
            raise InputError(str(exc)) from None
        if preparer is None and four_eyes:
            raise InputError(
                f"release {seq} of {cfg.dataset!r} has no record of who prepared it (prepared before serialpub "
                "recorded it), so the four-eyes rule cannot be checked; reject it and prepare it again"
            )
        approver = identity.authorize(series.ws, approver, preparer, four_eyes)
    if report_sha256 is None:
        page = series.staging_dir(series.open_release(seq)) / REPORT_FILE
        report_sha256 = release_files.sha256_file(page) if page.exists() else None
    required = 1 if automatic else cfg.sign_off.required_approvals
    return series.store.approve(cfg.dataset, seq, approver, comment, report_sha256, required)


def not_approved(series: DatasetSeries, rel: OpenRelease) -> StateError:
    """Why the open release ``rel`` cannot be published yet, and who must act: its
    approvals so far against ``sign_off.required_approvals``. The approver runs
    ``serialpub approve`` under their own account (``--by`` may only repeat it,
    :mod:`serialpub.workflow.identity`), so the line names no ``--by``."""
    cfg = series.ws.config
    what = f"release {rel.seq} of {cfg.dataset!r}"
    if rel.status != ReleaseStatus.VALIDATED:
        return StateError(f"{what} is {rel.status}; only a validated release that is approved can be published")
    given = [a.approver for a in series.store.approvals(rel.id)]
    required = cfg.sign_off.required_approvals
    if given:
        return StateError(
            f"{what} has {len(given)} of {required} required approvals ({', '.join(map(quoted, given))}; "
            f"sign_off.required_approvals); another approver must approve it under their own account: "
            f"serialpub approve --release {rel.seq}"
        )
    return StateError(
        f"{what} is validated; it is published only after an approving sign-off: an approver on "
        f"sign_off.approvers runs 'serialpub approve --release {rel.seq}' under their own account"
    )


def auto_approve(series: DatasetSeries, seq: int) -> SignOffRecord:
    """Approve ``seq`` automatically (``sign_off.auto_approve``: test and demo
    environments); the manifest records the sign-off as automatic."""
    return approve(series, seq, AUTO_APPROVER, "sign_off.auto_approve is set in serialpub.yaml", automatic=True)


def close(series: DatasetSeries, seq: int, reason: str) -> None:
    """End the open release ``seq`` as failed (a run that failed or timed out waiting
    for its sign-off): staging removed, nothing counted.

    Raises:
        StateError: ``seq`` is not the dataset's open release.
    """
    rel = series.open_release(seq)
    series.store.fail(rel.id, reason, this_process())
    series.remove_staging(rel)


def reject_release(
    ws: Workspace, seq: int, approver: str, comment: str, report_sha256: str | None = None
) -> OpenRelease:
    """Reject the open release ``seq`` of a workspace's dataset: record the sign-off,
    close the release and remove its staged files; the statistics file does not move.
    Needs only the state, not the workspace's inputs. Whoever rejects must be on
    ``sign_off.approvers`` (the preparer may reject their own release).

    Raises:
        InputError: ``approver`` may not sign off (:func:`serialpub.workflow.identity.authorize`).
        StateError: ``seq`` is not the dataset's open release.
    """
    approver = identity.authorize(ws, approver)
    store = StateStore(open_engine(ws.database_url))
    rejected = store.reject(ws.config.dataset, seq, approver, comment, report_sha256)
    shutil.rmtree(ws.dataset_dir / release_files.staging_name(seq, rejected.id), ignore_errors=True)
    return rejected
