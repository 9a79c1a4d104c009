"""Bringing in a release published with another tool (``serialpub import-release``).

A publisher who already released generalized tables before adopting serialpub must not
start from an empty statistics file: the adversary has those tables (docs/design.md section 1), so
every individual they linked to a protected value carries that linkage into the next
release. :func:`import_release` reads such a table (one column per quasi-identifier
holding hierarchy node labels, plus the sensitive column), checks it, computes the
candidates of every group from the register, and advances the state exactly as
:func:`anonymizer.release.anonymize_history` does for a release serialpub computed
itself (paper 004, §7: the statistics file keeps, per individual o and protected value s,
the factors 1 - n_{j,s}/n_j of the releases that linked o to s; docs/design.md section 4). The release
then goes through the publisher's own path (draft → staging → commit → rename), so it
enters the state database and the release store as the next ``release-NNNN``.

The region geometry (labels to nodes, groups, the register's combinations in each region,
disjointness) is the writer side's :mod:`anonymizer.regions`, which
:mod:`serialpub.analysis.verify` uses too; it works on the distinct register QI
combinations, so a 5,000,000-person register costs a few array passes. The independent
audit keeps its own geometry (docs/design.md section 9).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.regions import RegisterCells, locate_groups
from anonymizer.release import History, PrivacyParams, advance_history
from anonymizer.settings import Dilution, Strategy, SuppressionModel
from serialpub.config import Workspace
from serialpub.errors import InputError
from serialpub.io import release_files
from serialpub.io.inputs import present_rows
from serialpub.io.manifest import Manifest
from serialpub.io.release_settings import recorded_ratio
from serialpub.workflow import identity, publishing, release_record
from serialpub.workflow.dataset_inputs import DatasetInputs, read_dataset_inputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.drafting import ReleaseOutcome
from serialpub.workflow.imported_table import ReadRelease, check_cover, group_labels, read_groups, shown_labels
from serialpub.workflow.input_checks import check_period
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.request import ReleaseRequest
from state.store import OpenRelease

IntArray = npt.NDArray[np.int64]


# --------------------------------------------------------------------------- the command


def _strategy(
    ws: Workspace, ell: float, strategy: str | None, k_prime: int | None, alpha: float | None
) -> PrivacyParams:
    cfg = ws.config
    chosen: Strategy
    if strategy is None and k_prime is None and alpha is None:
        chosen = cfg.strategy
        k_prime = cfg.k_prime if chosen is Strategy.CONSTANT else None
        alpha = cfg.alpha if chosen is Strategy.GEOMETRIC else None
    elif strategy is None:
        if k_prime is not None and alpha is not None:
            raise InputError("give --strategy constant (with --k-prime) or geometric (with --alpha), not both")
        chosen = Strategy.CONSTANT if k_prime is not None else Strategy.GEOMETRIC
    elif strategy in set(Strategy):
        chosen = Strategy(strategy)
    else:
        raise InputError(f"--strategy must be 'constant' or 'geometric', got {strategy!r}")
    if chosen is Strategy.CONSTANT and alpha is not None:
        raise InputError("--alpha belongs to the geometric strategy; the constant one takes --k-prime")
    if chosen is Strategy.GEOMETRIC and k_prime is not None:
        raise InputError("--k-prime belongs to the constant strategy; the geometric one takes --alpha")
    try:
        return PrivacyParams(
            ell=ell,
            strategy=chosen,
            k_prime=k_prime,
            alpha=alpha,
            guarantee=cfg.guarantee,
        )
    except ValueError as exc:
        raise InputError(f"import parameters: {exc}") from None


def _protected(ws: Workspace, inputs: DatasetInputs, protected: Sequence[str] | str) -> list[str]:
    """The imported release's protected values; a subset of what the state tracks."""
    config = ws.root / "serialpub.yaml"
    if isinstance(protected, str):
        if protected != "all":
            raise InputError(f"--protected must be 'all' or a list of values, got {protected!r}")
        if inputs.sensitive_domain is None:
            raise InputError(
                f"--protected all needs the sensitive domain: add {ws.hierarchy_dir}/"
                f"{inputs.sensitive}.csv or list the protected values"
            )
        values = list(inputs.sensitive_domain)
    else:
        values = list(dict.fromkeys(protected))
    if not values:
        raise InputError("--protected names no value")
    domain = inputs.sensitive_domain
    unknown = [v for v in values if domain is not None and v not in domain]
    if unknown:
        raise InputError(f"--protected: {', '.join(map(repr, unknown))} not value(s) of {inputs.sensitive!r}")
    untracked = [v for v in values if v not in inputs.protected]
    if untracked:
        raise InputError(
            f"--protected: {', '.join(map(repr, untracked))} not protected by {config} (protected_values); the "
            "statistics file tracks only the configured values. Protect them there first"
        )
    return values


def import_release(
    ws: Workspace,
    data_path: Path,
    period: str,
    ell: float,
    protected: Sequence[str] | str,
    dilution: str,
    snapshot: Path | None = None,
    strategy: str | None = None,
    k_prime: int | None = None,
    alpha: float | None = None,
) -> ReleaseOutcome:
    """Record a release published by another tool as the dataset's next release.

    The file (Parquet, or CSV with a header) has one column per quasi-identifier of the
    configuration holding node labels of its hierarchy, and the sensitive column. Its
    groups are the records with equal labels; the candidates of a group are the register
    individuals whose QI values lie in its region (``dilution="register"``, n_j = their
    number) or the present individuals there (``"presence"``, n_j = the group's records;
    docs/design.md section 1). The state advances as for a release serialpub computed
    (:func:`advance_history`; paper 004 §7, docs/design.md section 4) and the release is written to
    ``release-NNNN/`` with the data rewritten as Parquet with string columns (rows in the
    given order, columns in configuration order) and a manifest with the keys of
    docs/release-contract.md plus ``"imported": true`` and ``"source_sha256"``. The state
    database records the release as imported.

    Args:
        data_path: the release as published elsewhere (``ws``: the workspace).
        period: its period label; must sort after the last published period.
        ell: the ℓ the other tool enforced (recorded; >= 2).
        protected: ``"all"`` (the sensitive hierarchy's leaves) or the protected values;
            each must be one the configuration protects (the state tracks only those).
        dilution: ``"register"`` or ``"presence"``.
        snapshot: CSV listing the present individuals (id column); required for presence
            dilution, optional otherwise (then it gives the suppressed count). Its path is
            recorded so ``serialpub state verify`` can recompute the release.
        strategy, k_prime, alpha: the strategy recorded (default: the configuration's).

    Returns its :class:`~serialpub.workflow.drafting.ReleaseOutcome`. A release whose
    import makes some p exceed 1/ℓ is still recorded (the tables are public already);
    ``exceeds_bound`` says so.

    Raises:
        InputError: a bad parameter; a missing or unreadable file; a column missing or
            extra; an empty cell; a generalized value that is not a node label of its QI's
            hierarchy (file, line/row, column and value named); overlapping regions (two
            groups named); a sensitive value outside its domain; presence dilution without
            a snapshot; a group with more records than candidates; the period already
            published or not later than the last; without ``sign_off.auto_approve``, an
            account not on ``sign_off.approvers``. Nothing is changed.
        StateError: another release of the dataset is being prepared, or the state
            database cannot be used. Nothing is changed.
    """
    started = time.perf_counter()
    mode, params = _check_arguments(ws, dilution, snapshot, period), _strategy(ws, ell, strategy, k_prime, alpha)
    inputs = read_dataset_inputs(ws)  # before the state database is opened (Publisher, why)
    series, register = DatasetSeries(ws), RegisterReader(ws, inputs)
    values = _protected(ws, inputs, protected)
    publishing.recover(series)
    published, read = check_period(series, ReleaseRequest(), period), read_groups(ws, inputs, data_path, values)
    group_of_ind, n_j, present = _candidates(inputs, register, data_path, read, snapshot, mode)
    suppressed = int(present.size - len(read.table)) if present is not None else None
    source_sha, record = release_files.sha256_file(data_path), _record(ws, inputs, params, mode, suppressed, values)
    listed = {"snapshot": str(snapshot.resolve())} if snapshot is not None else {}
    draft = release_record.open_draft(
        series, period, record, imported=True, source=str(data_path.resolve()), source_sha256=source_sha, **listed
    )
    try:
        new = _advanced(_history(series, register), group_of_ind, n_j, read, inputs.params)
        previous = published[-1].seq if published else None
        manifest = _manifest(
            ws, inputs, register, draft.seq, period, previous, record, read, suppressed, new, source_sha
        )
        _stage(series, inputs, register, draft, manifest, read, n_j, new)
        # published by the other tool already: no validation or sign-off of its own
        publishing.commit(series, draft, manifest)
    except BaseException as exc:
        series.abandon(draft, exc)
        raise
    return _outcome(ws, draft, manifest, read, n_j, time.perf_counter() - started)


def _advanced(
    history: History, group_of_ind: IntArray, n_j: IntArray, read: ReadRelease, params: PrivacyParams
) -> History:
    """The state after the imported release: its published counts charged as the
    workspace's ρ charges its own releases (:func:`anonymizer.release.advance_history`)."""
    return advance_history(history, group_of_ind, n_j, read.groups.counts, propensity_ratio=params.propensity_ratio)[0]


def _manifest(
    ws: Workspace,
    inputs: DatasetInputs,
    register: RegisterReader,
    seq: int,
    period: str,
    previous: int | None,
    record: dict[str, Any],
    read: ReadRelease,
    suppressed: int | None,
    new: History,
    source_sha: str,
) -> Manifest:
    """The imported release's manifest (:func:`serialpub.workflow.release_record.release_manifest`):
    its settings ``record``, its figures, ``imported`` and the source file's sha256."""
    return release_record.release_manifest(
        ws.config,
        inputs,
        register.file_sums,
        seq,
        period,
        previous,
        record,
        records=len(read.table),
        groups=read.groups.records.size,
        suppressed=suppressed,
        max_breach_probability=new.max_breach(),
        imported=True,
        source_sha256=source_sha,
    )


def _outcome(
    ws: Workspace, draft: OpenRelease, manifest: Manifest, read: ReadRelease, n_j: IntArray, seconds: float
) -> ReleaseOutcome:
    """The figures of the imported release ``draft``, now published with ``manifest``."""
    max_breach = float(manifest.max_breach_probability or 0.0)
    return ReleaseOutcome(
        seq=draft.seq,
        period=draft.period,
        directory=ws.dataset_dir / release_files.release_name(draft.seq),
        records=manifest.records,
        groups=manifest.groups,
        suppressed=manifest.suppressed,
        avg_candidates=float(n_j.mean()),
        max_candidates=int(n_j.max()),
        avg_records=float(read.groups.records.mean()),
        max_records=int(read.groups.records.max()),
        max_breach=max_breach,
        seconds=seconds,
        exceeds_bound=max_breach > 1.0 / manifest.l,
        source_sha256=manifest.source_sha256,
        data_sha256=manifest.sha256.data_parquet,
    )


def _history(series: DatasetSeries, register: RegisterReader) -> History:
    """The state after the dataset's newest published release."""
    ell = np.full(len(register.register.ids), float(series.ws.config.ell))
    return register.statistics.load(series.store.latest_statistics(series.dataset), ell)


def _record(
    ws: Workspace,
    inputs: DatasetInputs,
    params: PrivacyParams,
    mode: Dilution,
    suppressed: int | None,
    values: list[str],
) -> dict[str, Any]:
    """The privacy settings an imported release's row and manifest record."""
    return {
        "l": float(params.ell),
        "strategy": params.strategy,
        "k_prime": params.k_prime,
        "alpha": params.alpha,
        "guarantee": ws.config.guarantee,
        "dilution": mode,
        # the state charges the published counts: that is mechanism-aware only when the
        # snapshot shows nothing was left out (docs/threat-model.md)
        "suppression_model": SuppressionModel.MECHANISM if suppressed == 0 else SuppressionModel.PAPER,
        "suppression_budget": None,
        "numeric_quasi_identifiers": inputs.numeric,
        "protected_values": values,
        # the workspace's ρ charges the imported counts as it charges its own releases
        **({"propensity_ratio": rho} if (rho := recorded_ratio(ws.config.propensity_ratio)) is not None else {}),
    }


def _check_arguments(ws: Workspace, dilution: str, snapshot: Path | None, period: str) -> Dilution:
    """The dilution named, after the checks that need no file.

    Raises:
        InputError: an unknown dilution, presence dilution without a snapshot, an empty
            period, or (without ``sign_off.auto_approve``) an account not on the approvers.
    """
    if not ws.config.sign_off.auto_approve:
        # an import publishes into the series at once: only an approver may record one
        identity.authorize(ws, identity.os_login())
    if dilution not in set(Dilution):
        raise InputError(f"--dilution must be 'register' or 'presence', got {dilution!r}")
    mode = Dilution(dilution)
    if mode is Dilution.PRESENCE and snapshot is None:
        raise InputError(
            "--dilution presence needs --snapshot: the candidates of a group are the present individuals, "
            "so the file listing them is required"
        )
    if not period:
        raise InputError("--period must not be empty")
    return mode


def _candidates(
    inputs: DatasetInputs,
    register: RegisterReader,
    data_path: Path,
    read: ReadRelease,
    snapshot: Path | None,
    mode: Dilution,
) -> tuple[IntArray, IntArray, IntArray | None]:
    """The group of every register individual (-1: none; under presence dilution, only the
    present ones), n_j of every group, and the register rows of the present individuals
    (None without a snapshot).

    Raises:
        InputError: overlapping regions, or a group with more records than candidates.
    """
    qis, hierarchies, groups = inputs.qis, read.hierarchies, read.groups
    cells = RegisterCells.of(register.register.keys, hierarchies)
    located = locate_groups(cells.leaves, groups.nodes, [h.index for h in hierarchies])
    if located.overlap_pairs:
        i, j = located.overlaps[0]
        more = f" (and {located.overlap_pairs - 1} more pair(s))" if located.overlap_pairs > 1 else ""
        first, second = (shown_labels(group_labels(hierarchies, qis, groups.nodes[g])) for g in (i, j))
        raise InputError(
            f"{data_path}: the regions of groups {first} and {second} overlap{more}; a release must cover every "
            "individual by at most one group (docs/design.md section 1), so this one cannot be imported"
        )
    group_of_ind = located.group_of_cell[cells.of_individual]
    n_groups = groups.records.size
    in_region = np.bincount(group_of_ind[group_of_ind >= 0], minlength=n_groups).astype(np.int64)
    check_cover(
        data_path, hierarchies, qis, groups, in_region, "register individuals", "the register does not cover it"
    )
    present: IntArray | None = None
    if snapshot is not None:
        present = present_rows(snapshot, inputs.id_column, qis, register.register, inputs.hierarchies)
        present_in = np.bincount(group_of_ind[present][group_of_ind[present] >= 0], minlength=n_groups)
        check_cover(
            data_path,
            hierarchies,
            qis,
            groups,
            present_in.astype(np.int64),
            f"individuals of {snapshot}",
            "the snapshot does not list everyone the release publishes",
        )
    if mode is Dilution.REGISTER:
        return group_of_ind, in_region, present
    assert present is not None
    members = np.full(group_of_ind.size, -1, dtype=np.int64)
    members[present] = group_of_ind[present]
    return members, groups.records, present


def _stage(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    draft: OpenRelease,
    manifest: Manifest,
    read: ReadRelease,
    n_j: IntArray,
    new: History,
) -> None:
    """Stage the imported release as a draft is staged: its data file (rewritten as Parquet
    with string columns, rows in the given order) and manifest in its staging folder, its
    figures, groups and ``new`` (the state after it) in the state, not counted until it is
    published."""
    qis, groups = inputs.qis, read.groups
    out = pd.DataFrame({c: read.table[c].to_numpy(dtype=str) for c in [*qis, inputs.sensitive]})
    register.keep_input_versions()
    staging, _ = release_files.write_staging(series.ws.dataset_dir, draft.seq, draft.id, out, manifest)
    rows = release_record.release_group_rows(
        read.hierarchies, groups.nodes, n_j, groups.records, groups.counts, inputs.protected
    )
    figures = {"records": len(read.table), "groups": groups.records.size, "suppressed": manifest.suppressed,
               "max_breach": manifest.max_breach_probability, "data_sha256": manifest.sha256.data_parquet}  # fmt: skip
    series.store.stage(draft.id, figures, rows, register.statistics.tables(new), str(staging))
