"""The release suites as the gate before publication: a draft that fails them is marked
failed with its results stored, and nothing is published or counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cli, make_workspace, read_config, snapshot, state_of, write_config

from checks.evidence import HTML_FILE, JSON_FILE
from serialpub.config import load_config
from serialpub.errors import ValidationFailed
from serialpub.io.release_files import sha256_file
from serialpub.workflow.publisher import Publisher


@pytest.mark.slow
def test_published_release_carries_its_evidence(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    ws = load_config(root)
    outcome = Publisher(ws).publish(snapshot(root, 1))
    manifest = json.loads((outcome.directory / "manifest.json").read_text())
    validation = manifest["validation"]
    assert validation["success"] is True and validation["global_guarantee_checked"] is True
    assert set(validation["suites"]) == {
        "register",
        "snapshot",
        "contract",
        "disjointness",
        "guarantee",
        "coverage",
        "localized",
        "utility",
    }
    assert validation["sha256"] == sha256_file(outcome.directory / JSON_FILE)
    evidence = json.loads((outcome.directory / JSON_FILE).read_text())
    assert [s["suite"] for s in evidence["suites"]] == list(validation["suites"])
    assert "PASSED" in (outcome.directory / HTML_FILE).read_text()
    stored = Publisher(ws).store.validation_results("clinic", 1)
    assert {r["suite"] for r in stored} == set(validation["suites"])
    assert all(r["success"] and r["release_status"] == "published" for r in stored)
    # the suites' result checksums: in the evidence, not in the published manifest (a
    # function of the raw snapshot; docs/threat-model.md)
    assert {r["suite"]: r["sha256"] for r in stored} == {s["suite"]: s["sha256"] for s in evidence["suites"]}
    assert all("sha256" not in v for v in validation["suites"].values())


@pytest.fixture
def strict_workspace(tmp_path: Path) -> Path:
    """Release 1 published; then a utility threshold release 2 cannot meet."""
    root = make_workspace(tmp_path / "ws")
    Publisher(load_config(root)).publish(snapshot(root, 1))
    config = read_config(root)
    config["validation"] = {"max_group_size": 1}
    write_config(root, config)
    return root


@pytest.mark.slow
def test_failed_validation_publishes_nothing_and_keeps_the_state(strict_workspace: Path) -> None:
    root = strict_workspace
    before = state_of(root)
    publisher = Publisher(load_config(root))
    with pytest.raises(ValidationFailed) as caught:
        publisher.publish(snapshot(root, 2))
    assert "release 2" in str(caught.value) and "nothing was published" in str(caught.value)
    assert any(line.startswith("utility:") and "group" in line for line in caught.value.failures)
    assert state_of(root) == before  # published releases, statistics file and folder listing
    assert not list((root / "releases" / "clinic").glob(".staging-*"))
    stored = publisher.store.validation_results("clinic", 2)
    assert stored and all(r["release_status"] == "failed" for r in stored)
    assert [r["suite"] for r in stored if not r["success"]] == ["utility"]
    assert publisher.store.open_release("clinic") is None
    actions = [e["action"] for e in publisher.store.audit_log("clinic") if e["release"] == 2]
    assert actions == ["draft", "failed"]


@pytest.mark.slow
def test_cli_reports_the_failed_expectations_and_exits_3(strict_workspace: Path) -> None:
    proc = cli("release", "--config", strict_workspace, "--snapshot", snapshot(strict_workspace, 2))
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("serialpub: validation failed: release 2")
    assert any(line.startswith("  - utility:") for line in lines[1:])
    assert "Traceback" not in proc.stderr
