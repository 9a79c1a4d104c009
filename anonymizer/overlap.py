"""The one home of the threads that run independent work beside each other
(docs/design.md section 6, "The draft path"; docs/scaling.md).

Overlap is an optimization, never the structure: every step that runs beside another is
also correct run in turn, and gives the same bytes. Under :func:`in_turn` (the workspace's
``sequential: true``, applied by :class:`serialpub.workflow.publisher.Publisher`) nothing
runs on a second thread: :meth:`Overlap.submit` runs the work at once on the caller's
thread and :func:`sequential` tells a caller to skip work it would only do speculatively.
The environment variable ``SERIALPUB_SEQUENTIAL`` overrides the setting when it is set:
``1`` (or ``true``/``yes``/``on``) runs every step in turn, any other value overlaps them.
The tests publish a series both ways and compare the data files' bytes.

A pool belongs to the one :class:`Overlap` block that made it, never to the module: a
forked process (an Airflow task) would inherit a module-level pool's bookkeeping without
its threads.

Work submitted runs in a copy of the submitter's :mod:`contextvars` context, as it would
run on the submitter's own thread: what a caller set for the extent of a call (the
listeners of a release's progress, the reference sets of a suite) holds for the work it
hands to a thread too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import Context, ContextVar, copy_context
from types import TracebackType
from typing import ParamSpec, TypeVar

from anonymizer.settings import SEQUENTIAL_ENV

# SEQUENTIAL_ENV, when set, overrides the setting: every step in turn on the caller's thread
# (``1``, ``true``, ``yes``, ``on``) or overlapped (any other value)

#: the setting in force for the extent of an :func:`in_turn` block (work an Overlap hands to
#: a thread runs in a copy of the submitter's context, so it holds there too)
_IN_TURN: ContextVar[bool] = ContextVar("serialpub_in_turn", default=False)

P = ParamSpec("P")
T = TypeVar("T")
U = TypeVar("U")


def sequential() -> bool:
    """Whether every step runs in turn: :data:`SEQUENTIAL_ENV` when it is set and not
    blank (read at each call, so a test or an operator can switch it for one run), else the
    setting of the enclosing :func:`in_turn` block (none: overlapped)."""
    text = os.environ.get(SEQUENTIAL_ENV, "").strip().lower()
    if text:
        return text in {"1", "true", "yes", "on"}
    return _IN_TURN.get()


@contextmanager
def in_turn(on: bool) -> Iterator[None]:
    """For the extent of the block, run every step in turn (``on``) or overlapped, unless
    :data:`SEQUENTIAL_ENV` overrides it. Blocks nest; leaving one restores the setting
    before it."""
    token = _IN_TURN.set(on)
    try:
        yield
    finally:
        _IN_TURN.reset(token)


class Overlap:
    """Up to ``workers`` threads for work beside the caller's, as a ``with`` block.

    Leaving the block waits for the work submitted, unless :meth:`release` let it go on
    beyond the block; leaving it by an exception drops the work not yet started. Under
    :func:`sequential` no thread is made and :meth:`submit` runs the work at once; its
    error is raised by the future's ``result()``, where the threaded run raises it too.
    """

    def __init__(self, workers: int, name: str) -> None:
        self._pool = None if sequential() else ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._released = False

    def __enter__(self) -> Overlap:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._pool is None or self._released:
            return
        if exc is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        else:
            self._pool.shutdown(wait=True)

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """``fn(*args, **kwargs)`` on a thread of the block, or at once when sequential."""
        if self._pool is not None:
            context = copy_context()
            return self._pool.submit(lambda: context.run(fn, *args, **kwargs))
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as exc:
            done.set_exception(exc)
        return done

    def map(self, fn: Callable[[U], T], items: Iterable[U]) -> list[T]:
        """``[fn(x) for x in items]``, in the items' order whichever thread computed each."""
        if self._pool is None:
            return [fn(x) for x in items]
        # one copy per item, taken here on the submitter's thread: a context cannot be
        # entered by two threads at once
        work = [(copy_context(), x) for x in items]
        return list(self._pool.map(_run_in, work, [fn] * len(work)))

    def release(self) -> None:
        """Let the work submitted go on after the block ends (whoever holds its futures
        waits for them); nothing more may be submitted."""
        self._released = True
        if self._pool is not None:
            self._pool.shutdown(wait=False)


def _run_in(work: tuple[Context, U], fn: Callable[[U], T]) -> T:
    context, item = work
    return context.run(fn, item)
