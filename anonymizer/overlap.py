"""The one home of the threads that run independent work beside each other
(docs/design.md section 6, "The draft path"; docs/scaling.md).

Overlap is an optimization, never the structure: every step that runs beside another is
also correct run in turn, and gives the same bytes. With the environment variable
``SERIALPUB_SEQUENTIAL`` set to ``1`` (or ``true``/``yes``) nothing runs on a second
thread: :meth:`Overlap.submit` runs the work at once on the caller's thread and
:func:`sequential` tells a caller to skip work it would only do speculatively. The tests
publish a series both ways and compare the data files' bytes.

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
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import Context, copy_context
from types import TracebackType
from typing import ParamSpec, TypeVar

#: the environment variable that runs every step in turn on the caller's thread
SEQUENTIAL_ENV = "SERIALPUB_SEQUENTIAL"

P = ParamSpec("P")
T = TypeVar("T")
U = TypeVar("U")


def sequential() -> bool:
    """Whether :data:`SEQUENTIAL_ENV` asks for every step in turn (read at each call, so a
    test or an operator can switch it for one run)."""
    return os.environ.get(SEQUENTIAL_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


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
