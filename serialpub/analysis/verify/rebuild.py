"""One published release rebuilt for ``serialpub state verify``: its checks against the
manifest and the state database, its groups, and the history it adds to the state.

:func:`rebuild_release` checks a ``release-NNNN/`` folder against its manifest and the
release's database row (sequence, period, the sha256 of ``data.parquet``, of the manifest,
the register and the hierarchies), reads its groups with the writer side's region geometry
(:mod:`anonymizer.regions`), has :func:`.compare.compare_groups` compare their figures with
the database's, and advances the rebuilt state with the anonymizer's own update
(:func:`anonymizer.release.advance_history`). Under presence dilution the candidates are
the individuals of the snapshot the database row names; without it the pairs the release
could have linked are marked unverifiable (docs/design.md sections 1 and 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import release_hierarchies
from anonymizer.privacy import ratio_by_value
from anonymizer.regions import group_release, locate_groups, record_nodes
from anonymizer.release import History, advance_history
from anonymizer.settings import Dilution
from serialpub.analysis.verify.compare import compare_groups
from serialpub.analysis.verify.context import IntArray, Rebuild, ReleaseInputs, Verification
from serialpub.analysis.verify.report import MAX_EXAMPLES
from serialpub.analysis.verify.stored import DbRelease
from serialpub.errors import InputError
from serialpub.io import release_files
from serialpub.io.inputs import present_rows
from serialpub.io.manifest import Manifest


def _short(sha: object) -> str:
    return f"{sha[:12]}..." if isinstance(sha, str) else repr(sha)


def rebuild_release(
    ctx: Verification,
    seq: int,
    folder: Path,
    pm: Manifest,
    dbr: DbRelease | None,
    values: list[str],
    state: Rebuild,
) -> Rebuild:
    """Check release ``seq`` (its ``folder``, parsed manifest ``pm`` and database row ``dbr``),
    compare its group figures with the database's and return ``state`` advanced by it;
    ``values``: the protected values of all manifests, in order (the state's columns). A
    release that cannot be read or recomputed is reported and leaves ``state`` as it was."""
    report, cfg = ctx.report, ctx.ws.config
    where = f"release {seq}"
    mpath, dpath = folder / release_files.MANIFEST_FILE, folder / release_files.DATA_FILE
    if pm.release != seq:
        report.add("manifest", f"{mpath}: says release {pm.release}, the folder is release {seq}")
    if pm.dataset != cfg.dataset:
        report.add("manifest", f"{mpath}: names dataset {pm.dataset!r}, the configuration {cfg.dataset!r}")
    expected_previous = seq - 1 if seq > 1 else None  # sequence numbers are dense
    if pm.previous_release != expected_previous:
        report.add("manifest", f"{mpath}: previous_release is {pm.previous_release}, expected {expected_previous}")
    if dbr is not None and pm.period != dbr.period:
        report.add(
            "period",
            f"{where}: the manifest says period {pm.period!r}, the state database {dbr.period!r}",
        )
    file_sha = release_files.sha256_file(dpath) if dpath.is_file() else None
    man_sha = pm.sha256.data_parquet
    if file_sha is None:
        report.add("data.parquet sha256", f"{where}: {dpath} is missing")
    elif file_sha != man_sha:
        report.add(
            "data.parquet sha256",
            f"{where}: {dpath} (sha256 {_short(file_sha)}) does not match its "
            f"manifest ({_short(man_sha)}); the file was changed after publishing",
        )
    if dbr is not None and dbr.data_sha256 != man_sha:
        report.add(
            "data.parquet sha256",
            f"{where}: the state database records sha256 {_short(dbr.data_sha256)}, the manifest {_short(man_sha)}",
        )
    if dbr is not None and dbr.manifest_sha256 != release_files.sha256_file(mpath):
        report.add(
            "manifest sha256",
            f"{where}: {mpath} is not the manifest the state database recorded; it was changed after publishing",
        )
    if sorted(pm.quasi_identifiers) != sorted(ctx.qis) or pm.sensitive != cfg.sensitive:
        report.add(
            "manifest",
            f"{mpath}: quasi-identifiers {pm.quasi_identifiers} and sensitive "
            f"{pm.sensitive!r} are not the configuration's; the release was not recomputed",
        )
        return state
    if file_sha is None:
        return state
    try:  # the register and hierarchies of the release's period (docs/design.md section 10)
        inp = ctx.inputs(pm.sha256.register_file, pm.sha256.hierarchies)
    except InputError as exc:
        report.add("register", f"{where}: {exc}; n_j cannot be recomputed")
        return state
    try:
        data = pd.read_parquet(dpath, read_dictionary=[*ctx.qis, cfg.sensitive])
    except Exception as exc:  # pyarrow raises several unrelated types for a broken file
        report.add("unreadable release", f"{where}: {dpath}: {type(exc).__name__}: {exc}")
        return state
    absent = [c for c in [*ctx.qis, cfg.sensitive] if c not in data.columns]
    if absent:
        report.add(
            "release content",
            f"{where}: data.parquet lacks column(s) {', '.join(absent)}; the release was not recomputed",
        )
        return state

    # groups as published; a numeric QI's intervals are nodes of this release's hierarchy
    numeric = [q for q in pm.numeric_quasi_identifiers if q in ctx.qis]
    hs = release_hierarchies(inp.hierarchies, numeric, data) if numeric else inp.hierarchies
    spans = [hs[q].index for q in ctx.qis] if numeric else inp.spans
    nodes = record_nodes(data, ctx.qis, [hs[q] for q in ctx.qis])
    known = (nodes >= 0).all(axis=1)
    if not known.all():
        report.add(
            "release content",
            f"{where}: {int((~known).sum())} record(s) carry a value that is not a "
            "label of its hierarchy; they were left out",
        )
    sens = data[cfg.sensitive].astype(str).to_numpy()[known]
    value = pd.Index(values).get_indexer(pd.Index(sens)).astype(np.int64)
    value[~np.isin(sens, pm.protected_values)] = -1  # only the values this release protected link
    groups = group_release(nodes[known], value, len(values), [hs[q] for q in ctx.qis])
    g = groups.records.size
    located = locate_groups(inp.cells.leaves, groups.nodes, spans)
    if located.overlap_pairs:
        i, j = located.overlaps[0]
        report.add(
            "overlapping regions",
            f"{where}: {located.overlap_pairs} pair(s) of groups overlap, e.g. "
            f"{_show(ctx, hs, groups.nodes[i])} and {_show(ctx, hs, groups.nodes[j])}",
        )
    group_of_ind = located.group_of_cell[inp.cells.of_individual]
    in_region = np.bincount(group_of_ind[group_of_ind >= 0], minlength=g).astype(np.int64)
    short = np.flatnonzero(groups.records > in_region)
    if short.size:
        report.add(
            "release content",
            f"{where}: {short.size} group(s) hold more records than register "
            f"individuals in their region, e.g. {_show(ctx, hs, groups.nodes[short[0]])}",
        )
    uncertain = False
    if pm.dilution is Dilution.REGISTER:
        n_j = np.maximum(in_region, groups.records)
    else:
        n_j = groups.records
        present = _present(ctx, inp, seq, dbr)
        if present is None:
            uncertain = True  # every register individual in a region may have been present
        else:
            members = np.full(group_of_ind.size, -1, dtype=np.int64)
            members[present] = group_of_ind[present]
            group_of_ind = members
    if dbr is not None:
        compare_groups(ctx, where, dbr, hs, groups, n_j, values)
        if (dbr.records, dbr.groups) != (len(data), g):
            report.add(
                "release figures",
                f"{where}: the state database says {dbr.records} records in "
                f"{dbr.groups} groups, data.parquet has {len(data)} in {g}",
            )
    if (pm.records is not None and pm.records != len(data)) or (pm.groups is not None and pm.groups != g):
        report.add(
            "release figures",
            f"{where}: the manifest says {pm.records} records in {pm.groups} groups, "
            f"data.parquet has {len(data)} in {g}",
        )
    # over the series' individuals: those not in this register are no candidates of it
    state = grow(state, len(ctx.ids), float(cfg.ell))
    group_of_series = np.full(len(ctx.ids), -1, dtype=np.int64)
    group_of_series[inp.in_series] = group_of_ind
    history, parent, via = advance_history(
        state.history,
        group_of_series,
        n_j,
        groups.counts,
        propensity_ratio=ratio_by_value(pm.propensity_ratio or 1, values),
    )
    unknown = state.unknown[parent]
    if uncertain and (groups.counts > 0).any():
        unknown = unknown | np.vstack([groups.counts > 0, np.zeros((1, len(values)), dtype=bool)])[via]
        if len(ctx.report.unverifiable.examples) < MAX_EXAMPLES:
            ctx.report.unverifiable.examples.append(
                f"release {seq} (presence dilution): snapshot "
                f"{(dbr.params.get('snapshot') if dbr else None) or '(not recorded)'} is not available"
            )
    return Rebuild(history, unknown)


def grow(state: Rebuild, n: int, ell: float) -> Rebuild:
    """``state`` over ``n`` individuals: those added since (new in a register) share one
    fresh class, never linked."""
    hist = state.history
    added = n - hist.class_of.size
    if added <= 0:
        return state
    k, v = hist.survival.shape
    grown = History(
        np.concatenate([hist.class_of, np.full(added, k, dtype=np.int64)]),
        np.vstack([hist.survival, np.ones((1, v))]),
        np.vstack([hist.linked, np.zeros((1, v), dtype=np.int64)]),
        np.append(hist.ell, ell),
    )
    return Rebuild(grown, np.vstack([state.unknown, np.zeros((1, v), dtype=bool)]))


def _present(ctx: Verification, inp: ReleaseInputs, seq: int, dbr: DbRelease | None) -> IntArray | None:
    """Register rows present in a presence-mode release, or None when unknowable."""
    recorded = dbr.params.get("snapshot") if dbr is not None else None
    if not isinstance(recorded, str) or not recorded:
        return None
    path = Path(recorded)
    if not path.is_absolute() and not path.is_file():
        path = ctx.ws.root / path  # recorded relative to where the publisher ran
    if not path.is_file():
        return None
    cfg = ctx.ws.config
    try:
        return present_rows(path, cfg.id_column, ctx.qis, inp.register, inp.hierarchies)
    except InputError as exc:
        ctx.report.add("snapshot", f"release {seq}: {exc}")
        return None


def _show(ctx: Verification, hs: Mapping[str, Hierarchy], nodes: IntArray) -> str:
    return "(" + ", ".join(f"{q}={hs[q].labels[int(nodes[a])]}" for a, q in enumerate(ctx.qis)) + ")"
