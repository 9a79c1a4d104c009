"""The report pages behind the sign-off prompt's link (the approver's view), served
by serialpub's Airflow plugin: which file a link opens while the release waits, once it
is published and once it is rejected, and the prompt's text that carries the link.

Airflow's login and its DAG permission in front of these pages run in a real api-server in
tests/test_airflow_standalone.py (a browser signs in and opens the link).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest
from helpers import cli, make_workspace, snapshot

from serialpub import airflow_plugin
from serialpub.io.release_files import sha256_file
from serialpub.workflow import orchestration
from serialpub.workspaces import WORKSPACES_ENV, report_url


@pytest.fixture
def waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace whose release 1 waits for its sign-off, served by this api-server."""
    root = make_workspace(tmp_path / "ws", sign_off={"auto_approve": False, "approvers": ["erin"]})
    proc = cli("release", "--config", root, "--snapshot", snapshot(root, 1))
    assert proc.returncode == 0, proc.stderr
    monkeypatch.setenv(WORKSPACES_ENV, str(root))
    return root


def _served(dataset: str, seq: int, page: str = "report.html") -> tuple[int, bytes, Path | None]:
    response = airflow_plugin._page(dataset, seq, page)
    path = getattr(response, "path", None)
    body = Path(path).read_bytes() if path else bytes(response.body)
    return response.status_code, body, Path(path) if path else None


def test_the_plugin_is_registered_for_airflow() -> None:
    [entry] = [e for e in entry_points(group="airflow.plugins") if e.name == "serialpub"]
    plugin = entry.load()
    assert plugin is airflow_plugin.SerialpubPlugin
    [mounted] = plugin.fastapi_apps
    assert mounted["url_prefix"] == "/serialpub" and mounted["app"] is airflow_plugin.app


@pytest.mark.slow
def test_the_link_opens_the_staged_page_then_the_published_one(waiting: Path) -> None:
    facts = orchestration.report(waiting, 1, "https://airflow.example.org/")
    link = report_url("https://airflow.example.org", "clinic", 1)
    assert link == "https://airflow.example.org/serialpub/clinic/releases/1/report.html"
    assert f"[Open the release report]({link})" in facts["markdown"]
    assert f"sha256 {facts['report_sha256']}" in facts["markdown"]
    final = waiting / "releases" / "clinic" / "release-0001"
    assert f"published to `{final}`" in facts["markdown"]

    status, _, path = _served("clinic", 1)
    assert status == 200 and path is not None and path.parent.name.startswith(".staging-release-0001")
    assert sha256_file(path) == facts["report_sha256"]
    status, _, path = _served("clinic", 1, "validation.html")
    assert status == 200 and path is not None and path.name == "validation.html"

    proc = cli("approve", "--config", waiting, "--release", "1", "--comment", "read it", login="erin")
    assert proc.returncode == 0, proc.stderr
    status, _, path = _served("clinic", 1)
    assert status == 200 and path == final / "report.html"
    assert sha256_file(path) == facts["report_sha256"]  # what was signed, from its final folder


@pytest.mark.slow
def test_a_rejected_unknown_or_missing_release_is_a_404_with_the_reason(waiting: Path) -> None:
    status, body, _ = _served("elsewhere", 1)
    assert status == 404 and b"no dataset 'elsewhere' in this api-server's SERIALPUB_WORKSPACES" in body
    status, body, _ = _served("clinic", 2)
    assert status == 404 and b"release 2 of 'clinic' has no report" in body
    proc = cli("reject", "--config", waiting, "--release", "1", "--comment", "no", login="erin")
    assert proc.returncode == 0, proc.stderr
    status, body, _ = _served("clinic", 1)
    assert status == 404 and b"release 1 of 'clinic' has no report" in body


@pytest.mark.slow
def test_without_a_base_url_the_prompt_names_the_files(waiting: Path) -> None:
    facts = orchestration.report(waiting, 1)
    assert "](" not in facts["markdown"] and facts["report_page"] in facts["markdown"]
