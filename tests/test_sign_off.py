"""The compliance sign-off gate outside Airflow (issue 6, part 3): ``serialpub release``
stops at the gate, ``serialpub approve`` publishes with the decision recorded in the state
and the manifest, ``serialpub reject`` ends the release without touching the state, and
automatic approval is allowed only when configured and is said in the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import Result, cli, make_workspace, snapshot, state_of

from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.pipeline import AUTO_APPROVER, Publisher
from serialpub.release_files import sha256_file
from state.store import StateError


def _cli(*args: str | Path) -> Result:
    return cli(*args)


@pytest.fixture
def gated(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws", sign_off={"auto_approve": False})


def test_release_waits_at_the_gate_then_approve_publishes(gated: Path) -> None:
    before = state_of(gated)
    proc = _cli("release", "--config", gated, "--snapshot", snapshot(gated, 1))
    assert proc.returncode == 0, proc.stderr
    assert "waits for its sign-off" in proc.stdout and "serialpub approve" in proc.stdout
    assert state_of(gated)[:2] == before[:2]  # nothing published, statistics file unchanged
    store = Publisher(load_config(gated)).store
    waiting = store.open_release("clinic")
    assert waiting is not None and waiting.status == "validated"

    # a later run of the CLI sees it waiting and does not fail it as abandoned
    busy = _cli("release", "--config", gated, "--snapshot", snapshot(gated, 2))
    assert busy.returncode == 2 and "release 1 (period '0001') is already validated" in busy.stderr

    proc = _cli("approve", "--config", gated, "--release", "1", "--by", "erin", "--comment", "fine")
    assert proc.returncode == 0, proc.stderr
    folder = gated / "releases" / "clinic" / "release-0001"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["sign_off"]["approver"] == "erin" and manifest["sign_off"]["automatic"] is False
    assert manifest["sign_off"]["report_sha256"] == sha256_file(folder / "report.html")
    [published] = store.published("clinic")
    assert published.manifest_sha256 == sha256_file(folder / "manifest.json")
    [decision] = store.sign_offs("clinic", 1)
    assert (decision.approver, decision.decision, decision.comment) == ("erin", "approved", "fine")
    actions = [e["action"] for e in store.audit_log("clinic")]
    assert actions == ["draft", "validated", "approved", "published"]


def test_reject_ends_the_release_without_touching_the_state(gated: Path) -> None:
    before = state_of(gated)
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    assert staged.staging.is_dir()
    proc = _cli("reject", "--config", gated, "--release", "1", "--by", "frank", "--comment", "too coarse")
    assert proc.returncode == 0, proc.stderr
    assert state_of(gated) == before
    assert not staged.staging.exists()
    [decision] = publisher.store.sign_offs("clinic", 1)
    assert (decision.decision, decision.approver) == ("rejected", "frank")
    # the next attempt gets number 1 again and publishes normally once approved
    again = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    assert again.seq == 1
    publisher.approve(1, "frank", "second try")
    publisher.finish(1)
    assert [r.seq for r in publisher.store.published("clinic")] == [1]


def test_no_publication_without_an_approving_sign_off(gated: Path) -> None:
    publisher = Publisher(load_config(gated))
    with pytest.raises(InputError, match="need a sign-off"):
        publisher.publish(snapshot(gated, 1))
    staged = publisher.prepare(snapshot(gated, 1))
    with pytest.raises(StateError, match="published only after an approving sign-off"):
        publisher.finish(staged.seq)
    with pytest.raises(InputError, match=r"automatic approval needs sign_off\.auto_approve"):
        publisher.approve(staged.seq, AUTO_APPROVER, "", automatic=True)
    with pytest.raises(InputError, match="approver's name is empty"):
        publisher.approve(staged.seq, "  ", "")
    with pytest.raises(InputError, match="reserved for automatic approvals"):
        publisher.approve(staged.seq, AUTO_APPROVER, "a person cannot pass for the automatic approval")
    assert publisher.store.published("clinic") == []


def test_automatic_approval_is_recorded_in_the_manifest(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")  # sign_off.auto_approve: true
    outcome = Publisher(load_config(root)).publish(snapshot(root, 1))
    sign_off = json.loads((outcome.directory / "manifest.json").read_text())["sign_off"]
    assert sign_off["automatic"] is True and sign_off["approver"] == AUTO_APPROVER
    assert sign_off["decision"] == "approved"


def test_approving_and_publishing_do_not_read_the_register(gated: Path) -> None:
    """Issue 17: the sign-off and publish steps (an Airflow task each) use the staged
    release and the state only, so a register that cannot be read does not stop them,
    and the register is never parsed on their way."""
    Publisher(load_config(gated)).prepare(snapshot(gated, 1), owner="awaiting sign-off")
    register = gated / "register.csv"
    register.rename(gated / "register.csv.away")
    publisher = Publisher(load_config(gated))
    publisher.approve(1, "erin", "fine")
    publisher.finish(1)
    assert "register" not in vars(publisher) and "statistics" not in vars(publisher)
    assert [r.seq for r in publisher.store.published("clinic")] == [1]
    # a step that needs it still says which file is missing
    with pytest.raises(InputError, match=r"register\.csv"):
        Publisher(load_config(gated)).prepare(snapshot(gated, 2))
    (gated / "register.csv.away").rename(register)
