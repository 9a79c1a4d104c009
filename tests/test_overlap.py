"""The steps that run beside each other (anonymizer.overlap): a series published with the
steps in turn is the same bytes as one published with them overlapped, no thread pool lives
outside the overlap module, and an error of the work done ahead is raised, not dropped."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import make_workspace, snapshot, state_of

from anonymizer import overlap
from serialpub.config import load_config
from serialpub.workflow import anonymizing
from serialpub.workflow.publisher import Publisher

ROOT = Path(__file__).resolve().parents[1]


def _series(root: Path) -> list[bytes]:
    publisher = Publisher(load_config(root))
    for t in (1, 2, 3):
        publisher.publish(snapshot(root, t))
    return [(root / "releases" / "clinic" / f"release-{t:04d}" / "data.parquet").read_bytes() for t in (1, 2, 3)]


@pytest.mark.slow
def test_a_series_is_the_same_bytes_with_the_steps_in_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(overlap.SEQUENTIAL_ENV, raising=False)
    overlapped = _series(make_workspace(tmp_path / "overlapped", seed=5))

    class NoThreads:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("a thread pool was made with the steps in turn")

    monkeypatch.setenv(overlap.SEQUENTIAL_ENV, "1")
    monkeypatch.setattr(overlap, "ThreadPoolExecutor", NoThreads)
    ran_ahead: list[object] = []
    ahead = anonymizing.ahead
    monkeypatch.setattr(anonymizing, "ahead", lambda *args: ran_ahead.append(1) or ahead(*args))
    in_turn = _series(make_workspace(tmp_path / "in-turn", seed=5))
    assert ran_ahead == []  # nothing computed speculatively
    assert in_turn == overlapped
    assert state_of(tmp_path / "in-turn")[1] == state_of(tmp_path / "overlapped")[1]


def test_the_switch_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in (("1", True), ("true", True), ("Yes", True), ("0", False), ("", False), ("no", False)):
        monkeypatch.setenv(overlap.SEQUENTIAL_ENV, value)
        assert overlap.sequential() is expected
    monkeypatch.setenv(overlap.SEQUENTIAL_ENV, "1")
    with overlap.Overlap(2, "test") as beside:
        failed = beside.submit(int, "x")  # run at once; its error waits for result(), as a thread's would
        assert beside.map(str, [1, 2]) == ["1", "2"]
    with pytest.raises(ValueError, match="invalid literal"):
        failed.result()


def test_an_error_of_the_work_ahead_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the draft dropped any error computed ahead and anonymized again; an error
    that the draft's own computation would not meet was then never seen."""
    monkeypatch.delenv(overlap.SEQUENTIAL_ENV, raising=False)
    root = make_workspace(tmp_path / "ws")
    calls: list[int] = []
    anonymize = anonymizing.anonymize_snapshot

    def first_fails(*args: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("failed ahead")
        return anonymize(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(anonymizing, "anonymize_snapshot", first_fails)
    before = state_of(root)
    with pytest.raises(RuntimeError, match="failed ahead"):
        Publisher(load_config(root)).publish(snapshot(root, 1))
    assert calls == [1] and state_of(root)[1] == before[1]
    assert not (root / "releases" / "clinic" / "release-0001").exists()


def test_no_thread_pool_outside_the_overlap_module() -> None:
    found = []
    for package in ("anonymizer", "checks", "state", "serialpub"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "anonymizer" / "overlap.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Name | ast.Attribute) and "ThreadPoolExecutor" in ast.unparse(node):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
                elif isinstance(node, ast.alias) and node.name == "ThreadPoolExecutor":
                    found.append(f"{path.relative_to(ROOT)}: import")
    assert found == []
