"""Publishing the releases of one workspace (docs/design.md section 6): the entry point
the command line, the DAG's tasks and the benchmarks call.

:class:`Publisher` is a :class:`~serialpub.workflow.context.ReleaseContext` (what every
step reads, the register only on first use) with the steps as methods. Each step lives
in its own module and reads only what it needs:

- :mod:`~serialpub.workflow.input_checks`: the period, the register and snapshot suites;
- :mod:`~serialpub.workflow.drafting`: anonymize and stage a draft;
- :mod:`~serialpub.workflow.validating`: the release suites, the evidence and the report;
- :mod:`~serialpub.workflow.sign_off`: approve, reject, close (no register read);
- :mod:`~serialpub.workflow.publishing`: publish the approved release, recover
  interrupted publications (no register read).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.release import ReleaseResult
from checks.gx import SuiteResult
from serialpub.errors import InputError
from serialpub.io.inputs import Snapshot
from serialpub.workflow import drafting, input_checks, progress, publishing, sign_off, validating
from serialpub.workflow.context import InputChecks, ReleaseContext
from serialpub.workflow.drafting import (
    QUERY_COUNT,
    QUERY_DIMENSIONS,
    QUERY_SELECTIVITY,
    ReleaseOutcome,
    StagedRelease,
)
from serialpub.workflow.sign_off import AUTO_APPROVER, reject_release
from serialpub.workflow.validating import ApprovalFacts
from state.store import PublishedRelease, SignOffRecord

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


class Publisher(ReleaseContext):
    """Publishes the releases of one workspace's dataset, in order."""

    # -- in one go -------------------------------------------------------------------------
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

    def prepare(self, snapshot_path: str | Path, period: str | None = None, owner: str | None = None) -> StagedRelease:
        """Draft and validate the next release: :meth:`draft` then :meth:`validate`. The
        release is left ``validated`` and staged, waiting for its sign-off.

        Args:
            owner: who holds the release once staged (default: this process, so that
                recovery fails it if the process ends); give e.g. ``"awaiting sign-off"``
                to let it outlive the process.
        """
        staged = self.draft(snapshot_path, period, owner)
        self.validate(staged.seq)
        return staged

    # -- the steps (see their modules) -----------------------------------------------------
    def recover(self) -> None:
        """:func:`serialpub.workflow.publishing.recover` (arguments, errors)."""
        publishing.recover(self)

    def check_period(self, period: str) -> list[PublishedRelease]:
        """:func:`serialpub.workflow.input_checks.check_period` (arguments, errors)."""
        return input_checks.check_period(self, period)

    check_period_label = staticmethod(input_checks.check_period_label)

    def check_inputs(self, snapshot_path: str | Path, period: str) -> InputChecks:
        """:func:`serialpub.workflow.input_checks.check_inputs` (arguments, errors)."""
        return input_checks.check_inputs(self, snapshot_path, period)

    def draft(self, snapshot_path: str | Path, period: str | None = None, owner: str | None = None) -> StagedRelease:
        """:func:`serialpub.workflow.drafting.draft` (arguments, errors)."""
        return drafting.draft(self, snapshot_path, period, owner)

    def validate(self, seq: int) -> list[SuiteResult]:
        """:func:`serialpub.workflow.validating.validate` (arguments, errors)."""
        return validating.validate(self, seq)

    def report(self, seq: int) -> ApprovalFacts:
        """:func:`serialpub.workflow.validating.summary` (arguments, errors)."""
        return validating.summary(self, seq)

    def report_page(self, seq: int) -> Path:
        """:func:`serialpub.workflow.validating.report_page` (arguments, errors)."""
        return validating.report_page(self, seq)

    def approve(
        self, seq: int, approver: str, comment: str, report_sha256: str | None = None, automatic: bool = False
    ) -> SignOffRecord:
        """:func:`serialpub.workflow.sign_off.approve` (arguments, errors)."""
        return sign_off.approve(self, seq, approver, comment, report_sha256, automatic)

    def auto_approve(self, seq: int) -> SignOffRecord:
        """:func:`serialpub.workflow.sign_off.auto_approve` (arguments, errors)."""
        return sign_off.auto_approve(self, seq)

    def finish(self, seq: int) -> Path:
        """:func:`serialpub.workflow.publishing.finish` (arguments, errors)."""
        with progress.step("publishing"):
            return publishing.finish(self, seq)

    def close(self, seq: int, reason: str) -> None:
        """:func:`serialpub.workflow.sign_off.close` (arguments, errors)."""
        sign_off.close(self, seq, reason)

    def published_table(
        self, snap: Snapshot, result: ReleaseResult, hierarchies: Sequence[Hierarchy] | None = None
    ) -> pd.DataFrame:
        """:func:`serialpub.workflow.drafting.published_table` (arguments, errors)."""
        return drafting.published_table(self, snap, result, hierarchies)
