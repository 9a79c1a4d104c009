"""The compliance sign-off gate outside Airflow: ``serialpub release``
stops at the gate, ``serialpub approve`` publishes with the decision recorded in the state
and the manifest, ``serialpub reject`` ends the release without touching the state, and
automatic approval is allowed only when configured and is said in the manifest."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helpers import Result, as_login, cli, make_workspace, snapshot, state_of

from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.io.release_files import sha256_file
from serialpub.workflow.publisher import AUTO_APPROVER, Publisher
from state.store import StateError


def _cli(*args: str | Path, login: str | None = None) -> Result:
    return cli(*args, login=login)


@pytest.fixture
def gated(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws", sign_off={"auto_approve": False, "approvers": ["erin", "frank"]})


@pytest.mark.slow
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

    proc = _cli("approve", "--config", gated, "--release", "1", "--comment", "fine", login="erin")
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


@pytest.mark.slow
def test_reject_ends_the_release_without_touching_the_state(gated: Path) -> None:
    before = state_of(gated)
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    assert staged.staging.is_dir()
    proc = _cli("reject", "--config", gated, "--release", "1", "--comment", "too coarse", login="frank")
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_automatic_approval_is_recorded_in_the_manifest(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")  # sign_off.auto_approve: true
    outcome = Publisher(load_config(root)).publish(snapshot(root, 1))
    sign_off = json.loads((outcome.directory / "manifest.json").read_text())["sign_off"]
    assert sign_off["automatic"] is True and sign_off["approver"] == AUTO_APPROVER
    assert sign_off["decision"] == "approved"


@pytest.mark.slow
def test_approving_and_publishing_do_not_read_the_register(gated: Path) -> None:
    """The sign-off and publish steps (an Airflow task each) use the staged
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


def _rewrite_parquet(path: Path) -> None:
    """A staged data file edited while the release waits: one sensitive value changed."""
    import pandas as pd

    table = pd.read_parquet(path)
    table.iloc[0, -1] = "flu" if table.iloc[0, -1] != "flu" else "cold"
    table.to_parquet(path, index=False)


def _edit_json(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["edited"] = True
    path.write_text(json.dumps(data), encoding="utf-8")


def _forge_suite(path: Path) -> None:
    """The manifest's validation block rewritten to name other suite results."""
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["validation"]["suites"]["guarantee"]["sha256"] = "0" * 64
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("file", "edit", "named"),
    [
        ("data.parquet", _rewrite_parquet, "data.parquet is sha256"),
        ("validation.json", _edit_json, "validation.json is sha256"),
        ("report.html", lambda p: p.write_text(p.read_text() + "<!-- edited -->"), "report.html is sha256"),
        ("report.json", _edit_json, "report.json is sha256"),
        ("manifest.json", _forge_suite, "suite results are not the ones the state recorded"),
    ],
)
@pytest.mark.parametrize("when", ["before approval", "after approval"])
def test_staged_files_edited_before_publication_are_refused(
    gated: Path, file: str, edit: object, named: str, when: str
) -> None:
    """A staged file edited while the release waits for (or right after) its
    sign-off is not published: the release fails, naming the file, and the state and the
    release store stay as they were."""
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    before = state_of(gated)
    if when == "after approval":
        publisher.approve(staged.seq, "erin", "fine")
    edit(staged.staging / file)  # type: ignore[operator]
    if when == "before approval":
        proc = _cli("approve", "--config", gated, "--release", "1", "--comment", "fine", login="erin")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        message = proc.stderr
    else:
        with pytest.raises(StateError) as err:
            publisher.finish(staged.seq)
        message = str(err.value)
    assert named in message and "was not published and is now failed" in message, message
    assert state_of(gated)[:2] == before[:2] and not (gated / "releases" / "clinic" / "release-0001").exists()
    assert publisher.store.open_release("clinic") is None and not staged.staging.exists()
    # the failed attempt is recorded with its reason; a fresh one publishes normally
    assert [e["action"] for e in publisher.store.audit_log("clinic")][-1] == "failed"
    again = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    publisher.approve(again.seq, "erin", "second try")
    publisher.finish(again.seq)
    assert [r.seq for r in publisher.store.published("clinic")] == [1]


# ---------------------------------------------------------------------------------------
# who may sign off


@pytest.mark.slow
def test_only_listed_accounts_sign_off_and_not_the_preparer(gated: Path) -> None:
    """Each probe of the hostile insider: an account not on sign_off.approvers, the account
    that prepared the release, a --by naming someone else, a zero-width space in a name.
    Each is refused with one line, nothing is published, and a listed account then approves."""
    with as_login("erin"):  # erin prepares release 1
        prepared = _cli("release", "--config", gated, "--snapshot", snapshot(gated, 1))
    assert prepared.returncode == 0, prepared.stderr
    before = state_of(gated)
    refused = {
        "not an approver": (("--comment", "mine now"), "mallory",
                            "'mallory' may not sign off releases of 'clinic': not in sign_off.approvers"),
        "the preparer": ((), "erin", "'erin' prepared this release and cannot also approve it (four-eyes rule"),
        "--by someone else": (("--by", "erin"), "frank", "--by 'erin': a sign-off is recorded under the account"),
    }  # fmt: skip
    for options, login, message in refused.values():
        proc = _cli("approve", "--config", gated, "--release", "1", *options, login=login)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    publisher = Publisher(load_config(gated))
    with pytest.raises(InputError, match=r"invisible or control characters \(U\+200B\)"):
        publisher.approve(1, "fr\u200bank", "")
    assert state_of(gated) == before and publisher.store.sign_offs("clinic", 1) == []
    proc = _cli("approve", "--config", gated, "--release", "1", "--by", "frank", login="frank")
    assert proc.returncode == 0, proc.stderr
    [decision] = publisher.store.sign_offs("clinic", 1)
    assert (decision.approver, decision.decision) == ("frank", "approved")


@pytest.mark.slow
def test_names_are_compared_in_nfkc(gated: Path) -> None:
    """A full-width 'ｆｒａｎｋ' is 'frank' after NFKC: one name, recorded as 'frank'."""
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    record = publisher.approve(staged.seq, "\uff46\uff52\uff41\uff4e\uff4b", "")
    assert record.approver == "frank"


@pytest.mark.slow
def test_a_release_waiting_at_an_airflow_gate_is_decided_there(gated: Path) -> None:
    """'serialpub approve' published a release whose Airflow run still waited at
    its gate. It is refused now; --force decides anyway and the comment records it."""
    publisher = Publisher(load_config(gated))
    owner = "airflow:serialpub_release_clinic/manual__2026-01-01"
    publisher.prepare(snapshot(gated, 1), owner=owner)
    before = state_of(gated)
    for command in ("approve", "reject"):
        proc = _cli(command, "--config", gated, "--release", "1", login="frank")
        assert proc.returncode == 2, proc.stderr
        assert f"release 1 of 'clinic' waits at the sign-off gate of {owner}: answer it there" in proc.stderr
    assert state_of(gated) == before and publisher.store.sign_offs("clinic", 1) == []
    proc = _cli("approve", "--config", gated, "--release", "1", "--comment", "run lost", "--force", login="frank")
    assert proc.returncode == 0, proc.stderr
    [decision] = publisher.store.sign_offs("clinic", 1)
    assert decision.comment == f"run lost [decided from the command line with --force over {owner}]"


@pytest.mark.slow
def test_history_all_lists_every_decision(gated: Path) -> None:
    publisher = Publisher(load_config(gated))
    publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    assert _cli("reject", "--config", gated, "--release", "1", "--comment", "too coarse", login="frank").returncode == 0
    publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    assert _cli("approve", "--config", gated, "--release", "1", "--comment", "fine", login="erin").returncode == 0
    proc = cli("history", "--config", gated, "--all", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "rejected" in line or "approved" in line]
    assert len(lines) == 2, proc.stdout
    assert "frank" in lines[0] and "too coarse" in lines[0] and "erin" in lines[1] and "fine" in lines[1]


@pytest.mark.slow
def test_an_approver_without_the_key_approves_and_the_key_holder_publishes(
    gated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approver's account may not read the publisher's private key: the approval is
    recorded, and 'serialpub publish' by the account holding the key publishes."""
    from serialpub.io import signing

    publisher = Publisher(load_config(gated))
    publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")

    def unreadable(path: Path) -> None:
        raise InputError(f"{path}: this account cannot read the signing key")

    with monkeypatch.context() as patch:
        patch.setattr(signing, "load_private_key", unreadable)
        proc = _cli("approve", "--config", gated, "--release", "1", login="erin")
    assert proc.returncode == 0, proc.stderr
    assert "approved by erin; not published yet" in proc.stdout and "serialpub publish" in proc.stdout
    assert publisher.store.published("clinic") == []
    proc = _cli("publish", "--config", gated, "--release", "1")
    assert proc.returncode == 0, proc.stderr
    assert [r.seq for r in publisher.store.published("clinic")] == [1]


@pytest.mark.slow
def test_two_required_approvals_publish_only_after_the_second_approver(tmp_path: Path) -> None:
    root = make_workspace(
        tmp_path / "ws",
        sign_off={"auto_approve": False, "approvers": ["erin", "frank", "grace"], "required_approvals": 2},
    )
    proc = _cli("release", "--config", root, "--snapshot", snapshot(root, 1), login="pat")
    assert proc.returncode == 0, proc.stderr
    before = state_of(root)
    store = Publisher(load_config(root)).store

    first = _cli("approve", "--config", root, "--release", "1", "--comment", "first look", login="erin")
    assert first.returncode == 0, first.stderr
    assert "approval 1 of 2 recorded (erin); not published yet: it needs 1 more" in first.stdout
    assert state_of(root)[:2] == before[:2] and store.published("clinic") == []
    waiting = store.open_release("clinic")
    assert waiting is not None and waiting.status == "validated"

    # the same approver twice does not count twice, and nothing publishes a half-approved release
    again = _cli("approve", "--config", root, "--release", "1", login="erin")
    assert again.returncode == 2 and "erin has already approved release 1" in again.stderr
    early = _cli("publish", "--config", root, "--release", "1")
    assert early.returncode == 2 and "has 1 of 2 required approvals ('erin'" in early.stderr
    assert store.published("clinic") == []

    second = _cli("approve", "--config", root, "--release", "1", "--comment", "agreed", login="frank")
    assert second.returncode == 0, second.stderr
    assert "approved by frank; published" in second.stdout
    manifest = json.loads((root / "releases" / "clinic" / "release-0001" / "manifest.json").read_text())
    assert manifest["sign_off"]["approver"] == "frank" and manifest["sign_off"]["comment"] == "agreed"
    [earlier] = manifest["sign_off"]["earlier_approvals"]
    assert (earlier["approver"], earlier["comment"]) == ("erin", "first look")
    assert earlier["report_sha256"] == manifest["sign_off"]["report_sha256"]
    assert [(s.approver, s.decision) for s in store.sign_offs("clinic", 1)] == [
        ("erin", "approved"), ("frank", "approved"),
    ]  # fmt: skip
    assert _cli("state", "verify", "--config", root).returncode == 0
    # the earlier approval rewritten by someone who can drop the trigger: verify names it
    with sqlite3.connect(root / "state.sqlite") as db:
        db.execute("DROP TRIGGER sign_offs_no_update")
        db.execute("UPDATE sign_offs SET approver = 'Mallory' WHERE approver = 'erin'")
    forged = _cli("state", "verify", "--config", root)
    assert forged.returncode == 1
    assert "release 1: the manifest's earlier approval by 'erin'" in forged.stdout.replace("\n", " "), forged.stdout


@pytest.mark.slow
def test_one_approval_leaves_no_earlier_approvals_in_the_manifest(gated: Path) -> None:
    assert _cli("release", "--config", gated, "--snapshot", snapshot(gated, 1)).returncode == 0
    assert _cli("approve", "--config", gated, "--release", "1", login="erin").returncode == 0
    manifest = json.loads((gated / "releases" / "clinic" / "release-0001" / "manifest.json").read_text())
    assert "earlier_approvals" not in manifest["sign_off"]


def test_more_required_approvals_than_approvers_is_a_configuration_error(tmp_path: Path) -> None:
    root = make_workspace(
        tmp_path / "ws", sign_off={"auto_approve": False, "approvers": ["erin"], "required_approvals": 2}
    )
    proc = _cli("history", "--config", root)
    assert proc.returncode == 2
    assert "required_approvals is 2 but approvers lists 1" in proc.stderr and "Traceback" not in proc.stderr
