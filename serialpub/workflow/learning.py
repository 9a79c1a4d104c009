"""The learning adversary in the release report (docs/threat-model.md, "The learning
adversary"): the audit's learners (:mod:`anonymizer.learners`) fitted on every release
published so far and the draft, read as the public copy shows them, so that the approver
sees beside the uniform charge what ``serialpub audit --learners`` will print once the
draft is published.

Only public data feeds them: each release's ``data.parquet`` (the published ones from their
release folders, the draft from its staging folder) resolved against the public register,
exactly what a holder of the public copy reads. Nothing here changes what is published;
the figures are reported beside the verdict and do not change it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from anonymizer.joint import JointRelease
from anonymizer.learners.core import learner_report
from anonymizer.learners.figures import LearnerReport
from anonymizer.learners.resolved import resolved_series
from serialpub.io import release_files
from serialpub.workflow import progress
from serialpub.workflow.dataset_inputs import DatasetInputs
from serialpub.workflow.dataset_series import DatasetSeries
from serialpub.workflow.register_reader import RegisterReader


def draft_learners(
    series: DatasetSeries,
    inputs: DatasetInputs,
    register: RegisterReader,
    draft: pd.DataFrame,
    names: Sequence[str],
) -> LearnerReport | None:
    """The learners of ``names`` (the ``report.learners`` setting, in the order of
    :data:`anonymizer.learners.core.LEARNERS`) on the releases published so far and
    ``draft`` (the staged table as read back), with the charge (``uniform``) first. None
    when no learner is asked or no value is protected. A series larger than
    ``report.learners_max_work`` (register cells × sensitive values × releases) gets a report
    without figures and a note saying so. A series whose earlier releases were
    published with another register or other hierarchies gets a report without figures and
    a note naming the release: the learners here read one register, the audit reads every
    version (``serialpub audit --learners nb`` on the public copy)."""
    cfg = series.ws.config
    if not names or not inputs.protected:
        return None
    # the learners' arrays are (cells × sensitive values) per release: their size, known
    # before any table is read, bounds the time and memory they add to the validation
    values = len({*(inputs.sensitive_domain or ()), *inputs.protected})
    work = register.register.keys.counts.size * values * (len(series.store.published(cfg.dataset)) + 1)
    if work > cfg.report.learners_max_work:
        return LearnerReport(
            float(cfg.ell),
            0,
            notes=[
                f"not computed: {work:,} register cells × sensitive values × releases, above report.learners_max_work "
                f"({cfg.report.learners_max_work:,}); run 'serialpub audit --learners nb' on the public copy once the "
                "draft is published, or raise the setting"
            ],
        )
    with progress.step("learning adversary"):
        tables = published_tables(series, register)
        if isinstance(tables, str):
            return LearnerReport(float(cfg.ell), 0, notes=[tables])
        return series_learners([*tables, draft], inputs, register, float(cfg.ell), names)


def published_tables(series: DatasetSeries, register: RegisterReader) -> list[pd.DataFrame] | str:
    """The tables of the releases published so far, oldest first, as their release folders
    hold them; or why the learners here cannot read them (a note naming the first release
    published with another register or other hierarchies than ``register``'s)."""
    cfg = series.ws.config
    sums = register.file_sums
    tables = []
    for published in series.store.published(cfg.dataset):
        folder = series.ws.dataset_dir / release_files.release_name(published.seq)
        manifest, table = release_files.read_release(folder)
        if manifest.sha256.register_file != sums["register"] or manifest.sha256.hierarchies != sums["hierarchies"]:
            return (
                f"not computed: release {published.seq} was published with another register or other hierarchies "
                "than this draft's; run 'serialpub audit --learners nb' on the public copy once the draft is published"
            )
        tables.append(table)
    return tables


def series_learners(
    tables: Sequence[pd.DataFrame], inputs: DatasetInputs, register: RegisterReader, ell: float, names: Sequence[str]
) -> LearnerReport:
    """The learners of ``names`` and the charge on the releases ``tables`` (oldest first,
    each as published), resolved against ``register``: the public register and the
    declared hierarchies, with each release's own intervals for a numeric QI."""
    keys = register.register.keys  # coded rows: its distinct rows are the register's cells, in the releases' order
    releases = []
    for table in tables:
        read = inputs.read_hierarchies(table)
        hs = [read[q] for q in inputs.qis]
        releases.append(JointRelease.of(table, inputs.qis, inputs.sensitive, hs, keys))
    learned = resolved_series(releases, list(inputs.protected), ell, register.register.ids, keys.codes)
    return learner_report(learned, names)
