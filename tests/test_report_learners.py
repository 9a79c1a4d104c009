"""The learning adversary in the release report (serialpub.workflow.learning;
docs/threat-model.md, "The learning adversary"): every release's report carries the
figures ``serialpub audit --learners`` gives on the public copy of the releases published
up to it, and the setting changes no published byte."""

from __future__ import annotations

import hashlib
import json
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from helpers import cli, make_workspace, read_config, snapshot, write_config

from anonymizer.learners.core import LEARNERS
from serialpub.analysis.audit import audit_workspace
from serialpub.config import ReportConfig

PERIODS = 3


def _series(root: Path, learners: list[str], periods: int = PERIODS, **settings: Any) -> list[dict[str, Any]]:
    """Publish the periods with ``report.learners: learners``; after each release, its
    report's ``learners`` record and the audit's learner figures on the public files so far."""
    config = read_config(root)
    config.update(settings, report={"learners": learners})
    write_config(root, config)
    out = []
    for t in range(1, periods + 1):
        proc = cli("release", "--config", root, "--snapshot", snapshot(root, t))
        assert proc.returncode == 0, proc.stderr
        folder = root / "releases" / "clinic" / f"release-{t:04d}"
        record = json.loads((folder / "report.json").read_text())["learners"]
        audited = audit_workspace(root, learners=learners).learners if learners else None
        html = (folder / "report.html").read_text()
        data = hashlib.sha256((folder / "data.parquet").read_bytes()).hexdigest()
        out.append({"record": record, "audited": audited, "html": html, "data": data})
    return out


@pytest.mark.parametrize(
    ("dilution", "periods"), [("register", 2), pytest.param("presence", PERIODS, marks=pytest.mark.slow)]
)
def test_each_report_shows_the_audits_learners_on_the_releases_so_far(
    tmp_path: Path, dilution: str, periods: int
) -> None:
    names = ["nb", "nb-em3", "logistic-pairs"]
    root = make_workspace(tmp_path / "ws", periods=periods, n=80, dilution=dilution)
    compared = 0
    for t, release in enumerate(_series(root, names, periods), start=1):
        record, audited = release["record"], release["audited"]
        assert record["releases"] == t and record["notes"] == []
        assert record["pairs"] == audited.pairs and record["ell"] == audited.ell
        assert [f["name"] for f in record["learners"]] == ["uniform", *names]
        for mine, theirs in zip(record["learners"], audited.learners, strict=True):
            assert mine["name"] == theirs.name
            # the logistic fit stops at its gradient tolerance: its cells in another order end a
            # few 1e-6 away; the charge and the naive Bayes learners are closed forms
            tol = 1e-4 if theirs.name == "logistic-pairs" else 1e-9
            assert mine["max_p"] == pytest.approx(theirs.max_p, rel=tol, abs=1e-12), (t, theirs.name)
            assert mine["max_uniform"] == pytest.approx(theirs.max_uniform, rel=1e-9, abs=1e-12), (t, theirs.name)
            assert (mine["above"], mine["max_value"]) == (theirs.above, theirs.max_value), (t, theirs.name)
            per_value = [mine["max_per_value"][v] for v in audited.values]
            assert per_value == pytest.approx(theirs.max_per_value, rel=tol, abs=1e-12), (t, theirs.name)
            compared += mine["max_p"] > 0
        # the page shows the table beside the charge, and the strongest learner in the verdict box
        assert 'id="learners"' in release["html"] and 'id="learners-verdict"' in release["html"]
        strongest = max(record["learners"][1:], key=lambda f: f["max_p"])
        assert f"{strongest['max_p']:.4f}" in release["html"]
    assert compared >= 3 * periods  # the comparison compared figures, not zeros


@pytest.mark.slow
def test_the_learners_change_no_published_byte(tmp_path: Path) -> None:
    """The same series with the learners and without: the same data.parquet in every
    release; without them report.json says so (null) and the page has no learner section."""
    with_nb = _series(make_workspace(tmp_path / "with"), ["nb"])
    without = _series(make_workspace(tmp_path / "without"), [])
    assert [r["data"] for r in with_nb] == [r["data"] for r in without]
    assert all(r["record"] is None and 'id="learners"' not in r["html"] for r in without)
    assert all(r["record"]["learners"][1]["name"] == "nb" for r in with_nb)


@pytest.mark.slow  # publishes a series to reach the note; the figures' check stays quick
def test_a_changed_register_is_named_not_computed(tmp_path: Path) -> None:
    """A series whose register changed after a release: the report's learners read one
    register, so they say which release was published with another and leave the figures
    to the audit, which reads every version."""
    root = make_workspace(tmp_path / "ws", periods=2)
    assert cli("release", "--config", root, "--snapshot", snapshot(root, 1)).returncode == 0
    register = root / "register.csv"
    register.write_text(register.read_text() + "p999,M,65001,25\n")
    proc = cli("release", "--config", root, "--snapshot", snapshot(root, 2))
    assert proc.returncode == 0, proc.stderr
    record = json.loads((root / "releases" / "clinic" / "release-0002" / "report.json").read_text())["learners"]
    assert record["learners"] == [] and record["releases"] == 0
    assert record["notes"][0].startswith("not computed: release 1 was published with another register")


def test_the_setting_names_the_learners() -> None:
    """``report.learners`` takes exactly the audit's learner names."""
    (item,) = typing.get_args(ReportConfig.model_fields["learners"].annotation)
    assert typing.get_args(item) == LEARNERS
    assert ReportConfig().learners == ["nb"]


@pytest.mark.slow  # publishes a series to reach the note; the figures' check stays quick
def test_a_series_above_the_work_bound_is_named_not_computed(tmp_path: Path) -> None:
    """Above ``report.learners_max_work`` (register cells × sensitive values × releases) the
    report says so and gives the figures to the audit; at the bound it computes them."""
    root = make_workspace(tmp_path / "ws", periods=1)
    # the clinic register's cells × its six diseases × one release: the work of release 1
    cells = len(set(map(tuple, pd.read_csv(root / "register.csv", dtype=str)[["sex", "zipcode", "age"]].values)))
    work = cells * 6
    config = read_config(root)
    write_config(root, {**config, "report": {"learners": ["nb"], "learners_max_work": work - 1}})
    assert cli("release", "--config", root, "--snapshot", snapshot(root, 1)).returncode == 0
    record = json.loads((root / "releases" / "clinic" / "release-0001" / "report.json").read_text())["learners"]
    assert record["learners"] == []
    assert record["notes"][0].startswith(f"not computed: {work:,} register cells × sensitive values × releases")
    again = make_workspace(tmp_path / "again", periods=1)
    write_config(again, {**read_config(again), "report": {"learners": ["nb"], "learners_max_work": work}})
    assert cli("release", "--config", again, "--snapshot", snapshot(again, 1)).returncode == 0
    record = json.loads((again / "releases" / "clinic" / "release-0001" / "report.json").read_text())["learners"]
    assert [f["name"] for f in record["learners"]] == ["uniform", "nb"] and record["notes"] == []
