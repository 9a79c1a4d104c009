"""What the steps of one workspace's releases read (docs/design.md section 6).

A :class:`ReleaseContext` reads the configuration's small inputs when it is made (the QI
hierarchies, the sensitive domain, the protected values, the privacy parameters) and
opens the state store. The register, its checksums and the statistics file's codec are
read when a step first needs them: drafting and validating do; approving, publishing and
closing a release do not (a 5M-person register takes seconds to read, parse and hash on
every Airflow task).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import quantile_hierarchy, release_hierarchies
from anonymizer.release import PrivacyParams
from anonymizer.settings import Algorithm
from checks.gx import SuiteResult
from checks.input_suites import DatasetColumns, register_suite
from serialpub.config import Workspace
from serialpub.errors import InputChecksFailed, InputError
from serialpub.io import register_cache, release_files, signing, versions
from serialpub.io.inputs import IdLookup, Register, Snapshot, read_csv, register_from_table
from serialpub.io.statistics_file import StatisticsFile
from serialpub.workflow import progress
from serialpub.workflow.dataset_inputs import input_stamp, read_dataset_inputs
from state.store import OpenRelease, StateError, StateStore, open_engine, this_process

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@dataclass(frozen=True)
class InputChecks:
    """What :func:`serialpub.workflow.input_checks.check_inputs` found: the register and
    snapshot suites' results, the checked snapshot and the snapshot file's sha256; and
    ``ahead``, the work given to run beside the snapshot suite, when the suite ran."""

    suites: list[SuiteResult]
    snapshot: Snapshot
    sha256: str
    ahead: Future[Any] | None = None


def suite_code() -> list[Path]:
    """The source files of the input suites: every module whose change can change a suite's
    verdict or evidence (the register cache and the snapshot verdicts are keyed by them)."""
    import checks.distinct
    import checks.gx
    import checks.input_suites

    return [Path(m.__file__ or "") for m in (checks.input_suites, checks.gx, checks.distinct)]


@dataclass(frozen=True)
class ReleaseRequest:
    """What the operator asked of a run, beside the configuration.

    Attributes:
        skip_reason: why the next release may skip periods (``--skip-periods``); None: a
            period that skips one is refused (:func:`serialpub.workflow.input_checks.check_period`).
        allow_repeated_snapshot: the next release may use a snapshot a published release
            already used (``--allow-repeated-snapshot``); else refused
            (:func:`serialpub.workflow.input_checks.check_repeated_snapshot`).
        preparer: who prepares the next release (recorded as ``prepared_by``; four-eyes
            compares it with the approver): the Airflow user who triggered the run; None:
            the OS account.
    """

    skip_reason: str | None = None
    allow_repeated_snapshot: bool = False
    preparer: str | None = None


class ReleaseContext:
    """The inputs and the state of one workspace's dataset, as every step reads them.

    Raises (when made):
        InputError: as :func:`serialpub.workflow.dataset_inputs.read_dataset_inputs`.
    """

    def __init__(
        self, ws: Workspace, cache_writes: register_cache.Writes | None = None, request: ReleaseRequest | None = None
    ) -> None:
        self.ws = ws
        # the register cache entries this context writes beside its releases
        self.cache_writes = cache_writes if cache_writes is not None else register_cache.Writes()
        self._stamp = input_stamp(ws)
        #: the dataset's small inputs, frozen; read again when their files change (refresh_inputs)
        self.inputs = read_dataset_inputs(ws)
        self._search_hierarchies: dict[tuple[str, tuple[str, ...]], list[Hierarchy]] = {}
        # The register suite runs before the first check of a snapshot, once per context;
        # its result is evidence of every release.
        self._register_table: pd.DataFrame | None = None
        self._register_sha: str | None = None  # of the bytes the register was read from
        # a Parquet or SQL register's canonical CSV bytes, until its version is kept (a CSV
        # file is read again for that: it is on disk)
        self._register_bytes: bytes | None = None
        self._register_content: bytes | None = None  # read and hashed, not yet parsed
        self._register_check: SuiteResult | None = None
        # the input checks of the last snapshot checked, with what it was checked as (its
        # source and suite verdict key; workflow.input_checks.check_inputs): validating a
        # draft in the context that drafted it does not check its snapshot again
        self.last_checked: tuple[tuple[object, str], InputChecks] | None = None
        self.store = StateStore(open_engine(ws.database_url))
        #: what the operator asked of the releases this context prepares
        self.request = request if request is not None else ReleaseRequest()

    # -- the dataset's inputs (DatasetInputs), by their names ----------------------------
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
    def hierarchy_sources(self) -> dict[str, str]:
        return self.inputs.hierarchy_sources

    @property
    def sensitive_hierarchy(self) -> Hierarchy | None:
        return self.inputs.sensitive_hierarchy

    @property
    def sensitive_domain(self) -> list[str] | None:
        return self.inputs.sensitive_domain

    @property
    def protected(self) -> list[str]:
        return self.inputs.protected

    @property
    def params(self) -> PrivacyParams:
        return self.inputs.params

    def refresh_inputs(self) -> None:
        """Forget what was read of the register and the hierarchies if their files changed
        since (a register of a new period in the same process, as the demo does; docs/design.md
        section 10). A context made for one step reads them fresh anyway.

        Raises:
            InputError: as on construction, for the changed hierarchy files.
        """
        stamp = input_stamp(self.ws)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        self.inputs = read_dataset_inputs(self.ws)
        self._search_hierarchies = {}
        self._register_table, self._register_check = None, None
        self._register_sha, self._register_bytes, self._register_content = None, None, None
        for name in ("register", "register_leaf_counts", "file_sums", "statistics", "_cache_key", "_cached"):
            self.__dict__.pop(name, None)

    # -- the register, read on first use -------------------------------------------------
    def _read_register(self) -> None:
        """Hash the register (its canonical CSV form): the manifest names the register the
        release was computed with, even if the source changes meanwhile. A CSV file is
        hashed as it is read, not held (3.9 GB for a 50M-person register), and hashed again
        as it is parsed, if it is (:func:`serialpub.io.inputs.read_csv`); a Parquet or SQL
        register's canonical bytes are made in memory and kept until parsed or the cache
        made parsing needless, and until its version is kept."""
        if self._register_sha is None:
            with progress.step("reading the register"):
                source = self.ws.register_source
                if source.kind == "csv" and source.path is not None:
                    try:
                        self._register_sha = release_files.sha256_file(source.path)
                    except FileNotFoundError:
                        raise InputError(f"{source.label}: population register file not found") from None
                    return
                content = source.read_bytes("population register", self.ws.config.id_column)
                self._register_sha = versions.sha256_bytes(content)
                self._register_bytes = self._register_content = content

    def _register_rows(self) -> pd.DataFrame:
        """The register as parsed, kept until both the register and its suite are built."""
        if self._register_table is None:
            self._read_register()
            content, self._register_content = self._register_content, None
            source = self.ws.register_source
            if content is None and source.kind != "csv":  # let go when the cache made parsing needless
                content = source.read_bytes("population register", self.ws.config.id_column)
                if versions.sha256_bytes(content) != self._register_sha:
                    raise InputError(f"{source.label}: the population register changed while it was being read; "
                                     "run the release again")  # fmt: skip
            with progress.step("parsing the register"):
                self._register_table = read_csv(
                    self.ws.register_source.label, "population register", content, dictionary=self.qis,
                    sha256=None if content is not None else self._register_sha,
                )  # fmt: skip
        return self._register_table

    @cached_property
    def _cache_key(self) -> str:
        """The register cache's key for this register, these hierarchies and this suite
        (:mod:`serialpub.io.register_cache`)."""
        import great_expectations

        sums = self.file_sums
        return register_cache.cache_key(
            sums["register"], self.ws.config.id_column, self.qis, sums["hierarchies"], self.hierarchy_sources,
            suite_code(), great_expectations.__version__,
        )  # fmt: skip

    @cached_property
    def _cached(self) -> register_cache.Entry | None:
        """This register's cache entry, or None."""
        entry = register_cache.load(self.ws.root, self._cache_key, self.cache_writes)
        if entry is not None:
            self._register_content = None  # no parsing needed
        return entry

    def _save_cache(self) -> None:
        """Cache the coded register with its passed suite (once both are built)."""
        check = self._register_check
        if "register" in self.__dict__ and check is not None and check.success and self._cached is None:
            suite = {"suite": check.suite, "success": True, "failures": [], "result": check.result,
                     "sha256": check.sha256}  # fmt: skip
            lookup = self.register.id_lookup
            # written on a thread of its own while the release goes on (register_cache.Writes)
            self.cache_writes.save_soon(
                self.ws.root, self._cache_key, self.register.ids, self.register.keys, self.qis, suite,
                None if lookup is None else (lookup.hashes, lookup.rows),
            )  # fmt: skip

    @cached_property
    def register(self) -> Register:
        """The population register, integer-coded (read on first use; from the register
        cache when this version was coded before).

        Raises:
            InputChecksFailed: the register fails its input suite (every problem named).
            InputError: the register cannot be read or coded.
        """
        if self._cached is not None:
            with progress.step("coding the register"):
                lookup = self._cached[3]
                return Register(ids=self._cached[0], keys=self._cached[1],
                                lookup=None if lookup is None else IdLookup(*lookup))  # fmt: skip
        cfg = self.ws.config
        rows = self._register_rows()
        try:
            # the ids' checks are the suite's when it passed on these rows
            checked = self._register_check is not None and self._register_check.success
            with progress.step("coding the register"):
                register = register_from_table(rows, self.ws.register_source.label, cfg.id_column, self.qis,
                                               self.hierarchies, ids_checked=checked)  # fmt: skip
        except InputError:
            self.check_register()  # the suite's report names every problem, not just the first
            raise
        if self._register_check is not None:
            self._register_table = None
        self.__dict__["register"] = register
        self._save_cache()
        return register

    @cached_property
    def register_leaf_counts(self) -> dict[str, npt.NDArray[np.int64]]:
        """Per QI, the register's individuals per leaf id of its declared hierarchy, shape
        (n_leaves,): the weights of the interval tree of a numeric QI, of the
        register-weighted query estimator, and the manifest's ``register_marginals``
        (docs/design.md section 8)."""
        keys = self.register.keys
        return {q: keys.column_counts(a, self.hierarchies[q].n_leaves) for a, q in enumerate(self.qis)}

    def check_register(self) -> SuiteResult:
        """The register input suite's result (run on first use).

        Raises:
            InputChecksFailed: naming the register file; one line per failed expectation.
        """
        if self._register_check is None and self._cached is not None and self._cached[2] is not None:
            with progress.step("register suite"):  # passed on this very version before
                self._register_check = SuiteResult(**self._cached[2])
        if self._register_check is None:
            rows = self._register_rows()
            with progress.step("register suite"):
                self._register_check = register_suite(by_file_line(rows), self.input_columns, row_label="line")
            if "register" in self.__dict__:  # built already: the rows are no longer needed
                self._register_table = None
            self._save_cache()
        if not self._register_check.success:
            raise InputChecksFailed(
                f"{self.ws.register_source.label}: the population register failed its input checks (suite 'register'); "
                "nothing was published and the state did not move",
                self._register_check.failures,
            )
        return self._register_check

    @cached_property
    def file_sums(self) -> dict[str, Any]:
        """sha256 of the register and of each QI's hierarchy file, as manifests record them."""
        if self._register_sha is None:
            self._read_register()
        return {
            "register": self._register_sha,
            "hierarchies": {q: release_files.sha256_file(self.ws.hierarchy_dir / f"{q}.csv") for q in self.qis},
        }

    def keep_input_versions(self) -> None:
        """Store the register and hierarchy versions a release of this context uses, named
        by the sha256 its manifest records (:mod:`serialpub.io.versions`, docs/design.md
        section 10), so the audit and ``state verify`` find them after the files change.

        Raises:
            InputError: the register file changed since it was hashed.
        """
        sums = self.file_sums
        kept = versions.RegisterVersions(self.ws.root)
        kept.keep(self.ws.register_path, sums["register"], self._register_bytes)
        self._register_bytes = None
        for q in self.qis:
            versions.keep_hierarchy(self.ws.root, q, self.ws.hierarchy_dir / f"{q}.csv", sums["hierarchies"][q])

    @cached_property
    def signing_key(self) -> Ed25519PrivateKey | None:
        """The publisher's private key (``signing_key`` in the configuration), or None.

        Raises:
            InputError: the key file is missing or not an Ed25519 PEM private key.
        """
        path = self.ws.signing_key_path
        return None if path is None else signing.load_private_key(path)

    @cached_property
    def statistics(self) -> StatisticsFile:
        """The statistics file's codec for this register (read on first use)."""
        return StatisticsFile(self.register, self.protected, self.file_sums["register"])

    @property
    def input_columns(self) -> DatasetColumns:
        """The columns the register and the snapshots must have, with their hierarchies and
        the sensitive domain (checks.input_suites)."""
        cfg = self.ws.config
        return DatasetColumns(
            cfg.id_column, self.qis, self.hierarchies, cfg.sensitive, self.sensitive_domain, self.hierarchy_sources
        )

    # -- hierarchies ---------------------------------------------------------------------
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
        key = (str(algorithm), tuple(q for q in self.qis if q in numeric))
        if key not in self._search_hierarchies:
            hs = [self.hierarchies[q] for q in self.qis]
            if algorithm == Algorithm.TOPDOWN:
                for a, q in enumerate(self.qis):
                    if q in key[1]:
                        hs[a] = quantile_hierarchy(hs[a], self.register_leaf_counts[q])
            self._search_hierarchies[key] = hs
        return self._search_hierarchies[key]

    def read_hierarchies(self, table: pd.DataFrame) -> dict[str, Hierarchy]:
        """The hierarchies a release table of this dataset is read with (its intervals as
        nodes, :func:`anonymizer.intervals.release_hierarchies`)."""
        return release_hierarchies(self.hierarchies, self.numeric, table)

    # -- the open release ----------------------------------------------------------------
    def open_release(self, seq: int) -> OpenRelease:
        """The dataset's open release, which must be ``seq``.

        Raises:
            StateError: no release is open, or another one is.
        """
        current = self.store.open_release(self.ws.config.dataset)
        if current is None or current.seq != seq:
            what = f"release {current.seq} is open" if current else "no release is open"
            raise StateError(f"dataset {self.ws.config.dataset!r} has no open release {seq} ({what})")
        return current

    def staging_dir(self, rel: OpenRelease) -> Path:
        """The staging folder of an open release."""
        return self.ws.dataset_dir / release_files.staging_name(rel.seq, rel.id)

    def remove_staging(self, rel: OpenRelease) -> None:
        shutil.rmtree(self.staging_dir(rel), ignore_errors=True)

    def abandon(self, draft: OpenRelease, exc: BaseException) -> None:
        """Close a draft that did not complete, unless its publication was committed (then the
        staging folder is the release and recovery moves it into place)."""
        current = self.store.open_release(self.ws.config.dataset)
        if current is None or current.id != draft.id:
            return  # committed, or closed by someone else: nothing of ours to undo
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.store.fail(draft.id, reason, this_process())
        self.remove_staging(draft)


def by_file_line(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` indexed by the file line of each row (the header is line 1), so that the
    input suites' failure lines name file lines."""
    return table.set_axis(pd.RangeIndex(2, len(table) + 2))
