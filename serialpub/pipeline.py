"""Publishing one release of a workspace: the pipeline step the command line and the
DAGs call (DESIGN.md section 6).

``Publisher`` loads the register and hierarchies once (a series of releases reuses them),
then for each snapshot: recover interrupted publications, check ordering, read and check
the snapshot, load the state, anonymize, measure, write the release into staging, commit
the state, move the release into place.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anonymizer import privacy
from anonymizer.bottomup import InfeasibleError
from anonymizer.queries import average_relative_error
from anonymizer.release import History, PrivacyParams, ReleaseResult, anonymize_history
from checks.gx import SuiteResult
from checks.release_suites import release_suite
from serialpub import release_files
from serialpub.config import Workspace
from serialpub.errors import InputError, ValidationFailed
from serialpub.faults import checkpoint
from serialpub.hierarchies import read_hierarchies, read_hierarchy
from serialpub.inputs import Register, Snapshot, load_register, load_snapshot
from serialpub.statistics_file import StatisticsFile
from state.store import (
    OpenRelease,
    PublishedRelease,
    StateError,
    StateStore,
    open_engine,
    owner_is_gone,
    this_process,
)

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


class Publisher:
    """Publishes the releases of one workspace's dataset, in order."""

    def __init__(self, ws: Workspace) -> None:
        cfg = ws.config
        self.ws = ws
        self.qis = cfg.quasi_identifiers
        self.hierarchies = read_hierarchies(ws.hierarchy_dir, self.qis)
        sens_path = ws.hierarchy_dir / f"{cfg.sensitive}.csv"
        self.sensitive_domain: list[str] | None = None
        if sens_path.exists():
            self.sensitive_domain = list(read_hierarchy(sens_path, cfg.sensitive).leaves)
        if cfg.protected_values == "all":
            if self.sensitive_domain is None:
                raise InputError(
                    f"{ws.root / 'serialpub.yaml'}: protected_values 'all' needs the sensitive domain; "
                    f"add {sens_path} or list the protected values"
                )
            self.protected = list(self.sensitive_domain)
        else:
            self.protected = list(dict.fromkeys(cfg.protected_values))
            unknown = [
                v for v in self.protected if self.sensitive_domain is not None and v not in self.sensitive_domain
            ]
            if unknown:
                raise InputError(
                    f"{ws.root / 'serialpub.yaml'}: protected value(s) {', '.join(map(repr, unknown))} are not "
                    f"values of {cfg.sensitive!r} (leaves of {sens_path})"
                )
        self.params = PrivacyParams(
            ell=cfg.ell,
            strategy=cfg.strategy,
            k_prime=cfg.k_prime if cfg.strategy == "constant" else None,
            alpha=cfg.alpha if cfg.strategy == "geometric" else None,
            guarantee=cfg.guarantee,
        )
        self.register: Register = load_register(ws.register_path, cfg.id_column, self.qis, self.hierarchies)
        self.store = StateStore(open_engine(ws.database_url))
        register_sha = release_files.sha256_file(ws.register_path)
        self.file_sums = {
            "register": register_sha,
            "hierarchies": {q: release_files.sha256_file(ws.hierarchy_dir / f"{q}.csv") for q in self.qis},
        }
        self.statistics = StatisticsFile(self.register, self.protected, register_sha)

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
            InputError: the period is already published or not later than the last.
        """
        published = self.store.published(self.ws.config.dataset)
        if any(r.period == period for r in published):
            raise InputError(f"period {period!r} of dataset {self.ws.config.dataset!r} is already published")
        if published and period <= published[-1].period:
            raise InputError(
                f"period {period!r} is not later than the last published period {published[-1].period!r}; "
                "releases are published in chronological order"
            )
        return published

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

    def publish(self, snapshot_path: Path, period: str | None = None) -> ReleaseOutcome:
        """Publish the next release from a snapshot file.

        Args:
            snapshot_path: CSV with the id, QI and sensitive columns.
            period: label of the period; defaults to the file name's last ``-`` part
                (``snapshot-0007.csv`` gives ``0007``). Labels must sort chronologically.

        Raises:
            InputError: bad input, a period already published or not later than the last,
                or a requirement the suppression budget cannot meet.
            StateError: another release of the dataset is being prepared.
            Either way nothing is published and the statistics file does not move.
        """
        started = time.perf_counter()
        cfg = self.ws.config
        period = period or snapshot_path.stem.rsplit("-", 1)[-1]
        self.recover()
        published = self.check_period(period)
        snap = load_snapshot(
            snapshot_path,
            cfg.id_column,
            self.qis,
            cfg.sensitive,
            self.register,
            self.hierarchies,
            set(self.sensitive_domain) if self.sensitive_domain is not None else None,
        )
        checkpoint("after_snapshot")
        # the draft is opened only for input that passed its checks, so bad input leaves no trace
        draft = self.store.begin_draft(
            cfg.dataset, period, {**self._params_record(), "snapshot": str(snapshot_path)}, this_process()
        )
        checkpoint("after_draft")
        try:
            return self._complete(draft, snap, snapshot_path, period, published, started)
        except BaseException as exc:
            self._abandon(draft, exc)
            raise

    def _abandon(self, draft: OpenRelease, exc: BaseException) -> None:
        """Close a draft that did not complete, unless its publication was committed (then the
        staging folder is the release and recovery moves it into place)."""
        current = self.store.open_release(self.ws.config.dataset)
        if current is None or current.id != draft.id:
            return  # committed, or closed by someone else: nothing of ours to undo
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        self.store.fail(draft.id, reason, this_process())
        shutil.rmtree(self.ws.dataset_dir / release_files.staging_name(draft.seq, draft.id), ignore_errors=True)

    def _complete(
        self, draft: OpenRelease, snap: Snapshot, snapshot_path: Path, period: str,
        published: list[PublishedRelease], started: float,
    ) -> ReleaseOutcome:
        cfg = self.ws.config
        seq = draft.seq
        ell = np.full(len(self.register.ids), float(cfg.ell))
        t_state = time.perf_counter()
        history = self.statistics.load(self.store.latest_statistics(cfg.dataset), ell)
        t_state = time.perf_counter() - t_state
        checkpoint("after_state_load")
        record_set = pd.Index(self.protected).get_indexer(pd.Index(snap.value)).astype(np.int64)
        t_anon = time.perf_counter()
        try:
            result = anonymize_history(
                self.register.keys,
                snap.individual,
                record_set,
                len(self.protected),
                history,
                self.params,
                [self.hierarchies[q] for q in self.qis],
                cfg.dilution == "presence",
                budget=int(np.floor(cfg.suppression_budget * len(snap.individual))),
                seed=seq,
            )
        except InfeasibleError as exc:
            raise InputError(f"{snapshot_path}: cannot publish under ℓ = {cfg.ell:g}: {exc}. "
                             f"{self._infeasible_advice(history)}") from None
        t_anon = time.perf_counter() - t_anon
        checkpoint("after_anonymize")
        table = self._published_table(snap, result)
        query = average_relative_error(
            snap.table[[*self.qis, cfg.sensitive]],
            table,
            self.hierarchies,
            cfg.sensitive,
            n_queries=QUERY_COUNT,
            qd=QUERY_DIMENSIONS,
            selectivity=QUERY_SELECTIVITY,
            seed=cfg.query_seed,
        )
        suites = self._validate(draft, snap, table, result, history, query.mean)
        checkpoint("after_validation")
        manifest = self._manifest(seq, period, published[-1].seq if published else None, result, query)
        manifest["validation"] = {
            "success": True,
            "sha256": None,  # of validation.json, filled when it is written
            "global_guarantee_checked": cfg.guarantee == "global",
            "suites": {r.suite: {"success": r.success, "sha256": r.sha256} for r in suites},
        }
        # the release row names its staging folder, for operators looking at an open draft
        self.store.set_staging(draft.id, str(self.ws.dataset_dir / release_files.staging_name(seq, draft.id)))
        title = f"{cfg.dataset} release {seq} (period {period})"
        _, manifest_sha = release_files.write_staging(
            self.ws.dataset_dir, seq, draft.id, table, manifest, evidence=(title, suites)
        )
        final = self.ws.dataset_dir / release_files.release_name(seq)
        stats = self.statistics.tables(result.history)
        checkpoint("before_commit")
        t_commit = time.perf_counter()
        self.store.publish(
            draft.id,
            {
                "records": int(result.published.sum()),
                "groups": int(result.group_nodes.shape[0]),
                "suppressed": result.suppressed,
                "max_breach": result.max_breach,
                "data_sha256": manifest["sha256"]["data.parquet"],
                "manifest_sha256": manifest_sha,
            },
            self._group_rows(result),
            stats,
            directory=str(final),
            actor=this_process(),
        )
        t_state += time.perf_counter() - t_commit
        checkpoint("after_commit")
        release_files.move_into_place(self.ws.dataset_dir, seq, draft.id)
        checkpoint("after_publish")
        cand, recs = result.group_candidates, result.group_records
        return ReleaseOutcome(
            seq=seq,
            period=period,
            directory=final,
            records=int(recs.sum()),
            groups=int(cand.size),
            suppressed=result.suppressed,
            avg_candidates=float(cand.mean()),
            max_candidates=int(cand.max()),
            avg_records=float(recs.mean()),
            max_records=int(recs.max()),
            max_breach=result.max_breach,
            query_error=query.mean,
            seconds=time.perf_counter() - started,
            seconds_anonymize=t_anon,
            seconds_state=t_state,
        )

    def _validate(
        self, draft: OpenRelease, snap: Snapshot, table: pd.DataFrame, result: ReleaseResult, history: History,
        query_error: float,
    ) -> list[SuiteResult]:
        """Run the release suites on the draft and store their results with it; the draft
        becomes ``validated``, or ``failed`` and :class:`ValidationFailed` is raised.

        Under the localized baseline the global-guarantee suite is left out (that baseline
        exists to show the leak); the manifest says so.
        """
        cfg = self.ws.config
        presence = cfg.dilution == "presence"
        thresholds = cfg.validation.model_dump()
        if thresholds["max_suppression_rate"] is None:
            thresholds["max_suppression_rate"] = cfg.suppression_budget
        suites = release_suite(
            table, self.qis, cfg.sensitive, self.hierarchies, self.register.keys, self.register.ids.to_numpy(),
            self.protected, history.survival[history.class_of], cfg.ell, presence,
            snap.individual if presence else None, thresholds,
            metrics={"suppression_rate": result.suppressed / max(len(snap.individual), 1), "query_error": query_error},
            id_column=cfg.id_column, sensitive_domain=self.sensitive_domain,
        )
        if cfg.guarantee == "localized":
            suites = [r for r in suites if r.suite != "guarantee"]
        passed = self.store.record_validation(
            draft.id, [(r.suite, r.success, r.result, r.sha256) for r in suites], this_process()
        )
        if not passed:
            failures = [f"{r.suite}: {f}" for r in suites for f in r.failures]
            raise ValidationFailed(
                f"release {draft.seq} of {cfg.dataset!r} failed validation and was marked failed; nothing was "
                f"published and the state did not move ({len(failures)} failed expectation(s))",
                failures,
            )
        return suites

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
        return "Raise suppression_budget, protect fewer values, or use register dilution"

    def _published_table(self, snap: Snapshot, result: ReleaseResult) -> pd.DataFrame:
        """Published records: QI labels of their group's nodes and the sensitive value,
        sorted by group then value (no identifier, no input order)."""
        keep = np.flatnonzero(result.published)
        group = result.group_of_record[keep]
        values = snap.value[keep]
        order = np.lexsort((values, group))
        group, values = group[order], values[order]
        cols: dict[str, Any] = {}
        for a, q in enumerate(self.qis):
            labels = np.asarray(self.hierarchies[q].labels, dtype=object)
            cols[q] = labels[result.group_nodes[group, a]].astype(str)
        cols[self.ws.config.sensitive] = values.astype(str)
        return pd.DataFrame(cols)

    def _group_rows(self, result: ReleaseResult) -> list[dict[str, Any]]:
        rows = []
        for g in range(result.group_nodes.shape[0]):  # one row per group (tens to thousands)
            nz = np.flatnonzero(result.group_counts[g])
            rows.append(
                {
                    "labels": [self.hierarchies[q].labels[result.group_nodes[g, a]] for a, q in enumerate(self.qis)],
                    "candidates": int(result.group_candidates[g]),
                    "records": int(result.group_records[g]),
                    "counts": {self.protected[v]: int(result.group_counts[g, v]) for v in nz},
                }
            )
        return rows

    def _params_record(self) -> dict[str, Any]:
        cfg = self.ws.config
        return {
            "l": cfg.ell,
            "strategy": cfg.strategy,
            "k_prime": self.params.k_prime,
            "alpha": self.params.alpha,
            "guarantee": cfg.guarantee,
            "dilution": cfg.dilution,
            "suppression_budget": cfg.suppression_budget,
            "protected_values": self.protected,
        }

    def _manifest(
        self, seq: int, period: str, previous: int | None, result: ReleaseResult, query: Any
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
                "average_relative_error": query.mean,
                "queries": query.n_queries,
                "qd": query.qd,
                "selectivity": query.selectivity,
                "seed": query.seed,
            },
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
