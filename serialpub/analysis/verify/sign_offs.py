"""The sign-off records cross-checked (docs/compliance.md): the state database's
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
from typing import Any

from serialpub.analysis.verify.report import VerifyReport
from serialpub.io.manifest import Manifest
from state.store import StateStore

KIND = "sign-off records"


def _order(row: tuple[int, str, str, str | None]) -> tuple[int, str, str, str]:
    return row[0], row[1], row[2], row[3] or ""


def compare_sign_offs(
    report: VerifyReport,
    store: StateStore,
    dataset: str,
    manifests: Mapping[int, Manifest],
    params: Mapping[int, Mapping[str, Any]] | None = None,
) -> None:
    """Add to ``report`` every disagreement between the sign-off rows, the audit log's
    decisions and the manifests' ``sign_off`` of ``dataset``; and, per published release,
    an approval by its preparer under the four-eyes rule it was drafted with, or a preparer
    or four-eyes setting that is not the same in the manifest, the release row (``params``,
    by release number) and the audit log's draft entry."""
    log = store.audit_log(dataset)
    _check_preparation(report, log, manifests, params or {})
    logged: Counter[tuple[int, str, str, str | None]] = Counter(
        (e["release"], e["action"], e["actor"], (e["detail"] or {}).get("comment"))
        for e in log
        if e["action"] in ("approved", "rejected")
    )
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


def _check_preparation(
    report: VerifyReport,
    log: list[dict[str, Any]],
    manifests: Mapping[int, Manifest],
    params: Mapping[int, Mapping[str, Any]],
) -> None:
    # the draft entry of the attempt that was published: the last one before its publication
    latest: dict[int, dict[str, Any]] = {}
    drafted: dict[int, dict[str, Any]] = {}
    for entry in log:
        seq = entry["release"]
        if entry["action"] == "draft" and seq is not None:
            latest[seq] = entry["detail"] or {}
        elif entry["action"] == "published" and seq in latest:
            drafted[seq] = latest[seq]
    for seq, manifest in manifests.items():
        signed = manifest.sign_off
        if signed is None:
            continue
        for who in signed.self_approvals():
            report.add(
                KIND,
                f"release {seq}: approved by {who!r}, who prepared it, although the four-eyes rule was on when it "
                "was drafted",
            )
        for key, in_manifest in (("prepared_by", signed.prepared_by), ("four_eyes", signed.four_eyes)):
            if in_manifest is None:
                continue  # published before it was recorded
            row, logged = params.get(seq, {}), drafted.get(seq, {})
            for where, record in (("release row", row), ("audit log's draft entry", logged)):
                if key in record and record[key] != in_manifest:
                    report.add(
                        KIND,
                        f"release {seq}: the manifest's sign_off.{key} is {in_manifest!r}, the {where} says "
                        f"{record[key]!r}",
                    )
