"""The release report of a demo release (bundled Adult data) opened in headless Chromium:
the page must load without console errors or outside requests, show its verdict, tables
and both figures at a readable size, and a full-page screenshot must show a page.

Chromium comes from the system (Debian's ``chromium`` package; ``.ci/run`` installs it),
driven through Playwright's Python API. Without a Chromium the test is skipped on a
developer machine and fails in CI (``CI`` set), so CI can never pass without running it.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import refused_series

from serialpub.demo import create_workspace, snapshots
from serialpub.io import release_files
from serialpub.workflow.publisher import Publisher

#: the screenshots in the docs (docs/reports.md): written there when this names a folder
#: (``SERIALPUB_SCREENSHOTS=docs/images``), else only into the test's own folder
SCREENSHOTS_ENV = "SERIALPUB_SCREENSHOTS"
CHROMIUM = next((p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        message = "no Chromium on PATH: install Debian's 'chromium' package (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="module")
def demo_reports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Release 1 of the demo workspace, published, and the series report after it."""
    ws = create_workspace(tmp_path_factory.mktemp("browser") / "demo")
    publisher = Publisher(ws)
    publisher.publish(snapshots(ws)[0])
    page = ws.dataset_dir / release_files.release_name(1) / "report.html"
    return page, publisher.series_report()


def _render(chromium: str, page_file: Path, shot: Path) -> dict:
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri(), wait_until="load")
            facts = {
                "title": page.title(),
                "verdict": page.inner_text("#verdict"),
                "h2": page.locator("h2").all_inner_texts(),
                "figures": [
                    page.locator("figure svg").nth(i).bounding_box() for i in range(page.locator("figure svg").count())
                ],
                "table_rows": page.locator("table tr").count(),
                "not_computed": page.locator("td.na").count(),
                "verdict_border": page.eval_on_selector("#verdict", "e => getComputedStyle(e).borderTopColor"),
            }
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    facts["problems"] = problems
    facts["requests"] = requests
    return facts


def _assert_looks_like_a_page(shot: Path, min_height: int) -> None:
    import matplotlib.image as mpimg

    img = mpimg.imread(io.BytesIO(shot.read_bytes()), format="png")
    assert img.shape[1] == 1200 and img.shape[0] > min_height, img.shape  # the whole page, not one screen
    gray = img[..., :3].mean(axis=2)
    assert (gray > 0.95).mean() > 0.5  # mostly white paper ...
    assert (gray < 0.5).mean() > 0.005  # ... with text and plot marks on it
    assert np.unique((gray * 255).astype(np.uint8)).size > 50  # anti-aliased text, not a flat block


@pytest.mark.slow
def test_demo_release_report_renders_in_headless_chromium(
    chromium: str, demo_reports: tuple[Path, Path], tmp_path: Path
) -> None:
    page, _ = demo_reports
    shot = tmp_path / "release-report.png"
    facts = _render(chromium, page, shot)
    assert facts["problems"] == []
    assert facts["requests"] == [page.as_uri()]  # self-contained: nothing else is fetched
    assert facts["title"] == "Release report: adult release 1"
    assert "Validation: PASSED" in facts["verdict"] and "Maximum breach probability" in facts["verdict"]
    assert facts["h2"] == ["Parameters", "Validation suites", "Privacy", "Utility"]
    assert len(facts["figures"]) == 2
    for box in facts["figures"]:
        assert box is not None and box["width"] > 400 and box["height"] > 150
    assert facts["table_rows"] > 60  # parameters, suites and every measure
    # no categories configured: the five categorical measures; and the Bayes risk (too large)
    assert facts["not_computed"] == 6
    _assert_looks_like_a_page(shot, 1500)


@pytest.mark.slow
def test_series_report_renders_in_headless_chromium(
    chromium: str, demo_reports: tuple[Path, Path], tmp_path: Path
) -> None:
    _, series = demo_reports
    shot = tmp_path / "series-report.png"
    facts = _render(chromium, series, shot)
    assert facts["problems"] == [] and facts["requests"] == [series.as_uri()]
    assert facts["title"] == "Series report: adult"
    assert "After release 1" in facts["verdict"] and "Localized baseline" in facts["verdict"]
    assert "Refused" not in facts["verdict"] and facts["verdict_border"] == GREEN
    assert len(facts["figures"]) == 2 and all(b and b["width"] > 400 for b in facts["figures"])
    _assert_looks_like_a_page(shot, 1000)


#: the verdict box's borders (style.css): green for a series within its bound, red otherwise
GREEN, RED = "rgb(17, 96, 42)", "rgb(164, 20, 27)"


@pytest.mark.slow
def test_a_refused_series_report_renders_with_a_red_verdict(
    chromium: str, tmp_path: Path, published_workspaces: Any
) -> None:
    """A series whose next release the anonymizer refused: the verdict box says so in red;
    the utility plot gives the register-joint error its own axis (the uniform one left it)."""
    page = refused_series(published_workspaces.copy(tmp_path / "ws", protected_values="all"))
    shot = tmp_path / "series-report-refused.png"
    facts = _render(chromium, page, shot)
    assert facts["problems"] == [] and facts["requests"] == [page.as_uri()]
    assert facts["verdict"].startswith("Refused: release 2 was not published.")
    assert "cannot publish under ℓ = 2" in facts["verdict"]
    assert facts["verdict_border"] == RED
    assert len(facts["figures"]) == 2 and all(b and b["width"] > 400 for b in facts["figures"])
    _assert_looks_like_a_page(shot, 900)
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        shutil.copyfile(shot, Path(folder) / shot.name)
