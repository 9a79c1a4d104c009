"""The localized baseline of a release series (docs/design.md section 6): the published
releases' snapshots replayed in memory under per-release ℓ-diversity, what other tools
guarantee, so that the series report (:mod:`serialpub.report.series`, which only renders
it) shows what the global guarantee prevents. Nothing is published or stored.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from anonymizer.measures.guarantee import TIE_TOLERANCE
from anonymizer.release import History, PrivacyParams, SnapshotCodes, anonymize_history
from anonymizer.search import InfeasibleError, TableInfeasibleError
from anonymizer.settings import AfterKPrime, Dilution, Guarantee, PartitionModel
from serialpub.config import Workspace
from serialpub.errors import InputError
from serialpub.io import release_files
from serialpub.io.inputs import Register, load_register_version, read_csv, snapshot_from_table
from serialpub.io.manifest import Manifest
from serialpub.io.statistics_file import StatisticsFile
from serialpub.report.series import Baseline, write_series_report
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.register_reader import RegisterReader
from state.params import DraftParams
from state.store import PublishedRelease


def series_report(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    baseline: bool = True,
    png_dir: Path | None = None,
) -> Path:
    """Write the dataset's series report (:func:`serialpub.report.series.write_series_report`),
    with the :func:`localized_baseline` when ``baseline`` (about as long as publishing the
    series). Returns the HTML file.

    Raises:
        InputError: nothing is published yet.
    """
    published = series.store.published(series.dataset)
    base = localized_baseline(series, inputs, register, published) if baseline and published else None
    return write_series_report(series.ws, series.store, base, png_dir)


def localized_baseline(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, published: list[PublishedRelease]
) -> Baseline:
    """Replay the published releases' snapshots under the localized guarantee, each with the
    settings its release was made with (ℓ, strategy, k' or α, dilution, suppression budget,
    protected values, recorded in the state) and the pipeline's seed (the release number).

    Each release is replayed against the register it used (today's file or the version kept
    under ``registers/``, docs/design.md section 10), histories following individuals by id
    as the statistics file does. The replay stops at the first release it cannot reproduce:
    an imported one, one whose snapshot file is gone or changed since (checksum), or one
    whose register version is missing or was read with other hierarchies than today's.

    Args:
        series, inputs, register: the dataset's release series, its inputs and today's
            register (``register`` made for ``inputs``).
        published: the published releases, in publication order.
    """
    started = time.perf_counter()
    register.check_reads(inputs)
    cfg = series.ws.config
    history: History | None = None
    carried: tuple[pa.Table, pa.Table] | None = None  # the replayed statistics file, by id
    domain = set(inputs.sensitive_domain) if inputs.sensitive_domain is not None else None
    out = Baseline()
    stopped = ""
    for r in published:
        coded: Register | None = None
        register_sha = ""
        params: DraftParams = r.params
        path = Path(params.snapshot) if params.snapshot else None
        stopped = _unavailable(r.seq, params, path)
        if not stopped:
            coded, register_sha, stopped = _register_of(series.ws, inputs, register, r)
        if stopped:
            break
        assert path is not None and coded is not None
        protected = list(params.protected_values or inputs.protected)
        statistics = StatisticsFile(coded, protected, register_sha)
        history = statistics.load(carried, np.full(len(coded.ids), params.l))
        pp = _localized(params)
        table = read_csv(path, "snapshot")
        snap = snapshot_from_table(
            table, path, cfg.id_column, inputs.qis, cfg.sensitive, coded, inputs.hierarchies, domain
        )
        record_set = pd.Index(protected).get_indexer(pd.Index(snap.value)).astype(np.int64)
        try:
            result = anonymize_history(
                coded.keys,
                SnapshotCodes(snap.individual, record_set, len(protected)),
                history,
                pp,
                register.search_hierarchies(pp.algorithm, params.numeric_quasi_identifiers),
                params.dilution is Dilution.PRESENCE,
                budget=int(np.floor(float(params.suppression_budget or 0.0) * len(snap.individual))),
                seed=r.seq,
            )
        except InfeasibleError as exc:
            why = str(exc)
            if isinstance(exc, TableInfeasibleError):
                why = exc.describe([repr(protected[v]) for v in exc.values])
            stopped = f"release {r.seq} is infeasible under the baseline ({why})"
            break
        history = result.history
        carried = statistics.tables(history)
        out.max_p.append(_max_breach(carried))
    done = len(out.max_p)
    if stopped:
        out.note = (
            f"replayed releases 1-{done}; stopped because {stopped}" if done else f"no release replayed: {stopped}"
        )
    else:
        out.note = f"replayed all {done} releases"
    if carried is not None and done:
        out.individuals_above = _individuals_above(carried, cfg.ell)
    out.seconds = time.perf_counter() - started
    return out


def _unavailable(seq: int, params: DraftParams, path: Path | None) -> str:
    """Why release ``seq``'s snapshot cannot be replayed, or "" when it can."""
    if params.imported:
        return f"release {seq} was imported (its snapshot is not a release input)"
    if path is None or not path.is_file():
        return f"the snapshot of release {seq} is not available"
    if params.snapshot_sha256 and release_files.sha256_file(path) != params.snapshot_sha256:
        return f"the snapshot of release {seq} changed since it was published ({path})"
    return ""


def _localized(params: DraftParams) -> PrivacyParams:
    """The baseline's settings for a release: its own, under the localized guarantee; those a
    release made before a setting existed does not record are the ones it was made with
    (state.params)."""
    return PrivacyParams(
        ell=params.l,
        strategy=params.strategy,
        k_prime=params.k_prime,
        alpha=params.alpha,
        guarantee=Guarantee.LOCALIZED,
        suppression_model=params.suppression_model,
        algorithm=params.algorithm,
        # null for a strategy without k': its default, never read
        after_k_prime=params.after_k_prime or AfterKPrime.STOP,
        partition_model=params.partition_model or PartitionModel.PARTS,
    )


def _individuals_above(carried: tuple[pa.Table, pa.Table], ell: float) -> int:
    """The register individuals whose replayed breach probability passes 1/ℓ (the bound the
    localized guarantee allows to be passed)."""
    members, classes = carried
    survival = classes.column("survival").to_numpy()
    above = np.unique(classes.column("class").to_numpy()[1.0 - survival > 1.0 / ell + TIE_TOLERANCE])
    return int(np.isin(members.column("class").to_numpy(), above).sum())


def _register_of(
    ws: Workspace, inputs: DatasetInputs, register: RegisterReader, r: PublishedRelease
) -> tuple[Register | None, str, str]:
    """The register release ``r`` used and its sha256, or why it cannot be had (a sentence
    for the note)."""
    manifest = Manifest.read(Path(r.directory) / release_files.MANIFEST_FILE)
    sha = manifest.sha256.register_file
    if sha == register.file_sums["register"]:
        return register.register, sha, ""
    if manifest.sha256.hierarchies != register.file_sums["hierarchies"]:
        return None, sha, f"release {r.seq} was made with other hierarchies than today's"
    try:
        kept = load_register_version(ws.root, sha, ws.config.id_column, inputs.qis, inputs.hierarchies)
    except InputError as exc:
        return None, sha, f"the register of release {r.seq} cannot be read ({exc})"
    return kept, sha, ""


def _max_breach(stats: tuple[pa.Table, pa.Table]) -> float:
    """Largest p over everyone in a statistics file, those who left the register included."""
    survival = stats[1].column("survival").to_numpy()
    return float(1.0 - survival.min()) if survival.size else 0.0
