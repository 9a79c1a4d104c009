"""The verification of a dataset's release series: :func:`verify_state`.

Lists the published releases of the state database and the release folders, reads their
manifests, rebuilds the state release by release (:mod:`.rebuild`) from the state before
the first release, and compares the result with the database's statistics file
(:mod:`.compare`; docs/design.md section 4).
"""

from __future__ import annotations

import numpy as np

from anonymizer.release import History
from serialpub.analysis.verify.bound import check_evidence, compare_fields
from serialpub.analysis.verify.compare import compare_statistics
from serialpub.analysis.verify.context import Rebuild, Verification
from serialpub.analysis.verify.rebuild import grow, rebuild_release
from serialpub.analysis.verify.report import VerifyReport
from serialpub.analysis.verify.sign_offs import compare_sign_offs
from serialpub.analysis.verify.stored import db_releases, release_folders
from serialpub.config import Workspace
from serialpub.errors import InputError
from serialpub.io import release_files
from serialpub.io.manifest import Manifest


def verify_state(ws: Workspace) -> VerifyReport:
    """Rebuild the state of a workspace's dataset from its published files and compare.

    Reads the register, the hierarchies, every ``release-NNNN/`` folder of the release
    store (in number order), the presence-mode snapshots the database names, and from the
    database the published releases, their group figures and the latest statistics file
    (read-only; nothing is written). See :mod:`serialpub.analysis.verify` for what is compared
    (paper 004 §7; docs/design.md sections 1 and 4).

    Returns:
        a :class:`VerifyReport`; ``report.ok`` is True when nothing differs and every
        pair could be verified. A statistics file failing its checksum is reported as a
        difference, not raised.

    Raises:
        InputError: the register or a hierarchy file is missing or malformed.
        StateError: the state database cannot be opened.
    """
    ctx = Verification(ws)
    cfg = ctx.ws.config
    report = ctx.report
    db = db_releases(ctx.store, cfg.dataset)
    by_seq = {r.seq: r for r in db}
    folders, staging = release_folders(ctx.ws.dataset_dir)
    report.releases_in_state = [r.seq for r in db]
    report.releases_on_disk = list(folders)
    if staging:
        report.notes.append(
            f"staging folder(s) {', '.join(staging)} in {ctx.ws.dataset_dir}: an interrupted publication; "
            "the next publication rolls them forward or removes them"
        )
    for r in db:
        if r.seq not in folders:
            report.add(
                "release folder missing",
                f"release {r.seq} (period {r.period!r}) is published in the state database but "
                f"{ctx.ws.dataset_dir / release_files.release_name(r.seq)} does not exist",
            )
    for seq, path in folders.items():
        if seq not in by_seq:
            report.add("release folder not in the state", f"{path} is not a published release of the state database")

    manifests: dict[int, Manifest] = {}
    for seq, path in folders.items():
        mpath = path / release_files.MANIFEST_FILE
        try:
            manifests[seq] = Manifest.read(mpath)
        except InputError as exc:
            report.add("unreadable release", f"release {seq}: {exc}; the release was not recomputed")
    values: list[str] = []
    for m in manifests.values():
        values.extend(v for v in m.protected_values if v not in values)

    empty = History.empty(np.full(len(ctx.ids), float(cfg.ell)), len(values))
    state = Rebuild(empty, np.zeros(empty.survival.shape, dtype=bool))
    for seq, manifest in manifests.items():
        state = rebuild_release(ctx, seq, folders[seq], manifest, by_seq.get(seq), values, state)
    state = grow(state, len(ctx.ids), float(cfg.ell))  # everyone of any register the releases used
    report.individuals = len(ctx.ids)
    compare_statistics(ctx, state, values, bool(db))
    compare_sign_offs(report, ctx.store, cfg.dataset, manifests, {seq: r.params for seq, r in by_seq.items()})
    compare_fields(report, manifests, by_seq)
    check_evidence(report, manifests, folders)
    return report
