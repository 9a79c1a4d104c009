"""The steps of a release as they happen (docs/operating.md, "Progress").

Each step of drafting, validating and publishing runs inside :func:`step`. A step is
logged when it ends, with its time, on the ``serialpub.progress`` logger (INFO): under
Airflow that is the task's log. Whoever wants to show the steps otherwise (the command
line draws a progress bar on a terminal, :mod:`serialpub.cli.progress`) registers a
:class:`Listener` with :func:`listening`.

The listeners belong to the caller's context (a :class:`contextvars.ContextVar`), not to
the process: two publications in one process hear only their own steps, and a step run on
a thread of :mod:`anonymizer.overlap` is heard by the listeners of the code that submitted
it, because that module runs the work in a copy of the submitter's context.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

LOG = logging.getLogger("serialpub.progress")

#: the steps of one release from a snapshot to publication, in order; a listener's bar
#: counts them (a step not in this list still runs and is logged)
RELEASE_STEPS = (
    "reading the register",
    "parsing the register",  # not when the register cache holds this version
    "register suite",
    "reading the snapshot",
    "coding the register",
    "looking the snapshot's ids up in the register",
    "snapshot suite",
    "checking the snapshot against the register",
    "query workload on the snapshot",  # beside the loading of the state and the anonymizing
    "loading the state",
    "anonymizing",
    "query workload and utility",
    "staging the draft",
    "saving the draft's state",
    "reading the snapshot",  # validation checks it is the one drafted
    "breach probabilities",
    "report figures",  # on the breach thread, beside the release suites
    "report measures",  # on a third thread, beside the report figures
    "learning adversary",  # on the first of those threads free: it reads the releases, not the breach
    "release suites",
    "report",
    "publishing",
)


class Listener(Protocol):
    def started(self, name: str) -> None: ...

    def ended(self, name: str, seconds: float, ok: bool) -> None: ...


#: the listeners of the code running in this context, each with the lock that makes it hear
#: one call at a time: a few steps run on a second thread beside another (the breach
#: probabilities beside the release suites), and a listener hears started and ended in each
#: thread's order
_LISTENERS: ContextVar[tuple[tuple[Listener, threading.Lock], ...]] = ContextVar("serialpub_progress_listeners")


def _tell(name: str, seconds: float | None = None, ok: bool = False) -> None:
    for listener, heard in _LISTENERS.get(()):
        with heard:
            if seconds is None:
                listener.started(name)
            else:
                listener.ended(name, seconds, ok)


@contextmanager
def step(name: str) -> Iterator[None]:
    """Run the body as the step ``name``: listeners hear its start and its end, and the
    end is logged with the seconds it took (a step that raises is logged as failed). Steps
    may run in two threads at once; each thread's steps do not nest."""
    _tell(name)
    t0 = time.perf_counter()
    ok = False
    try:
        yield
        ok = True
    finally:
        seconds = time.perf_counter() - t0
        LOG.info("%s: %.2f s%s", name, seconds, "" if ok else " (failed)")
        _tell(name, seconds, ok)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Let ``listener`` hear every step run inside the ``with`` block, and on the threads
    that code submits work to through :mod:`anonymizer.overlap`."""
    token = _LISTENERS.set((*_LISTENERS.get(()), (listener, threading.Lock())))
    try:
        yield
    finally:
        _LISTENERS.reset(token)
