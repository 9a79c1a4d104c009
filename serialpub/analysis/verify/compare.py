"""The rebuilt state compared with the state database for ``serialpub state verify``.

:func:`compare_groups` compares one release's group figures (regions, n_j, n_{j,s}) with
the rows the database recorded; :func:`compare_statistics` compares, per (individual,
protected value), the rebuilt survival product (relative tolerance
:data:`.report.SURVIVAL_RTOL`) and linked count with the database's latest statistics file
(docs/design.md section 4), over the joint classes of individuals whose stored and rebuilt
histories are alike, never over individuals one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from anonymizer.arrays import factorize
from anonymizer.hierarchy import Hierarchy
from serialpub.analysis.verify.context import IntArray, Rebuild, Verification
from serialpub.analysis.verify.report import MAX_EXAMPLES, SURVIVAL_RTOL
from serialpub.analysis.verify.stored import DbRelease, db_groups
from serialpub.errors import quoted
from state.engine import StateError


def compare_groups(
    ctx: Verification,
    where: str,
    dbr: DbRelease,
    hs: Mapping[str, Hierarchy],
    groups: Any,
    n_j: IntArray,
    values: list[str],
) -> None:
    """The database's per-group figures against the recomputed ones (one row per group);
    ``hs``: the hierarchies the release is read with."""
    rebuilt: dict[tuple[str, ...], tuple[int, int, dict[str, int]]] = {}
    for g in range(groups.records.size):
        labels = tuple(hs[q].labels[int(groups.nodes[g, a])] for a, q in enumerate(ctx.qis))
        counts = {values[v]: int(groups.counts[g, v]) for v in np.flatnonzero(groups.counts[g])}
        rebuilt[labels] = (int(n_j[g]), int(groups.records[g]), counts)
    stored = {tuple(lab): (cand, rec, counts) for lab, cand, rec, counts in db_groups(ctx.store, dbr.id)}
    for labels in stored.keys() - rebuilt.keys():
        ctx.report.add("group figures", f"{where}: group {labels} is in the state database, not in data.parquet")
    for labels in rebuilt.keys() - stored.keys():
        ctx.report.add("group figures", f"{where}: group {labels} is in data.parquet, not in the state database")
    for labels in rebuilt.keys() & stored.keys():
        (c1, r1, s1), (c2, r2, s2) = stored[labels], rebuilt[labels]
        if (c1, r1, s1) != (c2, r2, s2):
            ctx.report.add(
                "group figures",
                f"{where}: group {labels}: the state database has n_j={c1}, records={r1}, n_j,s={s1}; "
                f"the release files give n_j={c2}, records={r2}, n_j,s={s2}",
            )


def compare_statistics(ctx: Verification, state: Rebuild, values: list[str], any_published: bool) -> None:
    """The rebuilt ``state`` against the database's latest statistics file, per (individual,
    protected value), into ``ctx.report`` (values, pairs compared, unverifiable pairs,
    differences); ``any_published``: the database has published releases."""
    report, cfg = ctx.report, ctx.ws.config
    n = len(ctx.ids)
    try:
        stats = ctx.store.latest_statistics(cfg.dataset)
    except StateError as exc:
        report.add("statistics file", f"{exc}: it was changed outside serialpub; the pairs cannot be compared")
        report.values = values
        return
    names = list(values)
    if stats is None:
        if any_published:
            report.add("statistics file", "the state database has published releases but no statistics file")
            report.values = names
            return
        db_class_of = np.zeros(n, dtype=np.int64)  # nothing published: everyone never linked
        db_survival, db_linked = np.ones((1, len(names))), np.zeros((1, len(names)), dtype=np.int64)
    else:
        members, classes = stats
        try:
            db_class_of, n_classes = _member_classes(ctx, members)
            dictionary = classes.column("value").combine_chunks()
            stored_names = [str(x) for x in dictionary.dictionary.to_pylist()]
            names.extend(v for v in stored_names if v not in names)
            to_col = pd.Index(names).get_indexer(pd.Index(stored_names))
            cols = to_col[dictionary.indices.to_numpy()].astype(np.int64)
            k = classes.column("class").to_numpy().astype(np.int64)
            if k.size and (k.min() < 0 or k.max() >= n_classes):
                raise ValueError("the classes table names classes no individual belongs to")
            db_survival = np.ones((n_classes + 1, len(names)))
            db_linked = np.zeros((n_classes + 1, len(names)), dtype=np.int64)
            db_survival[k, cols] = classes.column("survival").to_numpy()
            db_linked[k, cols] = classes.column("linked").to_numpy()
        except (KeyError, ValueError, IndexError) as exc:
            report.add(
                "statistics file",
                f"the statistics file is not readable as members/classes tables "
                f"({type(exc).__name__}: {exc}); the pairs cannot be compared",
            )
            report.values = names
            return
    report.values = names
    v_all, v_rb = len(names), len(values)
    hist = state.history
    rb_survival = np.ones((hist.survival.shape[0], v_all))
    rb_linked = np.zeros((hist.survival.shape[0], v_all), dtype=np.int64)
    rb_unknown = np.zeros((hist.survival.shape[0], v_all), dtype=bool)
    rb_survival[:, :v_rb], rb_linked[:, :v_rb], rb_unknown[:, :v_rb] = hist.survival, hist.linked, state.unknown
    if n == 0:
        return
    # joint classes: individuals with the same stored and the same rebuilt class
    n_rb = max(1, hist.survival.shape[0])
    joint, first = factorize(db_class_of * n_rb + hist.class_of)
    weight = np.bincount(joint, minlength=first.size).astype(np.int64)
    jd, jr = db_class_of[first], hist.class_of[first]
    s_db, s_rb = db_survival[jd], rb_survival[jr]
    l_db, l_rb = db_linked[jd], rb_linked[jr]
    unknown = rb_unknown[jr]
    known_pairs = ~unknown
    report.unverifiable.count = int((unknown * weight[:, None]).sum())
    report.pairs_compared = n * v_all - report.unverifiable.count
    bad_s = ~np.isclose(s_db, s_rb, rtol=SURVIVAL_RTOL, atol=0.0) & known_pairs
    bad_l = (l_db != l_rb) & known_pairs
    ids = ctx.ids
    for kind, bad, a, b, fmt in (
        ("survival product", bad_s, s_db, s_rb, "{:.17g}"),
        ("linked releases", bad_l, l_db, l_rb, "{}"),
    ):
        if not bad.any():
            continue
        j, v = np.nonzero(bad)
        total = int(weight[j].sum())
        d_ex = [
            f"individual {quoted(ids[int(first[jj])])}, value {quoted(names[vv])}: state {fmt.format(a[jj, vv])}, "
            f"release files {fmt.format(b[jj, vv])}"
            + (f" (and {weight[jj] - 1} other individual(s) alike)" if weight[jj] > 1 else "")
            for jj, vv in zip(j[:MAX_EXAMPLES], v[:MAX_EXAMPLES], strict=True)
        ]
        report.add(kind, d_ex[0], total)
        for e in d_ex[1:]:
            report.add(kind, e, 0)


def _member_classes(ctx: Verification, members: Any) -> tuple[IntArray, int]:
    """History class of every individual of the series (``ctx.ids``) per the stored members
    table, matched by id (the table also keeps those who left the register); individuals
    the table does not name get class ``n_classes`` (never linked)."""
    report = ctx.report
    n = len(ctx.ids)
    stored_ids = pd.Index(np.asarray(members.column("individual").to_numpy(zero_copy_only=False)).astype(str))
    class_col = members.column("class").to_numpy().astype(np.int64)
    n_classes = int(class_col.max()) + 1 if class_col.size else 0
    rows = np.asarray(ctx.ids.get_indexer(stored_ids), dtype=np.int64)
    missing = rows < 0
    if missing.any():
        report.add(
            "statistics file",
            f"{int(missing.sum())} individual(s) of the statistics file are in no register a release used, "
            f"e.g. {quoted(stored_ids[int(np.flatnonzero(missing)[0])])}",
            int(missing.sum()),
        )
    class_of = np.full(n, n_classes, dtype=np.int64)
    class_of[rows[~missing]] = class_col[~missing]
    named = np.zeros(n, dtype=bool)
    named[rows[~missing]] = True
    absent = n - int(named.sum())
    if absent:
        report.notes.append(
            f"{absent} register individual(s) are not in the statistics file (added to the "
            "register after the last release); they are compared as never linked"
        )
    return class_of, n_classes
