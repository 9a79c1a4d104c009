"""Loading the state and anonymizing a snapshot, for a draft or ahead of it
(docs/scaling.md, "Anonymizing ahead").

A draft is opened only for a snapshot whose input suite passed, and the state is the one
after the newest published release. The suite (Great Expectations, single-threaded Python)
and the anonymizer (array work) are independent, so :func:`ahead` loads the state and
anonymizes on the second core while the suite runs, before the draft is opened. Its result
is used only when it was computed for exactly the draft that is then opened
(:func:`take`): the same release number (the anonymizer's seed) and the same newest
published release, whose statistics it read. Otherwise the draft computes its own
(:func:`load_state`, :func:`anonymize_snapshot`), so the released table and the state are
those of computing it after opening the draft; an unexpected error of the work ahead is
raised to the draft, never dropped. Run in turn (:func:`anonymizer.overlap.sequential`)
nothing is computed ahead.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from anonymizer.noisy_split import noise_generator
from anonymizer.release import History, ReleaseResult, SnapshotCodes, anonymize_history
from anonymizer.search import InfeasibleError
from anonymizer.settings import Dilution, PartitionTest
from serialpub.config import Config, Workspace
from serialpub.errors import InputError
from serialpub.io.inputs import Snapshot
from serialpub.workflow import progress
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.register_reader import RegisterReader
from state.store import OpenRelease


@dataclass(frozen=True)
class Anonymized:
    """A snapshot anonymized against the state after the newest published release.

    Attributes:
        history: the state before this release (the statistics file as loaded).
        result: the anonymizer's result for the release.
        seq: the release number it was computed for (the anonymizer's seed).
        basis: the release row of the newest published release, None before the first.
        seconds_state: seconds loading the state.
        seconds_anonymize: seconds anonymizing.
        table: the release table of ``result``, when it was built ahead too
            (:func:`serialpub.workflow.drafting.published_table`).
    """

    history: History
    result: ReleaseResult
    seq: int
    basis: int | None
    seconds_state: float
    seconds_anonymize: float
    table: pd.DataFrame | None = None


def record_sets(protected: Sequence[str], snap: Snapshot) -> npt.NDArray[np.int64]:
    """Index of every snapshot record's value in ``protected``, -1 for none, shape (R,)."""
    codes, labels = snap.value_order  # each distinct value looked up once, not 1M texts
    return pd.Index(protected).get_indexer(pd.Index(labels.tolist())).astype(np.int64)[codes]


def load_state(series: DatasetSeries, register: RegisterReader) -> History:
    """The state after the dataset's newest published release, for ``register``
    (the statistics file; docs/design.md section 4)."""
    with progress.step("loading the state"):
        ell = np.full(len(register.register.ids), float(series.ws.config.ell))
        return register.statistics.load_latest(series.store, series.dataset, ell)


#: the secret seed of ``partition_test: noisy``, beside the signing key (docs/threat-model.md)
NOISE_SEED = "partition-noise.seed"
_SEED_BYTES = 32


def noise_seed_path(ws: Workspace) -> Path | None:
    """Where the workspace keeps its noisy split test's secret seed: beside its signing key
    (None without one)."""
    key = ws.signing_key_path
    return None if key is None else key.parent / NOISE_SEED


def release_noise(ws: Workspace, seq: int) -> np.random.Generator | None:
    """The secret noise of release ``seq`` under ``partition_test: noisy`` (None under the
    sound test): :func:`anonymizer.noisy_split.noise_generator` of the seed file, which is
    made (32 random bytes, owner-only) the first time. The seed is never published: with it,
    an adversary would know the noise and read a refused split's counts.

    Raises:
        InputError: the seed file is shorter than ``_SEED_BYTES``, or cannot be made.
    """
    path = noise_seed_path(ws)
    if ws.config.partition_test is not PartitionTest.NOISY or path is None:
        return None
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first: read theirs
        except OSError as exc:
            raise InputError(
                f"{path}: cannot make the noisy split test's secret seed ({exc.strerror}); make its folder writable"
            ) from None
        else:
            with os.fdopen(fd, "wb") as out:
                out.write(secrets.token_bytes(_SEED_BYTES))
    secret = path.read_bytes()
    if len(secret) < _SEED_BYTES:
        raise InputError(
            f"{path}: the noisy split test's secret seed holds {len(secret)} bytes, not "
            f"{_SEED_BYTES}; restore it from the backup of the signing key"
        )
    return noise_generator(secret, ws.config.dataset, seq)


def anonymize_snapshot(
    cfg: Config,
    inputs: DatasetInputs,
    register: RegisterReader,
    snap: Snapshot,
    history: History,
    seq: int,
    noise: np.random.Generator | None = None,
) -> ReleaseResult:
    """Anonymize ``snap`` as release ``seq`` (its number seeds the anonymizer) after
    ``history`` (docs/design.md sections 3-5).

    Raises:
        anonymizer.search.InfeasibleError: no generalization fits the suppression budget.
    """
    with progress.step("anonymizing"):
        return anonymize_history(
            register.register.keys,
            SnapshotCodes(snap.individual, record_sets(inputs.protected, snap), len(inputs.protected)),
            history,
            inputs.params,
            register.search_hierarchies(),
            cfg.dilution is Dilution.PRESENCE,
            budget=int(np.floor(cfg.suppression_budget * len(snap.individual))),
            seed=seq,
            noise=noise,
            # the report's account of what blocked the splits (docs/reports.md); its cost at 1M/5M
            # is in docs/anonymization.md
            explain=True,
        )


def newest_published(series: DatasetSeries) -> tuple[int | None, int]:
    """The release row of the dataset's newest published release (None before the first)
    and the number the next release gets."""
    published = series.store.published(series.dataset)
    return (published[-1].id, published[-1].seq + 1) if published else (None, 1)


def ahead(
    series: DatasetSeries, inputs: DatasetInputs, register: RegisterReader, snap: Snapshot, stop: threading.Event
) -> Anonymized | None:
    """:func:`load_state` and :func:`anonymize_snapshot` of the coded snapshot ``snap``, for
    the release the next draft will be, before the draft is opened. None on the expected
    conditions under which the draft computes its own, in order: ``stop`` was set (the
    snapshot failed its checks), a release was published while the state was read, or no
    generalization fits the budget (the draft raises that with its advice,
    :func:`serialpub.workflow.drafting.infeasible_advice`). Any other error is raised to
    the draft that runs it."""
    basis, seq = newest_published(series)
    if stop.is_set():
        return None
    t0 = time.perf_counter()
    history = load_state(series, register)
    t_state = time.perf_counter() - t0
    if stop.is_set():
        return None
    t1 = time.perf_counter()
    try:
        result = anonymize_snapshot(
            series.ws.config, inputs, register, snap, history, seq, release_noise(series.ws, seq)
        )
    except InfeasibleError:
        return None
    done = Anonymized(history, result, seq, basis, t_state, time.perf_counter() - t1)
    # the statistics read must be the basis's: nothing was published meanwhile
    return done if newest_published(series) == (basis, seq) else None


def take(series: DatasetSeries, done: Anonymized | None, opened: OpenRelease) -> Anonymized | None:
    """``done``, the result of :func:`ahead`, if it was computed for the draft ``opened``:
    the same release number and the same newest published release (read again now that
    the draft is open, when no other release can be published). None otherwise."""
    if done is None or done.seq != opened.seq:
        return None
    return done if newest_published(series) == (done.basis, done.seq) else None
