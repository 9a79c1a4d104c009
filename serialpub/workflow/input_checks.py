"""Every check of the inputs before a draft (docs/design.md section 6; docs/validation.md):
the period label and order, the register suite and the snapshot suite. Bad input gets one
line per problem naming the file and line, nothing is published and the state does not
move.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.overlap import Overlap
from checks.gx import SuiteResult
from checks.input_suites import DatasetColumns, PeriodOrder, snapshot_suite
from serialpub.config import Config, Workspace
from serialpub.errors import InputChecksFailed, InputError, quoted
from serialpub.io import periods, verdict_cache, versions
from serialpub.io.hierarchies import nearest_spelling
from serialpub.io.inputs import Snapshot, read_csv, snapshot_from_table
from serialpub.io.sources import InputSource
from serialpub.workflow import progress
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.register_reader import RegisterReader, by_file_line
from serialpub.workflow.request import ReleaseRequest
from state.store import PublishedRelease

#: what a period label may look like (labels are compared as strings, so they must sort
#: chronologically: 2025-H1 < 2025-H2 < 2026-H1)
PERIOD_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"


@dataclass(frozen=True)
class InputChecks:
    """What :func:`check_inputs` found: the register and snapshot suites' results, the
    checked snapshot and the snapshot file's sha256."""

    suites: list[SuiteResult]
    snapshot: Snapshot
    sha256: str


def check_period_label(period: str) -> None:
    """Raises InputError when ``period`` does not match :data:`PERIOD_PATTERN`."""
    if not re.fullmatch(PERIOD_PATTERN, period):
        raise InputError(
            f"period {period!r} is malformed: use 1 to 100 letters, digits, '-', '_' or '.', starting with a "
            "letter or digit, that sort chronologically (e.g. 2025-H1, 2025-07, 0007)"
        )


def check_period(series: DatasetSeries, request: ReleaseRequest, period: str) -> list[PublishedRelease]:
    """The published releases, after checking that ``period`` can come next: written in
    the configured ``period_format``, not published yet, later than the last, and not
    skipping a period (:func:`skipped_periods`) unless ``request.skip_reason`` says why.
    ``StateStore.begin_draft`` checks the order again under its lock; this gives the
    user's error before any work.

    Raises:
        InputError: the period label is malformed (:data:`PERIOD_PATTERN`, the format),
            already published, not later than the last, or skips a period.
    """
    check_period_label(period)
    cfg = series.ws.config
    published = series.store.published(series.dataset)
    fmt = periods.effective(cfg.period_format, published[0].period if published else None)
    configured = cfg.period_format
    where = f"period_format: {configured.value}"
    if configured is periods.PeriodFormat.AUTO and published:
        where += f", as the first published period {published[0].period!r}"
    periods.check_format(period, fmt, where)
    if published:
        periods.check_format(published[-1].period, fmt, f"the last published period; {where}")
    if any(r.period == period for r in published):
        raise InputError(f"period {period!r} of dataset {series.dataset!r} is already published")
    first = published[0].period if published else None
    if fmt is periods.PeriodFormat.SEQUENCE and first is not None and len(period) != len(first):
        # labels are compared as text (here, in the state and in the snapshot suite)
        raise InputError(
            f"period {period!r}: sequence periods keep the width of the first, {first!r} "
            f"(write {period.lstrip('0').zfill(len(first))!r})"
        )
    if published and period <= published[-1].period:
        raise InputError(
            f"period {period!r} is not later than the last published period {published[-1].period!r}; "
            "releases are published in chronological order"
        )
    gap = skipped_periods(cfg, period, published)
    if gap and request.skip_reason is None:
        shown = ", ".join(gap[:5]) + (f" and {len(gap) - 5} more" if len(gap) > 5 else "")
        raise InputError(
            f"period {period!r} skips {shown} (the last published period is {published[-1].period!r}); publish "
            f"{gap[0]!r} first, or skip on purpose with --skip-periods 'REASON' (the decision is recorded)"
        )
    return published


def skipped_periods(cfg: Config, period: str, published: list[PublishedRelease]) -> list[str]:
    """The periods between the last published one and ``period`` in the format in force
    (none before the first release or under ``free``)."""
    if not published:
        return []
    fmt = periods.effective(cfg.period_format, published[0].period)
    return periods.skipped(published[-1].period, period, fmt)


def snapshot_source(ws: Workspace, snapshot: str | Path | InputSource) -> InputSource:
    """The source a snapshot argument names: a .csv or .parquet file, or ``sql:...`` in
    the input database (:mod:`serialpub.io.sources`).

    Raises:
        InputError: as :func:`serialpub.io.sources.parse_source`.
    """
    return snapshot if isinstance(snapshot, InputSource) else ws.snapshot_source(snapshot)


def period_of_source(source: InputSource) -> str:
    """The period a snapshot's file or table name gives (``snapshot-<period>``).

    Raises:
        InputError: a query, or a name without the pattern (give ``--period``).
    """
    if not source.name:
        raise InputError(f"{source.label}: a snapshot read by a query has no name to tell its period; give --period")
    return periods.period_of_file(Path(source.name) if source.path is None else source.path)


def check_repeated_snapshot(
    request: ReleaseRequest, label: str, sha: str, published: list[PublishedRelease]
) -> list[int]:
    """The published releases (their numbers) whose snapshot had exactly these bytes
    (``params.snapshot_sha256``, recorded by every draft). Last period's snapshot sent
    again for the next period would publish last period's data as this period's, so such a
    snapshot is refused unless the operator allows it (``--allow-repeated-snapshot``, recorded
    in the draft), e.g. for a population that truly did not change.

    Raises:
        InputError: a repeated snapshot, not allowed by ``request.allow_repeated_snapshot``.
    """
    repeated = [r for r in published if r.params.snapshot_sha256 == sha]
    if repeated and not request.allow_repeated_snapshot:
        r = repeated[-1]
        raise InputError(
            f"{label}: this snapshot is byte for byte the one release {r.seq} (period {r.period!r}) published; "
            "give this period's snapshot, or --allow-repeated-snapshot if the data truly did not change (recorded)"
        )
    return [r.seq for r in repeated]


@dataclass(frozen=True)
class SnapshotRead:
    """A snapshot as read for its checks, before its suite runs and it is coded
    (:func:`read_snapshot`).

    Attributes:
        source, period: where it was read from and the period it is for.
        table: its rows as read, every column as text.
        sha256: the sha256 of its bytes.
        published: the dataset's published releases, the period checked against them.
        order, verdict: where it stands in the series and the key of its suite's verdict
            (:func:`_order_and_key`).
        register_check: the register suite's result.
        register_rows: the register row of every line of ``table``, -1 for an id not in the
            register, shape (len(table),) (:meth:`serialpub.io.inputs.Register.rows_of`);
            None when the table has no id column (its suite says so). Looked up once, here:
            the coding and the suite's ids-in-register expectation both read them.
    """

    source: InputSource
    period: str
    table: pd.DataFrame
    sha256: str
    published: list[PublishedRelease]
    order: PeriodOrder
    verdict: str
    register_check: SuiteResult
    register_rows: npt.NDArray[np.int64] | None


def check_inputs(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    request: ReleaseRequest,
    snapshot: str | Path | InputSource,
    period: str,
) -> InputChecks:
    """Every check of the inputs before a draft: the period, the register suite (run
    once per reader), the snapshot suite and the snapshot's QIs against the register's:
    :func:`read_snapshot`, then :func:`run_snapshot_suite` and :func:`code_snapshot`, then
    :func:`keep_checks`. The checks of the last snapshot checked against ``register`` are
    kept, keyed by its source and by everything its suite's verdict depends on (the
    register cache's key, the snapshot's sha256, the period order, the columns and the
    sensitive domain), so that validating the draft with the same reader does not check it
    again (a later task's reader reads the suite's verdict from the workspace,
    :mod:`serialpub.io.verdict_cache`).

    Args:
        request: what the operator allowed (a period gap, a repeated snapshot); a draft's
            validation passes the request it was drafted under (``ReleaseRequest.as_drafted``).

    Raises:
        InputError (``InputChecksFailed`` for a failed suite): nothing was changed.
        ValueError: ``register`` was made for other inputs than ``inputs`` (a programming
            error, :meth:`RegisterReader.check_reads`).
    """
    read = read_snapshot(series, inputs, register, request, snapshot, period)
    if isinstance(read, InputChecks):
        return read
    # the coding (numpy and pandas work that releases the GIL) runs on the second core while
    # the suite runs (Great Expectations' Python holds it); the suite's verdict is the one
    # reported first
    with Overlap(1, "serialpub-snapshot") as beside:
        coding = beside.submit(code_snapshot, inputs, register, read)
        suite = run_snapshot_suite(series, register, read)
        with progress.step("checking the snapshot against the register"):
            snap = coding.result()
    return keep_checks(register, read, suite, snap)


def read_snapshot(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    request: ReleaseRequest,
    snapshot: str | Path | InputSource,
    period: str,
) -> SnapshotRead | InputChecks:
    """The first of the checks of :func:`check_inputs`: the register suite, the period, the
    snapshot's bytes read and not a repeated snapshot; then the snapshot as read, or the
    checks kept from before when this very snapshot was checked with ``register`` last.
    The snapshot's ids are looked up in the register here, once, for the suite and the
    coding (:attr:`SnapshotRead.register_rows`).

    Raises:
        InputError: as :func:`check_inputs`.
    """
    register.check_reads(inputs)
    cfg = series.ws.config
    source = snapshot_source(series.ws, snapshot)
    register_check = register.check()
    published = check_period(series, request, period)
    with progress.step("reading the snapshot"):
        content = source.read_bytes("snapshot", cfg.id_column)
        sha = versions.sha256_bytes(content)
        check_repeated_snapshot(request, source.label, sha, published)
        order, verdict = _order_and_key(cfg, register, period, published, sha)
        kept = register.kept_checks((source.record, verdict))
        if kept is not None:
            return InputChecks([register_check, kept[0]], kept[1], sha)
        # another snapshot: the kept one is let go before this one is read, not after it
        # is checked (two large snapshots' tables and codes need not be held at once)
        register.forget_checks()
        table = read_csv(source.label, "snapshot", content)
        del content
    with progress.step("looking the snapshot's ids up in the register"):
        id_column = inputs.id_column
        rows = register.register.rows_of(table[id_column]) if id_column in table.columns else None
    return SnapshotRead(source, period, table, sha, published, order, verdict, register_check, rows)


def code_snapshot(inputs: DatasetInputs, register: RegisterReader, read: SnapshotRead) -> Snapshot:
    """The snapshot coded against the register (:func:`serialpub.io.inputs.snapshot_from_table`).

    Raises:
        InputError: a QI value that is no leaf of its hierarchy, an id not in the register
            (the suite reports these first when it runs).
    """
    domain = set(inputs.sensitive_domain) if inputs.sensitive_domain is not None else None
    return snapshot_from_table(
        read.table,
        read.source.label,
        inputs.id_column,
        inputs.qis,
        inputs.sensitive,
        register.register,
        inputs.hierarchies,
        domain,
        read.register_rows,
    )


def run_snapshot_suite(series: DatasetSeries, register: RegisterReader, read: SnapshotRead) -> SuiteResult:
    """The snapshot suite on the snapshot as read (:func:`check_snapshot`).

    Raises:
        InputChecksFailed: as :func:`check_snapshot`.
    """
    with progress.step("snapshot suite"):
        return check_snapshot(
            series.ws,
            register,
            read.table,
            read.source.label,
            read.period,
            read.published,
            read.sha256,
            (read.order, read.verdict),
            read.register_rows,
        )


def keep_checks(register: RegisterReader, read: SnapshotRead, suite: SuiteResult, snap: Snapshot) -> InputChecks:
    """The checks of a snapshot that passed them, kept by ``register`` for the next check of
    the same snapshot (:meth:`RegisterReader.keep_checks`)."""
    register.keep_checks((read.source.record, read.verdict), suite, snap)
    return InputChecks([read.register_check, suite], snap, read.sha256)


def _order_and_key(
    cfg: Config, register: RegisterReader, period: str, published: list[PublishedRelease], sha: str | None
) -> tuple[PeriodOrder, str]:
    """Where the snapshot stands in the series, and the key of its suite's verdict
    (:func:`serialpub.io.verdict_cache.verdict_key`)."""
    bounds = cfg.validation.min_snapshot_rows_ratio, cfg.validation.max_snapshot_rows_ratio
    previous_rows = published[-1].params.snapshot_rows if published else None
    order = PeriodOrder(
        period,
        published[-1].period if published else None,
        previous_rows if bounds != (None, None) else None,
        (bounds[0] or 0.0, bounds[1] if bounds[1] is not None else float("inf")),
    )
    cols = register.inputs.columns
    key = verdict_cache.verdict_key(
        register=register.cache_key,
        snapshot=sha,
        order=dataclasses.asdict(order),
        id_column=cols.id_column,
        qis=list(cols.qis),
        sensitive=cols.sensitive,
        domain=None if cols.sensitive_domain is None else sorted(map(str, cols.sensitive_domain)),
    )
    return order, key


def check_snapshot(
    ws: Workspace,
    register: RegisterReader,
    table: pd.DataFrame,
    path: Path | str,
    period: str,
    published: list[PublishedRelease],
    sha: str | None = None,
    order_and_key: tuple[PeriodOrder, str] | None = None,
    register_rows: npt.NDArray[np.int64] | None = None,
) -> SuiteResult:
    """Run the snapshot input suite (checks.input_suites.snapshot_suite) on a snapshot as
    read: columns, text without blanks, unique ids in the register, QI values leaves of
    their hierarchies, sensitive values in their domain, the period after the last
    published one, the row count within the configured multiples of the previous
    snapshot's (recorded with each release; a release without it, e.g. an imported
    one, skips that expectation).

    With ``sha`` (the snapshot's sha256) a verdict that passed on the same inputs before
    is read from the workspace's cache instead (:mod:`serialpub.io.verdict_cache`): the
    later tasks of an Airflow run check the snapshot their first task checked.
    ``order_and_key``: :func:`_order_and_key` of these arguments, when the caller has it.
    ``register_rows``: the register row of every line (:attr:`SnapshotRead.register_rows`),
    when the caller has looked the ids up; the suite then reads them instead of looking
    the ids up again.

    Raises:
        InputChecksFailed: naming the file; one line per failed expectation with the
            file lines of the first unexpected values.
    """
    order, key = order_and_key or _order_and_key(ws.config, register, period, published, sha)
    cols = register.inputs.columns
    cached = verdict_cache.load(ws.root, key) if sha is not None else None
    if cached is not None:
        return SuiteResult(**cached)
    coded = register.register
    outcome = snapshot_suite(
        by_file_line(table),
        cols,
        coded.ids,
        order,
        row_label="line",
        id_lookup=coded.id_lookup,
        register_rows=register_rows,
    )
    if outcome.success and sha is not None:
        verdict_cache.save(ws.root, key, dataclasses.asdict(outcome))
    if not outcome.success:
        raise InputChecksFailed(
            f"{path}: the snapshot failed its input checks (suite 'snapshot'); nothing was published and "
            "the state did not move",
            _with_spelling_hints(cols, outcome.failures, table),
        )
    return outcome


def _with_spelling_hints(cols: DatasetColumns, failures: list[str], table: pd.DataFrame) -> list[str]:
    """The suite's failure lines, the sensitive domain's line extended with the nearest
    allowed spelling of every value outside it that has one, with its first file line (the
    suite names the values, not the fix; a value with no close spelling is left to the
    suite's examples, so a long cell is not quoted twice)."""
    sensitive = cols.sensitive
    if cols.sensitive_domain is None or sensitive is None or sensitive not in table.columns:
        return failures
    domain = list(cols.sensitive_domain)
    values = table[sensitive].astype(str)
    outside = values[~values.isin(domain) & (values.str.strip() != "")]
    hints = []
    for value, position in zip(*np.unique(outside.to_numpy(), return_index=True), strict=True):
        near = nearest_spelling(str(value), domain)
        if near is not None:
            line = int(outside.index[position]) + 2  # header is line 1
            hints.append(f"{quoted(value)} (line {line}): did you mean {near!r}?")
    if not hints:
        return failures
    shown = "; ".join(hints[:10]) + (f"; ... {len(hints) - 10} more" if len(hints) > 10 else "")
    domain_line = f"sensitive attribute {sensitive!r} is in its declared domain"
    return [f"{f}; nearest allowed spellings: {shown}" if domain_line in f else f for f in failures]
