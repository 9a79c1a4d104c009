"""What a publication checks before it records anything (docs/operating.md, "When the
release store and the state disagree"; docs/compliance.md):

- the release store holds exactly the ``release-NNNN`` entries (folders, files or
  symbolic links) of the releases the state database records as published, so the new
  release's folder is free (:func:`check_store_matches_state`);
- every published release's manifest signature and chain link verify, and the sign-off
  records agree with the audit log and the newest manifest (:func:`check_series_to_extend`).

The checks are the ones ``serialpub audit`` (:func:`serialpub.analysis.audit.integrity.check_link`)
and ``serialpub state verify`` (:func:`serialpub.analysis.verify.sign_offs.compare_sign_offs`)
run. The signatures are checked for the whole series, as ``public-copy`` checks those it
hands out (:func:`check_signatures`, the one check both use): a new release extends the
whole chain, and a signature that broke after its successor was published would fail
every consumer's audit of the series. That costs one manifest read, hashed and verified
per release; no data file is read (each manifest's checksums bind its data).

Every refusal is a :class:`~state.store.StateError` of one line that names the folder or
record and what to do; nothing has been recorded or moved when it is raised.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from serialpub.analysis.audit.integrity import check_link
from serialpub.analysis.verify.report import VerifyReport
from serialpub.analysis.verify.sign_offs import compare_sign_offs
from serialpub.io import release_files
from serialpub.io.manifest import Manifest
from serialpub.workflow.dataset_series import DatasetSeries
from state.store import PublishedRelease, StateError

#: the name of a release folder in the release store (docs/design.md section 5)
RELEASE_FOLDER = re.compile(r"^release-\d+$")


#: the longest finding a refusal quotes whole: the message stays one line of at most 300
#: characters besides the release folder's path (an approver's name may be 200)
FINDING_CHARS = 150


def _clip(finding: str) -> str:
    return finding if len(finding) <= FINDING_CHARS else finding[: FINDING_CHARS - 1] + "…"


def _recorded(published: list[PublishedRelease]) -> str:
    seqs = [r.seq for r in published]
    if not seqs:
        return "no published release"
    if seqs == list(range(1, len(seqs) + 1)):
        return f"releases 1-{seqs[-1]}" if len(seqs) > 1 else "release 1"
    return "releases " + ", ".join(map(str, seqs))


def check_store_matches_state(series: DatasetSeries, published: list[PublishedRelease], seq: int) -> None:
    """Refuse to publish release ``seq`` into a release store that does not hold exactly the
    published releases of the state database: a ``release-NNNN`` entry the state does not
    record (a stray or forged folder or link, or a state database restored from an older
    backup than the store) or a published release whose folder is gone (a store restored
    from an older backup than the state).

    Another process publishing meanwhile is no mismatch: a release's folder appears only
    after its commit, so the state is read again after the folders are listed when one
    looks foreign, and a published release whose folder is not listed yet counts when its
    folder or its staging folder is there now.

    Raises:
        StateError: naming the first foreign or missing folder and what to do.
    """
    folder = series.ws.dataset_dir
    present = set()
    if folder.is_dir():
        with os.scandir(folder) as entries:
            present = {e.name for e in entries if RELEASE_FOLDER.match(e.name)}
    if present - {release_files.release_name(r.seq) for r in published}:
        published = series.store.published(series.dataset)
    expected = {release_files.release_name(r.seq): r for r in published}
    foreign = sorted(present - set(expected), key=lambda name: (name != release_files.release_name(seq), name))
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if foreign[1:] else ""
        raise StateError(
            f"{folder / foreign[0]}{more}: not a release the state database records (it records "
            f"{_recorded(published)}); restore the state database that matches the release store, or move "
            "this out of it; nothing was published"
        )
    for name, r in expected.items():
        # the staging folder first: once it is gone, a rename that was on its way has happened
        if name in present or (folder / release_files.staging_name(r.seq, r.id)).is_dir():
            continue
        if not os.path.lexists(folder / name):
            raise StateError(
                f"{folder / name} is missing, but the state database records release {r.seq} of "
                f"{series.dataset!r} as published; restore the release store from the backup that matches "
                "the state database; nothing was published"
            )


def _manifest_bytes(folder: Path) -> bytes | None:
    try:
        return (folder / release_files.MANIFEST_FILE).read_bytes()
    except OSError:
        return None


def check_signatures(
    series: DatasetSeries, releases: list[PublishedRelease], doing: str = "nothing was published"
) -> None:
    """Refuse when the manifest signature or chain link of one of ``releases`` does not
    verify (a ``manifest.sig`` missing, broken or not the manifest's; a manifest not chained
    to its predecessor's): the audit's own check, :func:`check_link`.

    Args:
        doing: the end of the message, what was not done.

    Raises:
        StateError: naming the release, its folder and what to do.
    """
    dataset_dir = series.ws.dataset_dir
    for r in releases:
        folder = dataset_dir / release_files.release_name(r.seq)
        previous = None if r.seq == 1 else _manifest_bytes(dataset_dir / release_files.release_name(r.seq - 1))
        findings = check_link(r.seq, folder, previous)
        if findings:
            raise StateError(
                f"{folder}: {_clip(findings[0])}; restore its manifest.json and manifest.sig from the backup; {doing}"
            )


def check_series_to_extend(series: DatasetSeries, published: list[PublishedRelease]) -> None:
    """Refuse to build on a damaged series: the signature and chain link of every published
    release (:func:`check_signatures`, as ``public-copy`` runs it) and the sign-off records
    (rows against the append-only audit log for every release, and against the newest
    manifest's signed ``sign_off``), as ``serialpub state verify`` compares them. Run after
    :func:`serialpub.workflow.publishing.check_published_files` has matched the newest
    release's files with the state.

    Raises:
        StateError: the first damage found (the oldest release's first), in one line, with
            what to do.
    """
    if not published:
        return
    newest = published[-1]
    check_signatures(series, published)
    dataset = series.dataset
    folder = series.ws.dataset_dir / release_files.release_name(newest.seq)
    report = VerifyReport(dataset)
    compare_sign_offs(report, series.store, dataset, {newest.seq: Manifest.read(folder / release_files.MANIFEST_FILE)})
    if report.differences:
        first = report.differences[0].examples[0]
        more = sum(d.count for d in report.differences) - 1
        raise StateError(
            f"sign-off records changed: {_clip(first)}"
            + (f" (and {more} more)" if more else "")
            + "; restore the state database from its backup (see 'serialpub state verify'); nothing was published"
        )


def check_before_drafting(series: DatasetSeries) -> None:
    """Both checks, for the release a draft would become (the next after the newest
    published): refused before the snapshot is read rather than after the sign-off.

    Raises:
        StateError: as :func:`check_store_matches_state` and :func:`check_series_to_extend`.
    """
    if series.store.open_release(series.dataset) is not None:
        # the draft is refused anyway, naming the open release, whose sign-offs may be
        # written while these checks read them
        return
    published = series.store.published(series.dataset)
    check_store_matches_state(series, published, (published[-1].seq if published else 0) + 1)
    check_series_to_extend(series, published)
