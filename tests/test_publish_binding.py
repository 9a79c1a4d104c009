"""What is signed is what was validated and approved (docs/compliance.md, "What the
publication checks"): a staged manifest field edited while the release waits for its
sign-off, an edited or deleted ``validation.html``, and the four-eyes rule bypassed by a
configuration change or a rewritten ``prepared_by``; each refused before anything is
published, and found by ``audit`` and ``state verify`` once published."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import cli, make_workspace, read_config, snapshot, state_of, write_config

from serialpub.config import load_config
from serialpub.workflow.publisher import Publisher
from state.store import StateError

RELEASE_1 = Path("releases") / "clinic" / "release-0001"


@pytest.fixture
def gated(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws", sign_off={"auto_approve": False, "approvers": ["erin", "frank"]})


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    manifest = json.loads(path.read_text(encoding="utf-8"))
    change(manifest)
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _flat(text: str) -> str:
    """A report's text with its line wrapping undone."""
    return " ".join(text.split())


def _assert_failed_and_nothing_moved(root: Path, publisher: Publisher, before: Any, staging: Path) -> None:
    assert state_of(root)[:2] == before[:2] and not (root / RELEASE_1).exists()
    assert publisher.store.open_release("clinic") is None and not staging.exists()
    assert [e["action"] for e in publisher.store.audit_log("clinic")][-1] == "failed"


# ---------------------------------------------------------------------------------------
# the staged manifest


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "ℓ raised": (lambda m: m.update(l=3), "field 'l' is 3.0, the state recorded 2.0"),
    "breach probability lowered": (
        lambda m: m.update(max_breach_probability=0.001),
        "field 'max_breach_probability' is 0.001, the state recorded",
    ),
    "guarantee localized": (lambda m: m.update(guarantee="localized"), "field 'guarantee' is \"localized\""),
    # fields the state holds only as the sha256 recorded when serialpub wrote the manifest
    "created rewritten": (lambda m: m.update(created="2020-01-01T00:00:00+00:00"), "field 'created' was edited"),
    "a register marginal": (
        lambda m: m["register_marginals"]["sex"].update(M=1),
        "field 'register_marginals' was edited",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(EDITS))
def test_an_edited_staged_manifest_is_not_signed(gated: Path, case: str) -> None:
    """The edit made while the release waits for its sign-off: the approval does not
    publish it; the release fails naming the field, and nothing moves."""
    change, named = EDITS[case]
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    before = state_of(gated)
    _edit(staged.staging / "manifest.json", change)
    proc = cli("approve", "--config", gated, "--release", "1", "--comment", "fine", login="erin")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert named in proc.stderr and "was not published and is now failed" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    _assert_failed_and_nothing_moved(gated, publisher, before, staged.staging)


def test_an_edit_after_approval_is_not_signed(gated: Path) -> None:
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    before = state_of(gated)
    publisher.approve(staged.seq, "erin", "fine")
    _edit(staged.staging / "manifest.json", lambda m: m.update(protected_values=["hiv"]))
    with pytest.raises(StateError, match="field 'protected_values' is"):
        publisher.finish(staged.seq)
    _assert_failed_and_nothing_moved(gated, publisher, before, staged.staging)


def test_a_draft_manifest_edited_before_validation_is_not_validated(gated: Path) -> None:
    """Between the draft and validation tasks (Airflow runs them apart) the same edit would
    otherwise be vouched for by the validation."""
    publisher = Publisher(load_config(gated))
    staged = publisher.draft(snapshot(gated, 1), owner="awaiting sign-off")
    _edit(staged.staging / "manifest.json", lambda m: m.update(l=3))
    with pytest.raises(StateError, match=r"manifest changed after release 1 was drafted \(manifest.json field 'l'"):
        publisher.validate(staged.seq)
    assert publisher.store.open_release("clinic") is None and publisher.store.published("clinic") == []


# ---------------------------------------------------------------------------------------
# validation.html


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda p: p.write_text(p.read_text() + "<!-- all suites passed -->"), "validation.html is sha256"),
        (lambda p: p.unlink(), "validation.html is missing"),
    ],
    ids=["edited", "deleted"],
)
def test_a_staged_validation_page_edited_or_deleted_is_refused(
    gated: Path, edit: Callable[[Path], None], named: str
) -> None:
    publisher = Publisher(load_config(gated))
    staged = publisher.prepare(snapshot(gated, 1), owner="awaiting sign-off")
    before = state_of(gated)
    edit(staged.staging / "validation.html")
    proc = cli("approve", "--config", gated, "--release", "1", login="erin")
    assert proc.returncode == 2 and named in proc.stderr, proc.stderr
    _assert_failed_and_nothing_moved(gated, publisher, before, staged.staging)


def test_a_published_validation_page_edited_or_deleted_is_found(published_once: Path) -> None:
    folder = published_once / RELEASE_1
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["validation"]["page_sha256"]
    page = folder / "validation.html"
    page.write_text(page.read_text().replace("PASSED", "PASSED (reviewed)"))
    audit = cli("audit", published_once, "--public-key", published_once / "keys" / "publisher.pub")
    assert audit.returncode == 1 and "release 1: validation.html does not match the manifest's sha256" in audit.stdout
    verify = cli("state", "verify", "--config", published_once)
    assert verify.returncode == 1 and "validation.html does not match the manifest's sha256" in _flat(verify.stdout)
    page.unlink()
    audit = cli("audit", published_once, "--public-key", published_once / "keys" / "publisher.pub")
    assert audit.returncode == 1 and "release 1: validation.html is missing" in audit.stdout, audit.stdout
    verify = cli("state", "verify", "--config", published_once)
    assert verify.returncode == 1 and "validation.html is missing" in _flat(verify.stdout)


# ---------------------------------------------------------------------------------------
# four eyes


@pytest.mark.slow
def test_four_eyes_turned_off_after_drafting_does_not_apply_to_the_draft(gated: Path) -> None:
    assert cli("release", "--config", gated, "--snapshot", snapshot(gated, 1), login="erin").returncode == 0
    config = read_config(gated)
    config["sign_off"]["four_eyes"] = False
    write_config(gated, config)
    before = state_of(gated)
    proc = cli("approve", "--config", gated, "--release", "1", login="erin")
    assert proc.returncode == 2, proc.stdout
    assert "'erin' prepared this release and cannot also approve it" in proc.stderr, proc.stderr
    assert state_of(gated) == before
    assert cli("approve", "--config", gated, "--release", "1", login="frank").returncode == 0
    sign_off = json.loads((gated / RELEASE_1 / "manifest.json").read_text())["sign_off"]
    assert (sign_off["prepared_by"], sign_off["four_eyes"], sign_off["approver"]) == ("erin", True, "frank")
    assert cli("state", "verify", "--config", gated).returncode == 0


@pytest.mark.slow
def test_a_rewritten_preparer_is_found(gated: Path) -> None:
    """prepared_by rewritten in the state database: the append-only audit log still says
    who drafted the release, so the preparer cannot approve it, nor can it be published."""
    assert cli("release", "--config", gated, "--snapshot", snapshot(gated, 1), login="erin").returncode == 0
    with sqlite3.connect(gated / "state.sqlite") as db:
        db.execute("UPDATE releases SET params = json_set(params, '$.prepared_by', 'frank')")
    before = state_of(gated)
    proc = cli("approve", "--config", gated, "--release", "1", login="erin")
    assert proc.returncode == 2, proc.stdout
    assert "the state's prepared_by ('frank') is not the 'erin' the audit log recorded" in proc.stderr, proc.stderr
    assert state_of(gated) == before


@pytest.mark.slow
def test_audit_and_verify_check_preparer_against_approver(gated: Path) -> None:
    """A published manifest whose approver is its preparer under four eyes is named by both
    (the signature fails too: only the publisher's key could sign such a manifest)."""
    assert cli("release", "--config", gated, "--snapshot", snapshot(gated, 1), login="erin").returncode == 0
    assert cli("approve", "--config", gated, "--release", "1", login="frank").returncode == 0
    path = gated / RELEASE_1 / "manifest.json"
    _edit(path, lambda m: m["sign_off"].update(approver="erin"))
    line = "release 1: approved by 'erin', who prepared it, although the four-eyes rule was on"
    audit = cli("audit", gated, "--public-key", gated / "keys" / "publisher.pub")
    assert audit.returncode == 1 and line in audit.stdout, audit.stdout
    verify = cli("state", "verify", "--config", gated)
    assert verify.returncode == 1 and line in _flat(verify.stdout), verify.stdout
    _edit(path, lambda m: m["sign_off"].update(approver="frank", prepared_by="grace"))
    verify = cli("state", "verify", "--config", gated)
    assert "the manifest's sign_off.prepared_by is 'grace', the release row says 'erin'" in _flat(verify.stdout)


def test_state_verify_compares_published_fields_with_the_release_row(published_once: Path) -> None:
    assert cli("state", "verify", "--config", published_once).returncode == 0
    _edit(published_once / RELEASE_1 / "manifest.json", lambda m: m.update(l=3, guarantee="localized"))
    verify = cli("state", "verify", "--config", published_once)
    out = _flat(verify.stdout)
    assert verify.returncode == 1, out
    assert "release 1: manifest field 'l' is 3.0, the state database recorded 2.0" in out, out
    assert "manifest field 'guarantee' is 'localized'" in out
