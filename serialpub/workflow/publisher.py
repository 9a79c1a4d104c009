"""Publishing the releases of one workspace (docs/design.md section 6): the entry point
the command line, the DAG's tasks and the benchmarks call.

A :class:`Publisher` holds four values and hands each step the ones it reads:

- :class:`~serialpub.workflow.dataset_series.DatasetSeries`: the configuration, the state
  store, the staging folders and the signing key;
- :class:`~serialpub.workflow.dataset_inputs.DatasetInputs`: the dataset's small inputs,
  frozen (QI hierarchies, sensitive domain, protected values, privacy parameters);
- :class:`~serialpub.workflow.register_reader.RegisterReader`: the register, read on first
  use (approving, publishing and closing never read it);
- :class:`~serialpub.workflow.request.ReleaseRequest`: what the operator asked of this run.

Each step lives in its own module:

- :mod:`~serialpub.workflow.input_checks`: the period, the register and snapshot suites;
- :mod:`~serialpub.workflow.drafting`: anonymize and stage a draft;
- :mod:`~serialpub.workflow.validating`: the release suites, the evidence and the report;
- :mod:`~serialpub.workflow.sign_off`: approve, reject, close (no register read);
- :mod:`~serialpub.workflow.publishing`: publish the approved release, recover
  interrupted publications (no register read).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

import pandas as pd

from anonymizer import overlap
from anonymizer.hierarchy import Hierarchy
from anonymizer.release import PrivacyParams, ReleaseResult
from checks.gx import SuiteResult
from serialpub.config import Workspace
from serialpub.errors import InputError
from serialpub.io import register_cache
from serialpub.io.inputs import Register, Snapshot
from serialpub.io.statistics_file import StatisticsFile
from serialpub.report.render import read_presence_shown
from serialpub.workflow import drafting, input_checks, progress, publishing, sign_off, validating
from serialpub.workflow.baseline import series_report as baseline_report
from serialpub.workflow.dataset_inputs import input_stamp, read_dataset_inputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.drafting import ReleaseOutcome, StagedRelease
from serialpub.workflow.input_checks import InputChecks
from serialpub.workflow.measuring import QUERY_COUNT, QUERY_DIMENSIONS, QUERY_SELECTIVITY
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.request import ReleaseRequest
from serialpub.workflow.sign_off import AUTO_APPROVER, reject_release
from serialpub.workflow.validating import ApprovalFacts
from state.store import PublishedRelease, SignOffRecord, StateStore

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = [
    "AUTO_APPROVER",
    "QUERY_COUNT",
    "QUERY_DIMENSIONS",
    "QUERY_SELECTIVITY",
    "Publisher",
    "ReleaseOutcome",
    "StagedRelease",
    "reject_release",
]


P = ParamSpec("P")
T = TypeVar("T")


class _Configured(Protocol):
    """What :func:`_as_configured` reads of the object whose step it wraps."""

    @property
    def ws(self) -> Workspace: ...


C = TypeVar("C", bound=_Configured)


def _as_configured(step: Callable[Concatenate[C, P], T]) -> Callable[Concatenate[C, P], T]:
    """The step with the workspace's ``sequential`` setting in force (:func:`anonymizer.overlap.in_turn`;
    the environment's ``SERIALPUB_SEQUENTIAL`` overrides it)."""

    @functools.wraps(step)
    def run(self: C, /, *args: P.args, **kwargs: P.kwargs) -> T:
        with overlap.in_turn(self.ws.config.sequential):
            return step(self, *args, **kwargs)

    return run


class Publisher:
    """Publishes the releases of one workspace's dataset, in order.

    Args:
        ws: the workspace.
        cache_writes: the register cache entries its register reader writes beside its
            releases (default: its own).
        request: what the operator asked of the releases it prepares (default: nothing).

    Raises (when made):
        InputError: as :func:`serialpub.workflow.dataset_inputs.read_dataset_inputs`.
    """

    def __init__(
        self, ws: Workspace, cache_writes: register_cache.Writes | None = None, request: ReleaseRequest | None = None
    ) -> None:
        self._stamp = input_stamp(ws)
        #: the dataset's small inputs, frozen; read again when their files change (refresh_inputs).
        #: Read before the state database is opened: bad input leaves no trace, not even a new
        #: database file
        self.inputs = read_dataset_inputs(ws)
        self.series = DatasetSeries(ws)
        self.request = request if request is not None else ReleaseRequest()
        self.cache_writes = cache_writes if cache_writes is not None else register_cache.Writes()
        self.register_reader = RegisterReader(ws, self.inputs, self.cache_writes)

    def refresh_inputs(self) -> None:
        """Forget what was read of the register and the hierarchies if their files changed
        since (a register of a new period in the same process, as the demo does; docs/design.md
        section 10). A publisher made for one step reads them fresh anyway.

        Raises:
            InputError: as on construction, for the changed hierarchy files.
        """
        stamp = input_stamp(self.ws)
        if stamp != self._stamp:
            self._stamp = stamp
            self.inputs = read_dataset_inputs(self.ws)
            self.register_reader = RegisterReader(self.ws, self.inputs, self.cache_writes)

    # -- in one go -------------------------------------------------------------------------
    @_as_configured
    def publish(self, snapshot_path: str | Path, period: str | None = None) -> ReleaseOutcome:
        """Publish the next release from a snapshot in one go: :meth:`prepare`, automatic
        sign-off, :meth:`finish`. Only for workspaces whose configuration allows automatic
        approval (``sign_off.auto_approve``, test and demo environments); elsewhere a person
        signs off between :meth:`prepare` and :meth:`finish`.

        Args:
            snapshot_path: the id, QI and sensitive columns: a .csv or .parquet file, or
                ``sql:TABLE`` / ``sql:SELECT ...`` (:mod:`serialpub.io.sources`).
            period: label of the period; defaults to the file name's last ``-`` part
                (``snapshot-0007.csv`` gives ``0007``). Labels must sort chronologically.

        Raises:
            InputError: bad input (``InputChecksFailed`` for a failed input suite), a period
                already published or not later than the last, a requirement no partition
                meets, or a configuration without automatic approval.
            ValidationFailed: the draft failed a release suite (it is recorded as failed).
            StateError: another release of the dataset is being prepared.
            In every case nothing is published and the statistics file does not move.
        """
        started = time.perf_counter()
        if not self.ws.config.sign_off.auto_approve:
            raise InputError(
                f"{self.ws.root / 'serialpub.yaml'}: releases of {self.ws.config.dataset!r} need a sign-off; "
                "use 'serialpub release' (it stops at the sign-off gate) and 'serialpub approve', or set "
                "sign_off.auto_approve: true in a test environment"
            )
        draft = self.prepare(snapshot_path, period)
        self.auto_approve(draft.seq)
        self.finish(draft.seq)
        return replace(draft.outcome, seconds=time.perf_counter() - started)

    @_as_configured
    def prepare(self, snapshot_path: str | Path, period: str | None = None, owner: str | None = None) -> StagedRelease:
        """Draft and validate the next release: :func:`serialpub.workflow.drafting.draft`
        then :func:`serialpub.workflow.validating.validate`, on the same series, inputs and
        register reader (read again first if their files changed, :meth:`refresh_inputs`).
        The release is left ``validated`` and staged, waiting for its sign-off.

        Args:
            owner: who holds the release once staged (default: this process, so that
                recovery fails it if the process ends); give e.g. ``"awaiting sign-off"``
                to let it outlive the process.
        """
        self.refresh_inputs()  # the register of this period may differ from the last one read
        # the values each step reads, named here: a reader of the release follows them from
        # the command into the draft and on to the anonymizer
        series, inputs, register = self.series, self.inputs, self.register_reader
        staged = drafting.draft(series, inputs, register, self.request, snapshot_path, period, owner)
        validating.validate(series, inputs, register, staged.seq)
        # the figure the release report recorded, so that the release table shows it too
        shown = read_presence_shown(staged.staging)
        absent = shown.in_no_region if shown is not None else None
        return replace(staged, outcome=replace(staged.outcome, shown_absent=absent))

    # -- the steps (see their modules) -----------------------------------------------------
    def recover(self) -> None:
        """:func:`serialpub.workflow.publishing.recover` (arguments, errors)."""
        publishing.recover(self.series)

    def check_period(self, period: str) -> list[PublishedRelease]:
        """:func:`serialpub.workflow.input_checks.check_period` (arguments, errors)."""
        return input_checks.check_period(self.series, self.request, period)

    check_period_label = staticmethod(input_checks.check_period_label)

    @_as_configured
    def check_inputs(self, snapshot_path: str | Path, period: str) -> InputChecks:
        """:func:`serialpub.workflow.input_checks.check_inputs` (arguments, errors)."""
        return input_checks.check_inputs(
            self.series, self.inputs, self.register_reader, self.request, snapshot_path, period
        )

    @_as_configured
    def draft(self, snapshot_path: str | Path, period: str | None = None, owner: str | None = None) -> StagedRelease:
        """:func:`serialpub.workflow.drafting.draft` (arguments, errors), with the inputs
        read again if their files changed (:meth:`refresh_inputs`)."""
        self.refresh_inputs()  # the register of this period may differ from the last one read
        return drafting.draft(
            self.series, self.inputs, self.register_reader, self.request, snapshot_path, period, owner
        )

    def series_report(self, baseline: bool = True, png_dir: Path | None = None) -> Path:
        """:func:`serialpub.workflow.baseline.series_report` (arguments, errors)."""
        return baseline_report(self.series, self.inputs, self.register_reader, baseline, png_dir)

    @_as_configured
    def validate(self, seq: int) -> list[SuiteResult]:
        """:func:`serialpub.workflow.validating.validate` (arguments, errors)."""
        return validating.validate(self.series, self.inputs, self.register_reader, seq)

    @_as_configured
    def report(self, seq: int) -> ApprovalFacts:
        """:func:`serialpub.workflow.validating.summary` (arguments, errors)."""
        return validating.summary(self.series, seq)

    @_as_configured
    def report_page(self, seq: int) -> Path:
        """:func:`serialpub.workflow.validating.report_page` (arguments, errors)."""
        return validating.report_page(self.series, seq)

    def approve(
        self, seq: int, approver: str, comment: str, report_sha256: str | None = None, automatic: bool = False
    ) -> SignOffRecord:
        """:func:`serialpub.workflow.sign_off.approve` (arguments, errors)."""
        return sign_off.approve(self.series, seq, approver, comment, report_sha256, automatic)

    def auto_approve(self, seq: int) -> SignOffRecord:
        """:func:`serialpub.workflow.sign_off.auto_approve` (arguments, errors)."""
        return sign_off.auto_approve(self.series, seq)

    @_as_configured
    def finish(self, seq: int) -> Path:
        """:func:`serialpub.workflow.publishing.finish` (arguments, errors)."""
        with progress.step("publishing"):
            return publishing.finish(self.series, seq)

    def close(self, seq: int, reason: str) -> None:
        """:func:`serialpub.workflow.sign_off.close` (arguments, errors)."""
        sign_off.close(self.series, seq, reason)

    # -- what the steps read, for callers outside the workflow (the planner, the benchmarks) --
    @property
    def ws(self) -> Workspace:
        return self.series.ws

    @property
    def store(self) -> StateStore:
        return self.series.store

    @property
    def signing_key(self) -> Ed25519PrivateKey | None:
        """:attr:`DatasetSeries.signing_key` (errors)."""
        return self.series.signing_key

    @property
    def qis(self) -> list[str]:
        return self.inputs.qis

    @property
    def hierarchies(self) -> dict[str, Hierarchy]:
        return self.inputs.hierarchies

    @property
    def numeric(self) -> list[str]:
        return self.inputs.numeric

    @property
    def sensitive_domain(self) -> list[str] | None:
        return self.inputs.sensitive_domain

    @property
    def protected(self) -> list[str]:
        return self.inputs.protected

    @property
    def params(self) -> PrivacyParams:
        return self.inputs.params

    @property
    def register(self) -> Register:
        """:attr:`RegisterReader.register` (errors)."""
        return self.register_reader.register

    @property
    def statistics(self) -> StatisticsFile:
        return self.register_reader.statistics

    @property
    def search_hierarchies(self) -> list[Hierarchy]:
        """:meth:`RegisterReader.search_hierarchies` of the configuration's algorithm."""
        return self.register_reader.search_hierarchies()

    def hierarchies_for_search(self, algorithm: str, numeric: Sequence[str]) -> list[Hierarchy]:
        """:meth:`RegisterReader.search_hierarchies`."""
        return self.register_reader.search_hierarchies(algorithm, numeric)

    def read_hierarchies(self, table: pd.DataFrame) -> dict[str, Hierarchy]:
        """:meth:`DatasetInputs.read_hierarchies`."""
        return self.inputs.read_hierarchies(table)

    def published_table(
        self, snap: Snapshot, result: ReleaseResult, hierarchies: Sequence[Hierarchy] | None = None
    ) -> pd.DataFrame:
        """:func:`serialpub.workflow.drafting.published_table`, by default with the search's
        hierarchies (arguments, errors)."""
        hierarchies = self.search_hierarchies if hierarchies is None else hierarchies
        return drafting.published_table(self.inputs, snap, result, hierarchies)
