"""What the steps of one workspace's releases read (docs/design.md section 6).

A :class:`ReleaseContext` holds three values and the state store: the dataset's small
inputs, read and frozen when it is made (:class:`~serialpub.workflow.dataset_inputs.DatasetInputs`:
the QI hierarchies, the sensitive domain, the protected values, the privacy parameters);
the register's reader (:class:`~serialpub.workflow.register_reader.RegisterReader`), which
reads, hashes, parses and codes the register when a step first needs it; and the
operator's :class:`ReleaseRequest` for this run. Drafting and validating read the
register; approving, publishing and closing a release do not (a 5M-person register takes
seconds to read, parse and hash on every Airflow task).
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
from checks.input_suites import DatasetColumns
from serialpub.config import Workspace
from serialpub.io import register_cache, release_files, signing
from serialpub.io.inputs import Register, Snapshot
from serialpub.io.statistics_file import StatisticsFile
from serialpub.workflow.dataset_inputs import input_stamp, read_dataset_inputs
from serialpub.workflow.register_reader import RegisterReader
from serialpub.workflow.register_reader import by_file_line as by_file_line  # re-exported: callers read it here
from serialpub.workflow.register_reader import suite_code as suite_code  # re-exported: callers read it here
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
        self.register_reader = RegisterReader(ws, self.inputs, self.input_columns, self.cache_writes)
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
        self.register_reader = RegisterReader(self.ws, self.inputs, self.input_columns, self.cache_writes)
        self.__dict__.pop("statistics", None)

    # -- the register (RegisterReader), read on first use ----------------------------------
    @property
    def register(self) -> Register:
        """:attr:`RegisterReader.register` (errors)."""
        return self.register_reader.register

    @property
    def register_leaf_counts(self) -> dict[str, npt.NDArray[np.int64]]:
        """:attr:`RegisterReader.register_leaf_counts`."""
        return self.register_reader.register_leaf_counts

    @property
    def file_sums(self) -> dict[str, Any]:
        """:attr:`RegisterReader.file_sums`."""
        return self.register_reader.file_sums

    def check_register(self) -> SuiteResult:
        """:meth:`RegisterReader.check` (errors)."""
        return self.register_reader.check()

    def keep_input_versions(self) -> None:
        """:meth:`RegisterReader.keep_input_versions` (errors)."""
        self.register_reader.keep_input_versions()

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
