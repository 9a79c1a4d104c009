"""Reading the population register once per reader (docs/design.md section 6): hashed,
then parsed, then coded and checked, each on first use, from the register cache when this
version was coded before (:mod:`serialpub.io.register_cache`). Approving, publishing and
closing a release never read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.hierarchy import Hierarchy
from anonymizer.intervals import quantile_hierarchy
from anonymizer.settings import Algorithm
from checks.gx import SuiteResult
from checks.input_suites import register_suite
from serialpub.config import Workspace
from serialpub.errors import InputChecksFailed, InputError
from serialpub.io import register_cache, release_files, versions
from serialpub.io.inputs import IdLookup, Register, Snapshot, read_csv, register_from_table
from serialpub.io.statistics_file import StatisticsFile
from serialpub.workflow import progress
from serialpub.workflow.dataset_inputs import DatasetInputs


class RegisterState(Enum):
    """How far the register has been read: each state holds what the next needs."""

    UNREAD = "unread"  # nothing read
    HASHED = "hashed"  # its sha256 known (a Parquet or SQL register's bytes held until kept)
    PARSED = "parsed"  # its rows parsed, held until both the coded register and its suite exist
    CODED = "coded"  # integer-coded (the rows let go once the suite ran too)


def suite_code() -> list[Path]:
    """The source files of the input suites: every module whose change can change a suite's
    verdict or evidence (the register cache and the snapshot verdicts are keyed by them)."""
    import checks.distinct
    import checks.gx
    import checks.input_suites

    return [Path(m.__file__ or "") for m in (checks.input_suites, checks.gx, checks.distinct)]


def by_file_line(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` indexed by the file line of each row (the header is line 1), so that the
    input suites' failure lines name file lines."""
    return table.set_axis(pd.RangeIndex(2, len(table) + 2))


class RegisterReader:
    """The register of one workspace, read for one set of :class:`DatasetInputs`.

    Args:
        cache_writes: the register cache entries the owner writes beside its releases.
        cache_unchecked: cache the coded register before its suite has run, the entry then
            without a verdict (a plan, which never runs the suite, leaves the next plan and
            release 1 the coding; the first reader that runs the suite adds its verdict).
    """

    def __init__(
        self,
        ws: Workspace,
        inputs: DatasetInputs,
        cache_writes: register_cache.Writes | None = None,
        cache_unchecked: bool = False,
    ) -> None:
        self.ws, self.inputs = ws, inputs
        self.cache_writes = cache_writes if cache_writes is not None else register_cache.Writes()
        self.cache_unchecked = cache_unchecked
        self._sha: str | None = None  # of the bytes the register was read from
        # a Parquet or SQL register's canonical CSV bytes, until its version is kept (a CSV
        # file is read again for that: it is on disk)
        self._bytes: bytes | None = None
        self._content: bytes | None = None  # read and hashed, not yet parsed
        self._table: pd.DataFrame | None = None
        # the register suite runs before the first check of a snapshot, once per reader;
        # its result is evidence of every release
        self._check: SuiteResult | None = None
        self._search_hierarchies: dict[tuple[str, tuple[str, ...]], list[Hierarchy]] = {}
        self._register: Register | None = None  # coded on first use (the register property)
        # the last snapshot checked against this register: its key (its source and suite
        # verdict key, serialpub.workflow.input_checks.read_snapshot), its suite's result and
        # the coded snapshot; validating a draft with the reader that drafted it does not
        # check its snapshot again (keep_checks, kept_checks)
        self._last_snapshot: tuple[tuple[object, str], SuiteResult, Snapshot] | None = None

    def keep_checks(self, key: tuple[object, str], suite: SuiteResult, snapshot: Snapshot) -> None:
        """Keep the snapshot suite's result and the coded snapshot of the snapshot that
        passed its checks under ``key`` (its source's record and its suite's verdict key),
        in place of the one kept before."""
        self._last_snapshot = (key, suite, snapshot)

    def kept_checks(self, key: tuple[object, str]) -> tuple[SuiteResult, Snapshot] | None:
        """The suite's result and the coded snapshot kept under ``key``, or None."""
        last = self._last_snapshot
        return (last[1], last[2]) if last is not None and last[0] == key else None

    def forget_checks(self) -> None:
        """Let the kept snapshot go (before another one is read: two large snapshots' tables
        and codes need not be held at once)."""
        self._last_snapshot = None

    def check_reads(self, inputs: DatasetInputs) -> None:
        """Raises ValueError unless this reader was made for ``inputs`` (the same read): a
        step given a reader and inputs of two reads would check a snapshot against one set of
        hierarchies and domain and code and anonymize it with another."""
        if self.inputs is not inputs:
            raise ValueError(
                "the register reader was made for another read of the dataset's inputs; make the two together "
                "(Publisher.refresh_inputs replaces both)"
            )

    @property
    def state(self) -> RegisterState:
        """How far the register has been read."""
        if self._register is not None:
            return RegisterState.CODED
        if self._table is not None:
            return RegisterState.PARSED
        return RegisterState.UNREAD if self._sha is None else RegisterState.HASHED

    def _hash(self) -> None:
        """Hash the register (its canonical CSV form): the manifest names the register the
        release was computed with, even if the source changes meanwhile. A CSV file is
        hashed as it is read, not held (a national register's file is larger than the
        coded register), and hashed again
        as it is parsed, if it is (:func:`serialpub.io.inputs.read_csv`); a Parquet or SQL
        register's canonical bytes are made in memory and kept until parsed or the cache
        made parsing needless, and until its version is kept."""
        if self._sha is None:
            with progress.step("reading the register"):
                source = self.ws.register_source
                if source.kind == "csv" and source.path is not None:
                    try:
                        self._sha = release_files.sha256_file(source.path)
                    except FileNotFoundError:
                        raise InputError(f"{source.label}: population register file not found") from None
                    return
                content = source.read_bytes("population register", self.ws.config.id_column)
                self._sha = versions.sha256_bytes(content)
                self._bytes = self._content = content

    def _rows(self) -> pd.DataFrame:
        """The register as parsed, kept until both the register and its suite are built."""
        if self._table is None:
            self._hash()
            content, self._content = self._content, None
            source = self.ws.register_source
            if content is None and source.kind != "csv":  # let go when the cache made parsing needless
                content = source.read_bytes("population register", self.ws.config.id_column)
                if versions.sha256_bytes(content) != self._sha:
                    raise InputError(
                        f"{source.label}: the population register changed while it was being read; "
                        "run the release again"
                    )
            with progress.step("parsing the register"):
                self._table = read_csv(
                    self.ws.register_source.label,
                    "population register",
                    content,
                    dictionary=self.inputs.qis,
                    sha256=None if content is not None else self._sha,
                )
        return self._table

    @cached_property
    def cache_key(self) -> str:
        """The register cache's key for this register, these hierarchies and this suite
        (:mod:`serialpub.io.register_cache`)."""
        import great_expectations

        sums = self.file_sums
        return register_cache.cache_key(
            sums["register"],
            self.ws.config.id_column,
            self.inputs.qis,
            sums["hierarchies"],
            self.inputs.hierarchy_sources,
            suite_code(),
            great_expectations.__version__,
        )

    @cached_property
    def cached_entry(self) -> register_cache.Entry | None:
        """This register's cache entry, or None."""
        entry = register_cache.load(self.ws.root, self.cache_key, self.cache_writes)
        if entry is not None:
            self._content = None  # no parsing needed
        return entry

    def _save_cache(self) -> None:
        """Cache the coded register with its passed suite (once both are built), or without a
        verdict before the suite ran when :attr:`cache_unchecked`; an entry without a verdict
        is written again with the verdict once the suite passed."""
        check = self._check
        if self._register is None:
            return
        entry = self.cached_entry
        if check is not None and check.success:
            if entry is not None and entry[2] is not None:
                return
            suite: dict[str, Any] | None = {"suite": check.suite, "success": True, "failures": [],
                                            "result": check.result, "sha256": check.sha256}  # fmt: skip
        elif check is None and self.cache_unchecked and entry is None:
            suite = None
        else:
            return  # a failed suite is never cached: its messages are made afresh
        lookup = self.register.id_lookup
        # written on a thread of its own while the release goes on (register_cache.Writes)
        self.cache_writes.save_soon(
            self.ws.root,
            self.cache_key,
            self.register.ids,
            self.register.keys,
            self.inputs.qis,
            suite,
            None if lookup is None else (lookup.hashes, lookup.rows),
        )

    @property
    def register(self) -> Register:
        """The population register, integer-coded (read on first use; from the register
        cache when this version was coded before).

        Raises:
            InputChecksFailed: the register fails its input suite (every problem named).
            InputError: the register cannot be read or coded.
        """
        if self._register is None:
            self._register = self._code()
        return self._register

    def _code(self) -> Register:
        """The register coded (:attr:`register`): from the cache entry, or parsed and coded,
        then kept (before the cache entry is written, which reads it) and cached."""
        if self.cached_entry is not None:
            with progress.step("coding the register"):
                lookup = self.cached_entry[3]
                self._register = Register(
                    ids=self.cached_entry[0],
                    keys=self.cached_entry[1],
                    lookup=None if lookup is None else IdLookup(*lookup),
                )
            if self._check is not None:  # the suite ran on the rows (an entry without its verdict)
                self._table = None
            self._save_cache()  # an entry without a verdict (a plan's): written again with the suite's
            return self._register
        cfg = self.ws.config
        rows = self._rows()
        try:
            # the ids' checks are the suite's when it passed on these rows
            checked = self._check is not None and self._check.success
            with progress.step("coding the register"):
                register = register_from_table(
                    rows,
                    self.ws.register_source.label,
                    cfg.id_column,
                    self.inputs.qis,
                    self.inputs.hierarchies,
                    ids_checked=checked,
                )
        except InputError:
            self.check()  # the suite's report names every problem, not just the first
            raise
        if self._check is not None:
            self._table = None
        self._register = register
        self._save_cache()
        return register

    @cached_property
    def register_leaf_counts(self) -> dict[str, npt.NDArray[np.int64]]:
        """Per QI, the register's individuals per leaf id of its declared hierarchy, shape
        (n_leaves,): the weights of the interval tree of a numeric QI, of the
        register-weighted query estimator, and the manifest's ``register_marginals``
        (docs/design.md section 8)."""
        keys = self.register.keys
        return {q: keys.column_counts(a, self.inputs.hierarchies[q].n_leaves) for a, q in enumerate(self.inputs.qis)}

    def check(self) -> SuiteResult:
        """The register input suite's result (run on first use).

        Raises:
            InputChecksFailed: naming the register file; one line per failed expectation.
        """
        if self._check is None and self.cached_entry is not None and self.cached_entry[2] is not None:
            with progress.step("register suite"):  # passed on this very version before
                self._check = SuiteResult(**self.cached_entry[2])
        if self._check is None:
            rows = self._rows()
            with progress.step("register suite"):
                self._check = register_suite(by_file_line(rows), self.inputs.columns, row_label="line")
            if self._register is not None:  # built already: the rows are no longer needed
                self._table = None
            self._save_cache()
        if not self._check.success:
            raise InputChecksFailed(
                f"{self.ws.register_source.label}: the population register failed its input checks (suite 'register'); "
                "nothing was published and the state did not move",
                self._check.failures,
            )
        return self._check

    @cached_property
    def file_sums(self) -> dict[str, Any]:
        """sha256 of the register and of each QI's hierarchy file, as manifests record them."""
        if self._sha is None:
            self._hash()
        return {
            "register": self._sha,
            "hierarchies": {q: release_files.sha256_file(self.ws.hierarchy_dir / f"{q}.csv") for q in self.inputs.qis},
        }

    def keep_input_versions(self) -> None:
        """Store the register and hierarchy versions a release read with this reader uses, named
        by the sha256 its manifest records (:mod:`serialpub.io.versions`, docs/design.md
        section 10), so the audit and ``state verify`` find them after the files change.

        Raises:
            InputError: the register file changed since it was hashed.
        """
        sums = self.file_sums
        kept = versions.RegisterVersions(self.ws.root)
        kept.keep(self.ws.register_path, sums["register"], self._bytes)
        self._bytes = None
        for q in self.inputs.qis:
            versions.keep_hierarchy(self.ws.root, q, self.ws.hierarchy_dir / f"{q}.csv", sums["hierarchies"][q])

    @cached_property
    def statistics(self) -> StatisticsFile:
        """The statistics file's codec for this register (:mod:`serialpub.io.statistics_file`)."""
        return StatisticsFile(self.register, self.inputs.protected, self.file_sums["register"])

    def search_hierarchies(
        self, algorithm: Algorithm | str | None = None, numeric: Sequence[str] | None = None
    ) -> list[Hierarchy]:
        """The hierarchy per QI (in ``qis`` order) a search generalizes along and its drafts'
        labels come from. Under the top-down search a QI of ``numeric`` gets the binary
        interval hierarchy halved at the register's medians
        (:func:`anonymizer.intervals.quantile_hierarchy`); every other QI, and every QI under
        the bottom-up search, its declared hierarchy. Defaults: the configuration's
        ``algorithm`` and ``numeric``. Computed once per (algorithm, numeric).
        """
        algorithm = self.ws.config.algorithm if algorithm is None else algorithm
        numeric = self.inputs.numeric if numeric is None else numeric
        qis = self.inputs.qis
        key = (str(algorithm), tuple(q for q in qis if q in numeric))
        if key not in self._search_hierarchies:
            hs = [self.inputs.hierarchies[q] for q in qis]
            if algorithm == Algorithm.TOPDOWN:
                for a, q in enumerate(qis):
                    if q in key[1]:
                        hs[a] = quantile_hierarchy(hs[a], self.register_leaf_counts[q])
            self._search_hierarchies[key] = hs
        return self._search_hierarchies[key]
