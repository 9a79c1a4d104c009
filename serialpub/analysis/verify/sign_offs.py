"""The sign-off records cross-checked (issue 18; docs/compliance.md): the state database's
``sign_offs`` rows against the published manifests and the append-only audit log.

Three records of each decision exist: the ``sign_offs`` row, the audit-log entry written
in the same transaction (``approved`` / ``rejected``, whose triggers refuse UPDATE and
DELETE) and, for a published release, the manifest's ``sign_off`` (signed with the
publisher's key when one is configured). A row changed or deleted after the fact no
longer agrees with the other two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from serialpub.analysis.verify.report import VerifyReport
from serialpub.io.manifest import Manifest
from state.store import StateStore

KIND = "sign-off records"


def _order(row: tuple[int, str, str, str | None]) -> tuple[int, str, str, str]:
    return row[0], row[1], row[2], row[3] or ""


def compare_sign_offs(
    report: VerifyReport, store: StateStore, dataset: str, manifests: Mapping[int, Manifest]
) -> None:
    """Add to ``report`` every disagreement between the sign-off rows, the audit log's
    decisions and the manifests' ``sign_off`` of ``dataset``."""
    log = store.audit_log(dataset)
    logged: Counter[tuple[int, str, str, str | None]] = Counter(
        (e["release"], e["action"], e["actor"], (e["detail"] or {}).get("comment"))
        for e in log if e["action"] in ("approved", "rejected")
    )  # fmt: skip
    seqs = sorted({e["release"] for e in log if e["release"] is not None} | set(manifests))
    recorded_by_release = store.sign_offs_by_release(dataset)
    rows = {seq: recorded_by_release.get(seq, []) for seq in seqs}
    recorded: Counter[tuple[int, str, str, str | None]] = Counter(
        (seq, r.decision, r.approver, r.comment) for seq, found in rows.items() for r in found
    )
    for seq, decision, who, _ in sorted((recorded - logged).elements(), key=_order):
        report.add(KIND, f"release {seq}: the sign-off row '{decision}' by {who!r} has no such entry in the audit log")
    for seq, decision, who, _ in sorted((logged - recorded).elements(), key=_order):
        report.add(KIND, f"release {seq}: the audit log records '{decision}' by {who!r}, the sign_offs table does not")
    for seq, manifest in manifests.items():
        signed = manifest.sign_off
        if signed is None:
            continue
        # the decisions the sign_offs table holds for this release, keyed as a manifest records them
        stored = {
            (r.decision, r.approver, r.comment, r.report_sha256, r.decided_at.isoformat(timespec="seconds"))
            for r in rows.get(seq, [])
        }
        if (signed.decision, signed.approver, signed.comment, signed.report_sha256, signed.decided_at) not in stored:
            report.add(
                KIND,
                f"release {seq}: the manifest's sign-off ({signed.decision} by {signed.approver!r} at "
                f"{signed.decided_at}) is not in the state's sign_offs table",
            )
        for earlier in signed.earlier_approvals:
            if ("approved", earlier.approver, earlier.comment, earlier.report_sha256, earlier.decided_at) not in stored:
                report.add(
                    KIND,
                    f"release {seq}: the manifest's earlier approval by {earlier.approver!r} at "
                    f"{earlier.decided_at} is not in the state's sign_offs table",
                )
