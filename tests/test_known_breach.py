"""Models with a known breach are an explicit choice (docs/threat-model.md, "Models with a
known breach"): ``partition_model: parts`` (and the bottom-up search, which reads its cells'
counts) and ``suppression_model: paper`` need ``accept_known_breach``; a release made under
one says so in its manifest, its report, the sign-off prompt and the audit. And a refusal
names what failed: the whole table, when no partition at all can meet the requirement."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import DISEASES, cli, make_workspace, read_config, snapshot, write_config

from anonymizer.search import Cells, InfeasibleError, TableInfeasibleError
from anonymizer.topdown import partition
from serialpub import demo
from serialpub.analysis.audit import audit_workspace
from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.known_breach import release_span
from serialpub.workflow import orchestration
from serialpub.workflow.publisher import Publisher

RELEASE = "release-0001"


@pytest.mark.parametrize(
    ("settings", "accept", "named"),
    [
        ({"partition_model": "parts"}, ["parts"], r"partition_model 'parts' has a known breach"),
        ({"algorithm": "bottomup"}, ["parts"], r"algorithm 'bottomup' \(it reads its cells' counts.*known breach"),
        (
            {"suppression_model": "paper", "suppression_budget": 0.05, "algorithm": "bottomup"},
            ["parts", "paper"],
            r"known breach",
        ),
    ],
)
def test_a_model_with_a_known_breach_needs_its_acknowledgement(
    tmp_path: Path, settings: dict[str, object], accept: list[str], named: str
) -> None:
    """It used to be accepted silently; now the release is refused with one line naming the
    setting and the acknowledgement to write (exit 2, nothing drafted), and the acknowledged
    configuration is accepted."""
    root = make_workspace(tmp_path / "ws", **settings)
    proc = cli("release", "--config", root, "--snapshot", snapshot(root, 1))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert (
        "setting 'accept_known_breach'" in line
        and "docs/threat-model.md" in line
        and len(line.replace(str(root), "ws")) <= 300
    )
    assert f"accept_known_breach: [{', '.join(accept)}]" in line
    with pytest.raises(InputError, match=named):
        load_config(root)
    assert not (root / "state.sqlite").exists() and not (root / "releases").exists()  # refused before anything

    write_config(root, {**read_config(root), "accept_known_breach": accept})
    assert load_config(root).config.accept_known_breach == accept


def test_an_acknowledgement_of_a_model_not_in_use_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", accept_known_breach=["parts"])
    with pytest.raises(InputError, match=r"accept_known_breach': acknowledges 'parts', a model .* not use"):
        load_config(root)


@pytest.mark.slow
def test_the_demo_flags_write_the_acknowledgement(tmp_path: Path) -> None:
    """``serialpub demo --partition-model parts`` still works: its configuration names the
    model it chose, and the default demo's acknowledges nothing."""
    assert demo.create_workspace(tmp_path / "parts", rounds=1, partition_model="parts").config.accept_known_breach == [
        "parts"
    ]
    paper = demo.create_workspace(tmp_path / "paper", rounds=1, suppression_model="paper")
    assert paper.config.accept_known_breach == ["parts", "paper"]  # the paper model runs the bottom-up search
    default = demo.create_workspace(tmp_path / "default", rounds=1)
    assert default.config.accept_known_breach == []
    assert "accept_known_breach: []" in (tmp_path / "default" / "serialpub.yaml").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_parts_release_states_its_risk_in_the_manifest_report_prompt_and_audit(tmp_path: Path) -> None:
    root = make_workspace(
        tmp_path / "ws",
        partition_model="parts",
        accept_known_breach=["parts"],
        sign_off={"auto_approve": False, "approvers": ["erin"]},
    )
    proc = cli("release", "--config", root, "--snapshot", snapshot(root, 1))
    assert proc.returncode == 0, proc.stderr
    assert "known breach, accepted in the configuration (accept_known_breach: parts)" in proc.stdout
    facts = orchestration.report(root, 1)  # the Airflow gate's text
    assert "**Known breach, accepted in the configuration (parts):**" in facts["markdown"]
    assert cli("approve", "--config", root, "--release", "1", login="erin").returncode == 0

    folder = root / "releases" / "clinic" / RELEASE
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["accepted_known_breach"] == ["parts"] and manifest["partition_model"] == "parts"
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert 'id="known-breach"' in page and "Known breach, accepted by the publisher" in page

    result = audit_workspace(root)
    assert result.ok
    [note] = [n for n in result.notes if "known breach" in n]
    assert note.startswith("release(s) 1 were made under a model with a known breach (partition model 'parts'")
    out = cli("audit", root)
    text = " ".join(out.stdout.split())  # the terminal wraps long lines
    assert text.count("note: release(s) 1 were made under a model with a known breach") == 1
    # its own verdict and exit status: a script tells it from a clean PASS (0)
    assert out.returncode == 6 and text.endswith("verdict: PASS, with accepted known breach: parts"), text


@pytest.mark.slow
def test_an_automatic_approval_prints_the_known_breach_and_the_series_report_carries_it(tmp_path: Path) -> None:
    """Under sign_off.auto_approve no person reads the prompt: the command prints the risk
    (it used to print nothing), and the series report and every report.json carry the model."""
    root = make_workspace(tmp_path / "ws", partition_model="parts", accept_known_breach=["parts"])
    for t in (1, 2):
        proc = cli("release", "--config", root, "--snapshot", snapshot(root, t))
        assert proc.returncode == 0, proc.stderr
        text = " ".join(proc.stdout.split())
        assert (
            "approved automatically (sign_off.auto_approve) with a known breach, accepted in the configuration "
            "(accept_known_breach: parts): partition model 'parts'" in text
        ), text
    folder = root / "releases" / "clinic"
    for t in (1, 2):
        report = json.loads((folder / f"release-000{t}" / "report.json").read_text(encoding="utf-8"))
        assert report["accepted_known_breach"] == ["parts"]
    assert cli("report", "--config", root, "--no-baseline").returncode == 0
    series = json.loads((folder / "series-report.json").read_text(encoding="utf-8"))
    [breach] = series["known_breach"]
    assert (breach["model"], breach["releases"], breach["span"]) == ("parts", [1, 2], "1-2")
    assert breach["risk"].startswith("partition model 'parts'")
    assert [r["known_breach"] for r in series["releases"]] == [["parts"], ["parts"]]
    page = (folder / "series-report.html").read_text(encoding="utf-8")
    assert 'id="known-breach-parts"' in page and "Known breach, accepted by the publisher: parts" in page


@pytest.mark.slow
def test_a_default_release_states_no_risk(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    Publisher(load_config(root)).publish(snapshot(root, 1))
    folder = root / "releases" / "clinic" / RELEASE
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert "accepted_known_breach" not in manifest and manifest["partition_model"] == "published"
    assert 'id="known-breach"' not in (folder / "report.html").read_text(encoding="utf-8")
    assert json.loads((folder / "report.json").read_text(encoding="utf-8"))["accepted_known_breach"] == []
    result = audit_workspace(root)
    assert not [n for n in result.notes if "known breach" in n] and str(result.verdict) == "PASS"


def test_the_audit_names_every_release_made_under_such_a_model() -> None:
    """One line, every release number: consecutive ones as ranges, none left out."""
    assert release_span([1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 20]) == "1-3, 5, 7-13, 20"
    assert release_span([4]) == "4" and release_span([]) == ""


def test_a_refusal_names_the_table_when_the_whole_table_fails(tmp_path: Path) -> None:
    """Presence known and every value protected: no partition can meet the requirement, and
    the refusal used to name one QI cell where the search stopped. It now names the table
    and the value."""
    root = make_workspace(tmp_path / "ws", dilution="presence", protected_values=DISEASES)
    with pytest.raises(InputError) as err:
        Publisher(load_config(root)).publish(snapshot(root, 1))
    message = str(err.value)
    assert "the whole snapshot fails, not one QI cell" in message
    assert "individuals with QI values" not in message
    assert any(f"records of '{d}'" in message for d in DISEASES)


def _cells(keys: list[list[int]], counts: list[int], candidates: list[int], requirement: list[float]) -> Cells:
    return Cells(
        keys=np.array(keys, dtype=np.int64),
        candidates=np.array(candidates, dtype=np.int64),
        records=np.array(counts, dtype=np.int64),
        counts=np.array([[c] for c in counts], dtype=np.int64),
        requirement=np.array([[r] for r in requirement]),
    )


def test_the_search_tells_a_failing_table_from_a_failing_cell() -> None:
    from anonymizer.hierarchy import Hierarchy

    sex = Hierarchy.from_rows("sex", [(1, ["m", "*"]), (2, ["f", "*"])], "sex.csv")
    # 2 + 2 candidates, 1 + 1 records, requirement 3: the table needs 6 and has 4
    table = _cells([[0], [1]], [1, 1], [2, 2], [3.0, 3.0])
    with pytest.raises(TableInfeasibleError) as err:
        partition(table, [sex], presence=False)
    assert err.value.values == [0] and err.value.records == [2] and err.value.candidates == 4
    assert "need 3 candidates each, 6 in all, and the table has 4" in str(err.value)
    assert "'flu'" in err.value.describe(["'flu'"])
    # the table could pass (10 candidates for 2 records at 3), but one cell may not be linked again
    cell = _cells([[0], [1]], [1, 1], [8, 2], [3.0, np.inf])
    with pytest.raises(InfeasibleError) as err2:
        partition(cell, [sex], presence=False)
    assert not isinstance(err2.value, TableInfeasibleError) and "QI values (sex=" in str(err2.value)
