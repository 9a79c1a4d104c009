"""Publishing an approved release and recovering from interrupted publications
(docs/design.md section 6; the crash-safe order: :mod:`serialpub.io.release_files`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from checks.evidence import HTML_FILE, JSON_FILE
from serialpub.errors import InputError
from serialpub.faults import checkpoint
from serialpub.io import release_files, signing
from serialpub.io.manifest import Approval, Manifest, SignOff
from serialpub.report.render import HTML_FILE as REPORT_FILE
from serialpub.report.render import JSON_FILE as REPORT_JSON
from serialpub.workflow import manifest_binding, preflight, series_integrity
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.sign_off import AUTO_APPROVER, not_approved
from state.store import OpenRelease, PublishedRelease, ReleaseStatus, StateError, owner_is_gone, this_process


def finish(series: DatasetSeries, seq: int) -> Path:
    """Publish the approved release ``seq``: write its sign-off into the staged
    manifest, commit it in the state, move its folder into place. Running it again
    after it completed, or after a crash between commit and move, finishes the move
    and returns the folder.

    Raises:
        StateError: ``seq`` is neither approved nor published.
    """
    cfg = series.ws.config
    final = series.ws.dataset_dir / release_files.release_name(seq)
    done = [r for r in series.store.published(cfg.dataset) if r.seq == seq]
    if done:
        staged = series.ws.dataset_dir / release_files.staging_name(seq, done[0].id)
        if staged.is_dir() or not final.is_dir():
            move_into_place(series, done[0])
        series_integrity.write_checkpoint(series)
        return final
    rel = series.open_release(seq)
    if rel.status != ReleaseStatus.APPROVED:
        raise not_approved(series, rel)
    *earlier, sign_off = series.store.approvals(rel.id)
    staging = series.staging_dir(rel)
    manifest = Manifest.read(staging / release_files.MANIFEST_FILE)
    changed = staged_changes(series, rel, staging, manifest, sign_off.report_sha256)
    # what is signed is what was validated: every field, as the state recorded it
    changed += manifest_binding.differences(series, rel, manifest, validated=True)
    # every approver must have read the page that is published
    changed += [
        f"report.html is not the page {a.approver} approved (sha256 {a.report_sha256})"
        for a in earlier if a.report_sha256 != sign_off.report_sha256
    ]  # fmt: skip
    rewritten = manifest_binding.preparation_rewritten(series, rel)
    if changed or rewritten:
        # the first two: the message stays one line
        named = "; ".join(changed[:2]) + (f"; and {len(changed) - 2} more" if len(changed) > 2 else "")
        _refuse(
            series,
            rel,
            f"staged files changed after validation or sign-off: {named}"
            if changed
            else f"{rewritten}; the release row was changed outside serialpub",
        )
    preparer, four_eyes = manifest_binding.preparation(series, rel)
    # what the public reads: no figure computed from the raw snapshot (they stay in the evidence)
    manifest = manifest.published(str(staging / release_files.MANIFEST_FILE))
    manifest.sign_off = SignOff(
        decision=sign_off.decision,
        approver=sign_off.approver,
        comment=sign_off.comment,
        decided_at=sign_off.decided_at.isoformat(timespec="seconds"),
        report_sha256=sign_off.report_sha256,
        automatic=sign_off.approver == AUTO_APPROVER,
    )
    if earlier:
        manifest.sign_off.earlier_approvals = [
            Approval(approver=a.approver, comment=a.comment, decided_at=a.decided_at.isoformat(timespec="seconds"),
                     report_sha256=a.report_sha256)
            for a in earlier
        ]  # fmt: skip
    # who prepared it and the rule its approvals were held to, in what is signed
    manifest.sign_off.prepared_by = preparer
    manifest.sign_off.four_eyes = four_eyes
    if manifest.sign_off.self_approvals():
        _refuse(series, rel, f"{preparer!r} prepared it and approved it under the four-eyes rule it was drafted with")
    return commit(series, rel, manifest)


def commit(series: DatasetSeries, rel: OpenRelease, manifest: Manifest) -> Path:
    """Publish the staged release ``rel`` with ``manifest`` as its final manifest: seal it
    (:func:`seal`), write and sign it in the staging folder, mark the release published in
    the state, counting what was staged with it (:meth:`state.store.StateStore.publish_staged`),
    move its folder into place and write the series checkpoint. The one publication of
    every release: an approved draft (:func:`finish`) or an import
    (:func:`serialpub.workflow.importing.import_release`). Returns the release's folder.

    Raises:
        StateError: the last published release's files no longer match the state, the
            release is not ready to publish, or its folder cannot be moved into place.
        InputError: the configured signing key cannot be read.
    """
    final = series.ws.dataset_dir / release_files.release_name(rel.seq)
    seal(series, manifest)
    manifest_sha = release_files.write_manifest(series.staging_dir(rel), manifest, series.signing_key)
    checkpoint("before_commit")
    series.store.publish_staged(rel.id, manifest_sha, str(final), this_process())
    checkpoint("after_commit")
    move_into_place(series, rel)
    checkpoint("after_publish")
    series_integrity.write_checkpoint(series)
    return final


def _refuse(series: DatasetSeries, rel: OpenRelease, reason: str) -> None:
    """Fail the approved release ``rel`` without publishing it, for ``reason``.

    Raises:
        StateError: always.
    """
    series.store.fail(rel.id, reason, this_process())
    series.remove_staging(rel)
    raise StateError(
        f"release {rel.seq} of {series.dataset!r} was not published and is now failed: {reason}. Nothing "
        "was published and the state did not move; prepare the release again ('serialpub release')"
    )


def seal(series: DatasetSeries, manifest: Manifest) -> None:
    """Chain the manifest to the last published one (the sha256 the state recorded when it
    was published, compared with its file first) and name the key it is signed with
    (docs/release-contract.md, "Integrity").

    Raises:
        StateError: the last published release's files no longer match the state.
        InputError: the configured signing key cannot be read.
    """
    published = series.store.published(series.dataset)
    preflight.check_store_matches_state(series, published, manifest.release)
    check_published_files(series, published[-1:])
    preflight.check_series_to_extend(series, published)
    manifest.previous_manifest_sha256 = published[-1].manifest_sha256 if published else None
    key = series.signing_key
    manifest.signing_key = None if key is None else signing.public_key_text(key)
    if key is None and published:
        folder = series.ws.dataset_dir / release_files.release_name(published[-1].seq)
        last = Manifest.read(folder / release_files.MANIFEST_FILE)
        if last.signing_key is not None:
            # a series once signed stays signed: an unsigned release after signed ones is
            # what a forger would publish
            raise InputError(
                f"{series.ws.root / 'serialpub.yaml'}: signing_key is not set, but release {published[-1].seq} was "
                f"signed ({last.signing_key}); set signing_key to the publisher's key"
            )
    series_integrity.check_key_handover(series, manifest)


def staged_changes(
    series: DatasetSeries, rel: OpenRelease, staging: Path, manifest: Manifest, signed_report: str | None
) -> list[str]:
    """What changed in a staged release since it was validated and signed off: one line per
    file whose sha256 differs from what the state and the manifest recorded (empty when
    nothing did). Checked: ``data.parquet`` against the state's record at staging and the
    manifest; ``validation.json`` and ``validation.html`` against the manifest, and every
    suite's result against the state's; ``report.html`` against the sign-off (the page the approver saw) and the
    manifest; ``report.json`` against the manifest.
    """
    found: list[str] = []

    def check(name: str, *expected: tuple[str, str | None]) -> None:
        path = staging / name
        actual = release_files.sha256_file(path) if path.is_file() else None
        for source, sha in expected:
            if sha != actual:
                found.append(f"{name} is {_short(actual)}, {source} recorded {_short(sha)}")
                return

    check(
        release_files.DATA_FILE,
        ("the state at staging", rel.data_sha256),
        ("the manifest", manifest.sha256.data_parquet),
    )
    if manifest.validation is None:
        found.append("the manifest holds no validation")
    else:
        check(JSON_FILE, ("the manifest", manifest.validation.sha256))
        stored = {r["suite"]: r["sha256"] for r in series.store.validation_results(series.dataset, rel.seq)
                  if r["release_status"] == rel.status}  # fmt: skip
        # the suites' checksums as validation.json (checked against the manifest above) has
        # them: a published manifest no longer lists them, and a publication interrupted
        # after its manifest was rewritten must still find them
        listed = {suite: v.sha256 for suite, v in manifest.validation.suites.items()}
        if set(listed) != set(stored) or any(sha is not None and sha != stored[s] for s, sha in listed.items()):
            found.append("the manifest's suite results are not the ones the state recorded at validation")
        elif _evidence_suites(staging / JSON_FILE) != stored:
            found.append("the validation evidence's suite results are not the ones the state recorded at validation")
    report = manifest.report or {}
    check(REPORT_FILE, ("the sign-off", signed_report), ("the manifest", report.get(REPORT_FILE)))
    check(REPORT_JSON, ("the manifest", report.get(REPORT_JSON)))
    if manifest.validation is not None:
        check(HTML_FILE, ("the manifest", manifest.validation.page_sha256))
    return found


def _evidence_suites(path: Path) -> dict[str, str] | None:
    """Each suite's result sha256 as ``validation.json`` records it; None when unreadable."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        return {str(s["suite"]): str(s["sha256"]) for s in payload["suites"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _short(sha: str | None) -> str:
    return "missing" if sha is None else f"sha256 {sha[:12]}…"


def recover(series: DatasetSeries) -> None:
    """Settle what interrupted runs left: a draft whose process has ended is closed as
    failed, then staging folders are rolled forward or removed (serialpub.io.release_files),
    and a checkpoint a crash after the state commit left behind is rewritten
    (:func:`serialpub.workflow.series_integrity.refresh_checkpoint`).

    Raises:
        StateError: a published release's files are missing or changed.
    """
    dataset = series.dataset
    # list staging folders before reading the state: a draft is committed before its
    # folder is written, so each listed folder's release is in what is read next
    staged = release_files.staging_folders(series.ws.dataset_dir)
    current = series.store.open_release(dataset)
    if current is not None and owner_is_gone(current.owner):
        series.store.fail(current.id, f"the process that opened it ({current.owner}) has ended", this_process())
        current = None
    published = series.store.published(dataset)
    release_files.recover(
        series.ws.dataset_dir, {r.id: r.seq for r in published}, {current.id} if current else set(), staged
    )
    check_published_files(series, published)
    series_integrity.refresh_checkpoint(series, published)


def check_published_files(series: DatasetSeries, published: list[PublishedRelease]) -> None:
    """Refuse to build on a release store that no longer matches the state: every
    published release folder must exist and its data.parquet and manifest.json must
    have the checksums the state recorded when it was published.

    Raises:
        StateError: naming the release and the file, before anything is changed.
    """
    for r in published:
        folder = series.ws.dataset_dir / release_files.release_name(r.seq)
        if (series.ws.dataset_dir / release_files.staging_name(r.seq, r.id)).is_dir():
            # committed by another process whose rename is still on its way: finish it
            move_into_place(series, r)
        for name, expected in (
            (release_files.DATA_FILE, r.data_sha256),
            (release_files.MANIFEST_FILE, r.manifest_sha256),
        ):
            path = folder / name
            if not path.is_file():
                raise StateError(
                    f"{path} is missing but release {r.seq} is published; restore the release store "
                    "from its backup before publishing"
                )
            if expected and release_files.sha256_file(path) != expected:
                raise StateError(
                    f"{path} does not match the checksum recorded when release {r.seq} was published; "
                    "restore it from the backup (published releases are never rewritten)"
                )
        # the files the (just verified) manifest lists: the signed report page, its data
        # and the validation evidence
        manifest = Manifest.read(folder / release_files.MANIFEST_FILE)
        for name, sha in manifest.evidence_checksums().items():
            path = folder / name
            if not path.is_file() or release_files.sha256_file(path) != sha:
                what = (
                    f"is missing, though release {r.seq}'s manifest lists it"
                    if not path.is_file()
                    else f"is not the file release {r.seq}'s manifest lists (its sha256 differs)"
                )
                raise StateError(f"{path} {what}; restore it from the backup (published releases are never rewritten)")


def move_into_place(series: DatasetSeries, rel: PublishedRelease | OpenRelease) -> Path:
    """Move the staging folder of the committed release ``rel`` to its ``release-NNNN``
    name (step 3 of :mod:`serialpub.io.release_files`' order). The staging folder is then
    the release's only copy: on any failure it stays where it is, and the message says so.

    Raises:
        StateError: something else has the release's name (named), or the rename failed.
    """
    final = series.ws.dataset_dir / release_files.release_name(rel.seq)
    staged = series.ws.dataset_dir / release_files.staging_name(rel.seq, rel.id)
    kept = f"release {rel.seq} is published in the state database and its files are kept in {staged.name} beside it"
    if os.path.lexists(final) and staged.is_dir():
        raise StateError(
            f"{final}: not release {rel.seq} as published; {kept}: move {final.name} out of the release store, "
            f"then run 'serialpub publish --release {rel.seq}'"
        )
    try:
        return release_files.move_into_place(series.ws.dataset_dir, rel.seq, rel.id)
    except OSError as exc:
        if not staged.is_dir():
            raise StateError(
                f"{final} is missing, but the state database records release {rel.seq} as published; restore the "
                "release store from the backup that matches the state database"
            ) from None
        raise StateError(
            f"{final}: {exc.strerror or exc}; {kept}: fix the cause, then run 'serialpub publish --release {rel.seq}'"
        ) from None
