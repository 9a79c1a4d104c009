"""Publishing one release of a workspace: the pipeline step the command line and the
DAGs call (docs/design.md section 6).

``Publisher`` loads the register and hierarchies once (a series of releases reuses them),
then for each snapshot: recover interrupted publications, check ordering, read and check
the snapshot, load the state, anonymize, measure, write the release into staging, commit
the state, move the release into place.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer import privacy
from anonymizer.bottomup import InfeasibleError
from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import quantile_hierarchy, release_hierarchies
from anonymizer.measures import Measure
from anonymizer.queries import average_relative_error
from anonymizer.release import History, PrivacyParams, ReleaseResult, anonymize_history
from checks.evidence import HTML_FILE, write_evidence
from checks.gx import SuiteResult
from checks.input_suites import register_suite, snapshot_suite
from checks.release_suites import release_suite
from serialpub import release_files
from serialpub.config import Workspace
from serialpub.errors import InputChecksFailed, InputError, ValidationFailed
from serialpub.faults import checkpoint
from serialpub.hierarchies import nearest_spelling, read_domain, read_hierarchies, read_hierarchy, spelling_hint
from serialpub.inputs import Register, Snapshot, read_csv, register_from_table, snapshot_from_table
from serialpub.report.privacy import PrivacyInputs, privacy_figures
from serialpub.report.render import HTML_FILE as REPORT_FILE
from serialpub.report.render import measure_records, write_release_report
from serialpub.report.utility import utility_measures
from serialpub.statistics_file import StatisticsFile
from state.store import (
    OpenRelease,
    PublishedRelease,
    SignOffRecord,
    StateError,
    StateStore,
    open_engine,
    owner_is_gone,
    this_process,
)

#: what a period label may look like (labels are compared as strings, so they must sort
#: chronologically: 2025-H1 < 2025-H2 < 2026-H1)
PERIOD_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}"

QUERY_COUNT = 5000
QUERY_DIMENSIONS = 3
QUERY_SELECTIVITY = 0.05


@dataclass(frozen=True)
class ReleaseOutcome:
    """Figures of one published release (the demo prints one row per release)."""

    seq: int
    period: str
    directory: Path
    records: int
    groups: int
    suppressed: int
    avg_candidates: float
    max_candidates: int
    avg_records: float
    max_records: int
    max_breach: float
    query_error: float
    seconds: float
    seconds_anonymize: float  # anonymization and the state update it computes
    seconds_state: float  # loading and committing the state


#: the approver recorded for an automatic sign-off (``sign_off.auto_approve``)
AUTO_APPROVER = "automatic approval (sign_off.auto_approve)"


@dataclass(frozen=True)
class InputChecks:
    """What :meth:`Publisher.check_inputs` found: the register and snapshot suites'
    results, the checked snapshot and the snapshot file's sha256."""

    suites: list[SuiteResult]
    snapshot: Snapshot
    sha256: str


@dataclass(frozen=True)
class StagedRelease:
    """A drafted release in its staging folder, not yet published.

    Attributes:
        id: its release row; seq, period: its number and period label.
        staging: the staging folder (data.parquet, manifest.json, then the evidence).
        outcome: its figures, as the demo prints them once published.
    """

    id: int
    seq: int
    period: str
    staging: Path
    outcome: ReleaseOutcome


class Publisher:
    """Publishes the releases of one workspace's dataset, in order."""

    def __init__(self, ws: Workspace) -> None:
        cfg = ws.config
        self.ws = ws
        self.qis = cfg.quasi_identifiers
        self.hierarchies = read_hierarchies(ws.hierarchy_dir, self.qis)
        self.numeric = list(cfg.numeric)
        for q in self.numeric:
            if not self.hierarchies[q].numeric:
                raise InputError(
                    f"{ws.root / 'serialpub.yaml'}: setting 'numeric' lists {q!r}, but some leaves of "
                    f"{ws.hierarchy_dir / f'{q}.csv'} are not numbers; remove {q!r} from 'numeric'"
                )
        self._search_hierarchies: dict[tuple[str, tuple[str, ...]], list[Hierarchy]] = {}
        sens_path = ws.hierarchy_dir / f"{cfg.sensitive}.csv"
        self.sensitive_domain: list[str] | None = None
        self.sensitive_hierarchy: Hierarchy | None = None
        domain_source = str(sens_path)
        if sens_path.exists():
            self.sensitive_hierarchy = read_hierarchy(sens_path, cfg.sensitive)
            self.sensitive_domain = list(self.sensitive_hierarchy.leaves)
            domain_source = f"leaves of {sens_path}"
        elif cfg.sensitive_domain_file is not None:
            domain_path = ws.path(cfg.sensitive_domain_file)
            self.sensitive_domain = read_domain(domain_path)
            domain_source = str(domain_path)
        if self.sensitive_domain is None:
            # without the domain a value spelled another way ('HIV ' for 'hiv') would pass as
            # unprotected and be published as it is (docs/threat-model.md)
            raise InputError(
                f"{ws.root / 'serialpub.yaml'}: protecting values of {cfg.sensitive!r} needs its domain; add "
                f"{sens_path} (its hierarchy) or set sensitive_domain: to a file with one value per line"
            )
        if cfg.protected_values == "all":
            self.protected = list(self.sensitive_domain)
        else:
            self.protected = list(dict.fromkeys(cfg.protected_values))
            unknown = [v for v in self.protected if v not in self.sensitive_domain]
            if unknown:
                hints = ", ".join(f"{v!r}{spelling_hint(v, self.sensitive_domain)}" for v in unknown)
                raise InputError(
                    f"{ws.root / 'serialpub.yaml'}: setting 'protected_values': {hints} not in the domain of "
                    f"{cfg.sensitive!r} ({domain_source}); use the domain's spelling"
                )
        for name, values in (cfg.report.categories or {}).items():
            unknown = [v for v in values if self.sensitive_domain is not None and v not in self.sensitive_domain]
            if unknown:
                raise InputError(
                    f"{ws.root / 'serialpub.yaml'}: report.categories.{name} names {', '.join(map(repr, unknown))}, "
                    f"not value(s) of {cfg.sensitive!r} (leaves of {sens_path}); fix the category or remove it"
                )
        self.params = PrivacyParams(
            ell=cfg.ell,
            strategy=cfg.strategy,
            k_prime=cfg.k_prime if cfg.strategy == "constant" else None,
            alpha=cfg.alpha if cfg.strategy == "geometric" else None,
            guarantee=cfg.guarantee,
            suppression_model=cfg.suppression_model,
            algorithm=cfg.algorithm,
            after_k_prime=cfg.after_k_prime,
        )
        self.hierarchy_sources = {q: str(ws.hierarchy_dir / f"{q}.csv") for q in self.qis}
        # the register is read when a step first needs it: drafting and validating do;
        # approving, publishing and closing a release do not (a 5M-person register takes
        # seconds to read, parse and hash on every Airflow task). The register suite runs
        # before the first check of a snapshot, once per Publisher; its result is evidence
        # of every release.
        self._register_table: pd.DataFrame | None = None
        self._register_check: SuiteResult | None = None
        self._last_checked: tuple[tuple[str, str, str], InputChecks] | None = None
        self.store = StateStore(open_engine(ws.database_url))

    def _register_rows(self) -> pd.DataFrame:
        """The register file as read, kept until both the register and its suite are built."""
        if self._register_table is None:
            self._register_table = read_csv(self.ws.register_path, "population register")
        return self._register_table

    @cached_property
    def register(self) -> Register:
        """The population register, integer-coded (read on first use).

        Raises:
            InputChecksFailed: the register fails its input suite (every problem named).
            InputError: the register cannot be read or coded.
        """
        cfg = self.ws.config
        try:
            register = register_from_table(
                self._register_rows(), self.ws.register_path, cfg.id_column, self.qis, self.hierarchies
            )
        except InputError:
            self.check_register()  # the suite's report names every problem, not just the first
            raise
        if self._register_check is not None:
            self._register_table = None
        return register

    @cached_property
    def file_sums(self) -> dict[str, Any]:
        """sha256 of the register and of each QI's hierarchy file, as manifests record them."""
        return {
            "register": release_files.sha256_file(self.ws.register_path),
            "hierarchies": {q: release_files.sha256_file(self.ws.hierarchy_dir / f"{q}.csv") for q in self.qis},
        }

    @cached_property
    def statistics(self) -> StatisticsFile:
        """The statistics file's codec for this register (read on first use)."""
        return StatisticsFile(self.register, self.protected, self.file_sums["register"])

    @property
    def search_hierarchies(self) -> list[Hierarchy]:
        """The hierarchy per QI (in ``qis`` order) this workspace's search generalizes along
        and its drafts' labels come from (:meth:`hierarchies_for_search` of the configuration)."""
        return self.hierarchies_for_search(self.ws.config.algorithm, self.numeric)

    def hierarchies_for_search(self, algorithm: str, numeric: Sequence[str]) -> list[Hierarchy]:
        """Per QI (in ``qis`` order): under the top-down search, a QI of ``numeric`` gets the
        binary interval hierarchy halved at the register's medians
        (:func:`anonymizer.intervals.quantile_hierarchy`); every other QI, and every QI under
        the bottom-up search, its declared hierarchy. Computed once per (algorithm, numeric)."""
        key = (algorithm, tuple(q for q in self.qis if q in numeric))
        if key not in self._search_hierarchies:
            hs = [self.hierarchies[q] for q in self.qis]
            if algorithm == "topdown":
                for a, q in enumerate(self.qis):
                    if q in key[1]:
                        weights = np.bincount(self.register.keys[:, a], minlength=hs[a].n_leaves)
                        hs[a] = quantile_hierarchy(hs[a], weights)
            self._search_hierarchies[key] = hs
        return self._search_hierarchies[key]

    def read_hierarchies(self, table: pd.DataFrame) -> dict[str, Hierarchy]:
        """The hierarchies a release table of this dataset is read with (its intervals as
        nodes, :func:`anonymizer.intervals.release_hierarchies`)."""
        return release_hierarchies(self.hierarchies, self.numeric, table)

    # -- one release ---------------------------------------------------------------------
    def recover(self) -> None:
        """Settle what interrupted runs left: a draft whose process has ended is closed as
        failed, then staging folders are rolled forward or removed (serialpub.release_files)."""
        dataset = self.ws.config.dataset
        # list staging folders before reading the state: a draft is committed before its
        # folder is written, so each listed folder's release is in what is read next
        staged = release_files.staging_folders(self.ws.dataset_dir)
        current = self.store.open_release(dataset)
        if current is not None and owner_is_gone(current.owner):
            self.store.fail(current.id, f"the process that opened it ({current.owner}) has ended", this_process())
            current = None
        published = self.store.published(dataset)
        release_files.recover(
            self.ws.dataset_dir, {r.id: r.seq for r in published}, {current.id} if current else set(), staged
        )
        self._check_published_files(published)

    def check_period(self, period: str) -> list[PublishedRelease]:
        """The published releases, after checking that ``period`` can come next: not
        published yet and later than the last (labels must sort chronologically).
        ``StateStore.begin_draft`` checks the same under its lock; this gives the user's
        error before any work.

        Raises:
            InputError: the period label is malformed (:data:`PERIOD_PATTERN`), already
                published or not later than the last.
        """
        self.check_period_label(period)
        published = self.store.published(self.ws.config.dataset)
        if any(r.period == period for r in published):
            raise InputError(f"period {period!r} of dataset {self.ws.config.dataset!r} is already published")
        if published and period <= published[-1].period:
            raise InputError(
                f"period {period!r} is not later than the last published period {published[-1].period!r}; "
                "releases are published in chronological order"
            )
        return published

    def check_register(self) -> SuiteResult:
        """The register input suite's result (run on first use).

        Raises:
            InputChecksFailed: naming the register file; one line per failed expectation.
        """
        if self._register_check is None:
            cfg = self.ws.config
            self._register_check = register_suite(
                by_file_line(self._register_rows()), cfg.id_column, self.qis, self.hierarchies,
                self.hierarchy_sources, row_label="line",
            )  # fmt: skip
            if "register" in self.__dict__:  # built already: the rows are no longer needed
                self._register_table = None
        if not self._register_check.success:
            raise InputChecksFailed(
                f"{self.ws.register_path}: the population register failed its input checks (suite 'register'); "
                "nothing was published and the state did not move",
                self._register_check.failures,
            )
        return self._register_check

    @staticmethod
    def check_period_label(period: str) -> None:
        """Raises InputError when ``period`` does not match :data:`PERIOD_PATTERN`."""
        if not re.fullmatch(PERIOD_PATTERN, period):
            raise InputError(
                f"period {period!r} is malformed: use 1 to 100 letters, digits, '-', '_' or '.', starting with a "
                "letter or digit, that sort chronologically (e.g. 2025-H1, 2025-07, 0007)"
            )

    def check_inputs(self, snapshot_path: Path, period: str) -> InputChecks:
        """Every check of the inputs before a draft: the period, the register suite (run
        once per Publisher), the snapshot suite and the snapshot's QIs against the
        register's. The suite results and the snapshot of the last file checked are kept,
        keyed by its path, sha256 and period, so that validating the draft in the same
        process does not run the snapshot suite a second time.

        Raises:
            InputError (``InputChecksFailed`` for a failed suite): nothing was changed.
        """
        cfg = self.ws.config
        register_check = self.check_register()
        published = self.check_period(period)
        try:
            sha = release_files.sha256_file(snapshot_path)
        except FileNotFoundError:
            raise InputError(f"{snapshot_path}: snapshot file not found") from None
        key = (str(snapshot_path.resolve()), sha, period)
        if self._last_checked is not None and self._last_checked[0] == key:
            return self._last_checked[1]
        table = read_csv(snapshot_path, "snapshot")
        snapshot_check = self.check_snapshot(table, snapshot_path, period, published)
        snap = snapshot_from_table(
            table, snapshot_path, cfg.id_column, self.qis, cfg.sensitive, self.register, self.hierarchies,
            set(self.sensitive_domain) if self.sensitive_domain is not None else None,
        )  # fmt: skip
        checked = InputChecks([register_check, snapshot_check], snap, sha)
        self._last_checked = (key, checked)
        return checked

    def _check_published_files(self, published: list[PublishedRelease]) -> None:
        """Refuse to build on a release store that no longer matches the state: every
        published release folder must exist and its data.parquet and manifest.json must
        have the checksums the state recorded when it was published.

        Raises:
            StateError: naming the release and the file, before anything is changed.
        """
        for r in published:
            folder = self.ws.dataset_dir / release_files.release_name(r.seq)
            if not folder.exists() and (self.ws.dataset_dir / release_files.staging_name(r.seq, r.id)).is_dir():
                # committed by another process whose rename is still on its way: finish it
                release_files.move_into_place(self.ws.dataset_dir, r.seq, r.id)
            for name, expected in ((release_files.DATA_FILE, r.data_sha256),
                                   (release_files.MANIFEST_FILE, r.manifest_sha256)):
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

    # -- the steps -------------------------------------------------------------------------
    def publish(self, snapshot_path: Path, period: str | None = None) -> ReleaseOutcome:
        """Publish the next release from a snapshot in one go: :meth:`prepare`, automatic
        sign-off, :meth:`finish`. Only for workspaces whose configuration allows automatic
        approval (``sign_off.auto_approve``, test and demo environments); elsewhere a person
        signs off between :meth:`prepare` and :meth:`finish`.

        Args:
            snapshot_path: CSV with the id, QI and sensitive columns.
            period: label of the period; defaults to the file name's last ``-`` part
                (``snapshot-0007.csv`` gives ``0007``). Labels must sort chronologically.

        Raises:
            InputError: bad input (``InputChecksFailed`` for a failed input suite), a period
                already published or not later than the last, a requirement the
                suppression budget cannot meet, or a configuration without automatic
                approval.
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

    def prepare(self, snapshot_path: Path, period: str | None = None, owner: str | None = None) -> StagedRelease:
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

    def draft(self, snapshot_path: Path, period: str | None = None, owner: str | None = None) -> StagedRelease:
        """Check the inputs, open the draft, anonymize and stage the release (data and
        manifest in its staging folder; figures, groups and the statistics file after it in
        the state, not counted). The draft is opened only for input that passed its checks,
        so bad input leaves no trace.

        Raises:
            as :meth:`publish`, except ValidationFailed.
        """
        started = time.perf_counter()
        cfg = self.ws.config
        period = period or snapshot_path.stem.rsplit("-", 1)[-1]
        self.recover()
        checked = self.check_inputs(snapshot_path, period)
        snap = checked.snapshot
        published = self.store.published(cfg.dataset)
        checkpoint("after_snapshot")
        params = {
            **self._params_record(),
            "snapshot": str(snapshot_path.resolve()),
            "snapshot_rows": len(snap.individual),
            "snapshot_sha256": checked.sha256,
        }
        draft = self.store.begin_draft(cfg.dataset, period, params, this_process())
        checkpoint("after_draft")
        try:
            return self._stage(draft, snap, snapshot_path, period, published, started, owner)
        except BaseException as exc:
            self._abandon(draft, exc)
            raise

    def validate(self, seq: int) -> list[SuiteResult]:
        """Run the input and release suites on the staged draft ``seq`` and store their
        results with it; it becomes ``validated`` (evidence written into its staging folder,
        the manifest updated) or ``failed`` (staging removed, nothing counted) and
        :class:`ValidationFailed` is raised. Everything is read back from the staging
        folder, the snapshot file and the state, not taken from the anonymizer's memory.
        A release already validated is left as it is (an empty list is returned; its
        results are in the state).

        Raises:
            ValidationFailed: a suite failed.
            StateError: ``seq`` is not the dataset's open draft, or its snapshot file
                changed since the draft was made.
        """
        rel = self._open_release(seq)
        if rel.status != "draft":
            return []
        try:
            return self._validate(rel)
        except ValidationFailed:
            self._remove_staging(rel)  # record_validation already closed it as failed
            raise
        except BaseException as exc:
            self._abandon(rel, exc)
            raise

    def report(self, seq: int) -> dict[str, Any]:
        """What the approver sees for the open release ``seq``: its figures, the verdict of
        every suite, the release report (``report_page``) and its checksum (``report_sha256``,
        stored with the sign-off as what was seen)."""
        rel = self._open_release(seq)
        staging = self._staging_dir(rel)
        manifest = json.loads((staging / release_files.MANIFEST_FILE).read_text(encoding="utf-8"))
        page = staging / HTML_FILE
        report = staging / REPORT_FILE
        return {
            "dataset": self.ws.config.dataset,
            "release": rel.seq,
            "period": rel.period,
            "status": rel.status,
            "records": manifest["records"],
            "groups": manifest["groups"],
            "suppressed": manifest["suppressed"],
            "max_breach_probability": manifest["max_breach_probability"],
            "l": manifest["l"],
            "average_relative_error": manifest["utility"]["average_relative_error"],
            "validation": manifest["validation"],
            "validation_page": str(page) if page.exists() else None,
            "report_page": str(report) if report.exists() else None,
            "report_sha256": release_files.sha256_file(report) if report.exists() else None,
        }

    def report_page(self, seq: int) -> Path:
        """The report of release ``seq``: in its release folder once published, in its
        staging folder while it awaits sign-off.

        Raises:
            InputError: release ``seq`` has no report (not validated yet, imported, failed
                or rejected, or published before reports existed).
        """
        cfg = self.ws.config
        page: Path | None
        if any(r.seq == seq for r in self.store.published(cfg.dataset)):
            page = self.ws.dataset_dir / release_files.release_name(seq) / REPORT_FILE
        else:
            rel = self.store.open_release(cfg.dataset)
            page = self._staging_dir(rel) / REPORT_FILE if rel is not None and rel.seq == seq else None
        if page is None or not page.is_file():
            raise InputError(
                f"release {seq} of {cfg.dataset!r} has no report: reports are written when a release is validated "
                "(imported, failed and rejected releases have none)"
            )
        return page

    def approve(
        self, seq: int, approver: str, comment: str, report_sha256: str | None = None, automatic: bool = False
    ) -> SignOffRecord:
        """Record an approving sign-off of the validated release ``seq``.

        Raises:
            InputError: ``automatic`` without ``sign_off.auto_approve`` in the configuration,
                or an empty approver name.
            StateError: ``seq`` is not the dataset's validated (or approved) release.
        """
        cfg = self.ws.config
        if automatic and not cfg.sign_off.auto_approve:
            raise InputError(f"{self.ws.root / 'serialpub.yaml'}: automatic approval needs sign_off.auto_approve")
        if not approver.strip():
            raise InputError("the approver's name is empty; sign-offs are recorded with who decided")
        if automatic != (approver == AUTO_APPROVER):
            # the manifest tells automatic approvals by this name, so a person cannot take it
            raise InputError(f"the approver's name {approver!r} is reserved for automatic approvals")
        if report_sha256 is None:
            page = self._staging_dir(self._open_release(seq)) / REPORT_FILE
            report_sha256 = release_files.sha256_file(page) if page.exists() else None
        return self.store.approve(cfg.dataset, seq, approver, comment, report_sha256)

    def auto_approve(self, seq: int) -> SignOffRecord:
        """Approve ``seq`` automatically (``sign_off.auto_approve``: test and demo
        environments); the manifest records the sign-off as automatic."""
        return self.approve(seq, AUTO_APPROVER, "sign_off.auto_approve is set in serialpub.yaml", automatic=True)

    def finish(self, seq: int) -> Path:
        """Publish the approved release ``seq``: write its sign-off into the staged
        manifest, commit it in the state, move its folder into place. Running it again
        after it completed, or after a crash between commit and move, finishes the move
        and returns the folder.

        Raises:
            StateError: ``seq`` is neither approved nor published.
        """
        cfg = self.ws.config
        final = self.ws.dataset_dir / release_files.release_name(seq)
        done = [r for r in self.store.published(cfg.dataset) if r.seq == seq]
        if done:
            if not final.is_dir():
                release_files.move_into_place(self.ws.dataset_dir, seq, done[0].id)
            return final
        rel = self._open_release(seq)
        if rel.status != "approved":
            raise StateError(
                f"release {seq} of {cfg.dataset!r} is {rel.status}; it is published only after an approving "
                f"sign-off ('serialpub approve --release {seq} --by NAME')"
            )
        sign_off = self.store.sign_offs(cfg.dataset, seq)[-1]
        staging = self._staging_dir(rel)
        manifest = json.loads((staging / release_files.MANIFEST_FILE).read_text(encoding="utf-8"))
        manifest["sign_off"] = {
            "decision": sign_off.decision,
            "approver": sign_off.approver,
            "comment": sign_off.comment,
            "decided_at": sign_off.decided_at.isoformat(timespec="seconds"),
            "report_sha256": sign_off.report_sha256,
            "automatic": sign_off.approver == AUTO_APPROVER,
        }
        manifest_sha = release_files.write_manifest(staging, manifest)
        checkpoint("before_commit")
        self.store.publish_staged(rel.id, manifest_sha, str(final), this_process())
        checkpoint("after_commit")
        release_files.move_into_place(self.ws.dataset_dir, seq, rel.id)
        checkpoint("after_publish")
        return final

    def close(self, seq: int, reason: str) -> None:
        """End the open release ``seq`` as failed (a run that failed or timed out waiting
        for its sign-off): staging removed, nothing counted."""
        rel = self._open_release(seq)
        self.store.fail(rel.id, reason, this_process())
        self._remove_staging(rel)

    # -- helpers of the steps --------------------------------------------------------------
    def _open_release(self, seq: int) -> OpenRelease:
        current = self.store.open_release(self.ws.config.dataset)
        if current is None or current.seq != seq:
            what = f"release {current.seq} is open" if current else "no release is open"
            raise StateError(f"dataset {self.ws.config.dataset!r} has no open release {seq} ({what})")
        return current

    def _staging_dir(self, rel: OpenRelease) -> Path:
        return self.ws.dataset_dir / release_files.staging_name(rel.seq, rel.id)

    def _remove_staging(self, rel: OpenRelease) -> None:
        shutil.rmtree(self._staging_dir(rel), ignore_errors=True)

    def check_snapshot(
        self, table: pd.DataFrame, path: Path, period: str, published: list[PublishedRelease]
    ) -> SuiteResult:
        """Run the snapshot input suite (checks.input_suites.snapshot_suite) on a snapshot as
        read: columns, text without blanks, unique ids in the register, QI values leaves of
        their hierarchies, sensitive values in their domain, the period after the last
        published one, the row count within the configured multiples of the previous
        snapshot's (recorded with each release; a release without it, e.g. an imported
        one, skips that expectation).

        Raises:
            InputChecksFailed: naming the file; one line per failed expectation with the
                file lines of the first unexpected values.
        """
        cfg = self.ws.config
        bounds = cfg.validation.min_snapshot_rows_ratio, cfg.validation.max_snapshot_rows_ratio
        previous_rows = published[-1].params.get("snapshot_rows") if published else None
        outcome = snapshot_suite(
            by_file_line(table), cfg.id_column, self.qis, cfg.sensitive, self.hierarchies, self.register.ids,
            self.sensitive_domain, period, published[-1].period if published else None,
            previous_rows if bounds != (None, None) else None,
            (bounds[0] or 0.0, bounds[1] if bounds[1] is not None else float("inf")),
            self.hierarchy_sources, row_label="line",
        )  # fmt: skip
        if not outcome.success:
            raise InputChecksFailed(
                f"{path}: the snapshot failed its input checks (suite 'snapshot'); nothing was published and "
                "the state did not move",
                self._with_spelling_hints(outcome.failures, table),
            )
        return outcome

    def _with_spelling_hints(self, failures: list[str], table: pd.DataFrame) -> list[str]:
        """The suite's failure lines, the sensitive domain's line extended with the nearest
        allowed spelling of every value outside it, with its first file line (the suite
        names the values, not the fix)."""
        sensitive = self.ws.config.sensitive
        if self.sensitive_domain is None or sensitive not in table.columns:
            return failures
        values = table[sensitive].astype(str)
        outside = values[~values.isin(self.sensitive_domain) & (values.str.strip() != "")]
        hints = []
        for value, position in zip(*np.unique(outside.to_numpy(), return_index=True), strict=True):
            near = nearest_spelling(str(value), self.sensitive_domain)
            line = int(outside.index[position]) + 2  # header is line 1
            hints.append(f"{value!r} (line {line}): " + (f"did you mean {near!r}?" if near else "no close spelling"))
        if not hints:
            return failures
        shown = "; ".join(hints[:10]) + (f"; ... {len(hints) - 10} more" if len(hints) > 10 else "")
        domain_line = f"sensitive attribute {sensitive!r} is in its declared domain"
        return [f"{f}; nearest allowed spellings: {shown}" if domain_line in f else f for f in failures]

    def _abandon(self, draft: OpenRelease, exc: BaseException) -> None:
        """Close a draft that did not complete, unless its publication was committed (then the
        staging folder is the release and recovery moves it into place)."""
        current = self.store.open_release(self.ws.config.dataset)
        if current is None or current.id != draft.id:
            return  # committed, or closed by someone else: nothing of ours to undo
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.store.fail(draft.id, reason, this_process())
        shutil.rmtree(self.ws.dataset_dir / release_files.staging_name(draft.seq, draft.id), ignore_errors=True)

    def _stage(
        self, draft: OpenRelease, snap: Snapshot, snapshot_path: Path, period: str,
        published: list[PublishedRelease], started: float, owner: str | None,
    ) -> StagedRelease:
        cfg = self.ws.config
        seq = draft.seq
        ell = np.full(len(self.register.ids), float(cfg.ell))
        t_state = time.perf_counter()
        history = self.statistics.load(self.store.latest_statistics(cfg.dataset), ell)
        t_state = time.perf_counter() - t_state
        checkpoint("after_state_load")
        record_set = self._record_sets(snap)
        t_anon = time.perf_counter()
        try:
            result = anonymize_history(
                self.register.keys,
                snap.individual,
                record_set,
                len(self.protected),
                history,
                self.params,
                self.search_hierarchies,
                cfg.dilution == "presence",
                budget=int(np.floor(cfg.suppression_budget * len(snap.individual))),
                seed=seq,
            )
        except InfeasibleError as exc:
            raise InputError(f"{snapshot_path}: cannot publish under ℓ = {cfg.ell:g}: {exc}. "
                             f"{self._infeasible_advice(history)}") from None
        t_anon = time.perf_counter() - t_anon
        checkpoint("after_anonymize")
        table = self.published_table(snap, result)
        try:
            query = average_relative_error(
                snap.table[[*self.qis, cfg.sensitive]],
                table,
                self.read_hierarchies(table),
                cfg.sensitive,
                n_queries=QUERY_COUNT,
                qd=QUERY_DIMENSIONS,
                selectivity=QUERY_SELECTIVITY,
                seed=cfg.query_seed,
            )
        except ValueError:
            query = None  # a draft the measure cannot read fails the contract suite, which names the value
        sensitive_codes = pd.factorize(snap.value)[0].astype(np.int64)  # Π_tv only compares values
        utility = utility_measures(
            result, self.register.keys[snap.individual], self.search_hierarchies, query,
            self._query_settings(), sensitive_codes,
        )  # fmt: skip
        manifest = self._manifest(seq, period, published[-1].seq if published else None, result, query, utility)
        staging = self.ws.dataset_dir / release_files.staging_name(seq, draft.id)
        # the release row names its staging folder, for operators looking at an open draft
        self.store.set_staging(draft.id, str(staging))
        release_files.write_staging(self.ws.dataset_dir, seq, draft.id, table, manifest)
        t_commit = time.perf_counter()
        self.store.stage(
            draft.id,
            {
                "records": int(result.published.sum()),
                "groups": int(result.group_nodes.shape[0]),
                "suppressed": result.suppressed,
                "max_breach": result.max_breach,
                "data_sha256": manifest["sha256"]["data.parquet"],
            },
            self._group_rows(result),
            self.statistics.tables(result.history),
            str(staging),
            owner=owner,
        )
        t_state += time.perf_counter() - t_commit
        cand, recs = result.group_candidates, result.group_records
        outcome = ReleaseOutcome(
            seq=seq,
            period=period,
            directory=self.ws.dataset_dir / release_files.release_name(seq),
            records=int(recs.sum()),
            groups=int(cand.size),
            suppressed=result.suppressed,
            avg_candidates=float(cand.mean()),
            max_candidates=int(cand.max()),
            avg_records=float(recs.mean()),
            max_records=int(recs.max()),
            max_breach=result.max_breach,
            query_error=query.mean if query else float("nan"),
            seconds=time.perf_counter() - started,
            seconds_anonymize=t_anon,
            seconds_state=t_state,
        )
        return StagedRelease(id=draft.id, seq=seq, period=period, staging=staging, outcome=outcome)

    def _validate(self, rel: OpenRelease) -> list[SuiteResult]:
        """The body of :meth:`validate`. Under the localized baseline the global-guarantee
        suite is left out (that baseline exists to show the leak); the manifest says so."""
        cfg = self.ws.config
        staging = self._staging_dir(rel)
        manifest, table = release_files.read_release(staging)
        path = Path(rel.params["snapshot"])
        checked = self.check_inputs(path, rel.period) if path.is_file() else None
        if checked is None or checked.sha256 != rel.params.get("snapshot_sha256"):
            raise StateError(
                f"{path}: the snapshot of release {rel.seq} changed or disappeared after the release was drafted; "
                f"end it with 'serialpub reject --release {rel.seq}' and prepare it again"
            )
        register_check, snapshot_check = checked.suites
        snap = checked.snapshot
        history = self.statistics.load(
            self.store.latest_statistics(cfg.dataset), np.full(len(self.register.ids), float(cfg.ell))
        )
        presence = cfg.dilution == "presence"
        thresholds = cfg.validation.model_dump()
        if thresholds["max_suppression_rate"] is None:
            thresholds["max_suppression_rate"] = cfg.suppression_budget
        suites = release_suite(
            table, self.qis, cfg.sensitive, self.read_hierarchies(table), self.register.keys,
            self.register.ids.to_numpy(),
            self.protected, history.survival, cfg.ell, presence,
            snap.individual if presence else None, thresholds,
            metrics={
                "suppression_rate": manifest["suppressed"] / max(len(snap.individual), 1),
                "query_error": manifest["utility"]["average_relative_error"],
            },
            id_column=cfg.id_column, sensitive_domain=self.sensitive_domain, history_class=history.class_of,
            snapshot=(snap.individual, self._record_sets(snap)) if cfg.suppression_model == "mechanism" else None,
        )  # fmt: skip
        if cfg.guarantee == "localized":
            suites = [r for r in suites if r.suite != "guarantee"]
        suites = [register_check, snapshot_check, *suites]
        passed = self.store.record_validation(
            rel.id, [(r.suite, r.success, r.result, r.sha256) for r in suites], this_process()
        )
        if not passed:
            failures = [f"{r.suite}: {f}" for r in suites for f in r.failures]
            raise ValidationFailed(
                f"release {rel.seq} of {cfg.dataset!r} failed validation and was marked failed; nothing was "
                f"published and the state did not move ({len(failures)} failed expectation(s))",
                failures,
            )
        manifest["validation"] = {
            "success": True,
            "sha256": write_evidence(staging, f"{cfg.dataset} release {rel.seq} (period {rel.period})", suites),
            "global_guarantee_checked": cfg.guarantee == "global",
            "suites": {r.suite: {"success": r.success, "sha256": r.sha256} for r in suites},
        }
        manifest["report"] = self._write_report(staging, manifest, table, history, snap)
        release_files.write_manifest(staging, manifest)
        checkpoint("after_validation")
        return suites

    def _write_report(
        self, staging: Path, manifest: dict[str, Any], table: pd.DataFrame, history: History, snap: Snapshot
    ) -> dict[str, str]:
        """Write the release report into the staging folder from the staged ``table`` as read
        back by :meth:`_validate`; returns the files' checksums for the manifest (the sign-off
        records the checksum of the page the approver saw)."""
        cfg = self.ws.config
        presence = cfg.dilution == "presence"
        domain = self.sensitive_domain
        if domain is None:
            # no hierarchy file: the values seen, the protected ones and the categories' (a
            # release need not hold every protected value)
            named = [v for values in (cfg.report.categories or {}).values() for v in values]
            domain = sorted({*table[cfg.sensitive].astype(str), *self.protected, *named})
        inputs = PrivacyInputs(
            table=table, qis=self.qis, sensitive=cfg.sensitive, hierarchies=self.read_hierarchies(table),
            sensitive_hierarchy=self.sensitive_hierarchy,
            sensitive_domain=domain,
            protected=self.protected, register_keys=self.register.keys, register_ids=self.register.ids.to_numpy(),
            history=history, ell=cfg.ell, presence=presence, present_rows=snap.individual if presence else None,
            strategy=cfg.strategy, k_prime=cfg.k_prime, guarantee=cfg.guarantee,
        )  # fmt: skip
        return write_release_report(
            staging, manifest, "validated, awaiting sign-off", privacy_figures(inputs, cfg.report), presence
        )

    def _infeasible_advice(self, history: History) -> str:
        """What to do when no generalization fits the budget, from the state's figures."""
        cfg = self.ws.config
        if cfg.guarantee == "global" and cfg.strategy == "constant" and cfg.k_prime:
            used_up = history.linked >= cfg.k_prime
            if used_up.any():
                people = int(np.bincount(history.class_of, minlength=used_up.shape[0])[used_up.any(axis=1)].sum())
                return (
                    f"The constant-ratio budget is used up: {people} individuals have been linked to a protected "
                    f"value in k' = {cfg.k_prime} releases, and the strategy allows no further release linking "
                    "them to it (paper 004, section 6.1). Plan k' for the whole series; the geometric strategy "
                    "has no such bound"
                )
        if cfg.guarantee == "global" and cfg.strategy == "geometric" and history.max_breach() > 0:
            return (
                f"Under the geometric strategy the targets of the most-linked individuals have grown past every "
                f"ratio their own QI combination allows (largest breach probability so far "
                f"{history.max_breach():.4f}; targets double with each linked release, paper 004, section 6.2). "
                "A larger alpha keeps groups larger and lasts longer; the constant ratio bounds the series "
                "in advance (docs/choosing.md)"
            )
        # under the mechanism-aware model a suppressed record is still charged: no budget helps
        options = ["raise suppression_budget"] if cfg.suppression_model == "paper" else []
        if cfg.dilution == "presence":
            options += ["protect fewer values", "use register dilution"]
        else:
            options += [
                "protect fewer values",
                "choose a strategy with a smaller ratio target ('serialpub strategy' compares them; the constant "
                "ratio grows with k'); a snapshot holding a large share of the register leaves few candidates per "
                "record",
            ]
        text = ", ".join(options[:-1]) + ", or " + options[-1]
        return text[0].upper() + text[1:]

    def published_table(
        self, snap: Snapshot, result: ReleaseResult, hierarchies: Sequence[Hierarchy] | None = None
    ) -> pd.DataFrame:
        """The release table as published: per kept record the QI labels of its group's
        nodes and its sensitive value, sorted by group then value (no identifier, no input
        order); shape (published records, QIs + 1). ``hierarchies``: the ones the search
        ran with (default :attr:`search_hierarchies`). Also used by the experiment runner
        and the report benchmark, so their figures are the pipeline's."""
        hierarchies = self.search_hierarchies if hierarchies is None else hierarchies
        keep = np.flatnonzero(result.published)
        group = result.group_of_record[keep]
        values = snap.value[keep]
        order = np.lexsort((values, group))
        group, values = group[order], values[order]
        cols: dict[str, Any] = {}
        for a, q in enumerate(self.qis):
            labels = np.asarray(hierarchies[a].labels, dtype=object)
            cols[q] = labels[result.group_nodes[group, a]].astype(str)
        cols[self.ws.config.sensitive] = values.astype(str)
        return pd.DataFrame(cols)

    def _group_rows(self, result: ReleaseResult) -> list[dict[str, Any]]:
        rows = []
        for g in range(result.group_nodes.shape[0]):  # one row per group (tens to thousands)
            nz = np.flatnonzero(result.group_counts[g])
            rows.append(
                {
                    "labels": [h.labels[result.group_nodes[g, a]] for a, h in enumerate(self.search_hierarchies)],
                    "candidates": int(result.group_candidates[g]),
                    "records": int(result.group_records[g]),
                    "counts": {self.protected[v]: int(result.group_counts[g, v]) for v in nz},
                }
            )
        return rows

    def _record_sets(self, snap: Snapshot) -> npt.NDArray[np.int64]:
        """Index of every snapshot record's value in the protected values, -1 for none."""
        return pd.Index(self.protected).get_indexer(pd.Index(snap.value)).astype(np.int64)

    def _params_record(self) -> dict[str, Any]:
        cfg = self.ws.config
        return {
            "l": cfg.ell,
            "strategy": cfg.strategy,
            "k_prime": self.params.k_prime,
            "after_k_prime": cfg.after_k_prime if cfg.strategy == "constant" else None,
            "alpha": self.params.alpha,
            "guarantee": cfg.guarantee,
            "dilution": cfg.dilution,
            "suppression_model": cfg.suppression_model,
            "algorithm": cfg.algorithm,
            "numeric_quasi_identifiers": self.numeric,
            "suppression_budget": cfg.suppression_budget,
            "protected_values": self.protected,
        }

    def _query_settings(self) -> dict[str, Any]:
        return {"queries": QUERY_COUNT, "qd": QUERY_DIMENSIONS, "selectivity": QUERY_SELECTIVITY,
                "seed": self.ws.config.query_seed}  # fmt: skip

    def _manifest(
        self, seq: int, period: str, previous: int | None, result: ReleaseResult, query: Any,
        utility: list[Measure],
    ) -> dict[str, Any]:
        cfg = self.ws.config
        return {
            "format_version": 1,
            "dataset": cfg.dataset,
            "release": seq,
            "period": period,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "quasi_identifiers": self.qis,
            "sensitive": cfg.sensitive,
            **self._params_record(),
            "records": int(result.published.sum()),
            "groups": int(result.group_nodes.shape[0]),
            "suppressed": result.suppressed,
            "max_breach_probability": result.max_breach,
            "constant_ratio_target": (
                privacy.constant_ratio_target(cfg.ell, cfg.k_prime)
                if cfg.strategy == "constant" and cfg.k_prime
                else None
            ),
            "utility": {
                "average_relative_error": query.mean if query else None,
                **self._query_settings(),
            },
            # figures that need the link between snapshot records and groups (report.utility)
            "measures": measure_records(utility),
            "sha256": {"data.parquet": None, **self.file_sums},
            "previous_release": previous,
            "validation": None,
            "sign_off": None,
        }


def reject_release(
    ws: Workspace, seq: int, approver: str, comment: str, report_sha256: str | None = None
) -> OpenRelease:
    """Reject the open release ``seq`` of a workspace's dataset: record the sign-off,
    close the release and remove its staged files; the statistics file does not move.

    Raises:
        StateError: ``seq`` is not the dataset's open release.
    """
    store = StateStore(open_engine(ws.database_url))
    rejected = store.reject(ws.config.dataset, seq, approver, comment, report_sha256)
    shutil.rmtree(ws.dataset_dir / release_files.staging_name(seq, rejected.id), ignore_errors=True)
    return rejected


def by_file_line(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` indexed by the file line of each row (the header is line 1), so that the
    input suites' failure lines name file lines."""
    return table.set_axis(pd.RangeIndex(2, len(table) + 2))
