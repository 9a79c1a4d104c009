"""Progress of a release: every step is heard by listeners and logged
with its time (the Airflow task log), and ``serialpub release`` draws the steps on a
terminal only."""

from __future__ import annotations

import io
import logging
import threading
import time
from pathlib import Path

import pytest
from conftest import run_cli
from helpers import snapshot
from rich.console import Console

from anonymizer.overlap import Overlap
from serialpub.cli.progress import shown
from serialpub.config import DATABASE_ENV, load_config
from serialpub.workflow import progress
from serialpub.workflow.publisher import Publisher


class _Heard:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def started(self, name: str) -> None:
        self.events.append(("start", name))

    def ended(self, name: str, seconds: float, ok: bool) -> None:
        assert seconds >= 0
        self.events.append(("end" if ok else "failed", name))


#: steps that run on a second thread beside others, with the steps they end after and before:
#: the state's loading and the anonymizing beside the snapshot suite, the query workload
#: beside staging the draft and saving its state, the report figures and measures beside the release suites
BESIDE = {
    "loading the state": ("reading the snapshot", "staging the draft"),
    "anonymizing": ("loading the state", "staging the draft"),
    "query workload and utility": ("anonymizing", "breach probabilities"),
    "report figures": ("breach probabilities", "report"),
    "report measures": ("breach probabilities", "report"),
}


def _assert_in_order(ended: list[str], expected: list[str]) -> None:
    """``ended`` is ``expected``, except that a step of ``BESIDE`` may end anywhere between
    the step whose result it needs and the step that uses its own."""
    assert [s for s in ended if s not in BESIDE] == [s for s in expected if s not in BESIDE], ended
    for beside, (after, before) in BESIDE.items():
        assert ended.count(beside) == 1, ended
        assert ended.index(after) < ended.index(beside) < ended.index(before), ended


@pytest.mark.slow
def test_a_release_reports_every_step_in_order_and_logs_it(
    published_once: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    heard = _Heard()
    publisher = Publisher(load_config(published_once))
    with caplog.at_level(logging.INFO, logger="serialpub.progress"), progress.listening(heard):
        publisher.publish(snapshot(published_once, 2))
    ended = [name for kind, name in heard.events if kind == "end"]
    # a fresh process reads, parses and codes the register once (the copied workspace's
    # cache names the template's hierarchy paths, so it is not used)
    _assert_in_order(ended, list(progress.RELEASE_STEPS))
    assert all(kind != "failed" for kind, _ in heard.events)
    logged = [r.getMessage() for r in caplog.records if r.name == "serialpub.progress"]
    assert [m.rsplit(":", 1)[0] for m in logged] == ended and all(m.endswith(" s") for m in logged), logged
    # the next fresh process reads the register (its checksum) but takes the coded register
    # and the passed suite from the cache (serialpub.io.register_cache)
    again = _Heard()
    with progress.listening(again):
        Publisher(load_config(published_once)).publish(snapshot(published_once, 3))
    ended = [name for kind, name in again.events if kind == "end"]
    _assert_in_order(ended, [s for s in progress.RELEASE_STEPS if s != "parsing the register"])
    assert heard.events[-1] == ("end", "publishing")  # heard nothing outside its block


def test_a_failing_step_is_reported_as_failed(published_once: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    bad = published_once / "snapshot-0002.csv"
    bad.write_text(snapshot(published_once, 2).read_text().replace(",M,", ",X,", 1))
    heard = _Heard()
    with progress.listening(heard), pytest.raises(Exception, match="snapshot"):
        Publisher(load_config(published_once)).publish(bad)
    assert ("failed", "snapshot suite") in heard.events


@pytest.mark.slow
def test_the_bar_draws_on_a_terminal_only(published_once: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    out = io.StringIO()
    terminal = Console(file=out, force_terminal=True, width=120)
    with shown(terminal):
        Publisher(load_config(published_once)).publish(snapshot(published_once, 2))
    text = out.getvalue()
    for name in ("reading the snapshot", "anonymizing", "release suites", "publishing"):
        assert name in text, text
    piped = io.StringIO()
    with shown(Console(file=piped, force_terminal=False)):
        Publisher(load_config(published_once)).publish(snapshot(published_once, 3))
    assert piped.getvalue() == ""


@pytest.mark.slow
def test_the_command_off_a_terminal_prints_no_bar(published_once: Path) -> None:
    proc = run_cli(
        "release",
        "--config",
        published_once,
        "--snapshot",
        snapshot(published_once, 2),
        url=f"sqlite:///{published_once / 'state.sqlite'}",
        cwd=published_once,
    )
    assert proc.returncode == 0, proc.stderr
    assert "anonymizing" not in proc.stdout and "published" in proc.stdout, proc.stdout


def test_steps_of_two_threads_are_heard_one_call_at_a_time() -> None:
    # validation computes the breach probabilities on a second thread beside the release
    # suites: a listener (the terminal bar counts finished steps) must never be entered by
    # both at once, and each thread's steps keep their order
    class _Exclusive(_Heard):
        def __init__(self) -> None:
            super().__init__()
            self.inside = threading.Lock()
            self.overlaps = 0

        def _enter(self) -> None:
            if not self.inside.acquire(blocking=False):
                self.overlaps += 1
                self.inside.acquire()
            time.sleep(0.001)  # widen the window a second caller would have to enter
            self.inside.release()

        def started(self, name: str) -> None:
            self._enter()
            super().started(name)

        def ended(self, name: str, seconds: float, ok: bool) -> None:
            self._enter()
            super().ended(name, seconds, ok)

    heard = _Exclusive()

    def steps(prefix: str) -> None:
        for i in range(30):
            with progress.step(f"{prefix} {i}"):
                pass

    with progress.listening(heard), Overlap(2, "steps") as pool:
        for f in [pool.submit(steps, "a"), pool.submit(steps, "b")]:
            f.result()
    assert heard.overlaps == 0
    for prefix in "ab":
        mine = [(kind, name) for kind, name in heard.events if name.startswith(prefix)]
        assert mine == [(kind, f"{prefix} {i}") for i in range(30) for kind in ("start", "end")]


class _Names:
    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, name: str) -> None:
        self.names.append(name)

    def ended(self, name: str, seconds: float, ok: bool) -> None:
        pass


def test_listeners_belong_to_their_caller_not_to_the_process() -> None:
    # two publications in one process (two threads, each listening): each hears its own steps only
    both = threading.Barrier(2)
    heard = {"a": _Names(), "b": _Names()}

    def publication(name: str) -> None:
        with progress.listening(heard[name]):
            both.wait(timeout=60)  # both are listening before either runs a step
            for i in range(5):
                with progress.step(f"{name} {i}"):
                    pass
            both.wait(timeout=60)  # neither stops listening before the other's steps ran

    threads = [threading.Thread(target=publication, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert heard["a"].names == [f"a {i}" for i in range(5)]
    assert heard["b"].names == [f"b {i}" for i in range(5)]
    with progress.step("nobody listens"):
        pass
    assert "nobody listens" not in heard["a"].names + heard["b"].names


@pytest.mark.parametrize("sequential", ["0", "1"])
def test_work_on_an_overlap_thread_is_heard_by_the_submitter(sequential: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERIALPUB_SEQUENTIAL", sequential)
    heard = _Names()

    def one(i: int) -> int:
        with progress.step(f"map {i}"):
            return i * i

    with progress.listening(heard), Overlap(2, "heard") as pool:
        assert pool.submit(one, 7).result() == 49
        assert pool.map(one, range(6)) == [i * i for i in range(6)]
    assert sorted(heard.names) == sorted(["map 7", *(f"map {i}" for i in range(6))])
