"""What a release shows about presence (docs/threat-model.md, "What a release reveals about
presence"): the register individuals in no published region (shown absent) and those in a
region with as many records as register individuals (shown present), counted one by one
from the files (hierarchy CSVs, register, data.parquet) and compared with the release
report, the series report, the release table and the breach computation in both dilution
modes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import PublishedWorkspaces
from helpers import QIS

from anonymizer.regions import PresenceShown
from checks.breach import Draft, Population, PriorState, compute_breach
from serialpub.cli.app import console, outcome_table
from serialpub.config import load_config
from serialpub.io import release_files
from serialpub.report.render import read_presence_shown
from serialpub.report.series import SERIES_HTML, SERIES_JSON
from serialpub.workflow.publisher import Publisher

RELEASES = 3


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory, published_workspaces: PublishedWorkspaces) -> Path:
    """The small clinic workspace with its three releases published (a private copy)."""
    return published_workspaces.copy(tmp_path_factory.mktemp("presence") / "ws", releases=RELEASES)


def brute_force(root: Path, data: pd.DataFrame, present: set[str] | None = None) -> PresenceShown:
    """Every register individual matched against every published region by its labels'
    leaf sets, read from the hierarchy files: a loop over individuals and groups, nothing
    shared with the code under test. ``present`` does not change the answer (the figures
    are over the whole register); it is here to say so."""
    leaves_of: dict[str, dict[str, set[str]]] = {}
    for q in QIS:
        labels: dict[str, set[str]] = {}
        for line in (root / "hierarchies" / f"{q}.csv").read_text(encoding="utf-8").splitlines():
            row = line.split(";")
            for label in row:
                labels.setdefault(label, set()).add(row[0])
        leaves_of[q] = labels
    register = pd.read_csv(root / "register.csv", dtype=str)
    records = data.groupby(QIS, observed=True).size()
    members = dict.fromkeys(records.index, 0)
    outside = 0
    for _, person in register.iterrows():
        hits = [g for g in records.index if all(person[q] in leaves_of[q][lab] for q, lab in zip(QIS, g, strict=True))]
        outside += not hits
        for g in hits:
            members[g] += 1
    full = sum(n for g, n in members.items() if n and records[g] >= n)
    return PresenceShown(register_individuals=len(register), in_no_region=outside, in_full_regions=full)


def _release(root: Path, seq: int) -> Path:
    return load_config(root).dataset_dir / release_files.release_name(seq)


def test_each_report_counts_what_its_release_shows_about_presence(series: Path) -> None:
    expected = [brute_force(series, pd.read_parquet(_release(series, seq) / "data.parquet"))
                for seq in range(1, RELEASES + 1)]  # fmt: skip
    # the clinic's sparse register leaves individuals in no region, and some regions full
    assert all(e.register_individuals == 60 for e in expected)
    assert any(e.in_no_region > 0 for e in expected) and any(e.in_full_regions > 0 for e in expected)
    for seq, want in enumerate(expected, start=1):
        folder = _release(series, seq)
        assert read_presence_shown(folder) == want
        page = (folder / "report.html").read_text(encoding="utf-8")
        row = page[page.index('<tr id="presence-shown">') :].split("</tr>")[0]
        assert f"{want.in_no_region:,} of 60 register individuals lie in no published region" in row
        assert f"{want.in_full_regions:,} lie in a region with as many records as register individuals" in row
    publisher = Publisher(load_config(series))
    page = publisher.series_report(baseline=False)
    rows = json.loads((page.parent / SERIES_JSON).read_text(encoding="utf-8"))["releases"]
    assert [(r["in_no_region"], r["in_full_regions"]) for r in rows] == [
        (e.in_no_region, e.in_full_regions) for e in expected
    ]
    html = (page.parent / SERIES_HTML).read_text(encoding="utf-8")
    assert "shown absent / present²" in html
    for e in expected:
        assert f'<td class="num">{e.in_no_region:,}<br>{e.in_full_regions:,}</td>' in html


@pytest.mark.parametrize("presence", [False, True])
def test_the_breach_computation_counts_the_whole_register_in_both_modes(series: Path, presence: bool) -> None:
    """Under presence the candidates are the present individuals, but what a release shows
    about presence concerns everyone in the register: the count does not change with the
    mode or with who is present."""
    ws = load_config(series)
    publisher = Publisher(ws)
    protected = publisher.protected
    for seq in range(1, RELEASES + 1):
        draft = release_files.read_release(_release(series, seq))[1]
        present = np.arange(0, 60, 3) if presence else None
        population = Population(publisher.register.keys, publisher.register.ids.to_numpy(), presence, present)
        prior = PriorState(protected, np.ones((60, len(protected))), 2.0)
        shown = compute_breach(
            Draft(draft, publisher.qis, "disease", publisher.hierarchies), population, prior, per_unit=True
        ).presence_shown
        assert shown == brute_force(series, draft)


@pytest.mark.slow
def test_the_release_table_shows_the_absent_count(published_workspaces: PublishedWorkspaces, tmp_path: Path) -> None:
    root = published_workspaces.copy(tmp_path / "ws")
    outcome = Publisher(load_config(root)).publish(root / "snapshots" / "snapshot-0002.csv")
    want = brute_force(root, pd.read_parquet(_release(root, 2) / "data.parquet")).in_no_region
    assert outcome.shown_absent == want
    with console.capture() as captured:
        console.print(outcome_table([outcome], 2.0))
    text = captured.get()
    header = next(line for line in text.splitlines() if line.split()[:2] == ["rel", "records"])
    row = next(line for line in text.splitlines() if line.strip().startswith("2 "))
    # every heading whole (no ellipsis), and the count right-aligned under its own
    assert "…" not in text
    end = header.index("absent") + len("absent")
    assert row[:end].split()[-1] == str(want) and row[end] == " "
